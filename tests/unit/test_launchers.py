"""Launch commands: the exact argv of each launcher and controller, the sbatch script, and the runner
that starts them (real processes: timeouts, interrupts and a killed parent leave nothing behind)."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from horovod.runner.common.util.hosts import SlotInfo
from horovod.runner.gloo_run import _slot_info_to_command_fn, get_run_command

from hvdbench.errors import ConfigError, HvdbenchError
from hvdbench.launchers import (Job, build, forwarded_names, guard, horovodrun, launch_env, mpirun,
                                slurm, srun, worker_argv)
from hvdbench.topology import Layout

RUN = Path("/r/1x2-r1")
WORKER = ("/venv/bin/hvdbench", "train", "resnet50", "--out", "/r/1x2-r1")


def job(layout, **kw):
    return Job(layout, WORKER, RUN, **kw)


TWO_NODES = Layout(2, 4, ("node1", "node2"))


# --- argv ------------------------------------------------------------------------------------

def test_horovodrun_gloo():
    argv, env = horovodrun.build(job(TWO_NODES), {"A": "1"}, binary="horovodrun")
    assert argv == ["horovodrun", "-np", "8", "-H", "node1:4,node2:4", "--gloo",
                    "--output-filename", "/r/1x2-r1/logs", *WORKER]
    assert env == {"A": "1"}  # horovodrun forwards its whole environment itself


def test_horovodrun_mpi_and_extra_args():
    argv, _ = horovodrun.build(job(TWO_NODES, controller="mpi", launcher_args=("--verbose",)), {},
                               binary="/venv/bin/horovodrun")
    assert argv == ["/venv/bin/horovodrun", "-np", "8", "-H", "node1:4,node2:4", "--mpi",
                    "--output-filename", "/r/1x2-r1/logs", "--verbose", *WORKER]


def test_horovodrun_gloo_single_process_has_no_output_filename():
    # Horovod 0.28.1's Gloo launcher crashes padding rank numbers for one process (log10(0)).
    argv, _ = horovodrun.build(job(Layout(1, 1, ("localhost",))), {}, binary="horovodrun")
    assert argv == ["horovodrun", "-np", "1", "-H", "localhost:1", "--gloo", *WORKER]
    argv, _ = horovodrun.build(job(Layout(1, 1, ("localhost",)), controller="mpi"), {}, binary="horovodrun")
    assert "--output-filename" in argv


def test_no_environment_variable_name_reaches_horovodruns_shell(tmp_path):
    # horovodrun writes every variable into a /bin/sh line, the value quoted, the name not: the line
    # Horovod's own Gloo launcher builds from what build() hands it must run the worker, not a name.
    marker = tmp_path / "ran"
    env = {"PATH": os.environ["PATH"], "A(B)": "1", f"X;touch {marker};Y": "1", "OK": "it's; fine"}
    _, got = horovodrun.build(job(Layout(1, 2, ("localhost",))), env, binary="horovodrun")
    assert got == {"PATH": os.environ["PATH"], "OK": "it's; fine"}
    worker = get_run_command(["sh", "-c", "test \"$OK\" = \"it's; fine\""], "127.0.0.1", ["lo"], 1234)
    line = _slot_info_to_command_fn(worker, got)(SlotInfo("localhost", 0, 0, 0, 1, 1, 1))
    assert subprocess.run(["/bin/sh", "-c", line]).returncode == 0
    assert not marker.exists()
    # --mpi puts the log folder into mpirun's shell line as it is: it goes shell-quoted
    argv, _ = horovodrun.build(Job(TWO_NODES, WORKER, Path("/r/a b;c"), controller="mpi"), {})
    assert argv[argv.index("--output-filename") + 1] == "'/r/a b;c/logs'"
    # Its own options' values go into the line as given too: shell syntax in them is refused, up front.
    with pytest.raises(HvdbenchError) as e:
        horovodrun.build(job(TWO_NODES, controller="mpi", launcher_args=(f"--mpi-args=x;touch {marker}",)), {})
    assert str(e.value).startswith(f"--launcher-arg '--mpi-args=x;touch {marker}': horovodrun passes its options "
                                   "to /bin/sh unquoted")
    horovodrun.build(job(TWO_NODES, controller="mpi", launcher_args=("--mpi-args=--mca btl tcp,self",)), {})
    # The sweep says which variables its ranks will not get, and why.
    proc = subprocess.run([str(Path(sys.executable).parent / "hvdbench"), "sweep", "resnet50", "--hosts",
                           "localhost:1", "--dry-run", "--out", str(tmp_path / "sw"), "--", "--synthetic"],
                          env={**os.environ, "A(B)": "1"}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "warning: environment variable(s) 'A(B)' not passed to the ranks: not shell variable names, and " \
           "horovodrun writes names into a shell command" in proc.stdout.splitlines()


def test_horovodrun_rejects_unknown_controller():
    with pytest.raises(ValueError, match="controller"):
        horovodrun.build(job(TWO_NODES, controller="nccl"), {})


def test_mpirun_forwards_the_environment_the_worker_needs():
    env = {"PATH": "/bin", "HOME": "/root", "LD_LIBRARY_PATH": "/lib", "HVDBENCH_INJECT_FAULT": "crash",
           "NCCL_DEBUG": "INFO", "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "MY_VAR": "x", "SECRET": "not forwarded"}
    argv, out_env = mpirun.build(job(TWO_NODES, forward=("MY_VAR", "UNSET_VAR")), env, binary="mpirun")
    assert argv == ["mpirun", "-np", "8", "-H", "node1:4,node2:4", "--map-by", "ppr:4:node",
                    "--bind-to", "none",
                    "-x", "PATH", "-x", "LD_LIBRARY_PATH", "-x", "OMPI_ALLOW_RUN_AS_ROOT",
                    "-x", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "-x", "HVDBENCH_INJECT_FAULT",
                    "-x", "NCCL_DEBUG", "-x", "MY_VAR",
                    "--output-filename", "/r/1x2-r1/logs", *WORKER]
    assert out_env == env


def test_forwarded_names_are_unique_and_only_set_ones():
    env = {"PATH": "/bin", "HVDBENCH_A": "1", "HOROVOD_TIMELINE": "t"}
    assert forwarded_names(env, ("PATH", "HVDBENCH_A", "NOT_SET")) == ["PATH", "HOROVOD_TIMELINE", "HVDBENCH_A"]


def test_srun_inside_an_allocation():
    argv, _ = srun.build(job(TWO_NODES, launcher_args=("--mpi=pmi2",)), {}, binary="srun")
    assert argv == ["srun", "--nodes", "2", "--ntasks-per-node", "4", "--ntasks", "8",
                    "--nodelist", "node1,node2", "--mpi=pmix", "--kill-on-bad-exit=1", "--export=ALL",
                    "--output", "/r/1x2-r1/logs/rank.%t.out", "--error", "/r/1x2-r1/logs/rank.%t.err",
                    "--mpi=pmi2", *WORKER]
    argv, _ = srun.build(job(Layout(2, 4)), {}, binary="srun")  # nodes chosen by Slurm
    assert "--nodelist" not in argv


def test_build_dispatches_and_refuses_slurm():
    argv, _ = build("mpirun", job(TWO_NODES), {})
    assert Path(argv[0]).name == "mpirun" and argv[1:3] == ["-np", "8"]
    with pytest.raises(ValueError):
        build("slurm", job(TWO_NODES), {})


def test_argv_elements_are_plain_strings_with_no_shell():
    for mod in (horovodrun, mpirun, srun):
        argv, _ = mod.build(job(TWO_NODES), {"PATH": "/bin"})
        assert all(isinstance(a, str) for a in argv)


def test_worker_is_the_venvs_hvdbench_by_absolute_path():
    argv = worker_argv("bert", ["--synthetic"])
    assert argv == [str(Path(sys.executable).parent / "hvdbench"), "train", "bert", "--synthetic"]
    assert Path(argv[0]).is_absolute() and Path(argv[0]).exists()


def test_launch_env_sets_open_mpi_root_switches_only_for_root():
    base = {"PATH": "/bin"}
    assert launch_env({}, base=base, euid=1000) == {"PATH": "/bin"}
    assert launch_env({"X": "1"}, base=base, euid=0) == {
        "PATH": "/bin", "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "X": "1"}
    assert launch_env({"OMPI_ALLOW_RUN_AS_ROOT": "0"}, base=base, euid=0)["OMPI_ALLOW_RUN_AS_ROOT"] == "0"


# --- Slurm -----------------------------------------------------------------------------------

def render_example(**kw):
    args = dict(command=["/venv/bin/hvdbench", "sweep", "resnet50", "--layouts", "2x4", "--",
                         "--data", "/data/my images"],
                job_name="hvd-demo-2x4", time_limit="01:30:00", output=Path("/res/demo/slurm/2x4-%j.out"),
                script=Path("/res/demo/slurm/2x4.sub"), store=Path("/res/demo/runs.csv"))
    gpus = kw.pop("gpus", True)
    args.update(kw)
    return slurm.render(slurm.load_template(), Layout(2, 4), slurm.SlurmJob(**args), gpus=gpus)


def test_sbatch_script_renders_exactly():
    assert render_example() == """#!/bin/bash
