"""`hvdbench compare` (two sweeps: the environment's differences first, each change judged against both
sides' noise, different models never compared as one) and `hvdbench bundle` (the evidence archive and
its sha256 manifest: a file changed or missing since is named).

    .venv/bin/python -m pytest tests/unit/test_compare_bundle.py
"""

import io
import tarfile

import pytest
from click.testing import CliRunner
from conftest import csv_rows
from test_stats_aggregate import run

from hvdbench.cli.main import cli
from hvdbench.results.records.store import append_run


def invoke(*args):
    return CliRunner().invoke(cli, list(map(str, args)))


def sweep(folder, scale=1.0, nccl="2.21", model="resnet50", spread=(-2, 0, 2), one_more=None):
    for layout, rate in (("1x1", 100), ("1x2", 190)):
        for j in spread:
            append_run(folder / "runs.csv", run(layout, rate * scale + j, model=model,
                                                versions=f"python=3.11.7;torch=2.13.0;nccl={nccl}"))
    if one_more:
        append_run(folder / "runs.csv", run(*one_more, versions=f"python=3.11.7;torch=2.13.0;nccl={nccl}"))
    return folder


def test_compare_lists_the_environment_first_and_judges_each_change_against_both_sides_noise(tmp_path):
    before = sweep(tmp_path / "before")
    after = sweep(tmp_path / "after", scale=1.2, nccl="2.23", one_more=("2x1", 150.0))
    result = invoke("compare", before, after, "--out", tmp_path / "cmp")
    assert result.exit_code == 0, result.output
    out = tmp_path / "cmp"
    assert csv_rows(out / "compare_environment.csv") == [{"what": "nccl", "before": "2.21", "after": "2.23"}]
    found = {(r["layout"], r["figure"]): r for r in csv_rows(out / "compare.csv")}
    assert set(found) == {("1x1", "throughput"), ("1x2", "throughput")}
    assert found[("1x1", "throughput")]["verdict"] == "faster"
    assert float(found[("1x1", "throughput")]["change"]) == pytest.approx(0.2)
    md = (out / "compare.md").read_text()
    assert md.index("nccl: 2.21 -> 2.23") < md.index("| 1x1 |") and "only AFTER measured it" in md
    page = (out / "compare.html").read_text()
    assert "http" not in page.replace("http-equiv", "") and page.count('class="state pass"') == 2


def test_a_change_inside_the_noise_is_within_noise_one_run_is_not_judged_and_models_never_mix(tmp_path):
    before = sweep(tmp_path / "b", spread=(-30, 0, 30))
    after = sweep(tmp_path / "a", scale=1.02, spread=(-30, 0, 30), model="bert")
    sweep(tmp_path / "a", scale=1.02, spread=(-30, 0, 30))
    assert invoke("compare", before, after, "--out", tmp_path / "c").exit_code == 0
    found = csv_rows(tmp_path / "c" / "compare.csv")
    assert {r["model"] for r in found} == {"resnet50"} and {r["verdict"] for r in found} == {"within noise"}
    single = sweep(tmp_path / "s", spread=(0,))
    assert invoke("compare", single, after, "--out", tmp_path / "d").exit_code == 0
    assert {r["verdict"] for r in csv_rows(tmp_path / "d" / "compare.csv")} == {"not judged"}


def test_compare_refuses_bad_input_in_one_line_and_writes_nothing(tmp_path):
    before = sweep(tmp_path / "before")
    result = invoke("compare", before, tmp_path / "missing", "--out", tmp_path / "c")
    assert result.exit_code == 1 and result.output.count("\n") == 1 and "missing" in result.output
    assert not (tmp_path / "c").exists() and not (tmp_path / "missing").exists()
    result = invoke("compare", before, before)
    assert result.exit_code == 2 and "the same folder" in result.output


def test_bundle_archives_a_sweep_with_its_manifest_and_verify_names_what_changed_since(tmp_path):
    folder = sweep(tmp_path / "demo")
    (folder / "r1").mkdir()
    (folder / "r1" / "result.json").write_text("{}\n")
    (folder / "link.txt").symlink_to(tmp_path / "elsewhere.txt")
    archive = tmp_path / "demo-evidence.tar.gz"
    result = invoke("bundle", "write", folder, "--out", archive)
    assert result.exit_code == 0, result.output
    assert "link.txt: a symbolic link, left out" in result.output
    assert not (folder / "report").exists()  # the report built for the archive, not into the sweep
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        manifest = tar.extractfile("MANIFEST.sha256").read().decode()
    assert {"demo/runs.csv", "demo/r1/result.json", "demo/report/report.html", "demo/report/verdict.csv"} <= set(names)
    assert "demo/link.txt" not in names and manifest.count("\n") == len(names) - 1
    assert invoke("bundle", "verify", archive, "--sweep", folder).exit_code == 0
    again = invoke("bundle", "write", folder, "--out", archive)  # an archive is never replaced
    assert again.exit_code == 1 and "already exists" in again.output
    (folder / "r1" / "result.json").write_text('{"edited": 1}\n')
    (folder / "runs.csv").unlink()
    result = invoke("bundle", "verify", archive, "--sweep", folder)
    assert result.exit_code == 1
    assert f"{folder}/r1/result.json: changed since the bundle was written" in result.output
    assert f"{folder}/runs.csv: missing since the bundle was written" in result.output


def test_verify_names_a_file_changed_inside_the_archive(tmp_path):
    folder = sweep(tmp_path / "demo")
    archive = tmp_path / "a.tar.gz"
    assert invoke("bundle", "write", folder, "--out", archive).exit_code == 0
    with tarfile.open(archive) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    forged = tmp_path / "forged.tar.gz"
    with tarfile.open(forged, "w:gz") as tar:
        for m, data in members:
            if m.name == "demo/runs.csv":
                data = data.replace(b"100", b"999")
                m.size = len(data)
            if m.name != "demo/report/summary.md":
                tar.addfile(m, io.BytesIO(data))
    result = invoke("bundle", "verify", forged)
    assert result.exit_code == 1
    assert "demo/runs.csv: changed since the bundle was written" in result.output
    assert "demo/report/summary.md: missing" in result.output
    bad = tmp_path / "not.tar.gz"
    bad.write_text("hello")
    result = invoke("bundle", "verify", bad)
    assert result.exit_code == 1 and result.output.startswith(f"Error: {bad}: not an archive")
    assert result.output.count("\n") == 1


def study(folder, bert_scale=1.0):
    """A study folder as `hvdbench study run --out` writes it: study.json and <model>/<mode>/runs.csv."""
    folder.mkdir(parents=True)
    (folder / "study.json").write_text('{"study": "pair", "identity": "0123456789abcdef", "flavor": "debug"}')
    sweep(folder / "resnet50" / "throughput")
    sweep(folder / "bert" / "throughput", scale=bert_scale, model="bert")
    return folder


def test_compare_of_two_studies_judges_each_model_on_its_own(tmp_path):
    before, after = study(tmp_path / "before"), study(tmp_path / "after", bert_scale=0.8)
    result = invoke("compare", before, after, "--out", tmp_path / "cmp")
    assert result.exit_code == 0, result.output
    found = {(r["model"], r["layout"]): r["verdict"] for r in csv_rows(tmp_path / "cmp" / "compare.csv")
             if r["figure"] == "throughput"}
    assert found == {("resnet50", "1x1"): "within noise", ("resnet50", "1x2"): "within noise",
                     ("bert", "1x1"): "slower", ("bert", "1x2"): "slower"}
