"""How a run's failure is told (issue 50, item 17): a rank killed by a signal is named as such from
the launcher's own words, not rank 0's follow-on "connection reset"; a lone `train` ended by SIGTERM
says just that; rank 0 records a job's failure at once, naming the rank that left no note (issue 57
cases 2 and 14); an error every rank meets before the ranks meet is printed once; a rank stuck in its
start (a rendezvous that never answers) prints where, and waits on; `--attention varlen`
on a network without attention is refused by the sweep before it launches anything."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hvdbench.cli.main import cli
from hvdbench.launchers.guard import Outcome
from hvdbench.results.records.schema import RunResult, write_result
from hvdbench.sweep import record
from hvdbench.sweep import run as sweep_run
from hvdbench.sweep.plan import Entry
from hvdbench.topology import Layout
from hvdbench.train.worker import SILENT, STOPPED, JobFailure, Note, job_error, peer_lost

HVDBENCH = str(Path(sys.executable).parent / "hvdbench")

# The launchers' own lines when a rank died of SIGKILL (Open MPI 4's, torchrun's failure summary,
# horovodrun's Gloo runner, srun's), as each prints them.
KILLED = {
    "mpirun": "--------\nmpirun noticed that process rank 1 with PID 4321 on node n1 exited on signal 9 (Killed).\n",
    "torchrun": ("Root Cause (first observed failure):\n[0]:\n  time      : 2026-11-27_10:00:00\n  host      : n1\n"
                 "  rank      : 1 (local_rank: 1)\n  exitcode  : -9 (pid: 4321)\n  error_file: <N/A>\n"
                 "  traceback : Signal 9 (SIGKILL) received by PID 4321\n"),
    "horovodrun": ("RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus "
                   "causing the job to be terminated. The first process to do so was:\nProcess name: 1\n"
                   "Exit code: 137\n"),
    "srun": "srun: error: n1: task 1: Killed\n",
}


@pytest.mark.parametrize("launcher", list(KILLED))
def test_a_rank_killed_by_a_signal_is_the_runs_error_not_rank_0s_connection_reset(tmp_path, launcher):
    spec = sweep_run.SweepSpec(model="resnet50", out=tmp_path, entries=[Entry(Layout(1, 2, ("h",)))],
                               train_args=("--synthetic",))
    run = spec.runs[0]
    rdir = tmp_path / run.run_id
    (rdir / "logs" / "1" / "rank.0").mkdir(parents=True)
    (rdir / "logs" / "1" / "rank.0" / "stderr").write_text(
        "Error: rank 0 on n1: RuntimeError: Connection reset by peer (at gloo.py:12)\n")
    (rdir / "launch.log").write_text(KILLED[launcher])
    result = record.build_result(spec, run, rdir, Outcome("exited", 137, 1, 1, 4.0), "t0")
    assert result.status == "failed"
    assert result.error.startswith("rank 1 killed by signal 9 (SIGKILL) (exit status 137) | "), result.error
    assert "Connection reset" in result.error  # what followed is still there, after the cause


def test_a_rank_that_failed_without_a_signal_names_no_signal(tmp_path):
    assert record.killed_rank("mpirun noticed that process rank 1 with PID 5 on node n1 exited on signal 15 "
                              "(Terminated).") == "rank 1 killed by signal 15 (SIGTERM)"
    assert record.killed_rank("Process name: 1\nExit code: 1\n") == ""  # an exit status, not a signal
    assert record.killed_rank("Traceback ...\nValueError: x\n") == ""


LONE = """
import os, signal, sys, time
from hvdbench.train import worker
from hvdbench.train.config import resolve
cfg = resolve({"model": "resnet50", "flavor": "debug", "synthetic": True, "out": sys.argv[1], "run_id": "lone"})
worker._watch_sigterm(cfg, {"rank": 0, "host": "h", "t0": time.time()})
os.kill(os.getpid(), signal.SIGTERM)  # as `kill` or a shell's job control sends it
time.sleep(60)
"""


def clean_env(**extra):
    """This environment without any launcher's rank variables (a test may run under one), plus `extra`."""
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "HVDBENCH_LAUNCHER")
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not k.startswith(("OMPI_COMM_WORLD", "PMI", "PMIX", "HOROVOD_", "SLURM_"))}
    return {**env, "OMP_NUM_THREADS": "1", **extra}