# One layout of an hvdbench sweep as one Slurm job, rendered by `hvdbench sweep --launcher slurm`
# from launch/slurm/run.sub with Python's string.Template (values that reach the shell are quoted
# with shlex.quote, values on #SBATCH lines are validated). Submit with `sbatch /res/demo/slurm/2x4.sub`, or let
# `hvdbench sweep ... --launcher slurm --submit` do it.
#
# Inside the allocation the sweep runs again with `--launcher srun`: it reads the hosts from the
# allocation, runs every repeat of this layout with its timeout, and appends one row per run to
# /res/demo/runs.csv (appends from concurrent layout jobs are serialised by a lock in that directory).
# 60 s before the time limit Slurm sends SIGUSR1 to the sweep (the batch shell execs it): the run in
# flight is ended and recorded as timed out. scancel (or preemption) sends SIGTERM: the run in flight
# is ended and left unrecorded, and the next submission of the same script reruns it; a job requeued
# by Slurm (sbatch --requeue) resumes the same way.
#SBATCH --job-name=hvd-demo-2x4
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --time=01:30:00
#SBATCH --output=/res/demo/slurm/2x4-%j.out
#SBATCH --exclusive
#SBATCH --signal=B:USR1@60

set -euo pipefail
exec /venv/bin/hvdbench sweep resnet50 --layouts 2x4 -- --data '/data/my images'
"""


def test_a_cluster_without_gpu_gres_gets_no_gpu_request():
    text = render_example(gpus=False)
    assert "#SBATCH --gpus-per-node" not in text and "#SBATCH --ntasks-per-node=4\n" in text


def test_gpu_gres_is_asked_of_the_slurm_there_is(tmp_path):
    def fake_sinfo(output, code=0):
        path = tmp_path / f"sinfo{code}{len(output)}"
        path.write_text(f"#!/bin/sh\nprintf '{output}'\nexit {code}\n")
        path.chmod(0o755)
        return str(path)
    assert slurm.schedules_gpus(fake_sinfo("(null)\\n")) is False
    assert slurm.schedules_gpus(fake_sinfo("gpu:h100:8(S:0-1)\\n")) is True
    assert slurm.schedules_gpus(fake_sinfo("", code=1)) is True  # no answer: scripts for a GPU cluster
    assert slurm.schedules_gpus(None) is True


def test_shell_metacharacters_are_quoted_in_the_command():
    text = render_example(command=["hvdbench", "train", "--data", "$(rm -rf /); `x`\nnext"])
    assert "exec hvdbench train --data '$(rm -rf /); `x`\nnext'\n" in text


@pytest.mark.parametrize("field, value, message", [
    ("job_name", "bad name", "job name"),
    ("time_limit", "2 hours", "Slurm time"),
    ("output", Path("/res/with space/x.out"), "output path"),
    ("script", Path("/res/x\n#SBATCH --uid=0/x.sub"), "script path"),
    ("store", Path("/res/$HOME/runs.csv"), "run store path"),
])
def test_values_on_sbatch_lines_are_validated(field, value, message):
    with pytest.raises(ConfigError, match=message):
        render_example(**{field: value})


def test_template_errors(tmp_path):
    with pytest.raises(ConfigError, match="unknown field"):
        slurm.render("${nope}", Layout(1, 1), slurm.SlurmJob(command=["x"], job_name="j", time_limit="1:00",
                                                             output=Path("/o"), script=Path("/s"),
                                                             store=Path("/r")))
    with pytest.raises(ConfigError, match="cannot read Slurm template"):
        slurm.load_template(tmp_path / "missing.sub")


def test_sbatch_argv():
    assert slurm.sbatch_argv(Path("/res/s/2x4.sub")) == ["sbatch", "--parsable", "/res/s/2x4.sub"]
    assert slurm.sbatch_argv(Path("/s.sub"), ("--partition=gpu", "--account", "ml")) == [
        "sbatch", "--parsable", "--partition=gpu", "--account", "ml", "/s.sub"]


# --- the runner: real processes --------------------------------------------------------------

# A launcher-like tree: a child in a session of its own (as horovodrun's middlemen are) and one
# in the launcher's group; the launcher prints and then waits (or exits with $EXIT right away).
TREE = """
import os, subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True),
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])]
print("tree", " ".join(str(k.pid) for k in kids), flush=True)
if os.environ.get("EXIT"):
    sys.exit(int(os.environ["EXIT"]))
