"""The row a run leaves in runs.csv: the worker's own record, completed with what the sweep knows,
or, when the worker failed, hung or wrote nothing, a record the sweep makes itself.

    result = build_result(spec, run, run_dir, outcome, started_at)   # None: interrupted, no row

A failed, timed-out or refused row carries the identity a report groups by (model, mode, flavor,
framework, precision, dataset, batch, layout, hosts, launcher), from the run's resolved TrainConfig,
and `error`: the last error lines of the run's logs on one line.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from hvdbench.results.records.schema import RunResult, SchemaError, read_result
from hvdbench.train.config import levers_text

if TYPE_CHECKING:
    from hvdbench.launchers.guard import Outcome
    from hvdbench.sweep.plan import PlannedRun
    from hvdbench.sweep.spec import SweepSpec

_ERROR_LINE = re.compile(r"\b(error|exception|fault|abort(ed)?|killed|refused|failed|timeout|timed out)\b",
                         re.I)
_EXCEPTION_LINE = re.compile(r"^(\[[0-9,]+\]<std\w+>:)?[\w.]*(Error|Exception|Interrupt|Exit)\b: ")
_SOURCE_LINE = re.compile(r"^(\[[0-9,]+\]<std\w+>:)?\s*(File \"|raise |Traceback )")


def build_result(spec: SweepSpec, run: PlannedRun, rdir: Path, outcome: Outcome,
                 started_at: str) -> RunResult | None:
    """The row for a run: the worker's result.json when it exited 0 and wrote one, otherwise a
    record made from what the sweep knows (layout, launcher, the last error lines). None for an
    interrupted run, which is not recorded (a resume reruns it)."""
    if outcome.status == "interrupted":
        return None
    if outcome.status == "exited" and outcome.returncode == 0:
        try:
            result, _ = read_result(rdir / "result.json")
        except SchemaError as e:
            result = _fallback(spec, run, "failed", f"worker exited 0 but {e}")
    else:
        status, why = (("timeout", f"no result after {spec.timeout:g} s: process group {outcome.pgid} ended")
                       if outcome.status == "timeout" else ("failed", f"exit status {outcome.returncode}"))
        killed = killed_rank(_tail(rdir / "launch.log"))
        # the rank a signal killed first: the others' errors ("connection reset") only follow from it
        error = f"{killed} ({why}) | {error_tail(rdir)}" if killed else f"{why} | {error_tail(rdir)}"
        result = _failed_record(rdir, started_at, status, error) or _fallback(spec, run, status, error)
    _fill(result, spec, run, started_at, outcome.wall_s)
    if result.world_size and result.world_size != run.layout.world_size:
        result.status = "failed"
        result.error = (f"worker saw {result.world_size} ranks, layout {run.layout.name} "
                        f"has {run.layout.world_size}")
    return result


def time_limit_result(spec: SweepSpec, run: PlannedRun, rdir: Path, started_at: str) -> RunResult:
    """The row of a run ended because its Slurm job reached its time limit: timeout, like a run
    ended by --timeout, naming the job."""
    from datetime import datetime

    job = os.environ.get("SLURM_JOB_ID", "?")
    result = _fallback(spec, run, "timeout", f"Slurm job {job} reached its time limit (SIGUSR1 from Slurm) "
                       f"| {error_tail(rdir)}")
    try:
        wall = (datetime.now().astimezone() - datetime.fromisoformat(started_at)).total_seconds()
    except ValueError:
        wall = 0.0
    _fill(result, spec, run, started_at, wall)
    return result


def refused_result(spec: SweepSpec, run: PlannedRun, started_at: str, why: str) -> RunResult:
    """The row of a run the sweep did not start (e.g. --require-idle found the machine busy)."""
    result = _fallback(spec, run, "failed", why)
    _fill(result, spec, run, started_at, 0.0)
    return result


def _failed_record(rdir: Path, started_at: str, status: str, error: str) -> RunResult | None:
    """The failed record the worker wrote itself in this launch (hvdbench.train.result.
    record_failure: its identity and whatever it measured), with the sweep's status and error
    lines; None when it wrote none, or the one there is from an earlier attempt."""
    try:
        result, _ = read_result(rdir / "result.json")
    except SchemaError:
        return None
    if result.status in ("success", "aborted") or (result.started_at or "") < started_at:
        return None
    result.status, result.error = status, error[:1000]
    return result


def _fallback(spec: SweepSpec, run: PlannedRun, status: str, error: str) -> RunResult:
    """A row the sweep makes itself, with the identity the run's worker would have recorded: its
    resolved TrainConfig (the one the sweep checked before launching, with the model's defaults),
    so a failed run lands in the scaling group of its layout and mode."""
    from hvdbench.errors import HvdbenchError
    from hvdbench.sweep.spec import resolve_entry

    cfg = run.entry.train
    if cfg is None:  # a spec not built by hvdbench.sweep.build: resolve it as the worker would
        try:
            cfg = resolve_entry(spec, run.entry, run.repeat)
        except HvdbenchError as e:  # the worker refused it the same way: the row says why
            return RunResult(model=spec.model, status=status, error=f"{error} | {e}"[:1000])
    return RunResult(
        model=spec.model, flavor=cfg.flavor, framework=cfg.framework, engine=cfg.engine, precision=cfg.precision,
        levers=levers_text(cfg), mode=cfg.mode, dataset=cfg.dataset, batch_per_gpu=cfg.batch_per_gpu,
        accum_steps=cfg.accum_steps, metric_name=_metric_name(spec.model),
        target=cfg.target if cfg.mode == "time_to_accuracy" else None, status=status, error=error[:1000])


def _metric_name(model: str) -> str:
    from hvdbench.contracts import get_spec

    return get_spec(model).metric.name


def _fill(result: RunResult, spec: SweepSpec, run: PlannedRun, started_at: str, wall_s: float) -> None:
    """Identity the sweep owns, and layout facts the worker may have left empty."""
    lay = run.layout
    result.run_id, result.sweep, result.repeat = run.run_id, spec.name, run.repeat
    result.launcher = spec.launcher
    result.controller = result.controller or spec.controller_name
    if not result.world_size:
        result.world_size, result.nodes, result.gpus_per_node = lay.world_size, lay.nodes, lay.gpus_per_node
    result.layout = result.layout or lay.name
    result.scale = result.scale or lay.scale
    result.hosts = result.hosts or ";".join(lay.hosts)
    result.started_at = result.started_at or started_at
    # One meaning in runs.csv, whatever the status: the launch's wall-clock time as the sweep's guard
    # measured it (launcher start to exit), not the worker's own time that its result.json carries.
    result.wall_s = round(wall_s, 3)
    if not result.global_batch and result.batch_per_gpu:
        result.global_batch = result.batch_per_gpu * result.accum_steps * lay.world_size


def error_tail(rdir: Path, lines: int = 5) -> str:
    """The last error lines of a run: from each per-rank stderr (where a worker's traceback ends)
    and then the launcher's log, the last exception lines (`ValueError: ...`), else the last
    error-looking lines, else the log's last lines."""
    rank_logs = sorted(p for p in (rdir / "logs").rglob("*") if p.is_file() and
                       (p.name == "stderr" or p.suffix == ".err"))
    picked: list[str] = []
    for path in [*rank_logs, rdir / "launch.log"]:
        text = [ln.strip() for ln in _tail(path).splitlines()]
        exceptions = [ln for ln in text if _EXCEPTION_LINE.search(ln)]
        errors = [ln for ln in text if _ERROR_LINE.search(ln) and not _SOURCE_LINE.search(ln)]
        picked += (exceptions or errors)[-2:]
    if not picked:
        picked = [ln.strip() for ln in _tail(rdir / "launch.log").splitlines() if ln.strip()][-3:]
    picked = list(dict.fromkeys(picked))[-lines:]
    return " | ".join(picked)[-800:] or "(no output)"


# How each launcher says that a rank died of a signal: (pattern, group of the rank, group of the signal).
_KILLED = (
    # Open MPI: "mpirun noticed that process rank 1 with PID 4321 on node n1 exited on signal 9 (Killed)."
    (re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)"), 1, 3),
    # torchrun's failure summary: "rank      : 1 (local_rank: 1)" ... "exitcode  : -9 (pid: 4321)"
    (re.compile(r"rank\s*:\s*(\d+)[^\n]*\n\s*exitcode\s*:\s*-(\d+)"), 1, 2),
    # horovodrun (Gloo): "The first process to do so was:\nProcess name: 1\nExit code: 137"
    (re.compile(r"Process name:\s*(\S+)\s*\n\s*Exit code:\s*(-?\d+)"), 1, 2),
    # srun: "srun: error: n1: task 1: Killed"
    (re.compile(r"task (\d+): (Killed)"), 1, 2),
)


def killed_rank(log: str) -> str:
    """'rank 1 killed by signal 9 (SIGKILL)' when the launcher's log says a rank died of a signal
    (as far as the launcher's exit tells it), else ''."""
    for pattern, rank_group, signal_group in _KILLED:
        m = pattern.search(log)
        if not m:
            continue
        code = m.group(signal_group)
        number = 9 if code == "Killed" else abs(int(code))
        if not code.startswith("-") and code != "Killed" and pattern is _KILLED[2][0]:
            if not 128 < number <= 128 + 64:  # a shell's exit status: 128 + the signal
                continue
            number -= 128
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "unknown signal"
        return f"rank {m.group(rank_group)} killed by signal {number} ({name})"
    return ""


def _tail(path: Path, size: int = 65536) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - size))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


