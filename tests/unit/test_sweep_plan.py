"""The sweep without launching: plan order, per-layout configs, resume decisions, the rows made
for failed runs, sweep.json, Slurm jobs and the command line (dry run, errors)."""

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hvdbench import launchers
from hvdbench.cli.main import cli
from hvdbench.errors import ConfigError, TopologyError
from hvdbench.files import LockFile
from hvdbench.launchers import guard
from hvdbench.launchers.guard import Outcome
from hvdbench.results.records.schema import RunResult, write_result
from hvdbench.results.records.store import read_runs
from hvdbench.sweep import batch, launch, locks, record, signals
from hvdbench.sweep import layout_config as sweep_config
from hvdbench.sweep import run as sweep_run
from hvdbench.sweep.plan import Entry, interleave, pending, plan_entries
from hvdbench.topology import Host, Layout, select_layouts

ROOT = Path(__file__).resolve().parents[2]
HVDBENCH = str(Path(sys.executable).parent / "hvdbench")
LOCAL = [Host("localhost", 2)]


def entries(*names):
    return [Entry(Layout(int(n.split("x")[0]), int(n.split("x")[1]), ("h",))) for n in names]


def spec(tmp_path, **kw):
    args = dict(model="resnet50", out=tmp_path / "sw", entries=entries("1x1", "1x2"), repeats=2,
                train_args=("--flavor", "debug", "--synthetic"))
    args.update(kw)
    return sweep_run.SweepSpec(**args)


# --- plan ------------------------------------------------------------------------------------

def test_repeats_are_interleaved_across_layouts():
    runs = interleave(entries("1x1", "1x2", "2x1"), 3)
    assert [r.run_id for r in runs] == ["1x1-r1", "1x2-r1", "2x1-r1", "1x1-r2", "1x2-r2", "2x1-r2",
                                        "1x1-r3", "1x2-r3", "2x1-r3"]


def row(run_id, status):
    return RunResult(run_id=run_id, status=status)


def test_pending_skips_done_runs_and_retries_only_when_asked():
    runs = interleave(entries("1x1", "1x2"), 2)
    rows = [row("1x1-r1", "success"), row("1x2-r1", "failed"), row("1x1-r2", "aborted"),
            row("1x2-r2", "timeout")]
    assert pending(runs, rows) == []
    assert [r.run_id for r in pending(runs, rows, retry_failed=True)] == ["1x2-r1", "1x2-r2"]
    assert [r.run_id for r in pending(runs, rows[:1])] == ["1x2-r1", "1x1-r2", "1x2-r2"]
    # A retried run: its last row counts.
    assert pending(runs, rows + [row("1x2-r1", "success")], retry_failed=True)[0].run_id == "1x2-r2"


# --- configs ---------------------------------------------------------------------------------

def write_config(tmp_path, text):
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    return path


def test_config_layouts_are_named_nodes_gpus_batch_accum(tmp_path):
    path = write_config(tmp_path, "model: resnet50\ntrain: {flavor: debug, lr: 0.2}\n"
                                  "layouts:\n  1x2x16x1: {lr: 0.4}\n  1x2x8x2:\n  1x1x32x1: {}\n")
    cfg = sweep_config.load_sweep_config(path, "resnet50")
    first = cfg.layouts[0]
    assert (first.name, first.layout, first.batch_per_gpu, first.accum_steps) == ("1x2x16x1", "1x2", 16, 1)
    assert first.settings == {"flavor": "debug", "lr": 0.4, "batch_per_gpu": 16, "accum_steps": 1}
    assert cfg.layouts[1].settings == {"flavor": "debug", "lr": 0.2, "batch_per_gpu": 8, "accum_steps": 2}
    layouts = select_layouts(LOCAL, None, "1x1,1x2")
    plan = plan_entries(layouts, cfg)
    assert [e.name for e in plan] == ["1x1x32x1", "1x2x16x1", "1x2x8x2"]
    assert [r.run_id for r in interleave(plan, 1)] == ["1x1x32x1-r1", "1x2x16x1-r1", "1x2x8x2-r1"]


