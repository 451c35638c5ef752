"""Every bad input is a one-line error (issue 15): one test per class of bad input, each checking the
exit status, that stderr is ONE line naming the file, host or key at fault, and that every file that
existed before is byte-identical after; then a seeded property test feeding random bytes and random
edits of a hostfile, a manifest and a runs.csv to the commands that read them: a one-line error or a
success, never a traceback.

The commands run as processes of the venv's `hvdbench` (what a user types), except the property test
and the measurement rescue, which run in-process through click's CliRunner (many cases, or a fault
injected where no process could get it)."""

import csv
import errno
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hvdbench.cli.main import cli
from hvdbench.results.records.schema import IoRow, RunResult, write_result
from hvdbench.results.records.store import append_run, read_rows, read_runs

BIN = Path(sys.executable).parent
HVDBENCH = str(BIN / "hvdbench")


# --- helpers ---------------------------------------------------------------------------------

def hvd(*args, cwd=None, path_prefix=None, timeout=120):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    if path_prefix:
        env["PATH"] = f"{path_prefix}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run([HVDBENCH, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=timeout)


def one_line_error(proc, *names) -> str:
    """Exit status 1, and stderr one `Error: ...` line naming each of `names`."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    assert len(lines) == 1 and lines[0].startswith("Error: "), proc.stderr
    for name in names:
        assert str(name) in lines[0], f"{name!r} not named in: {lines[0]}"
    return lines[0]


def snapshot(*roots) -> dict:
    """Every regular file under `roots` -> its bytes (symbolic links: their target text)."""
    files = {}
    for root in roots:
        for p in [Path(root), *Path(root).rglob("*")] if Path(root).is_dir() else [Path(root)]:
            if p.is_symlink():
                files[p] = ("link", os.readlink(p))
            elif p.is_file():
                files[p] = p.read_bytes()
    return files


def unchanged(before: dict) -> None:
    for path, content in before.items():
        now = ("link", os.readlink(path)) if path.is_symlink() else path.read_bytes() if path.is_file() else None
        assert now == content, f"{path} changed"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A small prepared images dataset (4 shards), made once; tests copy it before editing it."""
    out = tmp_path_factory.mktemp("data") / "images"
    proc = hvd("prepare", "synthetic", "--like", "images", "--samples", "60", "--size", "8",
               "--num-classes", "4", "--samples-per-shard", "20", "--out", out)
    assert proc.returncode == 0, proc.stderr
    return out


def edited(dataset, tmp_path, edit):
    """A copy of the dataset whose manifest `edit(manifest)` changed."""
    copy = tmp_path / "d"
    shutil.copytree(dataset, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    edit(manifest)
    (copy / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return copy


def good_runs(store: Path) -> Path:
    for layout, world, tput in (("1x1", 1, 100.0), ("1x2", 2, 190.0), ("1x1", 1, 104.0)):
        append_run(store, RunResult(run_id=f"{layout}-r{tput:g}", sweep="s", model="resnet50", flavor="debug",
                                    framework="torch", layout=layout, world_size=world, nodes=1, gpus_per_node=world,
                                    scale="up", batch_per_gpu=32, global_batch=32 * world, throughput=tput,
                                    throughput_per_gpu=tput / world, steps=10, wall_s=3.0))
    return store


def fake_srun(tmp_path, sleep=0.0, during: str = "") -> Path:
    """A `srun` for `sweep --launcher srun`: after `sleep` s it writes the worker's result.json into
    its --out (a success) and appends its --run-id to launched.txt, so a test sees every launch; then
    runs `during` (Python, with `out` the run's folder: what happens to the sweep folder meanwhile)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "srun").write_text(f"""#!{sys.executable}
import sys, time
from pathlib import Path
from hvdbench.results.records.schema import RunResult, write_result
argv = sys.argv[1:]
out = Path(argv[argv.index("--out") + 1])
with open({str(tmp_path / "launched.txt")!r}, "a") as f:
    f.write(argv[argv.index("--run-id") + 1] + "\\n")
time.sleep({sleep})
write_result(out / "result.json", RunResult(model="resnet50", world_size=1, nodes=1, gpus_per_node=1,
                                            throughput=10.0, wall_s=0.1))
{during}""")
    (bin_dir / "srun").chmod(0o755)
    return bin_dir


def launched(tmp_path) -> list[str]:
    path = tmp_path / "launched.txt"
    return path.read_text().split() if path.exists() else []


# --- 1. unwritable output --------------------------------------------------------------------

PROC_OUT = "/proc/hvdbench-no-such/out"  # nothing can be created under /proc, root or not


def out_commands(dataset, sweep_dir, out):
    return {
        "sweep": ["sweep", "resnet50", "--hosts", "localhost:1", "--out", out, "--", "--synthetic"],
        "sweep --dry-run": ["sweep", "resnet50", "--hosts", "localhost:1", "--dry-run", "--out", out, "--", "--synthetic"],
        "prepare digits": ["prepare", "digits", "--out", out],
        "prepare synthetic": ["prepare", "synthetic", "--like", "images", "--samples", "10", "--out", out],
        "report": ["report", sweep_dir, "--out", out],
        "bench io": ["bench", "io", "--data", dataset, "--out", out],
    }


@pytest.mark.parametrize("command", ["sweep", "sweep --dry-run", "prepare digits", "prepare synthetic",
                                     "report", "bench io"])
def test_an_unwritable_out_is_refused_before_the_work(tmp_path, dataset, command):
    sweep_dir = good_runs(tmp_path / "sw" / "runs.csv").parent
    before = snapshot(tmp_path, dataset)
    proc = hvd(*out_commands(dataset, sweep_dir, PROC_OUT)[command], path_prefix=fake_srun(tmp_path))
    one_line_error(proc, "--out", PROC_OUT)
    assert "samples/s" not in proc.stdout  # bench io: refused before it measured
    assert launched(tmp_path) == []
    unchanged(before)


@pytest.fixture
def read_only_dir(tmp_path):
    """A read-only bind mount (root only): the real 'read-only file system' case."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a read-only bind mount needs root")
    src, mnt = tmp_path / "ro-src", tmp_path / "ro"
    src.mkdir()
    mnt.mkdir()
    (src / "kept.txt").write_text("was here\n")
    if subprocess.run(["mount", "--bind", str(src), str(mnt)], capture_output=True).returncode:
        pytest.skip("mount --bind is not permitted here")
    try:
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(mnt)], capture_output=True).returncode:
            pytest.skip("cannot remount read-only here")
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


