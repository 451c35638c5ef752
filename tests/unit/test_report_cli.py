"""`hvdbench report` end to end through click: files written, tables printed, schema errors named."""

import csv

import pytest
from click.testing import CliRunner
from conftest import csv_rows
from test_stats_aggregate import run, sweep_runs, tta

from hvdbench.cli.main import cli
from hvdbench.files import LockFile
from hvdbench.results.records.schema import RunResult
from hvdbench.results.records.store import append_run

EXPECTED = ["scaling.csv", "layouts.csv", "time_to_train.csv", "epochs.csv", "summary.md",
            "throughput_vs_gpus.png", "efficiency_vs_gpus.png", "layouts_bars.png", "time_to_train.png",
            "waterfall.csv", "cost.csv", "verdict.csv", "report.html"]  # no waterfall.png: no step breakdown

OWN = [".hvdbench-report.json", ".hvdbench-report.lock"]  # the folder's record of what the report wrote


@pytest.fixture
def sweep(tmp_path):
    store = tmp_path / "results" / "demo" / "runs.csv"
    for r in sweep_runs():
        append_run(store, r)
    for minutes in (30, 32, 34):
        append_run(store, tta("1x1", minutes, epochs_to_target=5.0, time_per_epoch_s=360.0, global_batch=32))
    for minutes in (10, 11, 12):
        append_run(store, tta("1x4", minutes, epochs_to_target=6.0, time_per_epoch_s=100.0, global_batch=128))
    return store.parent


def invoke(*args):
    return CliRunner().invoke(cli, ["report", *map(str, args)])


def test_report_writes_every_file_and_prints_the_tables(sweep):
    result = invoke(sweep)
    assert result.exit_code == 0, result.output
    out = sweep / "report"
    assert sorted(p.name for p in out.iterdir()) == sorted([*EXPECTED, *OWN])
    rows = {r["layout"]: r for r in csv_rows(out / "scaling.csv")}
    assert float(rows["2x2"]["throughput_mean"]) == 390 and float(rows["2x2"]["efficiency"]) == pytest.approx(0.975)
    assert (rows["2x1"]["runs"], rows["2x1"]["ok"], rows["2x1"]["failed"]) == ("3", "2", "1")
    assert rows["1x1"]["throughput_2sigma"] == "20"  # 4 significant digits, trailing zeros dropped
    assert rows["1x1"]["throughput_std"] == "10"
    layouts = csv_rows(out / "layouts.csv")
    assert [(r["gpus"], r["layout"], r["within_noise"]) for r in layouts] == [
        ("2", "1x2", ""), ("2", "2x1", "no"), ("4", "1x4", ""), ("4", "2x2", "yes")]
    ttt = csv_rows(out / "time_to_train.csv")
    assert [(r["layout"], r["ttt_min"], r["converged"]) for r in ttt] == [("1x1", "32", "3"), ("1x4", "11", "3")]
    epochs = csv_rows(out / "epochs.csv")
    assert [(r["gpus"], r["global_batch"], r["epochs_mean"], r["precision"]) for r in epochs] == [
        ("1", "32", "5", "fp32"), ("4", "128", "6", "fp32")]
    summary = (out / "summary.md").read_text()
    assert summary in result.output  # the same Markdown on the terminal
    assert "| 2x1 | 2 | out | 3 (2/1/0/0) | 175.0 ± 14.1 |" in summary
    assert "| 4 | 2x2 | 1x4 | 3 (2/0/0/1) | 390.0 ± 28.3 | 0.975 | -2.5 % |" in summary
    assert "sample standard deviation (ddof=1)" in summary
    for name in EXPECTED:
        assert f"wrote {out / name}" in result.output


def test_out_format_and_baseline_options(sweep, tmp_path):
    out = tmp_path / "elsewhere"
    result = invoke(sweep, "--out", out, "--format", "csv", "--baseline", "1x2")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [*OWN, "cost.csv", "epochs.csv", "layouts.csv", "scaling.csv",
                                                    "time_to_train.csv", "verdict.csv", "waterfall.csv"]
    rows = {r["layout"]: r for r in csv_rows(out / "scaling.csv")}
    assert rows["1x1"]["baseline"] == "1x2" and float(rows["1x1"]["speedup"]) == 0.5
    assert not (sweep / "report").exists()


