"""What a sweep shows: the plan and exact commands of --dry-run, and, while it runs, a progress
bar with the run in flight and one line per finished run (and per layout's allreduce bench).

    hvdbench sweep resnet50 --hosts localhost:2 --dry-run --out results/demo -- --synthetic
    ->  dry_run(spec, console)
    hvdbench sweep resnet50 --hosts localhost:2 --out results/demo -- --synthetic
    ->  with SweepProgress(spec, console) as shown:
            shown.bench(layout, outcome, rdir)    # `bench allreduce 1x2   12.3 s  done`
            shown.start(total, done)
            shown.running(run) ... shown.finished(run, result)
            # `1x2-r1  1x2  repeat 1  812.3 samples/s  41.0 s wall  success`

In a pipe (a batch job's log, `| cat`) there is no bar: whole lines only, so nothing printed
there is later contradicted (see SweepProgress).
"""

from __future__ import annotations

import re
import shlex
import threading
import time
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from hvdbench.launchers.guard import Outcome
from hvdbench.results.records.schema import RunResult
from hvdbench.sweep.launch import bench_command, bench_dir, bench_launches, command, env_additions, env_left_out
from hvdbench.sweep.plan import PlannedRun
from hvdbench.sweep.spec import SweepSpec, run_dir
from hvdbench.topology import Layout


def mode_line(spec: SweepSpec) -> str:
    """What the runs will do, from each layout's resolved TrainConfig (`entry.train`): 'throughput: 50
    timed steps after at least 10 warm-up steps (up to 50)', or 'time to accuracy: top1_accuracy >= 0.95,
    at most 12 epochs, evaluating every 1 epoch'; layouts that differ are named."""
    said: dict[str, list[str]] = {}
    for entry in spec.entries:
        cfg = entry.train
        if cfg is None:
            continue
        said.setdefault(_mode_of(spec, cfg), []).append(entry.layout.name)
    if not said:
        return ""
    if len(said) == 1:
        return "mode: " + next(iter(said))
    return "mode: " + "; ".join(f"{', '.join(layouts)}: {text}" for text, layouts in said.items())


def _mode_of(spec: SweepSpec, cfg) -> str:
    if cfg.mode == "throughput":
        from hvdbench.train.warmup import cap

        most = cap(cfg.warmup_steps, cfg.warmup_max_steps)
        warm = (f"at least {cfg.warmup_steps} warm-up steps (more until step times settle, up to {most})"
                if most > cfg.warmup_steps else f"{cfg.warmup_steps} warm-up steps")
        return f"throughput, {cfg.steps} timed steps after {warm}"
    from hvdbench.contracts import get_spec

    m = get_spec(spec.model).metric  # a known model: the sweep resolved this config through it
    metric, better = m.name or "metric", ">=" if m.higher_is_better else "<="
    unit = cfg.eval_unit if cfg.eval_every != 1 else cfg.eval_unit.rstrip("s")
    return (f"time to accuracy, target {metric} {better} {cfg.target:g}, at most {cfg.max_epochs:g} epochs "
            f"(status aborted past them), evaluating every {cfg.eval_every:g} {unit}")


