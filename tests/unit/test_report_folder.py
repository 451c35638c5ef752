"""The report as a library and the folder it owns (hvdbench/results/report/): a study's name never
becomes a path outside --out, a file the report cannot prove it wrote is never replaced or deleted,
a damaged record or hand-edited sweep.json is a warning, and the predictor takes the hosts' cores
from the recorded hardware."""

import json
import os
import types

import pytest
from click.testing import CliRunner
from test_stats_aggregate import sweep_runs

from hvdbench.cli.main import cli
from hvdbench.errors import ConfigError
from hvdbench.results import report as library
from hvdbench.topology import Layout
from hvdbench.results.records.store import SWEEP_RECORD, append_run, read_study_record
from hvdbench.results.report import folder as folder_module
from hvdbench.results.report.folder import REPORT_RECORD, owned_folder, read_record

OWN = {".hvdbench-report.json", ".hvdbench-report.lock"}


@pytest.fixture
def sweep(tmp_path):
    store = tmp_path / "demo" / "runs.csv"
    for r in sweep_runs():
        append_run(store, r)
    return store.parent


def invoke(*args):
    return CliRunner().invoke(cli, ["report", *map(str, args)])


# The formats of a test whose behaviour is the folder's, not the plots': a report's files are proven
# and refused one by one, whatever made them, and without png and html a report costs a fraction
# (the tests about PNGs and every format ask for them).
TABLES = ("--format", "csv,md")


def listing(out):
    return {p.relative_to(out).as_posix() for p in out.rglob("*")}


# --- the library, called from Python -----------------------------------------------------------

def test_the_report_is_a_library_a_notebook_can_call(sweep, tmp_path):
    loaded = library.load([sweep])
    assert {"1x1", "1x2", "2x1"} <= {r.layout for r in loaded.runs} and loaded.sources == [str(sweep)]
    built = library.build(loaded, library.Options(baseline=Layout(1, 1)))
    assert list(built.sections) == list(library.SECTIONS) and "## " in built.text
    written = library.write(built, tmp_path / "r", ("csv", "md"))
    assert {"scaling.csv", "layouts.csv", "time_to_train.csv", "epochs.csv", "summary.md"} <= {p.name for p in written}
    assert all(p.parent == tmp_path / "r" and p.is_file() for p in written)
    assert (tmp_path / "r" / "summary.md").read_text() == built.text


def test_loading_and_building_set_no_attribute_a_record_does_not_declare(sweep, tmp_path, monkeypatch):
    """Issue 45: what loading finds beside a run (its link, cadence, time in parts, ranks) is a declared
    field of LoadedRun or MllogRun, never an attribute stuck on: every record refuses any other name."""
    import dataclasses

    from test_impossible_numbers import published

    from hvdbench.results.records import schema

    def declared_only(self, name, value):
        if dataclasses.is_dataclass(self) and name not in {f.name for f in dataclasses.fields(self)}:
            raise AttributeError(f"{type(self).__name__}.{name} is not a declared field")
        object.__setattr__(self, name, value)

    monkeypatch.setattr(schema.CsvRecord, "__setattr__", declared_only)
    (sweep / SWEEP_RECORD).write_text(json.dumps({"model": "resnet50", "train_args": [], "link": "100mbit"}))
    loaded = library.load([sweep], [published(tmp_path / "pub")], ("submitter", "system"), None,
                          lambda root: lambda files: files)
    assert {type(r).__name__ for r in loaded.runs} == {"LoadedRun", "MllogRun"}
    built = library.build(loaded, library.Options(baseline=None, predict_layouts=[Layout(2, 8)]))
    assert "## Predicted" in built.text
    with pytest.raises(AttributeError, match="LoadedRun.trained_by_hand is not a declared field"):
        loaded.runs[0].trained_by_hand = 1.0  # the guard is live: a stuck-on name would fail above


# --- issue 50.10: a study's name is a plain name -----------------------------------------------

@pytest.mark.parametrize("name", ["../escaped", "/tmp/abs", "a/b", "..", ["a", "list"], 7, "", "tab\there"])
def test_a_study_name_that_is_not_a_plain_name_is_one_line_naming_the_file(tmp_path, name):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "study.json").write_text(json.dumps({"study": name, "identity": {}}))
    with pytest.raises(ConfigError, match=r"study\.json: \"study\" is .*, not a study name"):
        read_study_record(tmp_path / "s")