def test_a_lone_train_ended_by_sigterm_is_recorded_as_that(tmp_path):
    proc = subprocess.run([sys.executable, "-c", LONE, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, env=clean_env(OMPI_ALLOW_RUN_AS_ROOT="1"))
    assert proc.returncode == 1
    assert proc.stderr.strip() == "Error: rank 0 on h: ended by SIGTERM"
    recorded = json.loads((tmp_path / "result.json").read_text())
    assert (recorded["status"], recorded["error"]) == ("failed", "rank 0 on h: ended by SIGTERM")


OWN = "rank 0 on n1: ended by SIGTERM"


def test_a_note_left_before_rank_0_failed_is_the_cause_and_later_ones_are_not():
    crash = Note(2, 10.0, "rank 2 on n3: RuntimeError: injected fault (at faults.py:45)")
    later = Note(1, 12.0, "rank 1 on n2: ValueError: x")
    failure = job_error(OWN, True, 11.0, [later, crash], 3, ["n1", "n2", "n3"])
    assert (failure.error, failure.silent, failure.complete) == (
        "rank 2 on n3: RuntimeError: injected fault (at faults.py:45); then rank 0 on n1: ended by SIGTERM", "", True)
    # A rank stopped by a peer's loss (its own follow-on) is never the cause, however early.
    follow = Note(2, 10.0, "rank 2 on n3: stopped because another rank failed", follow_on=True)
    assert job_error(OWN, True, 11.0, [follow], 3, ["n1", "n2", "n3"]).error == (
        f"rank 1 on n2 {SILENT}; then rank 0 on n1: ended by SIGTERM; rank 2: stopped because another rank failed")


def test_the_rank_that_left_no_note_is_named_with_its_host():
    stopped = [Note(r, 11.0, f"rank {r} on n{r + 1}: ended by SIGTERM", follow_on=True) for r in (2, 3)]
    failure = job_error(OWN, True, 11.0, stopped, 4, ["n1", "n2", "n3", "n4"])
    assert failure.error == f"rank 1 on n2 {SILENT}; then rank 0 on n1: ended by SIGTERM; ranks 2, 3: ended by SIGTERM"
    assert failure.silent == f"rank 1 on n2 {SILENT}" and not failure.complete  # rank 1 may still write
    # Killed before the ranks exchanged their hosts: the rank alone.
    assert job_error(OWN, True, 11.0, [], 2, []).error == f"rank 1 {SILENT}; then rank 0 on n1: ended by SIGTERM"
    # Every rank heard from: nothing more to wait for, no culprit invented.
    everyone = job_error(OWN, True, 11.0, [*stopped, Note(1, 11.0, "rank 1 on n2: ended by SIGTERM", follow_on=True)],
                         4, ["n1", "n2", "n3", "n4"])
    assert (everyone.error, everyone.silent, everyone.complete) == (
        "rank 0 on n1: ended by SIGTERM; ranks 1, 2, 3: ended by SIGTERM", "", True)


def test_rank_0_s_own_error_names_no_silent_rank():
    """Rank 0 failed by itself: the others are still running (no note yet), not dead."""
    own = "rank 0 on n1: ValueError: bad batch (at loop.py:3)"
    assert job_error(own, False, 11.0, [], 2, ["n1", "n2"]) == JobFailure(own)
    assert job_error(own, False, 11.0, [], 1, []).complete  # alone: nobody to wait for


def test_a_collective_s_error_for_a_lost_peer_is_a_follow_on():
    class HorovodInternalError(RuntimeError):
        pass

    gloo = RuntimeError("[/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:45492.")
    assert peer_lost(HorovodInternalError("Horovod has been shut down")) and peer_lost(gloo)
    assert not peer_lost(RuntimeError("injected fault")) and not peer_lost(ValueError("x"))


# Rank 0 or 1 of a job of SIZE ranks (rank 0 knows the hosts), ended by SIGTERM as mpirun ends it;
# rank 0 waits an hour for the other ranks' notes, so a record must come before the wait ends.
STOPPED_RANK = """
import os, signal, sys, time
from hvdbench.train import worker
from hvdbench.train.config import resolve
cfg = resolve({"model": "resnet50", "flavor": "debug", "synthetic": True, "out": sys.argv[1], "run_id": "job"})
worker.FIRST_FAILURE_WAIT_S = 3600
rank, size = int(sys.argv[2]), int(sys.argv[3])
worker._watch_sigterm(cfg, {"rank": rank, "size": size, "host": f"n{rank + 1}", "t0": time.time() - 1,
                            "hosts": [f"n{r + 1}" for r in range(size)]})
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(3600)
"""


def wait_for(check, what: str, proc):
    deadline = time.monotonic() + 60  # a generous bound on a loaded machine, not a measured time
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"no {what} within 60 s; stderr: {proc.communicate()[1]}")


