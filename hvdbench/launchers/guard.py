"""Where hvdbench runs launch commands (a sweep's runs and benches) and short queries (sbatch,
scontrol): run one, capture its output, enforce a timeout, and leave nothing behind.

    outcome = run(argv, env, log=run_dir / "launch.log", record=run_dir / "launch.json", timeout=600)
    outcome.status      # "exited" | "timeout" | "interrupted"; .returncode, .pid, .pgid, .wall_s
    capture(["scontrol", "show", "hostnames", "node[1-4]"])   # a short query: its stdout

Each launch runs under a small *guard* process (`python -m hvdbench.launchers.guard guard ...`),
started in a new session, so the guard, the launcher and everything they fork share one process
group that is neither the sweep's nor the terminal's. The guard:
- starts the launcher and records its descendants by pid and creation time while it runs (some
  launchers move helpers into sessions of their own: horovodrun's per-rank "middleman" processes
  call setsid), saving them in `record` (launch.json); it is a "child subreaper" (Linux
  PR_SET_CHILD_SUBREAPER), so a helper orphaned by its parent becomes the guard's child instead of
  init's and is still found;
- on timeout, or on SIGTERM/SIGINT/SIGHUP, sends SIGTERM to every member of the group and every
  recorded descendant, SIGKILL to whatever is left after a grace period, checks that nothing is
  left, and writes the outcome into `record`;
- asks the kernel for SIGTERM when the sweep dies (Linux PR_SET_PDEATHSIG), so even a sweep killed
  with SIGKILL, which cannot clean up, leaves nothing running; and asks the same for the launcher
  when the guard dies, so a guard killed with SIGKILL too (the OOM killer, a closed login shell)
  still ends the launcher, whose ranks end with it (`die_with_parent`).
Processes are only ever signalled by recorded pid and creation time (or group id), never by name.
`reap_stale(record)` ends any survivor of an earlier sweep before a resumed sweep reruns that run.
Ranks on other hosts are out of the guard's reach: MPI's daemons end them with mpirun, and a worker
started over ssh ends with its session if it calls `die_with_parent()` at start.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping

from hvdbench.errors import HvdbenchError
from hvdbench.files import open_no_link

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
PR_SET_CHILD_SUBREAPER = 36


@dataclass
class Outcome:
    status: str  # "exited" | "timeout" | "interrupted"
    returncode: int | None  # the launcher's exit status (None: it was ended by the guard)
    pid: int  # the launcher's pid
    pgid: int  # the run's process group (the guard's pid)
    wall_s: float
    leftover: list[int] = field(default_factory=list)  # pids alive after cleanup (none expected)


def run(argv: list[str], env: Mapping[str, str], log: Path, record: Path, *,
        timeout: float | None = None, grace_s: float = 10.0) -> Outcome:
    """Run `argv` to completion (or `timeout` seconds) under a guard; stdout and stderr go to `log`.
    An exception in the caller while waiting (the sweep's SIGTERM/SIGINT handler raises one) ends
    the run's whole process tree before it propagates."""
    guard = [sys.executable, "-m", "hvdbench.launchers.guard", "guard", "--parent", str(os.getpid()),
             "--record", str(record), "--timeout", str(timeout or 0), "--grace", str(grace_s),
             "--", *map(str, argv)]
    log.parent.mkdir(parents=True, exist_ok=True)
    record.unlink(missing_ok=True)
    start = time.monotonic()
    with open_no_link(log, "wb") as out:
        proc = subprocess.Popen(guard, env=dict(env), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        proc.wait()
    except BaseException:
        proc.send_signal(signal.SIGTERM)  # the guard ends the tree, then exits
        try:
            proc.wait(timeout=grace_s + 15)
        except subprocess.TimeoutExpired:
            reap_stale(record)
            proc.kill()
            proc.wait()
        raise
    outcome = read_outcome(record)
    if outcome is None:  # the guard itself died before reporting: clean up after it
        data = _read_record(record)
        leftover = reap_stale(record)
        return Outcome("exited", proc.returncode, data.get("pid", proc.pid), proc.pid,
                       time.monotonic() - start, leftover)
    return outcome


def read_outcome(record: Path) -> Outcome | None:
    """The outcome a guard wrote into `record`; None while the run is going on or when the guard
    never finished (killed with SIGKILL itself)."""
    data = _read_record(record)
    try:
        return Outcome(data["status"], data["returncode"], data["pid"], data["pgid"],
                       data["wall_s"], data["leftover"])
    except KeyError:
        return None


def capture(argv: list[str], timeout: float = 60) -> str:
    """stdout of a short query command (`scontrol show hostnames`, `sbatch --parsable`)."""
    argv = [str(a) for a in argv]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise HvdbenchError(f"{argv[0]}: command not found") from None
    except subprocess.TimeoutExpired:
        raise HvdbenchError(f"{' '.join(argv)}: no answer in {timeout:.0f} s") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise HvdbenchError(f"{' '.join(argv)} exited {proc.returncode}: {last}")
    return proc.stdout


def reap_stale(record: Path, grace_s: float = 5.0) -> list[int]:
    """End whatever is still running of the run recorded in `record`; returns those pids."""
    data = _read_record(record)
    try:
        tracked = {int(p): float(t) for p, t in data["descendants"].items()}
        pgid, since = int(data["pgid"]), float(data["create_time"])
    except (KeyError, ValueError, TypeError):
        return []
    found = sorted(alive(pgid, tracked, since))
    if found:
        terminate(pgid, tracked, since, grace_s)
    return found


def _read_record(record: Path) -> dict:
    try:
        return json.loads(Path(record).read_text())
    except (OSError, ValueError):
        return {}


# --- finding and ending a run's processes ----------------------------------------------------

def alive(pgid: int, tracked: Mapping[int, float], since: float, exclude: int | None = None) -> dict:
    """Running processes of a run: members of its process group created since it started, and
    recorded descendants whose creation time still matches (so a reused pid is never touched)."""
    import psutil

    procs = {}
    for pid, ctime in tracked.items():
        try:
            p = psutil.Process(pid)
            if abs(p.create_time() - ctime) < 0.05 and p.status() != psutil.STATUS_ZOMBIE:
                procs[pid] = p
        except psutil.NoSuchProcess:
            pass
    for p in psutil.process_iter(["create_time"]):
        try:
            if (p.pid not in procs and os.getpgid(p.pid) == pgid
                    and p.info["create_time"] >= since - 0.05 and p.status() != psutil.STATUS_ZOMBIE):
                procs[p.pid] = p
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    procs.pop(exclude, None)
    return procs


def terminate(pgid: int, tracked: dict[int, float], since: float, grace_s: float = 10.0,
              exclude: int | None = None) -> list[int]:
    """SIGTERM every process of the run, SIGKILL what is left after `grace_s`; returns the pids
    still alive afterwards (empty: nothing left). Signals go to each process by pid (not killpg),
    so the guard (`exclude`) can stay alive to report."""
    import psutil

    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0), (signal.SIGKILL, 5.0)):
        procs = alive(pgid, tracked, since, exclude)
        for p in list(procs.values()):  # children forked since the last look are the run's too
            try:
                for child in p.children(recursive=True):
                    tracked.setdefault(child.pid, child.create_time())
                    procs.setdefault(child.pid, child)
            except psutil.NoSuchProcess:
                pass
        procs.pop(exclude, None)
        if not procs:
            return []
        for p in procs.values():
            try:
                p.send_signal(sig)  # psutil refuses if the pid now names another process
            except psutil.NoSuchProcess:
                pass
        wait_gone(list(procs.values()), wait_s)
    return sorted(alive(pgid, tracked, since, exclude))