time.sleep(300)
"""


def tree_pids(tmp_path):
    text = (tmp_path / "launch.log").read_text()
    return [int(p) for p in text.split("tree ", 1)[1].split("\n", 1)[0].split()]


def gone(pids, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        if not left:
            return True
        time.sleep(0.05)
    return False


def group_members(pgid):
    found = []
    for p in psutil.pids():
        try:
            if os.getpgid(p) == pgid and psutil.Process(p).status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    return found


@pytest.mark.timeout(60)
def test_runner_normal_exit_records_outcome_and_ends_stragglers(tmp_path):
    out = guard.run([sys.executable, "-c", TREE], {**os.environ, "EXIT": "3"}, tmp_path / "launch.log",
                    tmp_path / "launch.json", grace_s=1)
    assert (out.status, out.returncode, out.leftover) == ("exited", 3, [])
    assert gone(tree_pids(tmp_path))  # the launcher exited; its helpers were ended too
    record = json.loads((tmp_path / "launch.json").read_text())
    assert record["status"] == "exited" and record["pgid"] == out.pgid and record["pid"] == out.pid
    assert guard.read_outcome(tmp_path / "launch.json") == out


@pytest.mark.timeout(60)
def test_runner_timeout_kills_the_whole_tree(tmp_path):
    out = guard.run([sys.executable, "-c", TREE], dict(os.environ), tmp_path / "launch.log",
                    tmp_path / "launch.json", timeout=2, grace_s=1)
    assert out.status == "timeout" and out.returncode is None and out.leftover == []
    pids = tree_pids(tmp_path)
    record = json.loads((tmp_path / "launch.json").read_text())
    assert set(pids) <= {int(p) for p in record["descendants"]}  # the setsid child was recorded
    assert gone(pids + [out.pid])
    assert group_members(out.pgid) == []
    assert "timeout after 2 s" in (tmp_path / "launch.log").read_text()


def wait_for_tree(tmp_path, timeout=30.0):
    """Until the launcher's tree has started (it prints its pids first)."""
    log = tmp_path / "launch.log"
    deadline = time.monotonic() + timeout
    while "tree " not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, "the tree never started"
        time.sleep(0.05)


