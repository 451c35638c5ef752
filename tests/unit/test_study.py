"""Study files: the strict schema (every error names the file and key), the plan of sweeps a study
becomes, a missing model refused before any launch, the shipped studies' dry runs, and the
speed-up across models from a fixture store."""

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from test_stats_aggregate import run, tta

from hvdbench.cli.main import cli
from hvdbench.errors import ConfigError
from hvdbench.results.analyses import study_tables
from hvdbench.results.stats.aggregate import build_tables
from hvdbench.study import run as study_run
from hvdbench.study.schema import load_study
from hvdbench.sweep.options import SweepOptions

ROOT = Path(__file__).resolve().parents[2]
BASE = {"study": "t", "reproduces": "a test", "layouts": ["1x1", "1x2"],
        "models": {"resnet50": {"data": "data/digits", "train": {"batch_per_gpu": 16}}}}


def options(out, flavor=None, **given) -> study_run.StudyOptions:
    """`study run --out OUT [--flavor F] ...`: the options every sweep of the study takes, and its own."""
    return study_run.StudyOptions(SweepOptions(out, **given), flavor=flavor)


def write(tmp_path, data, name="s.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def digits(tmp_path):
    data = tmp_path / "digits"
    data.mkdir(exist_ok=True)
    (data / "manifest.json").write_text("{}")  # the plan only looks for it
    return str(data)


def with_model(section, **top):
    return {**BASE, **top, "models": {"resnet50": section}}


@pytest.mark.parametrize("change, message", [
    ({"colour": 1}, "unknown key 'colour'"),
    ({"study": "Bad Name"}, "study 'Bad Name': lowercase letters"),
    ({"mode": "fast"}, "mode 'fast' is not one of throughput, time_to_accuracy, both"),
    ({"layouts": ["1x1", "2by2"]}, "layouts[1] '2by2' is not NODESxGPUS"),
    ({"layouts": ["1x1", "1x2", "1x1"]}, "layouts[2] '1x1' is given twice"),
    ({"gpus": [1, 2]}, "give 'layouts' or 'gpus', not both"),
    ({"repeats": 0}, "repeats 0: a whole number of at least 1"),
    ({"launcher": "ssh"}, "launcher 'ssh' is not one of"),
    ({"models": {}}, "'models' must map model names"),
    ({"models": {"resnet50": {"train": {"lr_": 1}}}}, "models.resnet50.train"),
    ({"models": {"resnet50": {"weights": 1}}}, "unknown key 'models.resnet50.weights'"),
    ({"models": {"resnet50": {"debug": {"flavor": "x"}}}}, "unknown key 'models.resnet50.debug.flavor'"),
    ({"models": {"resnet50": {"synthetic": True, "data": "d"}}}, "models.resnet50: synthetic data needs no"),
    ({"models": {"resnet50": {"prepare": ["digits"]}}}, "models.resnet50.prepare needs 'data'"),
    ({"models": {"resnet50": {"data": "d", "prepare": ["digits", "--out", "x"]}}}, "--out is the model's"),
    ({"models": {"resnet50": {"train": {"batch_per_gpu": 8}, "layouts": {"1x1x16x1": {}}}}},
     "models.resnet50.train.batch_per_gpu: the model's layouts name their batch"),
    ({"models": {"resnet50": {"layouts": {"1x1": {}}}}}, "models.resnet50.layouts: '1x1' is not NODESxGPUSxBATCHxACCUM"),
    ({"models": {"resnet50": {"train": {"data": "d"}}}}, "models.resnet50.train.data: set it in the model's section"),
    ({"published": {"speedup": {"resnet50": {4: "fast"}}}}, "published.speedup.resnet50.4: 'fast' is not a number"),
    ({"published": {"speedup": {"resnet50": {0: 1.0}}}}, "GPU count 0"),
])
def test_schema_errors_name_the_file_and_the_key(tmp_path, change, message):
    path = write(tmp_path, {**BASE, **change})
    with pytest.raises(ConfigError) as e:
        load_study(path)
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value)


