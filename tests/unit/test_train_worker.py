"""The framework-neutral parts of `hvdbench train`: learning-rate schedule and scaling, fault
injection, launcher detection, the output-directory guard, and the CLI's behaviour under a launcher
(only rank 0 reports a bad argument; --help imports no framework)."""

import json
import math
import os
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest

from hvdbench.errors import ConfigError
from hvdbench.frameworks import math_threads
from hvdbench.launchers import launch_info
from hvdbench.results.records.schema import new_run_id
from hvdbench.train import loop, result, schedule
from hvdbench.train.faults import Fault
from hvdbench.train.options import parse_set


def test_lr_warms_up_linearly_then_decays_polynomially_to_the_end_value():
    lrs = [schedule.lr_at(s, peak=1.0, warmup_steps=4, total_steps=14, end_lr=0.01, power=2) for s in range(14)]
    assert lrs[:4] == [0.25, 0.5, 0.75, 1.0]
    assert lrs[4] == 1.0 and all(a > b for a, b in zip(lrs[4:], lrs[5:]))
    assert lrs[9] == pytest.approx(0.01 + 0.99 * 0.5**2)
    assert schedule.lr_at(14, 1.0, 4, 14, 0.01, 2) == pytest.approx(0.01)
    assert schedule.lr_at(99, 1.0, 4, 14, 0.01, 2) == pytest.approx(0.01)  # clamped past the end
    assert schedule.lr_at(3, 1.0, 0, 0, 0.0, 2) == 1.0  # no schedule: constant


@pytest.mark.parametrize("scaling, expected", [("linear", 0.4), ("sqrt", 0.2), ("none", 0.1)])
def test_lr_scales_with_the_global_batch(scaling, expected):
    cfg = SimpleNamespace(lr=0.1, lr_base_batch=256, lr_scaling=scaling)
    assert schedule.scaled_lr(cfg, 1024) == pytest.approx(expected)


def test_fault_fires_on_the_chosen_rank_and_step_only():
    env = {"HVDBENCH_INJECT_FAULT": "crash"}
    last = Fault(rank=3, size=4, env=env)  # default rank: the last; default step: 2
    other = Fault(rank=0, size=4, env=env)
    last.check(1)
    other.check(2)
    with pytest.raises(RuntimeError, match="injected fault"):
        last.check(2)
    chosen = Fault(rank=0, size=4, env={**env, "HVDBENCH_INJECT_FAULT_RANK": "0",
                                              "HVDBENCH_INJECT_FAULT_STEP": "5"})
    chosen.check(2)
    with pytest.raises(RuntimeError):
        chosen.check(5)
    Fault(rank=0, size=1, env={}).check(2)  # not armed