def test_a_report_owns_its_folder(sweep, tmp_path):
    # `report A --out R` then `report B --out R` left A's waterfall and plots beside B's summary.md.
    out, other = tmp_path / "r", tmp_path / "b"
    append_run(other / "runs.csv", run("1x1", 100))
    append_run(other / "runs.csv", run("1x1", 104))
    (out / "notes.txt").parent.mkdir(parents=True)
    (out / "notes.txt").write_text("mine")  # no report wrote it: kept
    assert invoke(sweep, "--out", out).exit_code == 0
    assert {p.name for p in out.iterdir()} == {*EXPECTED, *OWN, "notes.txt"}
    result = invoke(other, "--out", out)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == sorted([
        *OWN, "notes.txt", "scaling.csv", "layouts.csv", "time_to_train.csv", "epochs.csv", "summary.md",
        "throughput_vs_gpus.png", "efficiency_vs_gpus.png", "cost.csv", "verdict.csv", "report.html"])
    assert str(other) in (out / "summary.md").read_text() and str(sweep) not in (out / "summary.md").read_text()
    # A second report into the folder while one writes there is refused, naming it; nothing changes.
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with LockFile(out / ".hvdbench-report.lock"):
        result = invoke(sweep, "--out", out)
    assert result.exit_code == 1 and result.output == (
        f"Error: --out {out}: another report is writing into this folder now; give another --out\n")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_runs_csv_path_reports_beside_it(sweep):
    result = invoke(sweep / "runs.csv", "--format", "csv")
    assert result.exit_code == 0, result.output
    assert (sweep / "report" / "scaling.csv").is_file()


