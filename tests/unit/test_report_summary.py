"""summary.md reads findings first and says each footnote once (issue 58 item 7)."""

from __future__ import annotations

from test_stats_aggregate import run

from hvdbench.results.analyses import study_tables
from hvdbench.results.records.store import append_run
from hvdbench.results.report.build import build
from hvdbench.results.report.load import load
from hvdbench.results.stats.aggregate import FLAGS, build_tables


def two_models_scaling_inversely():
    """ncf and resnet50, each slower on 1x2 than on 1x1 (inverse-scaling), one failed run."""
    runs = []
    for i, model in enumerate(("ncf", "resnet50")):
        runs += [run("1x1", t, model=model, run_id=f"{model}-1x1-{k}") for k, t in enumerate((400, 404, 396))]
        runs += [run("1x2", t, model=model, run_id=f"{model}-1x2-{k}") for k, t in enumerate((300, 310, 290))]
    runs.append(run("1x2", None, status="failed", model="ncf", run_id="ncf-1x2-3", error="boom"))
    return runs


def test_the_summary_opens_with_findings_and_says_each_flag_once(tmp_path):
    for r in two_models_scaling_inversely():
        append_run(tmp_path / "runs.csv", r)
    text = build(load([tmp_path])).text
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Findings"
    findings = text.split("## Findings\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert any(line.startswith("- ncf ·") and "most per rank on 1x1 (400 samples/s per rank)" in line
               and "1x2, 0.75× the 1x1 (38 % efficiency) (check: inverse-scaling)" in line for line in findings)
    assert any(line.startswith("- resnet50 ·") for line in findings)
    assert "- 1 of 13 runs did not succeed (1 failed): Runs that did not succeed." in findings
    # two groups flagged alike, the flag's meaning said once, at the end, after every table
    assert text.count(FLAGS["inverse-scaling"]) == 1
    assert headings.index("## Flags (the `check` columns)") > headings.index("## Scaling (throughput, samples/s)")
    assert headings[-1] == "## Notes"


def test_the_speedup_across_models_carries_the_scaling_tables_flags():
    # issue 58: gnmt's 2.40x read bare in the cross-model table while the scaling table flagged it noisy
    runs = [run("1x1", t, model="ncf") for t in (100, 102)] + [run("1x2", t, model="ncf") for t in (150, 250)]
    tables = build_tables(runs)
    noisy = next(r for r in tables.scaling if r.layout == "1x2")
    assert "noisy" in noisy.flags.split(";")
    rows = study_tables.speedup_rows(tables)
    text = study_tables.markdown(rows, "t")
    cell = f"{noisy.speedup:.2f}× (1x2) · check: {', '.join(noisy.flags.split(';'))}"
    assert f"| {cell} |" in text