@pytest.mark.parametrize("top, section, key", [
    ({"engines": ["ddp"]}, {"train": {"engine": "fsdp"}}, "models.resnet50.train.engine 'fsdp' and engines [ddp]"),
    ({}, {"engines": ["ddp", "horovod"], "layouts": {"1x1x16x1": {"engine": "fsdp"}}},
     "models.resnet50.layouts.1x1x16x1.engine 'fsdp' and models.resnet50.engines [ddp, horovod]"),
    ({"engines": ["horovod"]}, {"debug": {"synthetic": True, "train": {"engine": "ddp"}}},
     "models.resnet50.debug.train.engine 'ddp' and engines [horovod]"),
])
def test_study_engines_and_a_models_train_engine_are_refused_together(tmp_path, top, section, key):
    # `sweep --engines` refuses an --engine beside it; a study ran its `engines:` while its dry run
    # and layout files showed the model's own `engine:`.
    path = write(tmp_path, with_model({"data": digits(tmp_path), **section}, **top))
    result = CliRunner().invoke(cli, ["study", "run", str(path), "--dry-run", "--hosts", "localhost:2",
                                      "--out", str(tmp_path / "o")])
    assert result.exit_code == 1 and result.stderr == (
        f"Error: {path}: {key} both choose the engine: give it in one place\n"), result.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("section, said", [
    ({"synthetic": True, "layouts": {"1x1x16x1": {"flavor": "huge"}}},
     "layouts.1x1x16x1: model resnet50 has no flavor 'huge'; valid: full, debug"),
    ({"synthetic": True, "train": {"batch_per_gpu": 16, "max_epochs": 3}},
     "max_epochs belong to time-to-accuracy runs (--data without --steps); this is a throughput run (--synthetic)"),
])
def test_a_run_the_study_cannot_make_is_named_by_the_study_file(tmp_path, section, said):
    # It named the sweep config the study generates (a temporary file on a dry run), or no file.
    path = write(tmp_path, with_model(section))
    for dry in (["--dry-run"], []):
        result = CliRunner().invoke(cli, ["study", "run", str(path), *dry, "--hosts", "localhost:2",
                                          "--out", str(tmp_path / "o")])
        assert result.exit_code == 1 and result.stderr == (
            f"Error: {path}: models.resnet50 (throughput sweep): {said}\n"), result.output


def test_a_missing_model_is_refused_before_any_launch_unless_skipped(tmp_path):
    data = digits(tmp_path)
    study = load_study(write(tmp_path, {**BASE, "models": {"resnet50": {"data": data}, "dlrm": {"synthetic": True}}}))
    opts = options(tmp_path / "out", hosts="localhost:2")
    with pytest.raises(ConfigError, match=r"models.dlrm: this hvdbench has no model 'dlrm' .*--skip-missing"):
        study_run.plan_study(study, opts, tmp_path / "configs")
    assert not (tmp_path / "out").exists() and not (tmp_path / "configs").exists()
    opts.skip_missing = True
    sweeps, notes = study_run.plan_study(study, opts, tmp_path / "configs")
    assert [s.model for s in sweeps] == ["resnet50"] and notes == ["dlrm: skipped (no such model in this hvdbench)"]
    # Through the command line: one line, exit 1, nothing written.
    result = CliRunner().invoke(cli, ["study", "run", str(study.path), "--hosts", "localhost:2",
                                      "--out", str(tmp_path / "cli")])
    assert result.exit_code == 1 and result.output.count("\n") == 1 and "models.dlrm" in result.output
    assert not (tmp_path / "cli").exists()