@pytest.mark.parametrize("text, message", [
    ("layouts: {1x1x8x1: {}}\nextra: 1\n", "unknown key 'extra'"),
    ("layouts: {1x1x8x1: {lr: fast}}\n", "'layouts.1x1x8x1.lr' must be a number"),
    ("layouts: {1x1x8x1: {learning_rate: 0.1}}\n", "unknown key 'layouts.1x1x8x1.learning_rate'"),
    ("train: {nope: 1}\nlayouts: {1x1x8x1: {}}\n", "unknown key 'train.nope'"),
    ("layouts: {1x1x8: {}}\n", "not NODESxGPUSxBATCHxACCUM"),
    ("layouts: {1x1x8x1: {batch_per_gpu: 4}}\n", "given by the layout's name"),
    ("train: {run_id: x}\nlayouts: {1x1x8x1: {}}\n", "set by the sweep"),
    ("layouts: {}\n", "'layouts' must map"),
    ("model: bert\nlayouts: {1x1x8x1: {}}\n", "config is for model 'bert'"),
    ("layouts: [1x1x8x1]\n", "'layouts' must map"),
    ("layouts: {1x1x8x1: {}\n", "not valid YAML"),
])
def test_config_is_strict(tmp_path, text, message):
    path = write_config(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as e:
        sweep_config.load_sweep_config(path, "resnet50")
    assert str(path) in str(e.value)


def test_example_configs_load():
    for name, model in (("resnet50-example", "resnet50"), ("resnet50-debug", "resnet50"),
                        ("bert-example", "bert")):
        cfg = sweep_config.load_sweep_config(sweep_config.find_config(name), model)
        assert cfg.layouts
    with pytest.raises(ConfigError, match="not found"):
        sweep_config.find_config("no-such-config")


def test_train_args_may_not_repeat_config_keys():
    settings = {"lr": 0.1, "batch_per_gpu": 8}
    sweep_config.check_no_conflict(settings, ("--flavor", "debug"), "cfg")
    with pytest.raises(ConfigError, match="lr is set by the config and by --lr"):
        sweep_config.check_no_conflict(settings, ("--lr=0.3",), "cfg")
    with pytest.raises(ConfigError, match="batch_per_gpu"):
        sweep_config.check_no_conflict(settings, ("--batch-per-gpu", "4"), "cfg")
    with pytest.raises(ConfigError, match="'train:' section"):
        sweep_config.check_no_conflict(settings, ("--config", "x.yaml"), "cfg")


def test_config_layouts_must_be_selected_and_described(tmp_path):
    cfg = sweep_config.load_sweep_config(write_config(tmp_path, "layouts: {1x2x8x1: {}}\n"), "resnet50")
    with pytest.raises(TopologyError, match="no settings for layout 1x1"):
        plan_entries(select_layouts(LOCAL, None, "1x1,1x2"), cfg)
    assert [e.name for e in plan_entries(select_layouts(LOCAL), cfg, strict=False)] == ["1x2x8x1"]


# --- commands and records --------------------------------------------------------------------

def test_run_command_with_a_config(tmp_path):
    cfg = sweep_config.load_sweep_config(write_config(tmp_path, "layouts: {1x2x8x2: {}}\n"), "resnet50")
    s = spec(tmp_path, entries=plan_entries([Layout(1, 2, ("localhost",))], cfg), launcher="mpirun",
             user_env={"HVDBENCH_X": "1"}, train_args=("--synthetic",))
    run = s.runs[0]
    argv, env = sweep_run.command(s, run, base_env={"PATH": "/bin"})
    rdir = str(tmp_path / "sw" / "1x2x8x2-r1")
    assert argv[1:] == ["-np", "2", "-H", "localhost:2", "--map-by", "ppr:2:node", "--bind-to", "none",
                        "-x", "PATH", *(["-x", "OMPI_ALLOW_RUN_AS_ROOT", "-x", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"]
                                        if "OMPI_ALLOW_RUN_AS_ROOT" in env else []),
                        "-x", "HVDBENCH_LAUNCHER", "-x", "HVDBENCH_X", "--output-filename", f"{rdir}/logs",
                        HVDBENCH, "train", "resnet50", "--config", f"{rdir}/layout.yaml", "--synthetic",
                        "--out", rdir, "--run-id", "1x2x8x2-r1", "--sweep-name", "sw", "--repeat", "1",
                        "--thread-share", "2"]  # every layout shares a machine as its largest does
    assert env["HVDBENCH_X"] == "1" and env["PATH"] == "/bin"
    assert env["HVDBENCH_LAUNCHER"] == "mpirun"  # the worker records it: mpirun and horovodrun --mpi look alike


def test_sweep_owned_train_args_are_refused(tmp_path):
    for arg in ("--out", "--run-id=x", "--repeat"):
        with pytest.raises(ConfigError, match="set by the sweep"):
            spec(tmp_path, train_args=(arg, "1"))


def test_failed_run_row_comes_from_what_the_sweep_knows(tmp_path):
    s = spec(tmp_path, train_args=("--flavor", "debug", "--data", "/d/digits", "--batch-per-gpu=16"))
    run = s.runs[1]  # 1x2-r1
    rdir = tmp_path / "sw" / run.run_id
    (rdir / "logs" / "rank.1").mkdir(parents=True)
    (rdir / "logs" / "rank.1" / "stderr").write_text(
        "Traceback (most recent call last):\n  File \"w.py\", line 3\n    raise RuntimeError('x')\n"
        "RuntimeError: injected fault\n")
    (rdir / "launch.log").write_text("some output\nProcess 1 exit with status code 1.\n")
    result = record.build_result(s, run, rdir, Outcome("exited", 1, 10, 9, 3.5), "2026-01-01T00:00:00+00:00")
    assert result.status == "failed"
    assert result.error.startswith("exit status 1 | RuntimeError: injected fault")
    assert (result.run_id, result.sweep, result.repeat, result.layout, result.scale) == ("1x2-r1", "sw", 1, "1x2", "up")
    assert (result.world_size, result.nodes, result.gpus_per_node) == (2, 1, 2)
    assert (result.flavor, result.dataset, result.batch_per_gpu, result.global_batch) == ("debug", "/d/digits", 16, 32)
    assert (result.launcher, result.controller, result.wall_s) == ("horovodrun", "gloo", 3.5)
    timeout = record.build_result(spec(tmp_path, timeout=30), run, rdir, Outcome("timeout", None, 10, 9, 31.0), "")
    assert timeout.status == "timeout" and timeout.error.startswith("no result after 30 s: process group 9 ended")
    assert record.build_result(s, run, rdir, Outcome("interrupted", None, 10, 9, 1.0), "") is None


def test_failed_rows_carry_the_runs_resolved_identity(tmp_path):
    # Nothing after -- but the data: a time-to-accuracy run with the model's default flavor,
    # batch, precision and target. Its failed, timed-out and refused rows say so (not throughput,
    # flavor '' and batch 0), so the report counts them in their layout's row.
    from hvdbench.sweep.build import build_spec
    from hvdbench.sweep.options import SweepOptions

    s = build_spec(SweepOptions(tmp_path / "tta", "resnet50", ("--data", "/d/digits"), hosts="localhost:2"))
    assert all(e.train is not None for e in s.entries)  # resolved once, before any launch
    run = s.runs[1]
    rdir = tmp_path / "tta" / run.run_id
    rdir.mkdir(parents=True)
    failed = record.build_result(s, run, rdir, Outcome("exited", 1, 10, 9, 3.5), "2026-01-01T00:00:00+00:00")
    refused = record.refused_result(s, run, "2026-01-01T00:00:00+00:00", "not started: busy")
    for row in (failed, refused):
        assert (row.mode, row.flavor, row.framework, row.precision) == ("time_to_accuracy", "full", "torch", "fp32")
        assert (row.batch_per_gpu, row.global_batch, row.dataset) == (256, 512, "/d/digits")
        assert (row.metric_name, row.target, row.hosts) == ("top1_accuracy", 0.759, "localhost")
    assert refused.status == "failed" and refused.error == "not started: busy"

    # A failed record the worker wrote in this launch is the row (it knows the job's devices); one
    # left by an earlier attempt is not.
    write_result(rdir / "result.json", RunResult(model="resnet50", flavor="full", status="failed", devices="cpu",
                                                 mode="time_to_accuracy", started_at="2026-01-01T00:00:02+00:00"))
    mine = record.build_result(s, run, rdir, Outcome("exited", 1, 10, 9, 3.5), "2026-01-01T00:00:00+00:00")
    assert (mine.devices, mine.status) == ("cpu", "failed") and mine.error.startswith("exit status 1")
    stale = record.build_result(s, run, rdir, Outcome("exited", 1, 10, 9, 3.5), "2026-01-01T00:01:00+00:00")
    assert stale.devices == "" and stale.mode == "time_to_accuracy"


def test_worker_result_is_completed_and_checked(tmp_path):
    s = spec(tmp_path)
    run = s.runs[1]
    rdir = tmp_path / "sw" / run.run_id
    rdir.mkdir(parents=True)
    write_result(rdir / "result.json", RunResult(model="resnet50", world_size=2, nodes=1, gpus_per_node=2,
                                                 throughput=100.0, wall_s=2.0))
    result = record.build_result(s, run, rdir, Outcome("exited", 0, 10, 9, 5.0), "t0")
    assert (result.status, result.throughput, result.wall_s, result.run_id, result.launcher) == (
        "success", 100.0, 5.0, "1x2-r1", "horovodrun")  # wall_s: the launch's time, as on failed rows
    write_result(rdir / "result.json", RunResult(model="resnet50", world_size=1))
    wrong = record.build_result(s, run, rdir, Outcome("exited", 0, 10, 9, 5.0), "t0")
    assert wrong.status == "failed" and "worker saw 1 ranks, layout 1x2 has 2" in wrong.error
    (rdir / "result.json").unlink()
    missing = record.build_result(s, run, rdir, Outcome("exited", 0, 10, 9, 5.0), "t0")
    assert missing.status == "failed" and "no result record" in missing.error


def test_sweep_json_guards_a_resume_with_other_arguments(tmp_path):
    s = spec(tmp_path)
    s.out.mkdir(parents=True)
    sweep_run.check_sweep_record(s)
    data = json.loads((s.out / "sweep.json").read_text())
    assert data["model"] == "resnet50" and data["train_args"] == ["--flavor", "debug", "--synthetic"]
    sweep_run.check_sweep_record(spec(tmp_path, repeats=5, entries=entries("1x2")))  # extending: fine
    with pytest.raises(ConfigError, match="sweep.json: this sweep was made with train_args"):
        sweep_run.check_sweep_record(spec(tmp_path, train_args=("--synthetic",)))


def test_sweep_json_keeps_the_link_and_refuses_a_resume_over_another(tmp_path):
    s = spec(tmp_path, link="emulated veth bridge, 100mbit")
    s.out.mkdir(parents=True)
    sweep_run.check_sweep_record(s)
    assert json.loads((s.out / "sweep.json").read_text())["link"] == "emulated veth bridge, 100mbit"
    resumed = spec(tmp_path)  # a resume that names no link keeps the recorded one
    sweep_run.check_sweep_record(resumed)
    assert resumed.link == "emulated veth bridge, 100mbit"
    with pytest.raises(ConfigError, match="measured over the link 'emulated veth bridge, 100mbit', not '1gbit'"):
        sweep_run.check_sweep_record(spec(tmp_path, link="1gbit"))
    # A record from before links were recorded takes the first link named, and keeps everything else.
    record = json.loads((s.out / "sweep.json").read_text())
    del record["link"]
    (s.out / "sweep.json").write_text(json.dumps(record))
    sweep_run.check_sweep_record(spec(tmp_path, link="HDR InfiniBand 200 Gb/s"))
    assert json.loads((s.out / "sweep.json").read_text()) == {**record, "link": "HDR InfiniBand 200 Gb/s"}


def test_unrecorded_finished_run_is_recovered_without_rerunning(tmp_path):
    # The sweep was killed after the guard recorded the outcome but before the row was appended.
    s = spec(tmp_path, repeats=1, entries=entries("1x1"))
    s.out.mkdir(parents=True)
    rdir = s.out / "1x1-r1"
    rdir.mkdir()
    write_result(rdir / "result.json", RunResult(model="resnet50", world_size=1, throughput=5.0))
    (rdir / "launch.json").write_text(json.dumps({
        "status": "exited", "returncode": 0, "pid": 1, "pgid": 1, "wall_s": 4.0, "leftover": [],
        "started_at": "2026-01-01T00:00:00+00:00"}))
    from rich.console import Console

    counts = sweep_run.run_sweep(s, Console(file=open("/dev/null", "w")))
    assert counts == {"success": 1}
    [row] = read_runs(s.store)
    assert (row.run_id, row.throughput, row.started_at) == ("1x1-r1", 5.0, "2026-01-01T00:00:00+00:00")


def test_an_unrecorded_failed_attempt_runs_again(tmp_path, monkeypatch):
    # Caught in make test (test_slurm.py's cancelled job): the job's cancel failed srun ("job 7 has
    # expired", exit 1) and the guard recorded that before the sweep's SIGTERM came, so the resumed
    # sweep appended a failed row for a run the cancel had cut off. A failure without a row now runs again.
    fake_launcher(tmp_path, monkeypatch)
    s = spec(tmp_path, launcher="srun", repeats=1, entries=entries("1x1"), timeout=60)
    rdir = s.out / "1x1-r1"
    rdir.mkdir(parents=True)
    cut_off = {"status": "exited", "returncode": 1, "pid": 1, "pgid": 1, "wall_s": 0.2, "leftover": [],
               "started_at": "2026-01-01T00:00:00+00:00", "slurm_job_id": "7"}
    (rdir / "launch.json").write_text(json.dumps(cut_off))
    (rdir / "launch.log").write_text("srun: error: Slurm job 7 has expired\n")
    from rich.console import Console

    sweep_run.run_sweep(s, Console(file=open("/dev/null", "w")))
    [row] = read_runs(s.store)
    assert row.run_id == "1x1-r1" and row.started_at != cut_off["started_at"]
    assert (rdir / "launch.log").read_text().startswith("launched ")  # launched again, by this sweep
    assert json.loads((rdir / "attempts" / "1" / "launch.json").read_text()) == cut_off  # kept, not reused
    assert "expired" not in (row.error or "")


def test_an_interrupted_attempt_is_set_aside(tmp_path):
    rdir = tmp_path / "1x1-r1"
    (rdir / "logs").mkdir(parents=True)
    (rdir / "launch.log").write_text("first attempt\n")
    sweep_run._set_aside(rdir)
    assert sorted(p.name for p in rdir.iterdir()) == ["attempts"]
    assert (rdir / "attempts" / "1" / "launch.log").read_text() == "first attempt\n"
    (rdir / "launch.log").write_text("second attempt\n")
    sweep_run._set_aside(rdir)
    assert (rdir / "attempts" / "2" / "launch.log").read_text() == "second attempt\n"


# --- launching and locking: real processes ---------------------------------------------------

def fake_launcher(tmp_path, monkeypatch, name="srun"):
    """`srun` on PATH (Slurm is not installed here) that prints its argv and exits 0."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\nimport sys\nprint('launched', *sys.argv[1:])\n")
    path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return str(path)


def test_a_run_and_a_layout_bench_take_the_same_launch_path(tmp_path, monkeypatch):
    srun = fake_launcher(tmp_path, monkeypatch)
    s = spec(tmp_path, launcher="srun", entries=entries("1x2"), repeats=1, allreduce_bench="64K",
             user_env={"HVDBENCH_X": "a b"}, timeout=60)
    run = s.runs[0]
    train_dir = s.out / "1x2-r1"
    launched = {
        train_dir: (launch.launch_run(s, run),
                    ["train", "resnet50", "--flavor", "debug", "--synthetic", "--out", str(train_dir),
                     "--run-id", "1x2-r1", "--sweep-name", "sw", "--repeat", "1", "--thread-share", "2"]),
        s.out / "bench-allreduce-1x2": (launch.launch_bench(s, run.layout),
                                        ["bench", "allreduce", "--max-bytes", "64K", "--out", str(s.out)]),
        s.out / "bench-compute-1x2": (launch.launch_bench(s, run.layout, "compute"),
                                      ["bench", "compute", "--threads", "0", "--thread-share", "2",
                                           "--out", str(s.out)]),
    }
    for rdir, ((started_at, outcome), worker) in launched.items():
        assert (outcome.status, outcome.returncode) == ("exited", 0) and started_at
        assert guard.read_outcome(rdir / "launch.json") == outcome
        assert (rdir / "hostfile").read_text() == "h slots=2\n"
        *env_lines, command_line = (rdir / "command.txt").read_text().splitlines()
        assert "HVDBENCH_X='a b' \\" in env_lines
        argv = shlex.split(command_line)
        assert argv[0] == srun and argv[argv.index(HVDBENCH) + 1:] == worker
        assert (rdir / "logs").is_dir()
        assert (rdir / "launch.log").read_text() == f"launched {shlex.join(argv[1:])}\n"
    assert launch.command(s, run)[0] == shlex.split((train_dir / "command.txt").read_text().splitlines()[-1])


HOLDER = """
import sys
from pathlib import Path
from hvdbench.sweep import locks
sweep_dir, name = Path(sys.argv[1]), sys.argv[2]
with locks.store_lock(sweep_dir) if name == "runs.csv" else locks.claim(sweep_dir, name):
    print("held", flush=True)
    sys.stdin.readline()
print("released", flush=True)
sys.stdin.readline()
"""


def hold(sweep_dir, name):
    """Another process holding a lock of the sweep (as a concurrent sweep would); it says when."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(sweep_dir), name], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    return holder


def test_a_run_another_sweep_claimed_is_skipped_until_that_sweep_dies(tmp_path, monkeypatch):
    import threading

    from rich.console import Console

    fake_launcher(tmp_path, monkeypatch)  # prints and exits 0 without a result: a failed row
    s = spec(tmp_path, repeats=1, entries=entries("1x1"), launcher="srun")
    holder = hold(s.out, "1x1-r1")
    try:
        with locks.claim(s.out, "1x1-r1") as mine:
            assert not mine
        # SIGKILL while the sweep waits for the run: the holder cannot clean up; the kernel releases
        # its flock, and the sweep, finding no row, runs it itself.
        killer = threading.Timer(1.0, holder.kill)
        killer.start()
        counts = sweep_run.run_sweep(s, Console(file=open("/dev/null", "w")))
        killer.join()
        assert counts == {"failed": 1} and (s.out / "1x1-r1" / "launch.log").exists()
        assert [row.run_id for row in read_runs(s.store)] == ["1x1-r1"]
        holder.wait()
        with locks.claim(s.out, "1x1-r1") as mine:
            assert mine
            with locks.claim(s.out, "1x1-r2") as other:
                assert other  # one lock per run
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait()


def test_appends_to_runs_csv_are_serialised(tmp_path):
    holder = hold(tmp_path, "runs.csv")
    try:
        assert not LockFile(locks.lock_path(tmp_path, "runs.csv")).acquire(wait=False)
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline() == "released\n"
        with locks.store_lock(tmp_path):
            pass
    finally:
        holder.kill()
        holder.wait()


def test_a_signal_while_a_row_is_appended_waits_for_the_row():
    before = signal.getsignal(signal.SIGTERM)
    written = []
    with signals.raising_signals() as guard:
        with pytest.raises(signals.SweepInterrupted) as stopped:
            with guard.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                written.append("row")
        assert written == ["row"] and stopped.value.signum == signal.SIGTERM
        os.kill(os.getpid(), signal.SIGINT)  # already stopping: ignored, the cleanup goes on
    assert signal.getsignal(signal.SIGTERM) is before
    with pytest.raises(signals.SweepInterrupted):  # outside deferred(): at once
        signals.SignalGuard().handler(signal.SIGHUP, None)
    assert sweep_run.SweepInterrupted is signals.SweepInterrupted


def test_slurm_jobs_rerun_the_sweep_inside_each_allocation(tmp_path):
    s = spec(tmp_path, entries=entries("1x1", "1x2"), timeout=600, user_env={"A": "b c"}, repeats=3)
    jobs = batch.slurm_jobs(s, time_limit="00:30:00", sbatch_args=("--partition=gpu",))
    assert [j[0] for j in jobs] == ["1x1", "1x2"]
    name, script, body, argv = jobs[1]
    assert script == s.out / "slurm" / "1x2.sub"
    assert argv[1:] == ["--parsable", "--partition=gpu", str(script)]
    assert "#SBATCH --nodes=1\n#SBATCH --ntasks-per-node=2\n" in body
    assert "#SBATCH --job-name=hvd-sw-1x2\n" in body and "#SBATCH --time=00:30:00\n" in body
    exec_line = body.rstrip().splitlines()[-1]
    assert shlex.split(exec_line) == ["exec", HVDBENCH, "sweep", "resnet50", "--launcher", "srun",
                                      "--layouts", "1x2", "--repeats", "3", "--out", str(s.out), "--name", "sw",
                                      "--timeout", "600", "--kill-grace", "10", "--env", "A=b c", "--",
                                      "--flavor", "debug", "--synthetic"]


# --- the command line ------------------------------------------------------------------------

def invoke(*args):
    return CliRunner().invoke(cli, ["sweep", *map(str, args)])


def test_dry_run_prints_plan_and_exact_commands_and_writes_nothing(tmp_path):
    out = tmp_path / "demo"
    result = invoke("resnet50", "--hostfile", ROOT / "hostfiles/localhost", "--repeats", "2", "--out", out,
                    "--dry-run", "--", "--flavor", "debug", "--synthetic")
    assert result.exit_code == 0, result.output
    commands = [line.split(": ", 1) for line in result.output.splitlines() if line.startswith(("1x1-", "1x2-"))]
    assert [c[0] for c in commands] == ["1x1-r1", "1x2-r1", "1x1-r2", "1x2-r2"]
    argv = shlex.split(commands[1][1])
    assert argv[1:6] == ["-np", "2", "-H", "localhost:2", "--gloo"]
    assert argv[argv.index(HVDBENCH):] == [HVDBENCH, "train", "resnet50", "--flavor", "debug", "--synthetic",
                                           "--out", str(out / "1x2-r1"), "--run-id", "1x2-r1",
                                           "--sweep-name", "demo", "--repeat", "1", "--thread-share", "2"]
    assert "scale" in result.output and "localhost:2" in result.output
    assert not out.exists()


def test_dry_run_of_a_two_node_layout_choice(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("a slots=4\nb slots=4\n")
    result = invoke("resnet50", "--hostfile", hosts, "--gpus", "4", "--out", tmp_path / "o", "--dry-run",
                    "--launcher", "mpirun", "--", "--synthetic")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith(("1x4-r1", "2x2-r1", "4x1"))]
    assert [line.split(":")[0] for line in lines] == ["1x4-r1", "2x2-r1"]
    assert "-H a:2,b:2 --map-by ppr:2:node" in lines[1]


@pytest.mark.parametrize("args, message", [
    (["--hosts", "h:2", "--gpus", "8"], "8 GPUs requested but only 2 slots"),
    (["--hosts", "h:0"], "zero slots"),
    (["--hosts", "h:2", "--layouts", "2x1"], "--layouts 2x1: needs 2 host(s)"),
    (["--hosts", "h:2", "--config", "no-such"], "sweep config 'no-such' not found"),
    (["--hosts", "h:2", "--hostfile", "x"], "give one of --hostfile, --hosts or --cluster"),
    (["--cluster", "nosuch"], "cluster 'nosuch' is not up"),
    (["--hosts", "h:2", "--cluster", "c"], "give one of --hostfile, --hosts or --cluster"),
    (["--hosts", "h:2", "--submit"], "--submit goes with --launcher slurm"),
    (["--hosts", "h:2", "--env", "1X=2"], "KEY=VALUE"),
    (["--hosts", "h:2", "--", "--out", "x"], "--out is set by the sweep"),
])
def test_bad_input_is_a_one_line_error(tmp_path, args, message):
    result = invoke("resnet50", "--out", tmp_path / "o", *args)
    assert result.exit_code != 0
    assert message in result.output
    assert not (tmp_path / "o").exists()


def test_unknown_model_and_bad_hostfile_name_the_culprit(tmp_path):
    result = invoke("resnet5", "--hosts", "h:2", "--out", tmp_path / "o")
    assert result.exit_code == 1 and "Error: unknown model 'resnet5'" in result.output
    bad = tmp_path / "hosts"
    bad.write_text("ok slots=2\nbad host slots=2\n")
    result = invoke("resnet50", "--hostfile", bad, "--out", tmp_path / "o")
    assert result.exit_code == 1 and f"Error: {bad}:2: " in result.output


def test_slurm_dry_run_and_render(tmp_path):
    out = tmp_path / "r"
    args = ["resnet50", "--hostfile", ROOT / "hostfiles/example-2node", "--gpus", "8", "--launcher", "slurm",
            "--out", out]
    result = invoke(*args, "--dry-run", "--", "--synthetic")
    assert result.exit_code == 0, result.output
    assert f"# {out}/slurm/1x8.sub" in result.output and f"# {out}/slurm/2x4.sub" in result.output
    assert not out.exists()
    result = invoke(*args, "--", "--synthetic")  # renders the scripts; no --submit: prints sbatch commands
    assert result.exit_code == 0, result.output
    assert (out / "slurm" / "2x4.sub").read_text().startswith("#!/bin/bash\n")
    assert f"2x4: sbatch --parsable {out}/slurm/2x4.sub" in result.output.replace(
        launchers.resolve_binary("sbatch"), "sbatch")


def test_submit_runs_sbatch_and_records_job_ids(tmp_path, monkeypatch):
    # Slurm is not installed here: an `sbatch` on PATH that records its argv stands in for it, so
    # the exact submission command is what is checked.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sbatch = bin_dir / "sbatch"
    sbatch.write_text(f"#!{sys.executable}\nimport sys\nopen({str(tmp_path / 'argv')!r}, 'a').write("
                      "repr(sys.argv[1:]) + '\\n')\nprint('4242')\n")
    sbatch.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    out = tmp_path / "r"
    result = invoke("resnet50", "--hosts", "n1:4,n2:4", "--gpus", "8", "--launcher", "slurm", "--submit",
                    "--sbatch-arg=--partition=gpu", "--out", out, "--", "--synthetic")
    assert result.exit_code == 0, result.output
    calls = (tmp_path / "argv").read_text().splitlines()
    assert calls == [repr(["--parsable", "--partition=gpu", str(out / "slurm" / "2x4.sub")])]
    assert (out / "slurm" / "2x4.jobids").read_text() == "4242\n"
    assert f"2x4: submitted job 4242 ({out}/slurm/2x4.sub)" in result.output
    assert json.loads((out / "sweep.json").read_text())["model"] == "resnet50"


# --- what a sweep says (issue 31) ---------------------------------------------------------------

def test_a_finished_runs_line_shows_its_figure_beside_wall_time_and_status(tmp_path):
    from hvdbench.sweep.display import run_line

    [first] = spec(tmp_path).runs[:1]
    tput = RunResult(mode="throughput", throughput=812.34, wall_s=41.04, status="success")
    assert run_line(first, tput).split()[4:] == ["812.3", "samples/s", "41.0", "s", "wall", "success"]
    reached = RunResult(mode="time_to_accuracy", metric_name="top1_accuracy", final_metric=0.9528, target=0.95,
                        time_to_train_s=4.32, wall_s=9.5, status="success")
    assert "top1_accuracy 0.9528 (target 0.95) in 4.3 s  9.5 s wall  success" in run_line(first, reached)
    missed = RunResult(mode="time_to_accuracy", metric_name="top1_accuracy", final_metric=0.91, target=0.95,
                       epochs=12.0, wall_s=60.0, status="aborted")
    assert "top1_accuracy 0.91 (target 0.95) after 12 epochs  60.0 s wall  aborted" in run_line(first, missed)
    failed = RunResult(mode="throughput", wall_s=3.0, status="failed", error="exit status 1")
    assert run_line(first, failed).endswith("3.0 s wall  failed  exit status 1")


def test_a_refused_runs_line_says_its_refusal_whole_and_where_its_log_is(tmp_path):
    """Issue 58: the line cut the worker's refusal at 'this machin' and named no log. The error is
    runs.csv's, as the sweep records a launch the worker refused (rank tag and all)."""
    from hvdbench.sweep.display import error_words, run_line

    [first] = spec(tmp_path).runs[:1]
    refusal = ("resnet50/full (torch, horovod) needs ~25.9 GB for batch 256 per rank, and this machine has 21.4 GB "
               "available per rank (1 on this host); try --flavor debug or --batch-per-gpu 128")
    error = (f"exit status 1 | [0]<stderr>:Error: {refusal} | RuntimeError: Horovod detected that one or more "
             "processes exited with non-zero status, thus causing the job to be terminated. The first process to "
             "do so was:")
    log = tmp_path / "1x1-r1" / "launch.log"
    line = run_line(first, RunResult(mode="throughput", wall_s=49.0, status="failed", error=error), log)
    assert line.endswith(f"49.0 s wall  failed  {refusal}  (log: {log})")
    for tag in ("[1,0]<stderr>:", "[rank0]: ", "0: ", ""):  # mpirun's, torchrun's, srun's, a lone worker's
        assert error_words(f"exit status 1 | {tag}Error: {refusal}") == refusal
    # Not the worker's own line (a traceback's, a launcher's): the error's start, at most a few lines' worth.
    assert error_words(error.replace("Error: ", "")) == error.replace("Error: ", "")[:237] + "..."
    assert error_words("exit status 1 | ValueError: bad") == "exit status 1 | ValueError: bad"


def test_a_run_in_flight_says_what_it_is_doing(tmp_path):
    from hvdbench.sweep.display import STARTING, TRAINING, stage

    log = tmp_path / "launch.log"
    assert stage(log) == STARTING  # not even the log yet
    log.write_text("[0]<stderr>:W1128 a framework's warning\n")
    assert stage(log) == STARTING
    log.write_text("[0]<stdout>:[hvdbench] resnet50/debug torch fp32 horovod: 2 rank(s)\n")
    assert stage(log) == TRAINING
    log.write_text(log.read_text() + "[0]<stdout>:[hvdbench] step 12/25, 80 samples/s, 0:05 left\n")
    assert stage(log) == "step 12/25, 80 samples/s, 0:05 left"


def test_in_a_pipe_no_bar_and_no_stale_running_line(tmp_path):
    """Piped (`| cat`, a batch log) the sweep prints whole lines only: no bar frame at the end (it
    would keep 'running 1x2-r2' long after), and a run in flight is named only once it has gone
    PLAIN_STATUS_S, saying when that was."""
    import io

    from rich.console import Console

    from hvdbench.sweep import display

    out = io.StringIO()
    s = spec(tmp_path)
    first = s.runs[0]
    with display.SweepProgress(s, Console(file=out, force_terminal=False, width=200)) as shown:
        shown.start(total=2, done=0)
        shown.running(first)
        start = shown.progress.tasks[0].fields["run_start"]
        last = shown.status_tick((None, 0.0), start + 5)  # 5 s in: nothing to say yet
        assert out.getvalue() == ""
        last = shown.status_tick(last, start + display.PLAIN_STATUS_S + 5)
        # No line from the worker yet: said so (issue 58: 11 of 16 such lines said nothing of the run).
        assert out.getvalue() == f"  {first.run_id} still running after 0:35: {display.STARTING}\n"
        assert shown.status_tick(last, start + display.PLAIN_STATUS_S + 10) == last  # not again at once
        shown.finished(first, RunResult(mode="throughput", throughput=100.0, wall_s=40.0))
        assert shown.status_tick(last, start + 200) == last  # nothing in flight: nothing said
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[1].startswith(first.run_id) and "100.0 samples/s" in lines[1]
    assert not any("━" in line or "running 1x" in line for line in lines)


@pytest.mark.parametrize("train, said", [
    (("--flavor", "debug", "--synthetic", "--steps", "20", "--warmup-steps", "4"),
     "mode: throughput, 20 timed steps after at least 4 warm-up steps (more until step times settle, up to 20)"),
    (("--flavor", "debug", "--data", "data/digits", "--max-epochs", "6", "--target", "0.9"),
     "mode: time to accuracy, target top1_accuracy >= 0.9, at most 6 epochs"),
])
def test_dry_run_says_the_mode_target_and_epoch_cap(tmp_path, train, said):
    result = invoke("resnet50", "--hosts", "localhost:2", "--layouts", "1x1,1x2", "--out", tmp_path / "o",
                    "--dry-run", "--", *train)
    assert result.exit_code == 0, result.output
    assert said in result.output


@pytest.mark.parametrize("train_args, said", [
    (["--synthetic", "--thread-share"], "Option '--thread-share' requires an argument"),
    (["--synthetic", "--steps"], "Option '--steps' requires an argument"),
])
def test_an_option_left_without_its_value_after_dashes_is_named_not_the_sweeps_own_out(tmp_path, train_args, said):
    """The sweep checks the arguments after -- with a placeholder --out of its own; a last option
    missing its value must not take that placeholder as its value ("'--out' is not a valid integer")."""
    result = CliRunner().invoke(cli, ["sweep", "resnet50", "--hosts", "localhost:2", "--dry-run",
                                      "--out", str(tmp_path / "sw"), "--", "--flavor", "debug", *train_args])
    assert result.exit_code == 2, result.output
    assert said in result.output and "'--out'" not in result.output
    assert not (tmp_path / "sw").exists()


def test_the_dry_run_counts_layouts_engines_and_repeats_apart(tmp_path):
    # issue 58: "4 runs (4 layouts x 1 repeats)" was printed for 2 layouts x 2 engines
    result = invoke("resnet50", "--hostfile", ROOT / "hostfiles/localhost", "--engines", "ddp,horovod",
                    "--out", tmp_path / "demo", "--dry-run", "--", "--flavor", "debug", "--synthetic")
    assert result.exit_code == 0, result.output
    assert "4 runs (2 layouts x 2 engines x 1 repeat)" in " ".join(result.output.split())
