"""What a sweep shows: the plan and exact commands of --dry-run, and, while it runs, a progress
bar with the run in flight and one line per finished run (and per layout's allreduce bench).

    hvdbench sweep resnet50 --hosts localhost:2 --dry-run --out results/demo -- --synthetic
    ->  dry_run(spec, console)
    hvdbench sweep resnet50 --hosts localhost:2 --out results/demo -- --synthetic
    ->  with SweepProgress(spec, console) as shown:
            shown.bench(layout, outcome, rdir)    # `bench allreduce 1x2   12.3 s  done`
            shown.start(total, done)
            shown.running(run) ... shown.finished(run, result)   # `1x2-r1  1x2  repeat 1  41.0 s  success`
"""

from __future__ import annotations

import shlex
import threading
import time
from pathlib import Path

from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn,
                           TimeElapsedColumn)
from rich.table import Table
from rich.text import Text

from hvdbench.launchers.guard import Outcome
from hvdbench.results.schema import RunResult
from hvdbench.sweep.launch import command, env_additions
from hvdbench.sweep.plan import PlannedRun
from hvdbench.sweep.spec import SweepSpec, run_dir
from hvdbench.topology import Layout


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


def plan_line(spec: SweepSpec, todo: int) -> str:
    return (f"sweep {spec.name}: {len(spec.runs)} runs ({len(spec.entries)} layouts x {spec.repeats} "
            f"repeats), {todo} to do; store {spec.store}")


def run_line(run: PlannedRun, result: RunResult) -> str:
    return (f"{run.run_id:<16} {run.layout.name:>6}  repeat {run.repeat}  {result.wall_s or 0:7.1f} s  "
            f"{result.status}" + (f"  {result.error[:120]}" if result.error else ""))


def bench_line(layout: Layout, outcome: Outcome, rdir: Path) -> str:
    ok = outcome.status == "exited" and outcome.returncode == 0
    said = "done" if ok else f"{outcome.status} (see {rdir / 'launch.log'})"
    return f"bench allreduce {layout.name:>6}  {outcome.wall_s:7.1f} s  {said}"


PLAIN_STATUS_S = 30.0  # in a pipe, a line on the run in flight this often


def latest_progress(log: Path | None) -> str:
    """The worker's last progress line in a run's launch.log ("step 120/600 (epoch 2.0/10), ...",
    or an evaluation's), without launcher tags; empty when there is none yet."""
    if log is None:
        return ""
    try:
        with open(log, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 8192))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    for line in reversed(tail.splitlines()):
        _, marker, text = line.partition("[hvdbench] ")
        if marker and (text.startswith(("step ", "epoch ")) or ": " in text and "target" in text):
            return text.strip()
    return ""


def current_line(fields: dict) -> str:
    """'1x2-r1 1:05 step 120/600 (epoch 2.0/10), 812 samples/s, ...' for the run in flight."""
    if not fields.get("run"):
        return ""
    elapsed = int(time.monotonic() - fields["run_start"])
    said = latest_progress(fields.get("log"))
    return f"{fields['run']} {elapsed // 60}:{elapsed % 60:02d}" + (f"  {said}" if said else "")


class _CurrentRun(ProgressColumn):
    """Progress column: the run in flight, how long it has been going, and the worker's last
    progress line (steps or epochs done, the metric, the time left)."""

    def render(self, task) -> Text:
        return Text(current_line(task.fields))


class SweepProgress:
    """The live display of a running sweep (a rich Progress); lines printed through it appear
    above the bar."""

    def __init__(self, spec: SweepSpec, console):
        self.spec = spec
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=24), MofNCompleteColumn(),
                                 TimeElapsedColumn(), _CurrentRun(), console=console)
        self.task = None
        # Not a terminal (a pipe, a batch job's log): no live bar, so a plain status line on the
        # run in flight every PLAIN_STATUS_S seconds, from a thread (the loop waits on the launch).
        self._plain = None if console.is_terminal else threading.Event()

    def __enter__(self) -> SweepProgress:
        self.progress.__enter__()
        if self._plain is not None:
            threading.Thread(target=self._status_lines, name="sweep-status", daemon=True).start()
        return self

    def __exit__(self, *exc):
        if self._plain is not None:
            self._plain.set()
        return self.progress.__exit__(*exc)

    def _status_lines(self) -> None:
        while not self._plain.wait(PLAIN_STATUS_S):
            task = next((t for t in self.progress.tasks if t.id == self.task), None)
            said = current_line(task.fields) if task is not None else ""
            if said:
                self.print(f"  {said}")

    def print(self, line: str) -> None:
        self.progress.console.print(line)

    def bench(self, layout: Layout, outcome: Outcome, rdir: Path) -> None:
        self.print(bench_line(layout, outcome, rdir))

    def start(self, total: int, done: int) -> None:
        self.task = self.progress.add_task(f"sweep {self.spec.name}", total=total, completed=done)

    def running(self, run: PlannedRun, waiting: bool = False) -> None:
        what = "waiting for another sweep's" if waiting else "running"
        self.progress.update(self.task, run=f"{what} {run.run_id}", run_start=time.monotonic(),
                             log=None if waiting else run_dir(self.spec, run) / "launch.log")

    def held(self, run: PlannedRun) -> None:
        """Another sweep in this folder is running `run`: said now, awaited at the end."""
        self.print(f"{run.run_id:<16} {run.layout.name:>6}  repeat {run.repeat}  held by another sweep "
                   "(running it now); its row is awaited at the end")
        self.progress.update(self.task, run="")

    def finished(self, run: PlannedRun, result: RunResult | None, by_other: bool = False) -> None:
        """A run ended: its line (saying so when another sweep recorded it), and a step."""
        if result is not None:
            self.print(run_line(run, result) + ("  (recorded by another sweep)" if by_other else ""))
        self.progress.update(self.task, advance=1, run="")