@pytest.mark.parametrize("command", ["sweep", "prepare digits", "report", "bench io"])
def test_an_out_on_a_read_only_file_system_is_refused(tmp_path, dataset, read_only_dir, command):
    sweep_dir = good_runs(tmp_path / "sw" / "runs.csv").parent
    before = snapshot(tmp_path / "sw", read_only_dir)
    out = read_only_dir / "out"
    proc = hvd(*out_commands(dataset, sweep_dir, out)[command], path_prefix=fake_srun(tmp_path))
    assert "Read-only file system" in one_line_error(proc, "--out", out)
    assert launched(tmp_path) == []
    unchanged(before)


def test_a_finished_measurement_is_saved_elsewhere_when_its_csv_cannot_be_written(tmp_path, dataset, monkeypatch):
    """The output folder passed the check, then could not be written (it went read-only, the disk
    filled): the rows are saved in a new file, and the one-line error says where."""
    from hvdbench.results.records import store

    def read_only(path, rows):
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(store, "append_rows", read_only)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    result = CliRunner().invoke(cli, ["bench", "io", "--data", str(dataset), "--passes", "1",
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("Error: ") and "bench_io.csv" in line and "Read-only file system" in line
    assert "samples/s" in result.stdout  # the table was shown before the write failed
    [saved] = (tmp_path / "tmp").glob("bench_io-*.csv")
    assert f"saved in {saved}" in line
    rows = read_rows(saved, IoRow)
    assert {r.impl for r in rows} == {"reader", "reader+decode", "h5py"} and all(r.samples_s > 0 for r in rows)


# --- 2. hostfile numbers ---------------------------------------------------------------------

@pytest.mark.parametrize("slots, words", [
    ("²", ["digits 0-9", "'²'"]),
    ("٣", ["digits 0-9"]),  # an Arabic-Indic three, which int() would read as 3
    ("99999999999999999999", ["limit of 1024"]),
    ("1" * 5000, ["limit of 1024"]),  # int() refuses numbers this long
    ("1025", ["1025 slots", "limit of 1024"]),
    ("0x10", ["digits 0-9"]),
    ("-2", ["digits 0-9"]),
])
def test_hostfile_slots_are_ascii_whole_numbers_within_a_stated_bound(tmp_path, slots, words):
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"# cluster\nnode1 slots=2\nnode2 slots={slots}\n")
    before = snapshot(tmp_path)
    proc = hvd("sweep", "resnet50", "--hostfile", hostfile, "--dry-run", "--out", tmp_path / "out",
               "--", "--synthetic")
    one_line_error(proc, f"{hostfile}:3", *words)
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()
    unchanged(before)


def test_hosts_argument_slots_and_the_bound_on_gpus_per_node(tmp_path):
    one_line_error(hvd("sweep", "resnet50", "--hosts", "node1:²", "--dry-run", "--out", tmp_path / "o",
                       "--", "--synthetic"), "--hosts node1:²", "digits 0-9")
    one_line_error(hvd("sweep", "resnet50", "--hosts", "node1:4096", "--dry-run", "--out", tmp_path / "o",
                       "--", "--synthetic"), "--hosts node1:4096", "limit of 1024")
    assert not (tmp_path / "o").exists()


# --- 3. manifests missing a key --------------------------------------------------------------

def _shard(m, i=0):
    return m["splits"]["train"]["shards"][i]


@pytest.mark.parametrize("edit, words", [
    (lambda m: _shard(m).pop("samples"), ["splits.train.shards[0]", "'samples'"]),
    (lambda m: _shard(m).pop("file"), ["splits.train.shards[0]", "'file'"]),
    (lambda m: _shard(m).__setitem__("samples", "20"), ["splits.train.shards[0].samples"]),
    (lambda m: m["splits"]["train"].pop("shards"), ["splits.train", "'shards'"]),
    (lambda m: m["splits"].__setitem__("train", []), ["splits.train"]),
    (lambda m: m["fields"]["images"].pop("shape"), ["fields.images", "'shape'"]),
    (lambda m: m["fields"]["images"].__setitem__("dtype", "pixels"), ["fields.images.dtype", "'pixels'"]),
    (lambda m: m["fields"]["labels"].__setitem__("shape", [-1]), ["fields.labels.shape"]),
    (lambda m: m.pop("num_classes"), ["'num_classes' missing", "num_classes, image_size"]),
    (lambda m: m.__setitem__("num_classes", "ten"), ["num_classes", "'ten'"]),
    (lambda m: _shard(m).__setitem__("sha256", 5), ["splits.train.shards[0].sha256"]),
])
def test_a_manifest_missing_or_mistyping_a_key_is_named_with_its_file(tmp_path, dataset, edit, words):
    data = edited(dataset, tmp_path, edit)
    before = snapshot(tmp_path)
    proc = hvd("prepare", "verify", data)
    one_line_error(proc, data / "manifest.json", *words)
    assert "KeyError" not in proc.stderr and "Traceback" not in proc.stderr
    unchanged(before)


def test_the_readers_refuse_the_same_manifest_on_open(tmp_path, dataset):
    """`train` and `bench io` open datasets through the readers: the same check, the same line."""
    from hvdbench.data.readers import open_dataset
    from hvdbench.errors import DatasetError

    data = edited(dataset, tmp_path, lambda m: _shard(m, 1).pop("samples"))
    with pytest.raises(DatasetError, match=r"manifest.json: splits.train.shards\[1\]: key 'samples' missing"):
        open_dataset(data)
    proc = hvd("bench", "io", "--data", data, "--out", tmp_path / "out")
    one_line_error(proc, data / "manifest.json", "'samples'")
    data2 = tmp_path / "d2"
    shutil.copytree(dataset, data2)
    manifest = json.loads((data2 / "manifest.json").read_text())
    del manifest["image_size"]
    (data2 / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DatasetError, match="manifest.json: key 'image_size' missing"):
        open_dataset(data2).data_info  # noqa: B018 - what train builds the model with


# --- 4. corrupt run stores -------------------------------------------------------------------

def corrupt_stores(tmp_path):
    good = good_runs(tmp_path / "good" / "runs.csv").read_bytes()
    lines = good.split(b"\n")
    return {
        # random bytes without a line break before the bad pair: random ones broke a line now and
        # then, and the bad byte was (rightly) named on line 2
        "binary": (os.urandom(64).replace(b"\n", b" ") + b"\xff\xfe" + os.urandom(64), ":1", "not UTF-8"),
        "binary row": (b"\n".join([lines[0], lines[1], b"\xff\xfe\x00garbage"]) + b"\n", ":3", "not UTF-8"),
        "short row": (b"\n".join([lines[0], lines[1], b",".join(lines[2].split(b",")[:7])]) + b"\n", ":3",
                      "7 cell(s), the header has"),
        "long row": (b"\n".join([lines[0], lines[1] + b",extra"]) + b"\n", ":2", "the header has"),
        # (with its line end: a last line without one that is no row is an append cut short, left out
        # with a warning: tests/unit/test_run_store.py)
        "bad quote": (b"\n".join([lines[0], b'"unterminated' + lines[1]]) + b"\n", ":", "not valid CSV"),
        "bad number": (b"\n".join([lines[0], lines[1].replace(b",100.0,", b",fast,", 1)]) + b"\n", ":2",
                       "column throughput has 'fast'"),
    }


@pytest.mark.parametrize("case", ["binary", "binary row", "short row", "long row", "bad quote", "bad number"])
def test_a_corrupt_runs_csv_is_named_with_its_line_and_never_appended_to(tmp_path, case):
    content, line, words = corrupt_stores(tmp_path)[case]
    store = tmp_path / "sw" / "runs.csv"
    store.parent.mkdir()
    store.write_bytes(content)
    before = snapshot(tmp_path / "sw")
    one_line_error(hvd("report", store.parent), f"{store}{line}", words)
    bin_dir = fake_srun(tmp_path)
    for dry in ([], ["--dry-run"]):
        proc = hvd("sweep", "resnet50", "--launcher", "srun", "--hosts", "localhost:1", *dry, "--out", store.parent,
                   "--", "--synthetic", path_prefix=bin_dir)
        one_line_error(proc, f"{store}{line}", words)
    assert launched(tmp_path) == [] and sorted(p.name for p in store.parent.iterdir()) == ["runs.csv"]
    unchanged(before)


def test_a_store_is_checked_whole_before_an_append(tmp_path):
    from hvdbench.errors import StoreError

    store = tmp_path / "runs.csv"
    store.write_bytes(b"run_id,sweep\n\xff\n")
    with pytest.raises(StoreError, match=rf"{store}:2: not a CSV text file"):
        append_run(store, RunResult(run_id="x"))
    assert store.read_bytes() == b"run_id,sweep\n\xff\n"


# --- 5. a sweep launches runs it could have rejected -----------------------------------------

@pytest.mark.parametrize("train_args, words", [
    (["--flavor", "huge", "--synthetic"], ["train arguments after --", "no flavor 'huge'", "full, debug"]),
    (["--synthetic", "--set", "lr=-1.0"], ["train arguments after --", "lr must be > 0, got -1.0"]),
    (["--synthetic", "--steps", "-5"], ["steps must not be negative, got -5"]),
    (["--flavor", "debug"], ["exactly one of --data DIR and --synthetic"]),
    (["--synthetic", "--target", "0.5"], ["target belong to time-to-accuracy runs"]),
    (["--data", "d", "--target", "2"], ["target for top1_accuracy must be in (0, 1]"]),
    (["--synthetic", "--framework", "tensorflow", "--set", "optimizer=lamb"], ["optimizer 'lamb'"]),
])
@pytest.mark.parametrize("dry", [False, True], ids=["run", "dry-run"])
def test_a_sweep_resolves_every_run_as_train_would_before_launching_any(tmp_path, train_args, words, dry):
    bin_dir = fake_srun(tmp_path)
    proc = hvd("sweep", "resnet50", "--launcher", "srun", "--hosts", "localhost:2", *(["--dry-run"] if dry else []),
               "--out", tmp_path / "out", "--", *train_args, path_prefix=bin_dir)
    one_line_error(proc, *words)
    assert launched(tmp_path) == [] and not (tmp_path / "out").exists()


@pytest.mark.parametrize("layout_settings, words", [
    ("{steps: -5}", ["layouts.1x2x16x1", "steps must not be negative, got -5"]),
    ("{lr: -1.0}", ["layouts.1x2x16x1", "lr must be > 0, got -1.0"]),
    ("{lr: .nan}", ["layouts.1x2x16x1", "lr must be a finite number"]),
    ("{precision: fp4}", ["layouts.1x2x16x1", "precision 'fp4'"]),
    ("{flavor: huge}", ["layouts.1x2x16x1", "no flavor 'huge'"]),
])
def test_layout_settings_train_would_refuse_are_refused_when_the_config_loads(tmp_path, layout_settings, words):
    config = tmp_path / "cfg.yaml"
    config.write_text(f"train: {{flavor: debug}}\nlayouts:\n  1x1x16x1: {{}}\n  1x2x16x1: {layout_settings}\n")
    before = snapshot(tmp_path)
    bin_dir = fake_srun(tmp_path)
    for dry in ([], ["--dry-run"]):
        proc = hvd("sweep", "resnet50", "--launcher", "srun", "--hosts", "localhost:2", "--config", config, *dry,
                   "--out", tmp_path / "out", "--", "--synthetic", path_prefix=bin_dir)
        one_line_error(proc, config, *words)
    assert launched(tmp_path) == [] and not (tmp_path / "out").exists()
    unchanged(before)


def test_engines_beside_a_configs_own_engine_are_refused(tmp_path):
    # --engines would win over the config's `engine:` while --dry-run and layout.yaml showed the latter.
    config = tmp_path / "cfg.yaml"
    config.write_text("train: {flavor: debug, engine: fsdp}\nlayouts:\n  1x1x16x1: {}\n")
    before = snapshot(tmp_path)
    for dry in ([], ["--dry-run"]):
        proc = hvd("sweep", "resnet50", "--hosts", "localhost:1", "--config", config, "--engines", "ddp", *dry,
                   "--out", tmp_path / "out", "--", "--synthetic")
        assert one_line_error(proc) == (f"Error: {config}: layouts.1x1x16x1: engine 'fsdp' and --engines ddp both "
                                        "choose the engine: give it in one place")
    assert not (tmp_path / "out").exists()
    unchanged(before)


@pytest.mark.parametrize("args, option, why", [
    (["sweep", "resnet50", "--hosts", "localhost:2", "--engines", "ddp,,fsdp"], "--engines", "'ddp,,fsdp': an empty entry"),
    (["sweep", "resnet50", "--hosts", "localhost:2", "--engines", "ddp,"], "--engines", "'ddp,': an empty entry"),
    (["sweep", "resnet50", "--hosts", "localhost:2", "--layouts", "1x1,1x2,1x1"], "--layouts",
     "'1x1,1x2,1x1': 1x1 is given twice"),
    (["sweep", "resnet50", "--hosts", "localhost:2", "--gpus", "1,,2"], "--gpus", "'1,,2': an empty entry"),
    (["study", "run", "demo", "--hosts", "localhost:2", "--only", ",,,"], "--only", "',,,': an empty entry"),
    (["study", "run", "demo", "--hosts", "localhost:2", "--only", "resnet50,resnet50"], "--only",
     "'resnet50,resnet50': resnet50 is given twice"),
    (["predict", "sw", "--layouts", "2x2,02x2"], "--layouts", "'2x2,02x2': 2x2 is given twice"),
    (["predict", "sw", "--layouts", "2x2", "--fit-on", "1x1,,1x2"], "--fit-on", "'1x1,,1x2': an empty entry"),
    (["predict", "sw", "--layouts", ",".join(f"{n}x1" for n in range(1, 10001))], "--layouts",
     "10,000 entries; at most 256"),
    (["report", "sw", "--predict", "2x2,"], "--predict", "'2x2,': an empty entry"),
])
def test_empty_repeated_and_runaway_list_entries_are_refused_naming_the_option(tmp_path, args, option, why):
    # They were dropped unseen: `--only ',,,'` ran every model; 10,000 layouts ran past two minutes.
    good_runs(tmp_path / "sw" / "runs.csv")
    before = snapshot(tmp_path)
    args = [str(tmp_path / "sw") if a == "sw" else a for a in args]
    dry = ["--dry-run"] if args[0] in ("sweep", "study") else []
    result = CliRunner().invoke(cli, [*args, *dry, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert result.stderr.splitlines()[-1].startswith(f"Error: Invalid value for '{option}': ")
    assert why in result.stderr.splitlines()[-1], result.stderr
    assert not (tmp_path / "o").exists()
    unchanged(before)


def test_a_valid_config_still_sweeps_and_the_worker_gets_the_resolved_settings(tmp_path):
    config = tmp_path / "cfg.yaml"
    config.write_text("train: {flavor: debug}\nlayouts:\n  1x1x16x1: {lr: 0.2}\n")
    proc = hvd("sweep", "resnet50", "--launcher", "srun", "--hosts", "localhost:1", "--config", config,
               "--out", tmp_path / "out", "--", "--synthetic", "--steps", "3", path_prefix=fake_srun(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert launched(tmp_path) == ["1x1x16x1-r1"]


# --- 6. --steps 0 ----------------------------------------------------------------------------

@pytest.mark.parametrize("args", [["--synthetic", "--steps", "0"], ["--data", "data/x", "--steps", "0"],
                                  ["--synthetic", "--set", "steps=0"]])
def test_steps_zero_given_is_an_error_not_another_mode(tmp_path, args):
    proc = hvd("train", "resnet50", "--flavor", "debug", *args, "--out", tmp_path / "run")
    one_line_error(proc, "--steps 0", "at least 1 timed step")
    assert not (tmp_path / "run").exists()
    proc = hvd("sweep", "resnet50", "--hosts", "localhost:1", "--dry-run", "--out", tmp_path / "sw", "--", *args)
    one_line_error(proc, "train arguments after --", "--steps 0")


def test_steps_left_out_keeps_its_meaning(tmp_path):
    from hvdbench.train.config import resolve

    synthetic = resolve({"model": "resnet50", "synthetic": True, "out": "o"})
    assert (synthetic.mode, synthetic.steps) == ("throughput", 100)
    real = resolve({"model": "resnet50", "data": "d", "out": "o"})
    assert (real.mode, real.steps) == ("time_to_accuracy", 0)
    # A saved config.yaml of a time-to-accuracy run holds steps: 0 and reruns as it is.
    saved = tmp_path / "config.yaml"
    saved.write_text("model: resnet50\ndata: d\nout: o\nsteps: 0\n")
    assert resolve({}, saved).mode == "time_to_accuracy"


# --- 7. concurrent sweeps into one folder ----------------------------------------------------

def test_two_identical_sweeps_share_the_runs_and_both_exit_0(tmp_path):
    bin_dir = fake_srun(tmp_path, sleep=3.0)  # long enough for the second sweep to start meanwhile
    out = tmp_path / "sw"
    argv = [HVDBENCH, "sweep", "resnet50", "--launcher", "srun", "--hosts", "localhost:1", "--repeats", "2",
            "--out", str(out), "--", "--synthetic"]
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while not (out / "1x1-r1" / "command.txt").exists():  # the first sweep is running 1x1-r1
        assert time.monotonic() < deadline and first.poll() is None, first.communicate()
        time.sleep(0.05)
    second = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    first_out, first_err = first.communicate(timeout=120)
    assert (first.returncode, second.returncode) == (0, 0), (first_err, second.stderr)
    assert first_err == "" and second.stderr == ""
    assert "held by another sweep" in second.stdout and "(recorded by another sweep)" in second.stdout
    assert "2 runs: 2 success" in first_out and "2 runs: 2 success" in second.stdout
    assert sorted(r.run_id for r in read_runs(out / "runs.csv")) == ["1x1-r1", "1x1-r2"]  # once each
    assert sorted(launched(tmp_path)) == ["1x1-r1", "1x1-r2"]  # each launched once, by one of them


def test_a_held_run_whose_sweep_dies_unrecorded_is_run_by_the_other(tmp_path, monkeypatch):
    from rich.console import Console

    from hvdbench.sweep import locks
    from hvdbench.sweep import run as sweep_run
    from hvdbench.sweep.plan import Entry
    from hvdbench.topology import Layout

    monkeypatch.setenv("PATH", f"{fake_srun(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    spec = sweep_run.SweepSpec(model="resnet50", out=tmp_path / "sw", entries=[Entry(Layout(1, 1, ("localhost",)))],
                               launcher="srun", train_args=("--synthetic",))
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom pathlib import Path\nfrom hvdbench.sweep import locks\n"
        "with locks.claim(Path(sys.argv[1]), '1x1-r1'):\n    print('held', flush=True)\n    time.sleep(60)\n"),
        str(spec.out)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    killer = threading.Timer(1.0, holder.kill)  # it dies holding the run, with no row
    killer.start()
    text = io.StringIO()
    counts = sweep_run.run_sweep(spec, Console(file=text, width=200))
    killer.join()
    holder.wait()
    assert counts == {"success": 1} and launched(tmp_path) == ["1x1-r1"]
    assert "held by another sweep" in text.getvalue()
    with locks.claim(spec.out, "1x1-r1") as mine:
        assert mine


# --- 8. smaller ------------------------------------------------------------------------------

def test_an_empty_hosts_argument_is_named(tmp_path):
    proc = hvd("sweep", "resnet50", "--hosts", "", "--dry-run", "--out", tmp_path / "o", "--", "--synthetic")
    assert "Slurm" not in one_line_error(proc, "--hosts is empty")


def test_a_runs_csv_that_is_a_symbolic_link_is_refused_and_kept(tmp_path):
    real = good_runs(tmp_path / "elsewhere" / "runs.csv")
    sweep_dir = tmp_path / "sw"
    sweep_dir.mkdir()
    (sweep_dir / "runs.csv").symlink_to(real)
    before = snapshot(tmp_path)
    bin_dir = fake_srun(tmp_path)
    proc = hvd("sweep", "resnet50", "--launcher", "srun", "--hosts", "localhost:1", "--out", sweep_dir,
               "--", "--synthetic", path_prefix=bin_dir)
    one_line_error(proc, sweep_dir / "runs.csv", "symbolic link", f"--out {real.parent}")
    assert (sweep_dir / "runs.csv").is_symlink() and launched(tmp_path) == []
    unchanged(before)
    assert hvd("report", sweep_dir, "--format", "csv").returncode == 0  # reading through it is fine


@pytest.mark.parametrize("file", ["../outside.h5", "/etc/passwd", "sub/../../x.h5", ""])
def test_shard_paths_outside_the_dataset_folder_are_refused(tmp_path, dataset, file):
    data = edited(dataset, tmp_path, lambda m: _shard(m).__setitem__("file", file))
    before = snapshot(tmp_path)
    one_line_error(hvd("prepare", "verify", data), data / "manifest.json", "splits.train.shards[0].file")
    unchanged(before)


def test_wall_s_has_one_meaning_in_runs_csv(tmp_path):
    """The launch's time as the sweep measured it, on successful and failed rows alike."""
    from hvdbench.launchers.guard import Outcome
    from hvdbench.sweep import record
    from hvdbench.sweep import run as sweep_run
    from hvdbench.sweep.plan import Entry
    from hvdbench.topology import Layout

    spec = sweep_run.SweepSpec(model="resnet50", out=tmp_path, entries=[Entry(Layout(1, 1, ("h",)))],
                               train_args=("--synthetic",))
    run = spec.runs[0]
    rdir = tmp_path / run.run_id
    rdir.mkdir()
    write_result(rdir / "result.json", RunResult(model="resnet50", world_size=1, throughput=1.0, wall_s=2.0))
    ok = record.build_result(spec, run, rdir, Outcome("exited", 0, 1, 1, 7.5), "t0")
    failed = record.build_result(spec, run, rdir, Outcome("exited", 1, 1, 1, 4.25), "t0")
    assert (ok.status, ok.wall_s, failed.status, failed.wall_s) == ("success", 7.5, "failed", 4.25)


# --- 9. issue 30: numbers that are not numbers, layouts past the bounds, recipes a shell would run ----

def test_report_of_published_logs_with_infinities_and_a_bad_systems_json_warns_and_goes_on(tmp_path):
    """One bad file of a published tree does not stop the report: each is one warning line naming the
    file (and line) and key; an Infinity accuracy is not converged; the files read are unchanged."""
    logs = published_logs(tmp_path / "pub")
    result_0 = next(logs.rglob("result_0.txt"))
    text = result_0.read_text().splitlines()
    at = max(i for i, line in enumerate(text) if '"key": "eval_accuracy"' in line)
    text[at] = re.sub(r'"value": [0-9.]+', '"value": Infinity', text[at])
    result_0.write_text("\n".join(text) + "\n")
    desc = next(logs.rglob("*.json"))
    desc.write_text(json.dumps({**json.loads(desc.read_text()), "number_of_nodes": "9" * 300}))
    before = snapshot(logs)
    proc = hvd("report", "--mllog", logs, "--out", tmp_path / "report")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert f"warning: {result_0}:{at + 1}: eval_accuracy value Infinity (not a finite number): read as missing, " \
           "and its run does not count as converged" in proc.stdout
    assert f"warning: {desc.absolute()}: number_of_nodes '99999999999999999999...' (300 characters) is not a " \
           "whole number from 1 to 1,000,000; not read for layouts: its runs' come from their logs, else are unknown" \
        in proc.stdout
    rows = list(csv.DictReader((tmp_path / "report" / "time_to_train.csv").open()))
    assert [(r["layout"], r["runs"], r["converged"]) for r in rows] == [("1x8", "3", "2")]  # from the logs
    assert (tmp_path / "report" / "time_to_train.png").is_file()
    unchanged(before)


def test_a_text_accuracy_is_warned_and_a_log_without_run_stop_is_incomplete(tmp_path):
    """An eval_accuracy written as text vanished with no warning; a log cut before run_stop was
    scored as a run that "did not converge"."""
    logs = published_logs(tmp_path / "pub")
    first, second = sorted(logs.rglob("result_*.txt"))[:2]
    text = first.read_text().splitlines()
    at = max(i for i, line in enumerate(text) if '"key": "eval_accuracy"' in line)
    text[at] = re.sub(r'"value": ([0-9.]+)', r'"value": "\1"', text[at])
    first.write_text("\n".join(text) + "\n")
    second.write_text("".join(line + "\n" for line in second.read_text().splitlines()
                              if '"key": "run_stop"' not in line))
    before = snapshot(logs)
    proc = hvd("report", "--mllog", logs, "--out", tmp_path / "report")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert f'warning: {first}:{at + 1}: eval_accuracy value "0.8" (not a number): read as missing, and its run ' \
           "does not count as converged" in proc.stdout
    rows = list(csv.DictReader((tmp_path / "report" / "time_to_train.csv").open()))
    assert [(r["runs"], r["converged"], r["scoring"]) for r in rows] == [
        ("3", "1", "DNF: 2 of 3 runs did not converge (1 incomplete: no run_stop)")]
    unchanged(before)
    first.write_text(first.read_text().replace('"value": "0.8"', '"value": 0.8'))  # the incomplete run alone
    proc = hvd("report", "--mllog", logs, "--out", tmp_path / "report")
    rows = list(csv.DictReader((tmp_path / "report" / "time_to_train.csv").open()))
    assert [r["scoring"] for r in rows] == ["olympic mean of 1 of 3 (dropped fastest and the incomplete run)"]


def test_a_result_file_linked_to_another_is_one_run(tmp_path):
    # A symbolic link result_3.txt -> result_0.txt was read as a fourth run.
    logs = published_logs(tmp_path / "pub")
    first = next(logs.rglob("result_0.txt"))
    (first.parent / "result_3.txt").symlink_to(first.name)
    proc = hvd("report", "--mllog", logs, "--out", tmp_path / "report")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader((tmp_path / "report" / "time_to_train.csv").open()))
    assert [(r["layout"], r["runs"]) for r in rows] == [("1x8", "3")]
    assert f"{logs}: 3 run(s) from 3 log file(s); 2 file(s) skipped: 1 code, configuration or documents " \
           "(e.g. Org/systems/DGXA100_1x8x56x1.json), 1 the same file as another one read (a link) " \
           f"(e.g. {(first.parent / 'result_3.txt').relative_to(logs)})" in proc.stdout


@pytest.mark.parametrize("systems_json, words", [
    ('{"number_of_nodes": 0, "accelerators_per_node": 8}', "number_of_nodes 0 is not a whole number from 1"),
    ('{"number_of_nodes": "two", "accelerators_per_node": 8}', "number_of_nodes 'two' is not a whole number from 1"),
    ("not json {", "not valid JSON"),
])
def test_predict_mllog_warns_of_a_bad_systems_json_as_report_does(tmp_path, systems_json, words):
    # predict dropped the systems silently: every row "too few fitted", no reason given.
    logs = published_logs(tmp_path / "pub")
    desc = next(logs.rglob("*.json"))
    desc.write_text(systems_json)
    before = snapshot(logs)
    report = hvd("report", "--mllog", logs, "--out", tmp_path / "report")
    predict = hvd("predict", "--mllog", logs, "--layouts", "2x8", "--out", tmp_path / "p")
    said = [line.removeprefix("- ") for line in report.stdout.splitlines() if line.startswith("- warning: ")]
    assert len(said) == 1 and str(desc.absolute()) in said[0] and words in said[0], report.stdout
    assert [line for line in predict.stdout.splitlines() if line.startswith("warning: ")] == said, predict.stdout
    assert "Traceback" not in predict.stderr
    unchanged(before)


def test_a_study_recipe_a_shell_would_run_is_refused_when_the_file_loads(tmp_path):
    study = tmp_path / "s.yaml"
    study.write_text(json.dumps({**STUDY, "models": {"resnet50": {
        "data": str(tmp_path / "d"), "prepare": [f"digits; touch {tmp_path / 'pwned'}"]}}}))
    before = snapshot(tmp_path)
    for dry in ([], ["--dry-run"]):
        proc = hvd("study", "run", study, "--hosts", "localhost:1", *dry, "--out", tmp_path / "o", cwd=tmp_path)
        one_line_error(proc, f"{study}: models.resnet50.prepare[0]", "is not a command of `hvdbench prepare`")
    assert not (tmp_path / "o").exists() and not (tmp_path / "pwned").exists()
    unchanged(before)


# --- 10. issue 54, item 8: the sweep reads runs.csv once ---------------------------------------------

def test_a_sweep_records_a_run_without_reading_the_old_rows_again(tmp_path):
    """Issue 54, item 8: the sweep reads runs.csv whole once, to plan, then only what is appended
    after; a row damaged in place while a run trains (its bytes as long as before) does not stop the
    run's row, and the next whole read (the report) names it."""
    sweep_dir = good_runs(tmp_path / "sw" / "runs.csv").parent
    damage = ("store = out.parent / 'runs.csv'\n"
              "store.write_bytes(store.read_bytes().replace(b',100.0,', b',fast!,', 1))\n")
    proc = hvd("sweep", "resnet50", "--launcher", "srun", "--hosts", "localhost:1", "--repeats", "2",
               "--out", sweep_dir, "--", "--synthetic", path_prefix=fake_srun(tmp_path, during=damage))
    assert proc.returncode == 0 and "2 runs: 2 success" in proc.stdout, proc.stderr
    assert launched(tmp_path) == ["1x1-r1", "1x1-r2"]
    lines = (sweep_dir / "runs.csv").read_text().splitlines()
    assert len(lines) == 1 + 3 + 2 and ",fast!," in lines[1] and lines[-1].startswith("1x1-r2,")
    one_line_error(hvd("report", sweep_dir), f"{sweep_dir / 'runs.csv'}:2", "column throughput has 'fast!'")


# --- 11. issue 57: lock files, and a row that cannot be appended after its run ------------------------

@pytest.mark.parametrize("lock", ["runs.csv", "1x1-r1"])
def test_a_link_planted_at_a_sweep_lock_is_refused_before_anything_runs(tmp_path, victim, lock):
    """The run's claim and the store's lock are both taken before the launch: a link at either is
    one line naming it, nothing is launched, and the file it points at keeps its bytes."""
    sweep_dir = tmp_path / "sw"
    link = sweep_dir / ".locks" / f"{lock}.lock"
    link.parent.mkdir(parents=True)
    link.symlink_to(victim)
    proc = hvd("sweep", "resnet50", "--launcher", "srun", "--hosts", "localhost:1", "--out", sweep_dir,
               "--", "--synthetic", path_prefix=fake_srun(tmp_path))
    one_line_error(proc, link, "is a symbolic link")
    assert victim.read_text() == "mine\n" and link.is_symlink() and launched(tmp_path) == []
    assert not (sweep_dir / "runs.csv").exists()


def test_a_link_planted_at_the_report_lock_is_refused_and_what_it_points_at_kept(tmp_path, victim):
    sweep_dir = good_runs(tmp_path / "sw" / "runs.csv").parent
    out = tmp_path / "report"
    out.mkdir()
    (out / ".hvdbench-report.lock").symlink_to(victim)
    one_line_error(hvd("report", sweep_dir, "--out", out), out / ".hvdbench-report.lock", "is a symbolic link")
    assert victim.read_text() == "mine\n" and [p.name for p in out.iterdir()] == [".hvdbench-report.lock"]


def test_a_row_not_appended_after_its_run_names_the_run_and_its_folder_and_the_next_sweep_appends_it(
        tmp_path, victim):
    sweep_dir, rdir = tmp_path / "sw", tmp_path / "sw" / "1x1-r1"
    args = ("sweep", "resnet50", "--launcher", "srun", "--hosts", "localhost:1", "--out", sweep_dir, "--", "--synthetic")
    # The lock could be taken before the launch; while the run trains, a link takes its place.
    plant = (f"lock = out.parent / '.locks' / 'runs.csv.lock'\nlock.unlink(missing_ok=True)\nlock.symlink_to({str(victim)!r})\n")
    proc = hvd(*args, path_prefix=fake_srun(tmp_path, during=plant))
    one_line_error(proc, "run 1x1-r1 ended (success) but its row was not appended", sweep_dir / "runs.csv",
                   "runs.csv.lock is a symbolic link", f"its result is in {rdir}:")
    assert victim.read_text() == "mine\n" and launched(tmp_path) == ["1x1-r1"]
    assert (rdir / "result.json").is_file() and not (sweep_dir / "runs.csv").exists()
    (sweep_dir / ".locks" / "runs.csv.lock").unlink()
    proc = hvd(*args, path_prefix=fake_srun(tmp_path))
    assert proc.returncode == 0, proc.stderr
    [row] = read_runs(sweep_dir / "runs.csv")
    assert (row.run_id, row.status, row.throughput) == ("1x1-r1", "success", 10.0)
    assert launched(tmp_path) == ["1x1-r1"]  # appended from its folder, not run again


# --- the property: random bytes and random edits -------------------------------------------------

TOKENS = [b"0", b"-1", b"99999999999999999999", "²".encode(), b"\x00", b"\n", b",", b'"', b"nan", b"inf",
          b"null", b"[]", b"{}", b"true", b"\xff\xfe", b"1e308", b"..", b"/", b"slots=", b"#", b" ", b"x" * 200]
CELLS = ["", "0", "-1", "nan", "inf", "-inf", "1e308", "x", "0x0", "success", "failed", "aborted",
         "time_to_accuracy", "99999999999", "2x2", "-5", "1", "out"]
JSON_VALUES = [0, -1, 10 ** 30, "x", None, [], {}, 1.5, True, "../x", "/etc/passwd", "uint8", [8, 8, 3], 2 ** 40]
# Issue 30's: numbers JSON as Python writes and reads it takes (NaN, Infinity, 1e999 read back as
# infinite), counts past the hostfiles' bounds, and recipe items a shell would run.
NUMBER_VALUES = [float("nan"), float("inf"), float("-inf"), 1e308, -1, 0, 10 ** 300, "9" * 300, "-1", "8", 1025,
                 2.5, True, None, "x", [1], {"a": float("nan")}]
STUDY_VALUES = [*NUMBER_VALUES, "digits; touch pwned", "$(touch pwned)", "digits\0", "", " ", "--out", "--out=x",
                "nosuch", "٣x1", "1x100000", ["digits", "--size", "8; touch pwned"], ["--size"], ["digits", ""]]
RECIPE_ITEMS = ["digits; touch pwned", "$(touch pwned)", "8 && touch pwned", "`touch pwned`", "digits\0", "", " ",
                "--out", "--out=x", "nosuch", "8", "images"]
LAYOUT_TOKENS = ["1", "2", "0", "x", "X", ",", " ", "100000", "9" * 25, "٣", "-", "by", "\0", "1024", "1000001"]
COUNTS = ["1", "2", "3", "0", "01", "1024", "1025", "100000", "1000000", "1000001", "9" * 25, "٣", "-1", ""]


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op, i = rng.randrange(6), rng.randrange(len(data) + 1)
        if op == 0 and data:
            data[min(i, len(data) - 1)] = rng.randrange(256)
        elif op == 1:
            data[i:i] = rng.choice(TOKENS)
        elif op == 2:
            del data[i:i + rng.randint(1, 20)]
        elif op == 3:
            del data[i:]
        elif op == 4:
            lines = bytes(data).split(b"\n")
            lines.insert(rng.randrange(len(lines)), rng.choice(lines))
            data = bytearray(b"\n".join(lines))
        else:
            data = bytearray(rng.randbytes(rng.randint(0, 300)))
    return bytes(data)


def mutate_tree(rng: random.Random, tree, values=JSON_VALUES):
    """`tree` (parsed JSON or YAML) with 1-3 random keys or items dropped, replaced by one of
    `values`, or edited further down."""
    def walk(node):
        if isinstance(node, dict) and node:
            key, r = rng.choice(list(node)), rng.random()
            if r < 0.25:
                node.pop(key)
            elif r < 0.6:
                node[key] = rng.choice(values)
            else:
                walk(node[key])
        elif isinstance(node, list) and node:
            i, r = rng.randrange(len(node)), rng.random()
            if r < 0.3:
                node.pop(i)
            elif r < 0.6:
                node[i] = rng.choice(values)
            else:
                walk(node[i])

    for _ in range(rng.randint(1, 3)):
        walk(tree)
    return tree


def mutate_json(rng: random.Random, data: bytes, values=JSON_VALUES) -> bytes:
    return json.dumps(mutate_tree(rng, json.loads(data), values)).encode()


def mutate_mllog(rng: random.Random, data: bytes) -> bytes:
    """One :::MLLOG line's JSON edited (NaN, Infinity, counts out of bounds...) or raw bytes."""
    if rng.random() < 0.3:
        return mutate_bytes(rng, data)
    lines = data.decode().splitlines()
    at = rng.randrange(len(lines))
    head, sep, record = lines[at].partition(":::MLLOG ")
    lines[at] = head + sep + json.dumps(mutate_tree(rng, json.loads(record), NUMBER_VALUES))
    return ("\n".join(lines) + "\n").encode()


ENGINE_LISTS = [["ddp"], ["fsdp", "ddp"], ["horovod"], ["ddp", "ddp"], ["nccl"], [], ["ddp", ""], "ddp", [None], [1]]


def mutate_study(rng: random.Random, data: bytes) -> bytes:
    import yaml

    r, study = rng.random(), yaml.safe_load(data)
    if r < 0.15:
        return mutate_bytes(rng, data)
    if r < 0.45:  # one item of a prepare recipe: what a shell would run, empty, a NUL, --out...
        recipe = study["models"]["resnet50"]["prepare"]
        recipe[rng.randrange(len(recipe))] = rng.choice(RECIPE_ITEMS)
    elif r < 0.7:  # engines: the study's, the model's, and an engine: among its train settings (issue 40)
        model = study["models"]["resnet50"]
        for section, key in ((study, "engines"), (model, "engines"), (model["train"], "engine"),
                             (model["debug"], "train")):
            if rng.random() < 0.5:
                section[key] = (rng.choice(ENGINE_LISTS) if key == "engines" else
                                {"engine": rng.choice(["ddp", "fsdp", "horovod", "x"])} if key == "train" else
                                rng.choice(["ddp", "fsdp", "horovod", "x", 1]))
    else:
        mutate_tree(rng, study, STUDY_VALUES)
    return yaml.safe_dump(study, allow_unicode=True).encode()


C4_LINES = b'{"text": "w1 w2 w3 w4 w5", "url": "u"}\n{"text": "w6 w7 w8"}\n{"text": "w9 w1 w2 w3 w4 w5 w6"}\n' * 4
C4_TOKENS = [b"\xef\xbb\xbf", b'{"text": "   "}', b'{"text": 5}', b"{not json", b"\xe9", b"\x00", b'"text"', b"\n\n"]


def mutate_c4(rng: random.Random, data: bytes) -> bytes:
    """C4's JSON lines with bytes, lines or C4-specific faults (a BOM, empty texts, broken JSON) put in."""
    data = mutate_bytes(rng, data) if rng.random() < 0.5 else data
    lines = data.split(b"\n")
    for _ in range(rng.randint(0, 4)):
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(C4_TOKENS))
    return b"\n".join(lines)


def mutate_cells(rng: random.Random, data: bytes) -> bytes:
    rows = list(csv.reader(io.StringIO(data.decode())))
    for _ in range(rng.randint(1, 3)):
        row = rows[rng.randrange(1, len(rows))]
        row[rng.randrange(len(row))] = rng.choice(CELLS)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


def published_logs(root: Path) -> Path:
    """An MLPerf results tree: three ResNet runs of one system and its systems JSON."""
    from test_mllog import compliant_lines, system_json

    system = "DGXA100_1x8x56x1"
    for i, minutes in enumerate((10.0, 11.0, 12.0)):
        path = root / "Org" / "results" / system / "resnet" / f"result_{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(compliant_lines(minutes, 8, layout=(1, 8), t0=1_700_000_000_000 + i * 10**8)) + "\n")
    system_json(root / "Org" / "systems" / f"{system}.json", "DGX A100", 1, 8)
    return root


STUDY = {"study": "fuzz", "reproduces": "a fuzzed study", "layouts": ["1x1"], "repeats": 1,
         "models": {"resnet50": {"data": "nodata", "prepare": ["digits", "--size", "8"],
                                 "train": {"batch_per_gpu": 8}, "debug": {"data": "nodata", "prepare": ["digits"]}}}}
KINDS = ("hostfile", "manifest", "runs.csv", "mllog", "systems JSON", "study", "layouts", "c4 source")


def test_random_hostfiles_manifests_and_run_stores_give_a_one_line_error_or_success(tmp_path, dataset):
    import yaml

    rng = random.Random(15)
    runs = good_runs(tmp_path / "good" / "runs.csv").read_bytes()
    hostfile = b"# two nodes\nnode1 slots=2\nnode2 slots=2 max_slots=4\n"
    manifest = (dataset / "manifest.json").read_bytes()
    logs = published_logs(tmp_path / "pub")
    log_file = next(logs.rglob("result_0.txt")).relative_to(logs)
    desc_file = next(logs.rglob("*.json")).relative_to(logs)
    study = yaml.safe_dump(STUDY).encode()
    from test_c4 import word_tokenizer

    tokenizer = word_tokenizer(tmp_path / "words.json")
    runner = CliRunner()
    outcomes = {}
    deadline = time.monotonic() + 10  # bounded: as many seeded cases as fit, at least 25 of each kind
    i = 0
    while i < 25 * len(KINDS) or time.monotonic() < deadline and i < 700:
        work = tmp_path / f"case{i}"
        work.mkdir()
        which = KINDS[i % len(KINDS)]
        if which in ("mllog", "systems JSON"):
            shutil.copytree(logs, work / "pub")
            if which == "mllog":
                (work / "pub" / log_file).write_bytes(mutate_mllog(rng, (logs / log_file).read_bytes()))
            else:
                (work / "pub" / desc_file).write_bytes(mutate_json(rng, (logs / desc_file).read_bytes(), NUMBER_VALUES)
                                                       if rng.random() < 0.8 else
                                                       mutate_bytes(rng, (logs / desc_file).read_bytes()))
            args = (["report", "--mllog", work / "pub", "--format", "csv,md", "--out", work / "report"]
                    if which == "mllog" or rng.random() < 0.5 else  # predict --mllog reads the systems JSON too
                    ["predict", "--mllog", work / "pub", "--layouts", "2x8", "--out", work / "report"])
        elif which == "c4 source":
            (work / "a.json").write_bytes(mutate_c4(rng, C4_LINES))
            (work / "v.json").write_bytes(C4_LINES if rng.random() < 0.5 else mutate_c4(rng, C4_LINES))
            val = rng.choice([[], ["--val-src", work / "v.json"], ["--val-src", work / "a.json"],
                              ["--val-src", work / "v.json", "--val-src", work / "v.json"]])
            src = ["--src", work / "a.json"] + (["--src", work / "a.json"] if rng.random() < 0.15 else [])
            args = ["prepare", "c4", *src, *val, "--tokenizer", tokenizer, "--seq-len", "4", "--workers", "1",
                    "--out", work / "c4"]
        elif which == "study":
            (work / "s.yaml").write_bytes(mutate_study(rng, study))
            args = ["study", "run", work / "s.yaml", "--dry-run", "--hosts", "localhost:1", "--out", work / "o"]
            if rng.random() < 0.3:
                args += ["--flavor", "debug"]
        elif which == "layouts":
            (work / "sw").mkdir()
            (work / "sw" / "runs.csv").write_bytes(runs)
            counts = COUNTS if rng.random() < 0.7 else COUNTS[:3]  # some lists of sound layouts too
            value = ("".join(rng.choice(LAYOUT_TOKENS) for _ in range(rng.randint(1, 6))) if rng.random() < 0.4 else
                     ",".join(f"{rng.choice(counts)}x{rng.choice(counts)}" for _ in range(rng.randint(1, 3))))
            args = ["predict", work / "sw", rng.choice(["--layouts", "--fit-on"]), value, "--out", work / "p"]
            args += ["--layouts", "2x2"] if "--fit-on" in args else []
        elif which == "hostfile":
            (work / "hosts").write_bytes(mutate_bytes(rng, hostfile))
            args = ["sweep", "resnet50", "--hostfile", work / "hosts", "--dry-run", "--out", work / "out",
                    "--", "--synthetic"]
        elif which == "manifest":
            shutil.copytree(dataset, work / "d")
            (work / "d" / "manifest.json").write_bytes(
                mutate_json(rng, manifest) if rng.random() < 0.6 else mutate_bytes(rng, manifest))
            args = ["prepare", "verify", work / "d"]
        else:
            (work / "sw").mkdir()
            (work / "sw" / "runs.csv").write_bytes(
                mutate_cells(rng, runs) if rng.random() < 0.5 else mutate_bytes(rng, runs))
            args = (["report", work / "sw", "--format", "csv,md", "--out", work / "report"] if rng.random() < 0.7
                    else ["sweep", "resnet50", "--hosts", "localhost:2", "--dry-run", "--out", work / "sw",
                          "--", "--synthetic"])
        before = snapshot(work)
        result = runner.invoke(cli, [str(a) for a in args])
        lines = result.stderr.strip().splitlines()
        if which == "layouts" and result.exit_code == 2:  # a bad option value: click's usage error, the option named
            assert lines[-1].startswith(f"Error: Invalid value for '{args[2]}': ") and "baseline" not in lines[-1], \
                (args, result.stderr)
        elif result.exit_code != 0:
            assert isinstance(result.exception, SystemExit) and result.exit_code == 1 and len(lines) == 1 \
                and lines[0].startswith("Error: "), (which, args, result.stderr[-500:], result.exc_info)
        if which == "c4 source" and result.exit_code == 1 and any(
                words in lines[0] for words in ("no documents in it", "given to --val-src", "given twice")):
            assert not (work / "c4").exists(), lines  # refused before the output folder is made
        if which in ("mllog", "systems JSON") and result.exit_code == 0:  # read as missing, never written as inf
            for table in (work / "report").glob("*.csv"):
                text = table.read_text()
                assert not any(bad in text.split(",") for bad in ("inf", "-inf", "nan")), (table, text[:2000])
        assert "Traceback" not in result.output
        assert not (work / "pwned").exists() and not Path("pwned").exists()
        unchanged(before)
        outcomes[which, result.exit_code] = outcomes.get((which, result.exit_code), 0) + 1
        shutil.rmtree(work)
        i += 1
    # Both outcomes were reached for each input: the edits are neither all fatal nor all harmless.
    wanted = {("c4 source", 0), ("c4 source", 1),
              ("hostfile", 1), ("manifest", 1), ("runs.csv", 1), ("manifest", 0), ("runs.csv", 0), ("mllog", 0),
              ("systems JSON", 0), ("study", 1), ("study", 0), ("layouts", 1), ("layouts", 2)}
    assert wanted <= set(outcomes), (wanted - set(outcomes), outcomes)