def test_two_studies_with_a_name_outside_out_write_nothing_anywhere(sweep, tmp_path):
    studies = []
    for i, name in enumerate(("fine", "../../outside")):
        folder = tmp_path / f"study{i}"
        (folder / "resnet50" / "throughput").mkdir(parents=True)
        (folder / "resnet50" / "throughput" / "runs.csv").write_bytes((sweep / "runs.csv").read_bytes())
        (folder / "study.json").write_text(json.dumps({"study": name, "identity": {}}))
        studies.append(folder)
    before = listing(tmp_path)
    result = invoke(*studies, "--out", tmp_path / "deep" / "r")
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert "study1/study.json: \"study\" is \"../../outside\", not a study name" in result.output
    assert listing(tmp_path) - before <= {"deep", "deep/r"}  # --out is checked (made) first, nothing in it


# --- issue 50.11: a report never replaces or deletes a file it cannot prove it wrote ------------

@pytest.mark.parametrize("name", ["summary.md", "scaling.csv"])
def test_the_users_own_file_in_out_is_kept_and_the_report_refuses_in_one_line(sweep, tmp_path, name):
    out = tmp_path / "here"
    out.mkdir()
    (out / name).write_text("my own notes\n")
    result = invoke(sweep, "--out", out, *TABLES)
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert f"--out {out}: {name}" in result.output and "is not a file a report wrote here" in result.output
    assert (out / name).read_text() == "my own notes\n"
    assert listing(out) - OWN == {name}  # nothing else written: the refusal comes before any file moves in


def test_a_file_changed_since_the_report_wrote_it_is_kept(sweep, tmp_path):
    out = tmp_path / "r"
    assert invoke(sweep, "--out", out, *TABLES).exit_code == 0
    (out / "summary.md").write_text("edited by hand\n")
    result = invoke(sweep, "--out", out, *TABLES)
    assert result.exit_code == 1 and "summary.md is not a file a report wrote here" in result.output
    assert (out / "summary.md").read_text() == "edited by hand\n"
    (out / "summary.md").unlink()  # moved away: the next report writes it again
    assert invoke(sweep, "--out", out, *TABLES).exit_code == 0 and "edited" not in (out / "summary.md").read_text()


def test_a_prediction_written_by_predict_survives_the_next_report(tmp_path):
    out = tmp_path / "r"
    with owned_folder(out) as folder:  # an earlier report wrote prediction.csv (report --predict)
        folder.staged += [folder.stage / "prediction.csv", folder.stage / "summary.md"]
        for p in folder.staged:
            p.write_text("report's\n")
    with owned_folder(out, by="predict") as folder:  # `hvdbench predict` replaced it
        (folder.stage / "prediction.csv").write_text("predict's\n")
        folder.staged.append(folder.stage / "prediction.csv")
    with owned_folder(out) as folder:  # a report without --predict
        (folder.stage / "summary.md").write_text("again\n")
        folder.staged.append(folder.stage / "summary.md")
    assert (out / "prediction.csv").read_text() == "predict's\n" and (out / "summary.md").read_text() == "again\n"
    assert read_record(out)[0]["prediction.csv"]["by"] == "predict"


def test_a_report_asked_for_fewer_formats_keeps_the_others_files_and_their_record(sweep, tmp_path):
    """Issue 57, case 3: `report --format csv` after a full report deletes no summary.md and no PNG
    (fewer formats asked is not a request to delete the others); the record still proves each file
    in the folder, and a later report of every format replaces them as before."""
    out = tmp_path / "r"
    assert invoke(sweep, "--out", out).exit_code == 0
    pngs = {rel for rel in listing(out) if rel.endswith(".png")}
    kept = {rel: (out / rel).read_bytes() for rel in pngs | {"summary.md"}}
    assert pngs
    result = invoke(sweep, "--out", out, "--format", "csv")
    assert result.exit_code == 0, result.output
    assert {rel: (out / rel).read_bytes() for rel in kept} == kept
    record = read_record(out)[0]
    assert set(record) == listing(out) - OWN  # every file there, and only those, proven by the record
    assert all(folder_module._proven(out, rel, entry) for rel, entry in record.items())
    assert invoke(sweep, "--out", out).exit_code == 0  # every format again: each replaced, none refused
    assert pngs <= listing(out) and set(read_record(out)[0]) == listing(out) - OWN