def test_the_kill_fault_sends_sigkill_on_its_rank_and_step():
    Fault(0, 2, env={"HVDBENCH_INJECT_FAULT": "kill"}).check(2)  # rank 0: not armed (the default is the last)
    proc = subprocess.run([sys.executable, "-c", "from hvdbench.train.faults import Fault; "
                           "f = Fault(1, 2, env={'HVDBENCH_INJECT_FAULT': 'kill'}); f.check(1); f.check(2)"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def test_a_rank_leaving_runs_what_the_frameworks_registered_then_exits_with_its_code():
    """The worker leaves by os._exit, which skips atexit: `frameworks.on_exit` hooks run anyway, in
    order, past one that raises (TensorFlow's removes autograph's files: test_train_resnet.py)."""
    code = ("import atexit\nfrom hvdbench import frameworks\nfrom hvdbench.train import worker\n"
            "atexit.register(print, 'atexit')\nframeworks.on_exit(lambda: print('first'))\n"
            "frameworks.on_exit(lambda: 1 / 0)\nframeworks.on_exit(lambda: print('last'))\nworker._exit(3)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout.split()) == (3, ["first", "last"]), proc.stderr


def test_unknown_fault_kinds_are_refused():
    with pytest.raises(ConfigError, match="HVDBENCH_INJECT_FAULT='explode'"):
        Fault(0, 2, env={"HVDBENCH_INJECT_FAULT": "explode"})
    with pytest.raises(ConfigError, match="must be integers"):
        Fault(0, 2, env={"HVDBENCH_INJECT_FAULT": "hang", "HVDBENCH_INJECT_FAULT_STEP": "x"})


@pytest.mark.parametrize("env, launcher, rank", [
    ({"HOROVOD_RANK": "1", "HOROVOD_GLOO_RENDEZVOUS_ADDR": "h"}, "horovodrun", 1),
    ({"OMPI_COMM_WORLD_RANK": "3", "PMIX_RANK": "3"}, "mpirun", 3),
    ({"HVDBENCH_LAUNCHER": "horovodrun", "OMPI_COMM_WORLD_RANK": "2"}, "horovodrun", 2),
    ({"SLURM_PROCID": "5", "SLURM_STEP_ID": "0"}, "srun", 5),
    ({"SLURM_PROCID": "0", "SLURM_JOB_ID": "7"}, "single", 0),  # a batch script, not a step
    ({}, "single", 0),
])
def test_launcher_and_rank_come_from_the_environment(env, launcher, rank):
    assert launch_info.detect_launcher(env) == launcher
    assert launch_info.launcher_rank(env) == rank


def test_a_finished_run_is_never_overwritten_but_a_failed_one_may_be(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps({"status": "success"}))
    with pytest.raises(ConfigError, match="holds a finished run"):
        result.check_out(tmp_path)
    (tmp_path / "result.json").write_text(json.dumps({"status": "failed"}))
    (tmp_path / "mllog.txt").write_text(":::MLLOG {}\n")
    result.check_out(tmp_path)
    assert not (tmp_path / "mllog.txt").exists()  # the rerun starts a fresh event log
    result.check_out(tmp_path / "new")


def test_set_options_reach_nested_keys_with_yaml_values():
    assert parse_set(["momentum=0.95", "submission.org=acme", "synthetic=true"]) == {
        "momentum": 0.95, "submission": {"org": "acme"}, "synthetic": True}
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_set(["momentum"])


def test_std_and_run_ids():
    assert loop.std([1.0]) == 0.0
    assert loop.std([1.0, 3.0]) == pytest.approx(math.sqrt(2))
    a, b = new_run_id(), new_run_id()
    assert a != b and a[:8].isdigit()


def hvdbench(*args, env=None):
    import os

    return subprocess.run([sys.executable, "-m", "hvdbench.cli.main", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})})


def test_help_imports_no_framework():
    code = ("import sys\nfrom click.testing import CliRunner\nfrom hvdbench.cli.main import cli\n"
            "r = CliRunner().invoke(cli, ['train', '--help'])\nassert r.exit_code == 0, r.output\n"
            "assert 'Example:' in r.output\n"
            "print(sorted(m for m in ('torch', 'tensorflow', 'horovod', 'keras') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize("args, code, message", [
    (["train", "resnet50", "--bogus"], 2, "No such option"),
    (["train", "resnet50", "--synthetic"], 1, "Error: no output directory given"),
])
def test_bad_arguments_are_reported_by_rank_0_only(args, code, message):
    """Every rank parses the same argv; N copies of one error would bury it."""
    rank0 = hvdbench(*args, env={"OMPI_COMM_WORLD_RANK": "0"})
    # The quiet rank's delay (rank 0 must get to print first under a launcher) is not needed here.
    rank1 = hvdbench(*args, env={"OMPI_COMM_WORLD_RANK": "1", "HVDBENCH_QUIET_EXIT_DELAY_S": "0"})
    assert rank0.returncode == code and message in rank0.stderr
    assert rank1.returncode == code and rank1.stdout + rank1.stderr == ""


@pytest.mark.parametrize("env, expected", [
    ({}, 8),                                         # 16 cores, 2 ranks on this host
    ({"HVDBENCH_SHARED_MACHINE": "1"}, 4),           # emulated cluster: 4 ranks share the 16 cores
    ({"OMP_NUM_THREADS": "3", "HVDBENCH_SHARED_MACHINE": "1"}, 3),  # the user's setting wins
])
def test_math_threads_share_the_cores_of_one_machine(monkeypatch, env, expected):
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert math_threads(0, local_size=2, size=4, env=env) == expected
    assert math_threads(5, local_size=2, size=4, env=env) == 5  # --threads wins over all


def test_a_neighbour_takes_its_cores_away_from_the_default(monkeypatch):
    """A lone rank on 2 cores with a neighbour on one of them takes 1 thread, not 2 (its threads
    would wait at every barrier for the one the neighbour preempts); half a core or less is noise."""
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert math_threads(0, local_size=1, env={}, busy_cpus=0.0) == 2
    assert math_threads(0, local_size=1, env={}, busy_cpus=0.4) == 2
    assert math_threads(0, local_size=1, env={}, busy_cpus=1.0) == 1
    assert math_threads(0, local_size=1, env={}, busy_cpus=2.0) == 1  # never below one
    assert math_threads(3, local_size=1, env={}, busy_cpus=2.0) == 3  # the user's choice stands


def test_a_thread_share_gives_every_layout_the_largest_layouts_threads(monkeypatch):
    """A sweep's --thread-share N: a 1x1 baseline's rank takes the threads each rank of its largest
    layout takes (cores / N), not the whole machine, so the ideal the report draws from it can be
    reached; a share below the ranks really there changes nothing; --threads still wins."""
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert math_threads(0, local_size=1, env={}) == 8  # train alone: today's default
    assert math_threads(0, local_size=1, env={}, share=4) == 2
    assert math_threads(0, local_size=4, env={}, share=4) == 2
    assert math_threads(0, local_size=4, env={}, share=2) == 2  # never more than the real share
    shared = {"HVDBENCH_SHARED_MACHINE": "1"}
    assert math_threads(0, local_size=1, size=1, env=shared, share=2) == 4  # emulated cluster, 1x1
    assert math_threads(0, local_size=1, size=2, env=shared, share=2) == 4  # emulated cluster, 2x1
    assert math_threads(3, local_size=1, env={}, share=4) == 3