@pytest.mark.timeout(60)
def test_runner_interrupted_caller_ends_the_run(tmp_path):
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    def once_running():  # the caller is interrupted while its run is under way, as soon as it is
        wait_for_tree(tmp_path)
        os.kill(os.getpid(), signal.SIGALRM)

    old = signal.signal(signal.SIGALRM, interrupt)
    threading.Thread(target=once_running, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            guard.run([sys.executable, "-c", TREE], dict(os.environ), tmp_path / "launch.log",
                      tmp_path / "launch.json", grace_s=1)
    finally:
        signal.signal(signal.SIGALRM, old)
    record = guard.read_outcome(tmp_path / "launch.json")
    assert record.status == "interrupted" and record.leftover == []
    assert gone(tree_pids(tmp_path) + [record.pid])


PARENT = """
import sys
from pathlib import Path
from hvdbench.launchers import guard
guard.run([sys.executable, "-c", sys.argv[1]], {}, Path(sys.argv[2]) / "launch.log", Path(sys.argv[2]) / "launch.json")
"""


@pytest.mark.timeout(60)
def test_runner_parent_killed_with_sigkill_leaves_nothing(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", PARENT, TREE, str(tmp_path)], env={**os.environ})
    try:
        wait_for_tree(tmp_path)
        pids = tree_pids(tmp_path)
        parent.kill()  # SIGKILL: the parent cannot clean up; the guard's parent-death signal does
        parent.wait()
        assert gone(pids, timeout=20)
        deadline = time.monotonic() + 20
        while (record := guard.read_outcome(tmp_path / "launch.json")) is None:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert record.status == "interrupted" and record.leftover == []
        assert gone([record.pid, record.pgid])
    finally:
        if parent.poll() is None:
            parent.kill()


LAUNCHER = """
import subprocess, sys, time
rank = subprocess.Popen([sys.executable, "-c", "import time; from hvdbench.launchers.guard import die_with_parent; "
                         "die_with_parent(); print('armed', flush=True); time.sleep(300)"])
print("tree", rank.pid, flush=True)
time.sleep(300)
"""
OWN_ENV_PARENT = PARENT.replace("{}", "dict(os.environ)").replace("import sys", "import os, sys")


@pytest.mark.timeout(60)
def test_a_launcher_ends_when_its_guard_and_sweep_are_both_killed(tmp_path):
    # The OOM killer or a closed login shell kills the sweep and its guard alike (SIGKILL): neither
    # cleans up, and torchrun with its ranks trained on to the end, unsupervised, with no row.
    parent = subprocess.Popen([sys.executable, "-c", OWN_ENV_PARENT, LAUNCHER, str(tmp_path)], env={**os.environ})
    try:
        wait_for_tree(tmp_path)
        deadline = time.monotonic() + 30
        while "armed" not in (tmp_path / "launch.log").read_text():  # the rank asked to end with its launcher
            assert time.monotonic() < deadline
            time.sleep(0.05)
        rank = tree_pids(tmp_path)[0]
        record = json.loads((tmp_path / "launch.json").read_text())
        launcher, guard_pid = record["pid"], record["guard_pid"]
        assert psutil.Process(rank).ppid() == launcher
        os.kill(guard_pid, signal.SIGKILL)
        parent.kill()
        parent.wait()
        assert gone([guard_pid, launcher, rank], timeout=20)
    finally:
        if parent.poll() is None:
            parent.kill()


@pytest.mark.timeout(60)
def test_reap_stale_ends_survivors_of_a_recorded_run(tmp_path):
    # A run recorded by a guard that was itself SIGKILLed: reap_stale ends its process tree.
    survivor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    try:
        ctime = psutil.Process(survivor.pid).create_time()
        (tmp_path / "launch.json").write_text(json.dumps(
            {"pgid": survivor.pid, "create_time": ctime, "pid": survivor.pid,
             "descendants": {str(survivor.pid): ctime}}))
        assert guard.read_outcome(tmp_path / "launch.json") is None  # no outcome: cut off
        assert guard.reap_stale(tmp_path / "launch.json", grace_s=1) == [survivor.pid]
        assert gone([survivor.pid])
    finally:
        if survivor.poll() is None:
            survivor.kill()


def test_runner_missing_program_is_an_exit_status(tmp_path):
    out = guard.run(["/no/such/launcher"], dict(os.environ), tmp_path / "launch.log", tmp_path / "launch.json")
    assert (out.status, out.returncode) == ("exited", 127)
    assert "cannot run /no/such/launcher" in (tmp_path / "launch.log").read_text()


def test_capture():
    assert guard.capture([sys.executable, "-c", "print('gpu01')"]) == "gpu01\n"
    with pytest.raises(HvdbenchError, match="command not found"):
        guard.capture(["/no/such/scontrol"])
    with pytest.raises(HvdbenchError, match="exited 2: boom"):
        guard.capture([sys.executable, "-c", "import sys; sys.stderr.write('boom\\n'); sys.exit(2)"])


CHILD = """
import sys, time
from hvdbench.launchers.guard import die_with_parent
print("child", die_with_parent(), flush=True)
time.sleep(300)
"""


@pytest.mark.timeout(60)
def test_die_with_parent_ends_a_worker_whose_parent_dies(tmp_path):
    # What a rank started over ssh looks like when its session dies: its parent goes away.
    log = tmp_path / "out"
    parent = subprocess.Popen([sys.executable, "-c",
                               f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {CHILD!r}],"
                               f" stdout=open({str(log)!r}, 'w')); time.sleep(300)"])
    try:
        deadline = time.monotonic() + 30
        while not log.exists() or "child" not in log.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert log.read_text() == "child True\n"
        [child] = psutil.Process(parent.pid).children()
        parent.kill()
        parent.wait()
        assert gone([child.pid])
    finally:
        if parent.poll() is None:
            parent.kill()


def test_wait_gone_counts_a_zombie_as_exited_and_returns_what_still_runs():
    """A process that has exited but is not yet reaped (a zombie: here our own unreaped child, on a
    cluster node an orphan init has not collected) is gone for `guard.wait_gone`, so `cluster down` and
    the sweep's clean-up never wait out their timeout for it; a running process is returned."""
    exited = subprocess.Popen(["sleep", "30"])
    running = subprocess.Popen(["sleep", "30"])
    try:
        exited.kill()
        zombie = psutil.Process(exited.pid)
        while zombie.status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.01)
        assert guard.wait_gone([zombie, psutil.Process(running.pid)], 0.2) == [psutil.Process(running.pid)]
        assert guard.wait_gone([zombie], 30) == []
    finally:
        running.kill()
        running.wait()
        exited.wait()