def test_several_sweeps_are_read_together(sweep, tmp_path):
    other = tmp_path / "more"
    append_run(other / "runs.csv", run("4x2", 700))
    result = invoke(sweep, other, "--out", tmp_path / "r", "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = {r["layout"]: r for r in csv_rows(tmp_path / "r" / "scaling.csv")}
    assert float(rows["4x2"]["speedup"]) == 7.0


def rewrite(store, change):
    rows = csv_rows(store)
    header = list(rows[0])
    rows, header = change(rows, header)
    with open(store, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        w.writerows(rows)


def test_wrong_schema_version_is_one_line_naming_the_file(sweep):
    invoke(sweep)  # a first report, which a failing rerun must not touch
    before = (sweep / "report" / "scaling.csv").read_bytes()
    rewrite(sweep / "runs.csv", lambda rows, h: ([{**r, "schema_version": "999"} for r in rows], h))
    result = invoke(sweep)
    assert result.exit_code == 1
    message = result.output.strip()
    assert message.startswith("Error: ") and len(message.splitlines()) == 1
    assert str(sweep / "runs.csv") in message and "schema_version 999" in message
    assert (sweep / "report" / "scaling.csv").read_bytes() == before


def test_missing_column_is_named(sweep):
    rewrite(sweep / "runs.csv", lambda rows, h: ([{k: v for k, v in r.items() if k != "throughput"} for r in rows],
                                                  [c for c in h if c != "throughput"]))
    result = invoke(sweep)
    assert result.exit_code == 1
    assert "missing column(s) throughput" in result.output and str(sweep / "runs.csv") in result.output


def test_bad_status_value_names_the_file(sweep):
    rewrite(sweep / "runs.csv", lambda rows, h: ([{**r, "status": "exploded"} for r in rows], h))
    result = invoke(sweep)
    assert result.exit_code == 1
    assert str(sweep / "runs.csv") in result.output and "'exploded'" in result.output


@pytest.mark.parametrize("args, message", [
    (["--format", "csv,pdf"], "pdf: choose from csv,md,png"),
    (["--baseline", "one"], "expected NODESxGPUS"),
    (["--baseline", "8x8"], "8x8: no run has that layout"),
    (["--ruleset", "4.0"], "'4.0': a training ruleset such as 4.0.0"),
    (["--group-by", "system+rack"], "--group-by 'system+rack': '+'-joined keys of submitter, system, platform"),
])
def test_bad_options(sweep, args, message):
    result = invoke(sweep, *args)
    assert result.exit_code != 0 and message in result.output


def test_no_input_and_missing_store(tmp_path):
    result = invoke()
    assert result.exit_code == 2 and "at least one SWEEP_DIR or --mllog" in result.output
    result = invoke(tmp_path / "nothing")
    assert result.exit_code == 1 and f"{tmp_path / 'nothing' / 'runs.csv'}: no such run store" in result.output


def test_plots_skipped_without_data_are_said(tmp_path):
    store = tmp_path / "s" / "runs.csv"
    append_run(store, run("1x1", 100))
    append_run(store, run("1x2", None, status="failed"))
    result = invoke(store.parent)
    assert result.exit_code == 0, result.output
    assert "layouts_bars.png not written: no GPU count was run with more than one layout" in result.output
    assert "time_to_train.png not written" in result.output
    assert (store.parent / "report" / "throughput_vs_gpus.png").exists()
    assert "(no runs of this kind)" in result.output


def test_help_has_an_example():
    result = CliRunner().invoke(cli, ["report", "--help"])
    assert result.exit_code == 0 and "Example:" in result.output and "hvdbench report results/demo" in result.output
    assert RunResult.columns()  # the schema the report reads


def test_report_names_the_link_a_sweep_recorded(sweep):
    (sweep / "sweep.json").write_text('{"model": "resnet50", "train_args": [], "link": "HDR InfiniBand 200 Gb/s"}')
    result = invoke(sweep)
    assert result.exit_code == 0, result.output
    rows = {r["layout"]: r for r in csv_rows(sweep / "report" / "scaling.csv")}
    assert rows["2x2"]["link"] == "HDR InfiniBand 200 Gb/s" and rows["1x4"]["link"] == ""
    assert "Inter-node link: HDR InfiniBand 200 Gb/s." in (sweep / "report" / "summary.md").read_text()
    # The waterfall section says it too, as its plot does, and a CPU run's batch is per rank.
    waterfall = (sweep / "report" / "summary.md").read_text().split("(throughput waterfall)")[1]
    heading = "### resnet50 · debug · torch · horovod · fp32 · throughput · batch 32/rank — cpu"  # the scaling table's
    assert f"{heading}\n\ninter-node link: HDR InfiniBand 200 Gb/s\n" in waterfall, waterfall
    (sweep / "sweep.json").write_text("[1, 2]")
    result = invoke(sweep)
    assert result.exit_code != 0 and "sweep.json: not a sweep record" in result.output


def test_report_reads_each_runs_evaluation_cadence_and_names_the_threads(tmp_path):
    store = tmp_path / "s" / "runs.csv"
    for i, seconds in enumerate((4.3, 5.2)):
        r = tta("1x1", seconds / 60, run_id=f"1x1-r{i}", epochs_to_target=3.0, time_per_epoch_s=1.5, global_batch=16)
        append_run(store, r)
        (store.parent / r.run_id).mkdir()
        (store.parent / r.run_id / "config.yaml").write_text("eval_every: 1.0\neval_unit: epochs\n")
    append_run(store, run("1x1", 100, threads=2))
    append_run(store, run("1x2", 150, threads=1))
    result = invoke(store.parent)
    assert result.exit_code == 0, result.output
    [ttt] = csv_rows(store.parent / "report" / "time_to_train.csv")
    assert float(ttt["ttt_resolution_s"]) == pytest.approx(1.5) and ttt["eval_every_epochs"] == "1"
    assert "| 4.8 | ± 1.5 s: an evaluation every 1 epoch of ~1.5 s |" in result.output
    scaling = {r["layout"]: r for r in csv_rows(store.parent / "report" / "scaling.csv")}
    assert (scaling["1x1"]["threads"], scaling["1x2"]["threads"]) == ("2", "1")
    assert scaling["1x2"]["flags"] == "unfair-baseline"
    assert "the 1x1 rank had 2 threads, the 1x2 ranks 1 each" in result.output


def test_a_report_over_failed_runs_says_which_failed_and_why(tmp_path):
    """Issue 50: a sweep whose runs all failed is not tables of dashes and exit 0: the report lists each
    failed run under its recorded error, grouped, says in one line that no run succeeded and exits 1,
    with every table still written."""
    store = tmp_path / "mine" / "runs.csv"
    oom = "needs 25.8 GB of host memory, this machine has 7.7 GB: try --flavor debug"
    for layout, engine in (("1x1", "ddp"), ("1x1", "fsdp"), ("1x2", "ddp")):
        append_run(store, run(layout, status="failed", error=oom, engine=engine, run_id=f"{layout}-{engine}-r1"))
    append_run(store, run("1x2", status="timeout", error="no result after 300 s", engine="fsdp", run_id="1x2-fsdp-r1"))
    result = invoke(store.parent)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1].startswith("Error: no run succeeded: all 4 run(s) did not")
    summary = (store.parent / "report" / "summary.md").read_text()
    assert summary in result.stdout and (store.parent / "report" / "scaling.csv").is_file()
    assert "## Runs that did not succeed" in summary and "**No run succeeded: all 4 run(s)" in summary
    assert f"- failed, 3 run(s) (1x1-ddp-r1, 1x1-fsdp-r1, 1x2-ddp-r1): {oom}" in summary
    assert "- timeout, 1 run(s) (1x2-fsdp-r1): no result after 300 s" in summary
    # One run that succeeded: the failures are still listed, the report exits 0.
    append_run(store, run("1x1", 100.0, engine="ddp", run_id="1x1-ddp-r2"))
    result = invoke(store.parent)
    assert result.exit_code == 0, result.output
    assert "- failed, 3 run(s)" in result.stdout and "No run succeeded" not in result.stdout


def test_failure_groups_name_runs_without_an_error_by_their_status():
    from hvdbench.results.analyses.failures import failure_groups

    groups = failure_groups([tta("1x1", None, status="aborted", run_id="a"), run("1x1", status="failed", run_id="f"),
                             run("1x2", 100.0)])
    assert [(g.status, g.error, g.runs) for g in groups] == [
        ("aborted", "stopped before reaching its target", ("a",)), ("failed", "no error recorded", ("f",))]


def test_the_header_names_the_pytorch_of_the_runs_and_warns_where_one_table_mixes_them(tmp_path):
    """Runs of one scaling table on 2.13 and 2.15 are not comparable: the header says so for that
    table only; a table all on 2.13 and runs that recorded no torch (published logs) add nothing."""
    store = tmp_path / "mixed" / "runs.csv"
    for layout, version in (("1x1", "2.13.0"), ("1x2", "2.15.0+cu130"), ("1x2", "")):
        append_run(store, run(layout, 100.0, versions=f"python=3.11.7;torch={version}" if version else ""))
    for layout in ("1x1", "1x2"):
        append_run(store, run(layout, 50.0, model="bert", versions="python=3.11.7;torch=2.13.0;horovod=0.28.1"))
    result = invoke(store.parent, "--out", tmp_path / "report", "--format", "md")
    assert result.exit_code == 0, result.output
    summary = (tmp_path / "report" / "summary.md").read_text()
    header = summary.split("## ")[0]
    assert "PyTorch of these runs: 2.13.0, 2.15.0+cu130." in header
    warnings = [line for line in header.splitlines() if line.startswith("**Warning:**")]
    assert len(warnings) == 1
    table = "resnet50 · debug · torch · horovod · fp32 · throughput · batch 32/rank — cpu"
    assert f"({table})" in warnings[0] and f"\n### {table}\n" in summary  # named as its heading reads
    assert "used PyTorch 2.13.0, 2.15.0+cu130: their throughputs are not comparable" in warnings[0]
    same = tmp_path / "same" / "runs.csv"
    append_run(same, run("1x1", 100.0, versions="torch=2.13.0"))
    assert invoke(same.parent, "--out", tmp_path / "r2", "--format", "md").exit_code == 0
    assert "Warning" not in (tmp_path / "r2" / "summary.md").read_text()


@pytest.mark.parametrize("version, said", [
    ("2.16.0", "recorded PyTorch 2.16.0 (OUTSIDE the tested range, 2.11 to 2.15: hvdbench may break or measure "
               "differently) (runs.csv's versions column)."),
    ("2.9.1+cu126", "recorded PyTorch 2.9.1+cu126 (OUTSIDE the tested range"),
    ("<script>", "recorded PyTorch '<script>' (not a version hvdbench can read, so not known to be inside the tested "
                 "range, 2.11 to 2.15) (runs.csv's versions column)."),
])
def test_the_header_warns_of_a_pytorch_outside_the_tested_range_or_no_version(tmp_path, version, said):
    """Issue 57 case 9: a report over runs of a torch outside the tested range said nothing (only `env` did), and
    garbage in `versions` was printed as a release."""
    store = tmp_path / "s" / "runs.csv"
    append_run(store, run("1x1", 100.0, versions=f"python=3.11.7;torch={version}"))
    append_run(store, run("1x2", 180.0, versions=f"python=3.11.7;torch={version}"))
    result = invoke(store.parent, "--out", tmp_path / "report", "--format", "md")
    assert result.exit_code == 0, result.output
    header = (tmp_path / "report" / "summary.md").read_text().split("## ")[0]
    warnings = [line for line in header.splitlines() if line.startswith("**Warning:**")]
    assert len(warnings) == 1 and said in warnings[0], header
    assert ("PyTorch of these runs: " in header) == (version != "<script>")  # no version is no release