def wait_gone(procs: list, timeout_s: float) -> list:
    """Wait until every psutil process in `procs` has exited, at most `timeout_s`; returns those
    still running. A zombie counts as exited: psutil.wait_procs waits until an orphan is reaped, and
    init reaps late on some machines (2 s per process on this project's microVMs, where pid 1 is
    not a real init), so a `cluster down` of six daemons took 12 s for nothing."""
    import psutil

    def running(p) -> bool:
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + timeout_s
    left = [p for p in procs if running(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if running(p)]
    return left


# --- the guard (runs as its own process) -----------------------------------------------------

class _Stop(Exception):
    pass


def _prctl(option: int, value: int) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        print(f"hvdbench: prctl({option}, {value}) failed (errno {ctypes.get_errno()})", file=sys.stderr)
        return False
    return True


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send `sig` to this process when its parent dies (Linux).

    For a worker started over ssh (horovodrun's Gloo controller on other nodes): when the launcher
    is ended, its ssh client dies and the remote `sshd: notty` session exits, but the rank it
    started is only re-parented, not signalled, and would run on. A worker that calls this at
    start ends with its parent instead. Returns False when the parent is already gone."""
    parent = os.getppid()
    return _prctl(PR_SET_PDEATHSIG, sig) and os.getppid() == parent


def _guard(parent: int, record: Path, timeout: float, grace_s: float, argv: list[str]) -> int:
    import psutil

    from hvdbench.files import atomic_write_text

    # The kernel sends SIGTERM when the sweep dies, however it dies (SIGKILL included). Checked
    # after the request, in case the sweep died just before it.
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    if os.getppid() != parent:
        return 143

    stop = []

    def on_signal(signum, frame):
        if not stop:  # only the first one interrupts; the cleanup then runs to the end
            stop.append(signum)
            raise _Stop()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)

    me = os.getpid()
    since = psutil.Process(me).create_time()
    tracked: dict[int, float] = {}
    data = {"argv": argv, "guard_pid": me, "pgid": me, "create_time": since,
            "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if os.environ.get("SLURM_JOB_ID"):  # the Slurm job this run belongs to (sweep --launcher slurm)
        data["slurm_job_id"] = os.environ["SLURM_JOB_ID"]

    def save(**extra):
        data.update(extra)
        data["descendants"] = {str(p): t for p, t in tracked.items()}
        atomic_write_text(record, json.dumps(data, indent=1) + "\n")

    start = time.monotonic()
    status, returncode, proc = "exited", None, None
    try:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, preexec_fn=_ends_with_guard(me))
        except OSError as e:
            print(f"hvdbench: cannot run {argv[0]}: {e.strerror}", file=sys.stderr, flush=True)
            save(pid=me, status="exited", returncode=127, wall_s=0.0, leftover=[])
            return 0
        save(pid=proc.pid)
        _track(psutil, me, tracked, save)
        while True:
            try:
                returncode = proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                _track(psutil, me, tracked, save)
                if timeout and time.monotonic() - start > timeout:
                    status = "timeout"
                    print(f"hvdbench: timeout after {timeout:g} s: ending the run", file=sys.stderr,
                          flush=True)
                    break
    except _Stop:
        status = "interrupted"
        print(f"hvdbench: signal {stop[0]}: ending the run", file=sys.stderr, flush=True)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # finish the cleanup whatever else arrives
    # Also after a normal exit: a launcher can exit while helpers it started still linger (as our
    # children now: orphans come to the subreaper).
    _track(psutil, me, tracked, save)
    leftover = terminate(me, tracked, since, grace_s if status != "exited" else 2.0, exclude=me)
    if status == "interrupted" and proc is not None:
        proc.poll()  # reap it; an interrupted run has no meaningful exit status
    if leftover:
        print(f"hvdbench: processes left after SIGKILL: {leftover}", file=sys.stderr, flush=True)
    save(status=status, returncode=returncode, wall_s=time.monotonic() - start, leftover=leftover)
    return 0


def _ends_with_guard(guard_pid: int):
    """The launcher's preexec_fn: the kernel sends it SIGTERM when the guard dies, however it dies.
    A guard killed with SIGKILL beside its sweep (the OOM killer, a closed login shell's process
    group) cleans up nothing: torchrun, horovodrun or mpirun would train on, unsupervised, and their
    ranks with them (a rank ends with its launcher: `die_with_parent`, called by `hvdbench train`)."""
    def preexec() -> None:
        if not _prctl(PR_SET_PDEATHSIG, signal.SIGTERM) or os.getppid() != guard_pid:
            os._exit(143)  # the guard is already gone: nothing may run unsupervised
    return preexec


def _track(psutil, pid: int, tracked: dict[int, float], save) -> None:
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return
    new = False
    for child in children:
        try:
            if child.pid not in tracked:
                tracked[child.pid] = child.create_time()
                new = True
        except psutil.NoSuchProcess:
            pass
    if new:
        save()


def _main(args: list[str]) -> int:
    # python -m hvdbench.launchers.guard guard --parent PID --record FILE --timeout S --grace S -- ARGV
    try:
        sep = args.index("--")
        opts = dict(zip(args[1:sep:2], args[2:sep:2]))
        return _guard(int(opts["--parent"]), Path(opts["--record"]), float(opts["--timeout"]),
                      float(opts["--grace"]), args[sep + 1:])
    except (ValueError, KeyError, IndexError):
        print("usage: python -m hvdbench.launchers.guard guard --parent PID --record FILE "
              "--timeout S --grace S -- ARGV...", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