def test_an_edited_record_names_nothing_the_report_did_not_write(sweep, tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    (out / "sub").mkdir()
    (out / "sub" / "data.csv").write_text("mine\n")
    # A copied or edited record: names the user's files, as an older hvdbench's list and with wrong sums.
    for record in ({"wrote": ["notes.txt", "sub/data.csv", "../outside"]},
                   {"wrote": {"notes.txt": {"sha256": "0" * 64, "by": "report"},
                              "sub/data.csv": {"sha256": "1" * 64, "by": "report"}}}):
        (out / REPORT_RECORD).write_text(json.dumps(record))
        result = invoke(sweep, "--out", out, *TABLES)
        assert result.exit_code == 0, result.output
        assert (out / "notes.txt").read_text() == "mine\n" and (out / "sub" / "data.csv").read_text() == "mine\n"
        for p in [p for p in out.iterdir() if p.name not in (*OWN, "notes.txt", "sub")]:
            p.unlink()  # the next record's turn: no report file in the way


def test_a_report_stopped_midway_leaves_only_files_its_record_lists(sweep, tmp_path, monkeypatch):
    out = tmp_path / "r"
    calls, real = [], os.replace

    def replace_then_die(src, dst):
        if ".staging-" in str(src) and ".staging-" not in str(dst):  # a file moving in
            calls.append(dst)
            if len(calls) == 3:  # killed while moving in
                raise KeyboardInterrupt
        return real(src, dst)
    monkeypatch.setattr(folder_module.os, "replace", replace_then_die)
    with pytest.raises(KeyboardInterrupt):
        library.write(library.build(library.load([sweep])), out, ("csv", "md"))
    monkeypatch.undo()
    recorded, _ = read_record(out)
    files = {p for p in listing(out) if (out / p).is_file()} - OWN
    assert files and files <= set(recorded)  # every file there is listed: the next report replaces it
    assert not [p for p in listing(out) if ".staging-" in p]
    assert invoke(sweep, "--out", out, *TABLES).exit_code == 0


def test_a_section_that_fails_while_writing_leaves_the_old_report_as_it_was(sweep, tmp_path, monkeypatch):
    out = tmp_path / "r"
    assert invoke(sweep, "--out", out, *TABLES).exit_code == 0
    before = {p: (out / p).read_bytes() for p in listing(out) if (out / p).is_file()}
    built = library.build(library.load([sweep]))

    def broken(out, formats):
        (out / "half.csv").write_text("half")
        raise OSError(28, "No space left on device")
    built.sections["engines"].files = broken
    with pytest.raises(OSError):
        library.write(built, out, ("csv", "md"))
    assert {p: (out / p).read_bytes() for p in listing(out) if (out / p).is_file()} == before


# --- issue 50.17: a damaged record is one warning, then a report as usual ----------------------

@pytest.mark.parametrize("damage", ["nul", "loop", "folder-inside"])
def test_a_damaged_record_is_one_warning_and_the_report_goes_on(sweep, tmp_path, damage):
    out = tmp_path / "r"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    record = out / REPORT_RECORD
    if damage == "nul":
        record.write_bytes(b'{"wrote": {"\x00summary.md": 1}}\x00')
    elif damage == "loop":
        record.symlink_to(record.name)
    else:
        record.write_text(json.dumps({"wrote": {"a\x00b": {"sha256": "0" * 64, "by": "report"}, "x/../../y": {}}}))
    result = invoke(sweep, "--out", out, *TABLES)
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert len(warnings) == (0 if damage == "folder-inside" else 1)
    assert all(REPORT_RECORD in w for w in warnings)
    assert (out / "notes.txt").read_text() == "mine\n" and not record.is_symlink()
    assert "summary.md" in read_record(out)[0]


def test_a_damaged_record_over_a_report_s_files_is_named_in_the_refusal(sweep, tmp_path):
    """The files a report wrote, under a record damaged since: nothing proves them, so they are kept,
    and the one-line refusal says why (the record cannot be read), not that they changed."""
    out = tmp_path / "r"
    assert invoke(sweep, "--out", out, *TABLES).exit_code == 0
    before = (out / "summary.md").read_text()
    (out / REPORT_RECORD).write_bytes(b'{"wrote": \x00')
    result = invoke(sweep, "--out", out, *TABLES)
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert f"--out {out}: summary.md (and " in result.output
    assert f"{REPORT_RECORD} cannot be read (" in result.output and "changed since" not in result.output
    assert (out / "summary.md").read_text() == before


# --- issue 50.16: a hand-edited sweep.json's hardware of the wrong type ------------------------

@pytest.mark.parametrize("hardware", [[1, 2], "a100", {"node1": {"cpu": "x", "inter_node_link": 5}}])
def test_hand_edited_hardware_is_a_warning_naming_sweep_json_not_a_traceback(sweep, tmp_path, hardware):
    (sweep / SWEEP_RECORD).write_text(json.dumps({"model": "resnet50", "train_args": [], "hardware": hardware}))
    result = invoke(sweep, "--out", tmp_path / "r", *TABLES)  # read as the runs load (records/store.py)
    assert result.exit_code == 0, result.output
    said = [line for line in result.output.splitlines() if "sweep.json" in line and "warning" in line]
    assert len(said) == (0 if isinstance(hardware, dict) else 1)
    assert all(str(sweep / SWEEP_RECORD) in line for line in said)


def test_the_sweep_keeps_a_hand_edited_hardware_and_says_so(tmp_path, capsys):
    from hvdbench.sweep.spec import keep_hardware

    (tmp_path / SWEEP_RECORD).write_text(json.dumps({"model": "resnet50", "train_args": [], "hardware": [1]}))
    (tmp_path / "run1").mkdir()
    (tmp_path / "run1" / "hardware.json").write_text(json.dumps({"node1": {"cpu": {"logical": 8}}}))
    keep_hardware(types.SimpleNamespace(out=tmp_path), tmp_path / "run1")
    assert json.loads((tmp_path / SWEEP_RECORD).read_text())["hardware"] == [1]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path / SWEEP_RECORD}: \"hardware\" is a list" in err