def dry_run(spec: SweepSpec, console) -> None:
    table = Table(title=f"sweep {spec.name}: {spec.model}, {len(spec.runs)} runs ({counts(spec)})")
    columns = ["#", "run", "layout", "scale", "GPUs", "hosts"] + (["settings"] if spec.config_path else [])
    for col in columns:
        table.add_column(col)
    for i, run in enumerate(spec.runs, 1):
        settings = run.entry.config.settings if run.entry.config else {}
        table.add_row(str(i), run.run_id, run.layout.name, run.layout.scale, str(run.layout.world_size),
                      ",".join(map(str, run.layout.host_slots)),
                      *([" ".join(f"{k}={v}" for k, v in settings.items())] if spec.config_path else []))
    console.print(table)
    mode = mode_line(spec)
    if mode:
        print(mode)
    extra = env_additions(spec)
    if extra:
        print("environment added: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(extra.items())))
    if env_left_out(spec):
        print(env_left_out(spec))
    for bench, layout in bench_launches(spec):  # before the runs, as the sweep launches them
        print(f"{bench_dir(spec, layout, bench).name}: {shlex.join(bench_command(spec, layout, bench)[0])}")
    for run in spec.runs:  # plain print: an exact command must not be wrapped or restyled
        print(f"{run.run_id}: {shlex.join(command(spec, run)[0])}")


def _many(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def counts(spec: SweepSpec) -> str:
    """What the runs are made of: '2 layouts x 2 engines x 1 repeat' (engines where `--engines` gave
    several; a layout of a --config counts once however many settings it has)."""
    layouts = len({e.config.name if e.config else e.layout.name for e in spec.entries})
    engines = len({e.engine for e in spec.entries})
    parts = [_many(layouts, "layout")] + ([_many(engines, "engine")] if engines > 1 else [])
    if layouts * max(engines, 1) != len(spec.entries):  # not a full grid: say the entries as they are
        parts = [_many(len(spec.entries), "layout and engine pair")]
    return " x ".join(parts + [_many(spec.repeats, "repeat")])


def plan_line(spec: SweepSpec, todo: int) -> str:
    return f"sweep {spec.name}: {len(spec.runs)} runs ({counts(spec)}), {todo} to do; store {spec.store}"


def figure(result: RunResult) -> str:
    """What a run measured, in a few words: '812.3 samples/s' (throughput), 'top1_accuracy 0.953 >= 0.95
    in 4.3 s' (reached), 'top1_accuracy 0.91 < 0.95 after 12 epochs' (aborted); '' when it measured nothing."""
    if result.mode == "throughput":
        return "" if result.throughput is None else f"{result.throughput:,.1f} samples/s"
    metric = result.metric_name or "metric"
    if result.final_metric is None:
        return ""
    value = f"{metric} {result.final_metric:.4g}"
    if result.status == "success" and result.time_to_train_s is not None:
        train = result.time_to_train_s
        took = f"{train:.1f} s" if train < 60 else f"{train / 60:.2f} min"
        return value + (f" (target {result.target:g})" if result.target is not None else "") + f" in {took}"
    if result.epochs is not None:
        return value + (f" (target {result.target:g})" if result.target is not None else "") + \
            f" after {result.epochs:g} epochs"
    return value


def run_line(run: PlannedRun, result: RunResult, log: Path | None = None) -> str:
    """'1x2-r1  1x2  repeat 1  812.3 samples/s  41.0 s wall  success': a finished run, its figure first.
    A run that failed says why, the worker's own one-line error whole (a refusal: what the run needs,
    what to try), and where its launch's log is."""
    measured = figure(result)
    return (f"{run.run_id:<16} {run.layout.name:>6}  repeat {run.repeat}  "
            + (f"{measured}  " if measured else "") + f"{result.wall_s or 0:.1f} s wall  {result.status}"
            + (f"  {error_words(result.error)}" if result.error else "")
            + (f"  (log: {log})" if log is not None and result.status in ("failed", "timeout") else ""))


# A worker's own error line in a launcher's log, behind the rank tag the launcher adds ("[0]<stderr>:",
# "[1,0]<stderr>:", "[rank0]: ", "0: "): hvdbench's commands print their one-line errors as "Error: ...".
_OWN_ERROR = re.compile(r"^(?:\S*?[:>]\s?)?Error: (.+)$")
OTHER_ERROR_CHARS = 240  # of an error that is not the worker's own line (a traceback's, a launcher's)


def error_words(error: str) -> str:
    """What a run's line says of its error (runs.csv's: the status, then the last error lines, ' | '
    between them): the worker's own error line whole, without the launcher's tag; else the error's
    start."""
    for part in error.split(" | "):
        own = _OWN_ERROR.match(part.strip())
        if own:
            return own.group(1)
    return error if len(error) <= OTHER_ERROR_CHARS else error[:OTHER_ERROR_CHARS - 3] + "..."


def bench_line(layout: Layout, outcome: Outcome, rdir: Path, bench: str = "allreduce") -> str:
    ok = outcome.status == "exited" and outcome.returncode == 0
    said = "done" if ok else f"{outcome.status} (see {rdir / 'launch.log'})"
    return f"bench {bench:<9} {layout.name:>6}  {outcome.wall_s:7.1f} s  {said}"


PLAIN_STATUS_S = 30.0  # in a pipe, a line on a run in flight once it has gone this long, and this often


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


STARTING = "starting (its ranks import the framework and build the model)"
TRAINING = "training"


def stage(log: Path | None) -> str:
    """What a run in flight is doing, from its launch.log: the worker's last progress line (the first
    comes once its first step is done); TRAINING once the worker has said what it runs; STARTING
    before that, the first seconds of every launch; '' without a log (another sweep's run)."""
    if log is None:
        return ""
    said = latest_progress(log)
    if said:
        return said
    try:
        with open(log, "rb") as f:
            started = b"[hvdbench] " in f.read(65536)
    except OSError:
        started = False
    return TRAINING if started else STARTING


def current_line(fields: dict) -> str:
    """'1x2-r1 1:05 step 120/600 (epoch 2.0/10), 812 samples/s, ...' for the run in flight."""
    if not fields.get("run"):
        return ""
    elapsed = int(time.monotonic() - fields["run_start"])
    said = stage(fields.get("log"))
    return f"{fields['run']} {elapsed // 60}:{elapsed % 60:02d}" + (f"  {said}" if said else "")


def plain_status(fields: dict, now: float | None = None) -> str:
    """The line a pipe gets on a run in flight: '  1x2-r1 still running after 1:05: step 120/600 ...'
    (a statement of that moment, not a live status a later line would have to correct)."""
    elapsed = int((time.monotonic() if now is None else now) - fields["run_start"])
    doing, _, run_id = fields["run"].rpartition(" ")
    what = "still waiting for another sweep to finish it" if doing.startswith("waiting") else "still running"
    said = stage(fields.get("log"))
    return f"  {run_id} {what} after {elapsed // 60}:{elapsed % 60:02d}" + (f": {said}" if said else "")


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
        # Not a terminal (a pipe, a batch job's log): no bar at all (its last frame, printed when it
        # stops, would keep a "running ..." that was over long before), and instead a plain line on
        # a run in flight once it has gone PLAIN_STATUS_S seconds, and every PLAIN_STATUS_S after,
        # from a thread (the loop waits on the launch). Each line says how far it had got then.
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=24), MofNCompleteColumn(),
                                 TimeElapsedColumn(), _CurrentRun(), console=console, disable=not console.is_terminal)
        self.task = None
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
        last: tuple = (None, 0.0)
        while not self._plain.wait(min(1.0, PLAIN_STATUS_S)):
            last = self.status_tick(last, time.monotonic())

    def status_tick(self, last: tuple, now: float) -> tuple:
        """One look at the run in flight (in a pipe): a line on it once it has gone PLAIN_STATUS_S
        seconds since it started or since the last line on it. `last`: (the run said last, when);
        returns the new one."""
        task = next((t for t in self.progress.tasks if t.id == self.task), None)
        fields = dict(task.fields) if task is not None else {}
        if not fields.get("run"):
            return last
        which = (fields["run"], fields["run_start"])
        if now - (last[1] if last[0] == which else fields["run_start"]) < PLAIN_STATUS_S:
            return last
        self.print(plain_status(fields, now))
        return which, now

    def print(self, line: str) -> None:
        self.progress.console.print(line)

    def bench(self, layout: Layout, outcome: Outcome, rdir: Path, bench: str = "allreduce") -> None:
        self.print(bench_line(layout, outcome, rdir, bench))

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
            self.print(run_line(run, result, run_dir(self.spec, run) / "launch.log")
                       + ("  (recorded by another sweep)" if by_other else ""))
        self.progress.update(self.task, advance=1, run="")