def test_a_study_becomes_one_sweep_per_model_and_mode(tmp_path):
    data = digits(tmp_path)
    study = load_study(write(tmp_path, {
        **BASE, "mode": "both", "flavor": "debug", "throughput": {"steps": 7, "warmup_steps": 2},
        "models": {"resnet50": {"data": data, "train": {"batch_per_gpu": 16, "lr": 0.2}},
                   "bert": {"synthetic": True}}}))
    sweeps, notes = study_run.plan_study(study, options(tmp_path / "o", hosts="localhost:2"),
                                         tmp_path / "configs")
    assert [(s.model, s.mode) for s in sweeps] == [
        ("resnet50", "throughput"), ("resnet50", "time_to_accuracy"), ("bert", "throughput")]
    assert notes == ["bert: no time-to-accuracy sweep (synthetic data has no accuracy to reach)"]
    throughput, tta_sweep, bert = sweeps
    assert [r.run_id for r in throughput.spec.runs] == ["1x1x16x1-r1", "1x2x16x1-r1"]
    assert throughput.spec.out == tmp_path / "o" / "resnet50" / "throughput"
    config = yaml.safe_load((tmp_path / "configs" / "resnet50-throughput.yaml").read_text())
    assert config["train"] == {"flavor": "debug", "data": data, "lr": 0.2, "steps": 7, "warmup_steps": 2}
    tta_config = yaml.safe_load((tmp_path / "configs" / "resnet50-time_to_accuracy.yaml").read_text())
    assert "steps" not in tta_config["train"] and list(tta_config["layouts"]) == ["1x1x16x1", "1x2x16x1"]
    assert bert.spec.runs[0].entry.config.settings["synthetic"] is True


def test_another_flavor_drops_the_per_layout_settings_and_uses_the_debug_section(tmp_path):
    data = digits(tmp_path)
    study = load_study(write(tmp_path, {
        "study": "t", "reproduces": "x", "flavor": "full",
        "models": {"resnet50": {"data": "data/imagenet", "train": {"precision": "bf16"},
                                "layouts": {"1x8x256x1": {"warmup_epochs": 2}, "2x8x256x1": {"warmup_epochs": 3}},
                                "debug": {"data": data}}}}))
    opts = options(tmp_path / "o", flavor="debug", hosts="localhost:2", layouts="1x1,1x2")
    [sweep], _ = study_run.plan_study(study, opts, tmp_path / "c")
    settings = sweep.spec.runs[0].entry.config.settings
    assert settings["data"] == data and "precision" not in settings and "warmup_epochs" not in settings
    assert [r.run_id for r in sweep.spec.runs] == ["1x1x16x1-r1", "1x2x16x1-r1"]  # the debug flavor's batch


def test_missing_data_without_a_recipe_is_an_error_and_a_recipe_is_planned(tmp_path):
    study = load_study(write(tmp_path, with_model({"data": str(tmp_path / "none")})))
    opts = options(tmp_path / "o", hosts="localhost:2")
    with pytest.raises(Exception, match="none: no manifest.json there, and no 'prepare' recipe"):
        study_run.plan_study(study, opts, tmp_path / "c")
    study = load_study(write(tmp_path, with_model({"data": str(tmp_path / "none"), "prepare": ["digits"]})))
    [sweep], _ = study_run.plan_study(study, opts, tmp_path / "c")
    assert sweep.prepare[1:] == ["-m", "hvdbench", "prepare", "digits", "--out", str(tmp_path / "none")]


def test_a_resume_with_other_model_settings_is_refused(tmp_path):
    data = digits(tmp_path)
    opts = options(tmp_path / "o", hosts="localhost:2")
    (tmp_path / "o").mkdir()
    study_run.check_study_record(load_study(write(tmp_path, with_model({"data": data}))), opts)
    record = json.loads((tmp_path / "o" / "study.json").read_text())
    assert record["study"] == "t" and record["published"] == {}
    study_run.check_study_record(load_study(write(tmp_path, with_model({"data": data}, repeats=3))), opts)
    changed = load_study(write(tmp_path, with_model({"data": data, "train": {"lr": 0.5}})))
    with pytest.raises(ConfigError, match="study.json: this folder holds study 't' run with other model settings"):
        study_run.check_study_record(changed, opts)