# A fresh process's minor page faults in three rounds of 64 blocks of 1 MiB malloc'd, written and freed,
# with SETTINGS (a call of cpu_malloc_settings, or nothing) first.
PAGE_FAULTS = """
import ctypes, json, resource, sys
from hvdbench.frameworks import cpu_malloc_settings
said = eval(sys.argv[1])
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_size_t], [ctypes.c_void_p]
faults = []
for _ in range(3):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [libc.malloc(1 << 20) for _ in range(64)]
    for b in blocks:
        ctypes.memset(b, 1, 1 << 20)
    for b in blocks:
        libc.free(b)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps([said, faults]))
"""


def _page_faults(settings: str) -> tuple[object, list[int]]:
    out = subprocess.run([sys.executable, "-c", PAGE_FAULTS, settings], capture_output=True, text=True, check=True)
    return tuple(json.loads(out.stdout))


@pytest.mark.skipif(not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"), reason="glibc's malloc only")
def test_cpu_training_keeps_freed_memory_for_the_next_step_unless_the_user_chose():
    """glibc returns 64 MiB freed at once to the kernel, so writing it again faults every page in
    (16,384 of 4 KiB); after cpu_malloc_settings a CPU process keeps it: the next rounds fault none of them in.
    On a GPU, or where the user set glibc's own variables or another allocator, malloc is left alone."""
    pages = (64 << 20) // os.sysconf("SC_PAGE_SIZE")
    said, glibc = _page_faults("None")
    assert all(f >= pages * 0.9 for f in glibc), glibc  # the default: every round faults its pages in
    said, kept = _page_faults("cpu_malloc_settings(on_gpu=False, env={})")
    assert said is True and kept[0] >= pages * 0.9 and max(kept[1:]) < pages / 100, kept  # the interpreter's own: 0-1
    for left_alone in ("cpu_malloc_settings(on_gpu=True, env={})",
                       "cpu_malloc_settings(on_gpu=False, env={'MALLOC_TRIM_THRESHOLD_': '131072'})",
                       "cpu_malloc_settings(on_gpu=False, env={'GLIBC_TUNABLES': 'glibc.malloc.perturb=0'})",
                       "cpu_malloc_settings(on_gpu=False, env={'LD_PRELOAD': '/usr/lib/libjemalloc.so.2'})"):
        said, faults = _page_faults(left_alone)
        assert said is False and all(f >= pages * 0.9 for f in faults), (left_alone, faults)


def test_a_sweep_shares_cores_as_its_largest_layout_does(tmp_path):
    from hvdbench.sweep.build import build_spec
    from hvdbench.sweep.options import SweepOptions
    from hvdbench.sweep.spec import thread_share

    def share(*train, hosts="localhost:4", **kw):
        return thread_share(build_spec(SweepOptions(tmp_path / "s", "resnet50", ("--flavor", "debug", "--synthetic",
                                                                                  *train), hosts=hosts, **kw)))

    assert share() == 4  # 1x1, 1x2, 1x4 on one machine: every rank gets a quarter of it
    assert share(layouts="1x1,1x2") == 2
    assert share("--threads", "1") == 0  # the user's own choice is left alone
    assert share(env={"OMP_NUM_THREADS": "2"}) == 0
    s = build_spec(SweepOptions(tmp_path / "t", "resnet50", ("--flavor", "debug", "--synthetic"), hosts="localhost:4",
                                layouts="1x1,1x2"))
    assert {e.train.thread_share for e in s.entries} == {2}  # what each run's config records


@pytest.mark.parametrize("version, said", [
    ("2.16.0", "[hvdbench] warning: PyTorch 2.16.0 (OUTSIDE the tested range, 2.11 to 2.15: hvdbench may break or "
               "measure differently)\n"),
    ("2.10.1", "[hvdbench] warning: PyTorch 2.10.1 (OUTSIDE the tested range"),
    ("local-build", "[hvdbench] warning: PyTorch 'local-build' (not a version hvdbench can read"),
    ("2.13.0", ""),
])
def test_train_warns_once_of_a_pytorch_outside_the_tested_range(capsys, version, said):
    """Issue 57 case 9: `train` under a torch outside the tested range said nothing (only `env` did). The
    ranks' Dist as torch_versions() fills it (no torch outside the range is installed here to run)."""
    from hvdbench.train import worker

    for rank in (0, 1):
        worker._check_torch_release(SimpleNamespace(rank=rank, versions={"torch": version, "horovod": "0.28.1"}))
    out = capsys.readouterr().out
    assert out.startswith(said) and out.count("warning") == (1 if said else 0)  # rank 0 only
    worker._check_torch_release(SimpleNamespace(rank=0, versions={"tensorflow": "2.21.0"}))  # no torch: nothing
    assert capsys.readouterr().out == ""