# --- issue 45: the predictor takes the hosts' cores from the recorded hardware -----------------

def test_the_hosts_cores_come_from_the_sweeps_hardware_record(tmp_path, monkeypatch):
    from test_predict import FIT_LAYOUTS, run

    from hvdbench.results.predict import throughput as P

    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # the machine running the report: not the hosts
    sweep = tmp_path / "sweep"
    for n, g in FIT_LAYOUTS:
        for k in (1, 2):
            r = run(n, g, k)
            r.run_id, r.sweep, r.devices = f"{n}x{g}-r{k}", "s", "cpu"
            r.hosts = "gpu-node-17" if n == 1 else "gpu-node-17;gpu-node-18"
            append_run(sweep / "runs.csv", r)
    host = {"cpu": {"model": "x", "logical": 32, "cores": 16, "sockets": 1}}
    (sweep / SWEEP_RECORD).write_text(json.dumps({"model": "resnet50", "train_args": [],
                                                  "hardware": {"gpu-node-17": host, "gpu-node-18": host}}))
    fit = P.fit_group(library.load([sweep]).runs)
    assert fit.cores == 32 and "sweep.json" in fit.cores_from
    (sweep / SWEEP_RECORD).unlink()  # no record: not guessed from this machine, and said so
    fit = P.fit_group(library.load([sweep]).runs)
    assert fit.cores is None and "gpu-node-17" in fit.cores_from


def test_predict_then_report_into_one_folder_as_the_readme_runs_them(tmp_path):
    from test_predict import _sweep

    sweep = _sweep(tmp_path)
    runner = CliRunner()
    got = runner.invoke(cli, ["predict", str(sweep), "--layouts", "4x1", "--machines", "shared"])
    assert got.exit_code == 0, got.output
    out = sweep / "report"  # both commands' default
    assert {"prediction.csv", "prediction_fit.csv", "prediction.png"} <= listing(out)
    got = runner.invoke(cli, ["report", str(sweep), "--predict", "4x1"])  # replaces predict's own files
    assert got.exit_code == 0, got.output
    assert read_record(out)[0]["prediction.csv"]["by"] == read_record(out)[0]["prediction_fit.csv"]["by"] == "report"
    got = runner.invoke(cli, ["predict", str(sweep), "--layouts", "4x1,8x1", "--machines", "shared"])
    assert got.exit_code == 0, got.output
    got = runner.invoke(cli, ["report", str(sweep)])  # no --predict: predict's prediction.csv stays
    assert got.exit_code == 0, got.output
    assert "8x1" in (out / "prediction.csv").read_text() and (out / "summary.md").is_file()
    assert "8x1" in (out / "prediction_fit.csv").read_text()  # the fit's table stays beside it