def test_cross_model_speedup_table_from_a_fixture_store():
    runs = [run("1x1", 100, model="ncf"), run("1x2", 150, model="ncf"), run("2x1", 120, model="ncf")]
    runs += [tta("1x1", m, global_batch=32) for m in (30, 32, 34)]
    runs += [tta("1x2", m, global_batch=64) for m in (15, 16, 17)]
    runs += [run("1x1", 100), run("1x2", 190)]  # resnet50 throughput: its time to train wins
    rows = study_tables.speedup_rows(build_tables(runs), {"speedup": {"resnet50": {"2": 1.9}}})
    got = [(r.model, r.basis, r.gpus, r.layout, r.speedup, r.published_speedup) for r in rows]
    assert got == [("ncf", "throughput", 1, "1x1", 1.0, None), ("ncf", "throughput", 2, "1x2", 1.5, None),
                   ("resnet50", "time to train", 1, "1x1", 1.0, None),
                   ("resnet50", "time to train", 2, "1x2", 2.0, 1.9)]
    assert rows[-1].vs_published == pytest.approx(2.0 / 1.9)
    text = study_tables.markdown(rows, "t")
    assert "| resnet50 | debug · torch · fp32 | time to train | 1x1 | 1.00× (1x1) | 2.00× (1x2) · published 1.90× |" in text
    assert "| 2 CPU ranks |" in text.splitlines()[4] + " |"