def recorded_error(out: Path) -> str | None:
    try:
        return json.loads((out / "result.json").read_text())["error"]
    except (OSError, ValueError):
        return None


def test_rank_0_ended_by_sigterm_records_at_once_then_refines_as_notes_arrive(tmp_path):
    """Issue 57 case 2: under mpirun rank 0 waited for notes before writing, and mpirun's SIGKILL
    (a second after its SIGTERM) left no record at all."""
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", STOPPED_RANK, str(out), "0", "3"], stderr=subprocess.PIPE,
                            text=True, env=clean_env())
    try:
        first = wait_for(lambda: recorded_error(out), "record while rank 0 waits", proc)
        assert first == (f"rank 1 on n2, rank 2 on n3 {SILENT}; then rank 0 on n1: {STOPPED}")
        # Rank 2's note comes: the record is rewritten, and rank 1 alone stays unheard.
        (out / ".rank-failures").mkdir(exist_ok=True)
        (out / ".rank-failures" / "rank2.json").write_text(json.dumps(
            {"time": time.time(), "message": "rank 2 on n3: ended by SIGTERM", "follow_on": True}))
        refined = wait_for(lambda: (recorded_error(out) or "").endswith("rank 2: ended by SIGTERM")
                           and recorded_error(out), "rewritten record", proc)
        assert refined == f"rank 1 on n2 {SILENT}; then rank 0 on n1: {STOPPED}; rank 2: ended by SIGTERM"
        assert proc.poll() is None  # all of it before the wait ended
    finally:
        proc.kill()
        proc.wait()


def test_a_rank_ended_by_sigterm_leaves_a_note_at_once(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-c", STOPPED_RANK, str(out), "1", "2"], capture_output=True, text=True,
                          timeout=120, env=clean_env())
    assert proc.returncode == 1 and proc.stderr == ""  # not the job's cause: nothing printed
    note = json.loads((out / ".rank-failures" / "rank1.json").read_text())
    assert (note["message"], note["follow_on"]) == ("rank 1 on n2: ended by SIGTERM", True)
    assert not (out / "result.json").exists()  # rank 0's to write


STUCK = """
import sys
from hvdbench import frameworks
from hvdbench.train import worker
from hvdbench.train.config import resolve
frameworks.load("torch")  # imported first: the stacks are to show the rendezvous, not an import
worker.STUCK_START_S = 3.0
worker.main(resolve({"model": "resnet50", "flavor": "debug", "synthetic": True, "engine": "ddp", "out": sys.argv[1],
                     "run_id": "stuck"}))
"""


def test_a_rank_stuck_in_its_rendezvous_prints_where_and_goes_on(tmp_path):
    """Rank 1 of a torchrun job whose rank 0 never answers (a listener that takes the connection and says
    nothing): past STUCK_START_S the rank prints every thread's stack, the rendezvous in it, and waits on."""
    with socket.create_server(("127.0.0.1", 0)) as mute:
        env = clean_env(TORCHELASTIC_RUN_ID="t", RANK="1", LOCAL_RANK="1", WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(mute.getsockname()[1]))
        with open(tmp_path / "stderr", "w") as err, \
                subprocess.Popen([sys.executable, "-c", STUCK, str(tmp_path / "run")], stderr=err, env=env) as proc:
            try:
                wait_for(lambda: "Timeout (0:00:03)!" in (tmp_path / "stderr").read_text(), "the stacks", proc)
                time.sleep(1)  # the rest of the stacks
                assert proc.poll() is None  # printed, not ended: a slow start may yet succeed
            finally:
                proc.kill()
    stacks = (tmp_path / "stderr").read_text()
    assert stacks.count("Timeout (0:00:03)!") == 1 and "process_group.py" in stacks and "worker.py" in stacks


