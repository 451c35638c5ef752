"""The sweep loop: run every planned (layout, repeat), record one row each, resume after a stop.

    spec = SweepSpec(model="resnet50", out=Path("results/demo"), entries=..., repeats=2, ...)
    dry_run(spec, console)       # the plan and the exact commands; runs nothing
    counts = run_sweep(spec, console)

The sweep directory (--out) holds:
    runs.csv                 one row per run, appended atomically (hvdbench.results.store)
    sweep.json               model and train arguments of the sweep; a resume must match them
    <run_id>/                one per run: hostfile, command.txt, layout.yaml (with a config),
                             launch.log (the launcher's output), logs/ (per-rank), launch.json
                             (pids, outcome), and the worker's result.json, mllog.txt, config.yaml
    <run_id>/attempts/<k>/   what an earlier, unrecorded attempt of the run left (kept, not reused)

Resume: a run with a row is done (success/aborted; failed/timeout too unless --retry-failed).
A run directory without a row is either an attempt that finished but was not appended yet (its
guard recorded the outcome in launch.json: the row is appended from it, nothing reruns) or one cut
off by a killed sweep: its files move to attempts/<k>/ and it runs again.

Concurrent sweeps in one directory (the per-layout Slurm jobs) are safe: a run is claimed with a
lock file (.locks/<run_id>.lock, released by the kernel even on SIGKILL) and appends are
serialised by .locks/runs.csv.lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import signal
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn,
                           TimeElapsedColumn)
from rich.table import Table
from rich.text import Text

from hvdbench import launchers
from hvdbench.errors import ConfigError
from hvdbench.launchers import runner
from hvdbench.results.schema import RunResult, atomic_write_text
from hvdbench.results.store import append_run, read_rows, read_runs
from hvdbench.sweep.plan import DONE, PlannedRun, interleave, latest_status, pending
from hvdbench.sweep.record import build_result
from hvdbench.topology import write_hostfile

# Train options the sweep sets for every run: not allowed after `--`.
SWEEP_OWNED = ("--out", "--run-id", "--sweep-name", "--repeat")


@dataclass
class SweepSpec:
    model: str
    out: Path
    entries: list  # plan.Entry
    repeats: int = 1
    name: str = ""  # default: the name of --out
    launcher: str = "horovodrun"
    controller: str = "gloo"
    timeout: float | None = None
    train_args: tuple[str, ...] = ()
    user_env: dict[str, str] = field(default_factory=dict)
    launcher_args: tuple[str, ...] = ()
    retry_failed: bool = False
    config_path: Path | None = None
    grace_s: float = 10.0
    allreduce_bench: str | None = None  # max message size: run `bench allreduce` once per layout

    def __post_init__(self):
        self.out = Path(self.out).absolute()
        self.name = self.name or self.out.name
        for arg in self.train_args:
            if arg.split("=", 1)[0] in SWEEP_OWNED:
                raise ConfigError(f"train argument {arg.split('=', 1)[0]} is set by the sweep for every run")

    @property
    def store(self) -> Path:
        return self.out / "runs.csv"

    @property
    def runs(self) -> list[PlannedRun]:
        return interleave(self.entries, self.repeats)

    @property
    def controller_name(self) -> str:
        return self.controller if self.launcher == "horovodrun" else "mpi"


class SweepInterrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum


# --- commands --------------------------------------------------------------------------------

def run_dir(spec: SweepSpec, run: PlannedRun) -> Path:
    return spec.out / run.run_id


def command(spec: SweepSpec, run: PlannedRun, base_env=None) -> tuple[list[str], dict[str, str]]:
    """(argv, env) of one run: the launcher around `hvdbench train MODEL ... --out RUN_DIR`."""
    rdir = run_dir(spec, run)
    config_args = ["--config", str(rdir / "layout.yaml")] if run.entry.config else []
    worker = launchers.worker_argv(spec.model, [
        *config_args, *spec.train_args, "--out", str(rdir), "--run-id", run.run_id,
        "--sweep-name", spec.name, "--repeat", str(run.repeat)])
    job = launchers.Job(run.layout, tuple(worker), rdir, spec.controller, spec.launcher_args,
                        tuple(spec.user_env))
    env = launchers.launch_env(spec.user_env, base=base_env)
    return launchers.build(spec.launcher, job, env)


def env_additions(spec: SweepSpec) -> dict[str, str]:
    """What the sweep adds to the environment (shown by --dry-run and in command.txt)."""
    return {k: v for k, v in launchers.launch_env(spec.user_env).items() if os.environ.get(k) != v}


def dry_run(spec: SweepSpec, console) -> None:
    table = Table(title=f"sweep {spec.name}: {spec.model}, {len(spec.runs)} runs "
                        f"({len(spec.entries)} layouts x {spec.repeats} repeats)")
    columns = ["#", "run", "layout", "scale", "GPUs", "hosts"] + (["settings"] if spec.config_path else [])
    for col in columns:
        table.add_column(col)
    for i, run in enumerate(spec.runs, 1):
        settings = run.entry.config.settings if run.entry.config else {}
        table.add_row(str(i), run.run_id, run.layout.name, run.layout.scale, str(run.layout.world_size),
                      ",".join(map(str, run.layout.host_slots)),
                      *([" ".join(f"{k}={v}" for k, v in settings.items())] if spec.config_path else []))
    console.print(table)
    extra = env_additions(spec)
    if extra:
        print("environment added: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(extra.items())))
    for run in spec.runs:  # plain print: an exact command must not be wrapped or restyled
        print(f"{run.run_id}: {shlex.join(command(spec, run)[0])}")


# --- the loop --------------------------------------------------------------------------------

def run_sweep(spec: SweepSpec, console) -> Counter:
    """Run what is pending; returns the latest status of every planned run."""
    spec.out.mkdir(parents=True, exist_ok=True)
    check_sweep_record(spec)
    runs = spec.runs
    todo = pending(runs, _rows(spec), spec.retry_failed)
    console.print(f"sweep {spec.name}: {len(runs)} runs ({len(spec.entries)} layouts x {spec.repeats} "
                  f"repeats), {len(todo)} to do; store {spec.store}")
    with _signals_raise() as signals, Progress(
            TextColumn("{task.description}"), BarColumn(bar_width=24), MofNCompleteColumn(), TimeElapsedColumn(),
            _CurrentRun(), console=console) as progress:
        if spec.allreduce_bench:
            _bench_layouts(spec, progress.console)
        overall = progress.add_task(f"sweep {spec.name}", total=len(runs), completed=len(runs) - len(todo))
        for run in todo:
            progress.update(overall, run=f"running {run.run_id}", run_start=time.monotonic())
            result = _do_run(spec, run, signals)
            if result is not None:
                progress.console.print(f"{run.run_id:<16} {run.layout.name:>6}  repeat {run.repeat}  "
                                       f"{result.wall_s or 0:7.1f} s  {result.status}"
                                       + (f"  {result.error[:120]}" if result.error else ""))
            progress.update(overall, advance=1, run="")
    status = latest_status(_rows(spec))
    return Counter(status.get(run.run_id, "not run") for run in runs)


def _bench_layouts(spec: SweepSpec, console) -> None:
    """`hvdbench bench allreduce` once per layout, through the same launcher and hosts, into
    SWEEP/bench_allreduce.csv, where `hvdbench report` reads it to put the interconnect's bus
    bandwidth beside each layout's training throughput. A layout the file already has is skipped,
    so a resumed sweep does not measure it again."""
    from hvdbench.bench.allreduce_report import AllreduceRow

    csv_path = spec.out / "bench_allreduce.csv"
    done = {row.layout for row in read_rows(csv_path, AllreduceRow)} if csv_path.exists() else set()
    for layout in dict.fromkeys(entry.layout for entry in spec.entries):
        if layout.name in done:
            continue
        rdir = spec.out / f"bench-allreduce-{layout.name}"
        _set_aside(rdir)
        worker = (str(launchers.bin_dir() / "hvdbench"), "bench", "allreduce",
                  "--max-bytes", spec.allreduce_bench, "--out", str(spec.out))
        job = launchers.Job(layout, worker, rdir, spec.controller, spec.launcher_args, tuple(spec.user_env))
        argv, env = launchers.build(spec.launcher, job, launchers.launch_env(spec.user_env))
        (rdir / "logs").mkdir(parents=True, exist_ok=True)
        atomic_write_text(rdir / "command.txt", shlex.join(argv) + "\n")
        outcome = runner.run(argv, env, rdir / "launch.log", rdir / "launch.json",
                             timeout=spec.timeout, grace_s=spec.grace_s)
        ok = outcome.status == "exited" and outcome.returncode == 0
        said = "done" if ok else f"{outcome.status} (see {rdir / 'launch.log'})"
        console.print(f"bench allreduce {layout.name:>6}  {outcome.wall_s:7.1f} s  {said}")


class _CurrentRun(ProgressColumn):
    """Progress column: the run in flight and how long it has been going."""

    def render(self, task) -> Text:
        if not task.fields.get("run"):
            return Text("")
        elapsed = int(time.monotonic() - task.fields["run_start"])
        return Text(f"{task.fields['run']} {elapsed // 60}:{elapsed % 60:02d}")


def _rows(spec: SweepSpec) -> list[RunResult]:
    return read_runs(spec.store) if spec.store.exists() else []


def _do_run(spec: SweepSpec, run: PlannedRun, signals: _SignalGuard) -> RunResult | None:
    """Claim, (re)run or recover, and record one run; None when another sweep holds it or it
    turned out to be recorded already."""
    with _lock(spec.out / ".locks" / f"{run.run_id}.lock", block=False) as claimed:
        if not claimed:
            return None  # another sweep process is running it right now
        status = latest_status(_rows(spec)).get(run.run_id)  # re-read: a concurrent sweep may have
        if status is not None and not (spec.retry_failed and status not in DONE):  # recorded it
            return None
        rdir = run_dir(spec, run)
        outcome = runner.read_outcome(rdir / "launch.json")
        if status is None and outcome is not None and outcome.status != "interrupted":
            started = _started_at(rdir)  # finished but not appended: record it, do not rerun
        else:
            _set_aside(rdir)
            started, outcome = _launch(spec, run, rdir)
        result = build_result(spec, run, rdir, outcome, started)
        if result is not None:
            with signals.deferred(), _lock(spec.out / ".locks" / "runs.csv.lock"):
                append_run(spec.store, result)
        return result


def _launch(spec: SweepSpec, run: PlannedRun, rdir: Path):
    argv, env = command(spec, run)
    rdir.mkdir(parents=True, exist_ok=True)
    (rdir / "logs").mkdir(exist_ok=True)
    write_hostfile(rdir / "hostfile", run.layout.host_slots)
    if run.entry.config:
        import yaml

        atomic_write_text(rdir / "layout.yaml", yaml.safe_dump(run.entry.config.settings, sort_keys=False))
    extra = env_additions(spec)
    env_lines = "".join(f"{k}={shlex.quote(v)} \\\n" for k, v in sorted(extra.items()))
    atomic_write_text(rdir / "command.txt", env_lines + shlex.join(argv) + "\n")
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    outcome = runner.run(argv, env, rdir / "launch.log", rdir / "launch.json",
                         timeout=spec.timeout, grace_s=spec.grace_s)
    return started, outcome


def _set_aside(rdir: Path) -> None:
    """Move what an unrecorded attempt left into attempts/<k>/ (after ending any survivor)."""
    if not rdir.exists():
        return
    runner.reap_stale(rdir / "launch.json")
    leftovers = [p for p in rdir.iterdir() if p.name != "attempts"]
    if not leftovers:
        return
    attempts = rdir / "attempts"
    k = 1 + sum(1 for _ in attempts.glob("*")) if attempts.exists() else 1
    target = attempts / str(k)
    target.mkdir(parents=True)
    for p in leftovers:
        p.rename(target / p.name)


def _started_at(rdir: Path) -> str:
    try:
        return json.loads((rdir / "launch.json").read_text()).get("started_at", "")
    except (OSError, ValueError):
        return ""


# --- sweep.json ------------------------------------------------------------------------------

def check_sweep_record(spec: SweepSpec) -> None:
    """Write sweep.json the first time; later, refuse a sweep whose model, train arguments or
    config differ (its rows would not be comparable with the ones already there). Layouts,
    repeats, launcher and timeout may change: that is how a sweep is extended."""
    path = spec.out / "sweep.json"
    identity = {"model": spec.model, "train_args": list(spec.train_args),
                "config": str(spec.config_path.resolve()) if spec.config_path else None}
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except ValueError:
            raise ConfigError(f"{path}: not valid JSON") from None
        for key, value in identity.items():
            if old.get(key) != value:
                raise ConfigError(f"{path}: this sweep was made with {key} {old.get(key)!r}, not "
                                  f"{value!r}; use another --out for a different sweep")
        return
    atomic_write_text(path, json.dumps({
        **identity, "name": spec.name, "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "hvdbench": __import__("hvdbench").__version__}, indent=2) + "\n")


# --- signals ---------------------------------------------------------------------------------

class _SignalGuard:
    """SIGTERM/SIGINT/SIGHUP raise SweepInterrupted, except inside `deferred()` (appending a row),
    where the signal is held until the block ends, so a row is either written or not attempted."""

    def __init__(self):
        self.depth, self.pending, self.raised = 0, None, False

    def handler(self, signum, frame):
        if self.raised:
            return  # already stopping: let the cleanup of the current run finish
        if self.depth:
            self.pending = signum
        else:
            self.raised = True
            raise SweepInterrupted(signum)

    @contextmanager
    def deferred(self):
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if not self.depth and self.pending is not None:
                signum, self.pending, self.raised = self.pending, None, True
                raise SweepInterrupted(signum)


@contextmanager
def _signals_raise():
    signals = _SignalGuard()
    sigs = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    old = {s: signal.signal(s, signals.handler) for s in sigs}
    try:
        yield signals
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextmanager
def _lock(path: Path, block: bool = True):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