@pytest.mark.parametrize("path", sorted((ROOT / "hvdbench/studies").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_study_loads_and_dry_runs(path, tmp_path):
    study = load_study(path)
    assert study.reproduces and study.models
    hosts = [] if study.hostfile or study.launcher == "slurm" else ["--hosts", "localhost:2", "--layouts", "1x1,1x2"]
    result = CliRunner().invoke(cli, ["study", "run", str(path), "--dry-run", "--skip-missing", *hosts,
                                      "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "o").exists()  # a dry run writes nothing


# --- bad input (issue 30): recipes checked when the file loads, printed shell-quoted ------------------

@pytest.mark.parametrize("recipe, key, message", [
    (["digits; touch /tmp/pwned"], "prepare[0]", "'digits; touch /tmp/pwned' is not a command of `hvdbench prepare`"),
    (["nosuch"], "prepare[0]", "'nosuch' is not a command of `hvdbench prepare` (bert, c4, coco, "),
    (["--size", "8"], "prepare[0]", "'--size' is not a command"),
    (["digits", ""], "prepare[1]", "must be a non-empty string, not ''"),
    (["digits", "  "], "prepare[1]", "must be a non-empty string"),
    (["digits", "--size", "8\0"], "prepare[2]", "holds a NUL character"),
    (["digits", 8], "prepare[1]", "must be a non-empty string, not 8"),
    (["digits", "--out=x"], "prepare[1]", "--out is the model's 'data' folder"),
    (["digits", "--size", "8", "--out", "x"], "prepare[3]", "--out is the model's 'data' folder"),
    ("digits", "prepare", "must be a list"),
])
def test_a_prepare_recipe_is_checked_when_the_study_loads(tmp_path, recipe, key, message):
    path = write(tmp_path, with_model({"data": "d", "prepare": recipe}))
    with pytest.raises(ConfigError) as e:
        load_study(path)
    assert str(e.value).startswith(f"{path}: models.resnet50.{key}") and message in str(e.value), str(e.value)
    # and in the debug section, and through the command line: one line, exit 1, nothing written
    path = write(tmp_path, with_model({"data": "d", "debug": {"data": "d", "prepare": recipe}}))
    result = CliRunner().invoke(cli, ["study", "run", str(path), "--dry-run", "--hosts", "localhost:1",
                                      "--out", str(tmp_path / "o")])
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert f"models.resnet50.debug.{key}" in result.stderr
    assert not (tmp_path / "o").exists() and not (tmp_path / "pwned").exists()


def test_nul_in_a_data_folder_or_hostfile_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"models.resnet50.data 'd\\x00x' holds a NUL"):
        load_study(write(tmp_path, with_model({"data": "d\0x"})))
    with pytest.raises(ConfigError, match=r": hostfile 'h\\x00' holds a NUL"):
        load_study(write(tmp_path, with_model({"data": "d"}, hostfile="h\0")))


def test_prepare_commands_are_the_command_groups_without_importing_a_framework():
    import subprocess
    import sys

    import click

    from hvdbench.cli.prepare import prepare
    from hvdbench.study.schema import prepare_commands

    assert prepare_commands() == prepare.list_commands(click.Context(prepare))
    code = ("import sys; from hvdbench.study.schema import prepare_commands; prepare_commands(); "
            "print(sorted(m for m in ('torch', 'tensorflow', 'horovod') if m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"


def test_dry_runs_print_every_command_shell_quoted(tmp_path):
    import shlex

    data = str(tmp_path / "my data")  # a space: quoted
    path = write(tmp_path, with_model({"data": data, "prepare": ["digits", "--size", "8; touch pwned"]}))
    result = CliRunner().invoke(cli, ["study", "run", str(path), "--dry-run", "--hosts", "localhost:1",
                                      "--layouts", "1x1", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("prepare first: "))
    assert line == "prepare first: " + shlex.join(["hvdbench", "prepare", "digits", "--size", "8; touch pwned",
                                                   "--out", data])
    assert shlex.split(line.removeprefix("prepare first: "))[4] == "8; touch pwned"  # one argument, not a command
    result = CliRunner().invoke(cli, ["study", "run", str(path), "--dry-run", "--launcher", "slurm",
                                      "--hostfile", str(write_hosts(tmp_path)), "--layouts", "1x1",
                                      "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "# prepare first: " + shlex.join(["hvdbench", "prepare", "digits", "--size", "8; touch pwned",
                                             "--out", data]) in result.output
    submits = [x for x in result.output.splitlines() if x.startswith("# submit: ")]
    assert submits and all(shlex.split(x.removeprefix("# submit: "))[0].endswith("sbatch") for x in submits)
    assert not (tmp_path / "o").exists() and not (tmp_path / "pwned").exists()


def write_hosts(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("node1 slots=1\n")
    return hosts


def test_study_run_on_a_directory_says_what_a_study_is(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    result = CliRunner().invoke(cli, ["study", "run", str(folder), "--out", str(tmp_path / "o")])
    assert result.exit_code == 1
    assert result.stderr == (f"Error: {folder}: a directory, not a study file (a study is a NAME of "
                             "`hvdbench study list` or a YAML file)\n")
    (folder / "study.json").write_text("{}")  # the --out of an earlier study run
    result = CliRunner().invoke(cli, ["study", "run", str(folder), "--out", str(tmp_path / "o")])
    assert result.exit_code == 1 and f"`hvdbench report {folder}` reports them" in result.stderr
    result = CliRunner().invoke(cli, ["study", "run", "no-such-study", "--out", str(tmp_path / "o")])
    assert result.exit_code == 1 and "study 'no-such-study' not found (a study is a NAME of `hvdbench study list`" in result.stderr
    assert not (tmp_path / "o").exists()


# --- issue 50: the study files are package data -------------------------------------------------------

def test_a_pip_installed_hvdbench_has_its_studies(tmp_path):
    """`pip install` (a wheel built from this checkout, installed into a folder of its own) lists the
    shipped studies and finds `demo` by name, from outside any checkout: they are package data."""
    import shutil
    import subprocess
    import sys

    src = tmp_path / "src"
    shutil.copytree(ROOT / "hvdbench", src / "hvdbench", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "--target", site, src], check=True, capture_output=True, timeout=300)
    shutil.rmtree(src)  # nothing of the copy is left to find the studies in
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}

    def hvdbench(*args):
        return subprocess.run([sys.executable, "-m", "hvdbench", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)

    where = subprocess.run([sys.executable, "-c", "import hvdbench; print(hvdbench.__file__)"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(site))  # the installed copy, not this checkout
    listed = hvdbench("study", "list")
    assert listed.returncode == 0, listed.stderr
    names = [line.split(":")[0] for line in listed.stdout.splitlines()]
    assert names == sorted(p.stem for p in (ROOT / "hvdbench" / "studies").glob("*.yaml")) and "demo" in names
    dry = hvdbench("study", "run", "demo", "--dry-run", "--hosts", "localhost:2", "--layouts", "1x1,1x2", "--out", "o")
    assert dry.returncode == 0 and "resnet50" in dry.stdout, dry.stderr


def test_the_demo_study_warms_up_for_its_three_steps_only(tmp_path):
    """`make demo`'s throughput runs take 3 warm-up steps, not 10 to 15 until step times settle (the
    default cap): those steps were 13 to 19 % of a launch's CPU-seconds (issue 58: the demo took 22 min;
    benchmarks/bench_demo_launch.py)."""
    result = CliRunner().invoke(cli, ["study", "run", "demo", "--dry-run", "--hosts", "localhost:2", "--layouts",
                                      "1x1,1x2", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    modes = [line for line in result.output.splitlines() if line.startswith("mode: ")]
    assert len(modes) == 7 and set(modes) == {"mode: throughput, 10 timed steps after 3 warm-up steps"}, modes


def test_study_list_with_no_study_files_says_so(tmp_path, monkeypatch):
    from hvdbench.cli import study as study_cli

    monkeypatch.setattr(study_cli, "STUDIES_DIR", tmp_path / "studies")
    result = CliRunner().invoke(cli, ["study", "list"])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == (f"Error: no study files in {tmp_path / 'studies'} (this hvdbench was installed without "
                             "its package data; reinstall it, or give `study run` a YAML file's path)\n")


def test_sweep_and_study_run_take_the_sweep_options_declared_once():
    """One option set (issue 54): the options both commands take are declared once (cli/sweep_options.py)
    and fill one SweepOptions, whose every field is an option of `hvdbench sweep`."""
    import dataclasses
    import re

    import click

    from hvdbench.cli import sweep_options
    from hvdbench.cli.study import run as study_command
    from hvdbench.cli.sweep import sweep as sweep_command

    shared = {p.name for p in click.command()(sweep_options.sweep_options(lambda **_: None)).params}
    fields = {f.name for f in dataclasses.fields(SweepOptions)}
    assert {p.name for p in sweep_command.params} == fields
    assert {p.name for p in study_command.params} - shared == {"file", "flavor", "only", "skip_missing"}
    assert len(shared) == 17 and shared < fields
    sources = "".join((ROOT / "hvdbench" / "cli" / name).read_text() for name in ("sweep.py", "study.py",
                                                                                  "sweep_options.py"))
    for param in click.command()(sweep_options.sweep_options(lambda **_: None)).params:
        flag = param.opts[0]
        assert len(re.findall(rf'click\.option\(\s*"{flag}"', sources)) == 1, flag


def test_a_studys_line_says_how_long_it_has_run_and_how_long_the_rest_will_take():
    """Issue 58: 48 launches and no word of how long; a resumed study's runs found done took no time now."""
    from hvdbench.study.run import Pace, clock

    pace = Pace(done=4, now=100.0)  # 4 runs done by an earlier, stopped study
    assert pace.words(4, 42, now=130.0) == ""  # none of its own finished yet: no pace to go by
    assert pace.words(10, 42, now=100.0 + 6 * 30) == " in 3:00, about 16:00 left at this pace"
    assert pace.words(42, 42, now=100.0 + 3725) == " in 1:02:05"
    assert clock(59.6) == "1:00" and clock(0) == "0:00"