@pytest.mark.parametrize("rank, printed", [("0", True), ("1", False)])
def test_an_error_every_rank_meets_before_they_meet_is_printed_once(tmp_path, rank, printed):
    # torchrun's ranks cannot join Horovod's engine: each rank finds it before any collective
    env = clean_env(TORCHELASTIC_RUN_ID="t", RANK=rank, LOCAL_RANK=rank, WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                    MASTER_ADDR="127.0.0.1", MASTER_PORT="1")
    proc = subprocess.run([HVDBENCH, "train", "resnet50", "--flavor", "debug", "--synthetic", "--engine", "horovod",
                           "--out", str(tmp_path / "t")], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    if printed:
        assert len(lines) == 1 and lines[0].startswith("Error: torchrun starts torch.distributed ranks"), lines
    else:
        assert lines == [], lines


def test_varlen_attention_on_a_network_without_attention_is_refused_before_the_sweep_launches(tmp_path):
    result = CliRunner().invoke(cli, ["sweep", "resnet50", "--hosts", "localhost:2", "--out", str(tmp_path / "s"),
                                      "--", "--flavor", "debug", "--synthetic", "--attention", "varlen"])
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert line == ("Error: train arguments after --: --attention varlen: resnet50's network has no attention to "
                    "choose (BERT's has)")
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("lever, said", [
    (["--activation-checkpointing", "full"], "--activation-checkpointing full: resnet50's network has no decoder "
                                             "layers to recompute"),
    (["--loss-chunks", "4"], "--loss-chunks 4: resnet50's network has no vocabulary loss to chunk")])
def test_an_llm_lever_on_a_network_without_it_is_refused_before_the_sweep_launches(tmp_path, lever, said):
    """Issue 57 case 11: these launched and failed every run, and --dry-run listed them as valid."""
    for dry in ([], ["--dry-run"]):
        result = CliRunner().invoke(cli, ["sweep", "resnet50", "--hosts", "localhost:2", "--out", str(tmp_path / "s"),
                                          *dry, "--", "--flavor", "debug", "--synthetic", *lever])
        assert result.exit_code == 1, result.output
        [line] = result.stderr.strip().splitlines()
        assert line.startswith(f"Error: train arguments after --: {said}"), line
        assert not (tmp_path / "s").exists()


def test_a_count_past_32_bits_is_refused_in_one_line(tmp_path):
    """Issue 57 case 10: --loss-chunks 99999999999999999999 overflowed at the first step."""
    result = CliRunner().invoke(cli, ["train", "llama31_8b", "--flavor", "debug", "--synthetic", "--out",
                                      str(tmp_path / "t"), "--loss-chunks", "99999999999999999999"])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().splitlines()[-1] == \
        "Error: loss_chunks must be at most 2147483647, got 99999999999999999999"
    assert not (tmp_path / "t").exists()


def test_record_module_keeps_a_worker_s_own_success(tmp_path):
    spec = sweep_run.SweepSpec(model="resnet50", out=tmp_path, entries=[Entry(Layout(1, 1, ("h",)))],
                               train_args=("--synthetic",))
    run = spec.runs[0]
    (tmp_path / run.run_id).mkdir()
    write_result(tmp_path / run.run_id / "result.json", RunResult(model="resnet50", world_size=1, throughput=1.0))
    (tmp_path / run.run_id / "launch.log").write_text(KILLED["srun"])  # an exit 0 is a success, whatever the log
    assert record.build_result(spec, run, tmp_path / run.run_id, Outcome("exited", 0, 1, 1, 1.0), "t0").error == ""
