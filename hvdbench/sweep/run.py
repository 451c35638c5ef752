"""The sweep loop: run every planned (layout, repeat), record one row each, resume after a stop.

    hvdbench sweep resnet50 --hosts localhost:2 --repeats 2 --out results/demo -- --synthetic
    ->  spec = SweepSpec(model="resnet50", out=Path("results/demo"), entries=..., repeats=2, ...)
        dry_run(spec, console)       # --dry-run: the plan and the exact commands; runs nothing
        counts = run_sweep(spec, console)

The sweep directory (--out) holds:
    runs.csv                 one row per run, appended in one write (hvdbench.results.records.store)
    sweep.json               model and train arguments of the sweep (a resume must match them), and
                             each host's hardware record (RUN/hardware.json's, once per host)
    <run_id>/                one per run: hostfile, command.txt, layout.yaml (with a config),
                             launch.log (the launcher's output), logs/ (per-rank), launch.json
                             (pids, outcome), and the worker's result.json, mllog.txt, config.yaml
    <run_id>/attempts/<k>/   what an earlier, unrecorded attempt of the run left (kept, not reused)
    bench-allreduce-<NxG>/   with --allreduce-bench: the same launch files for the layout's bench,
                             whose rows go to bench_allreduce.csv
    bench-compute-<NxG>/     with --compute-bench: the same for `bench compute` (bench_compute.csv)
    bench-links-<NxG>/       with --links-bench: `bench links` once, over every host (bench_links.csv)

Resume: a run with a row is done (success/aborted; failed/timeout too unless --retry-failed).
A run directory without a row is either an attempt that finished but was not appended yet (its
guard recorded in launch.json that it succeeded or hit its timeout: the row is appended from it,
nothing reruns) or one cut off by a stopped sweep: its files move to attempts/<k>/ and it runs
again. A finished attempt that failed without a row counts as cut off: the stop that ended its sweep
may have failed it first (a cancelled Slurm job's srun exits 1, "job has expired", before the
sweep's SIGTERM arrives).

Concurrent sweeps in one directory (the per-layout Slurm jobs) are safe: a run is claimed with a
lock file (.locks/<run_id>.lock, released by the kernel even on SIGKILL) and appends are
serialised by .locks/runs.csv.lock (hvdbench.sweep.locks). A run another sweep holds is skipped
("held by another sweep") and awaited after the others: its row is that sweep's, or this sweep runs
it if that one died first; either way it is counted, so two identical sweeps both exit 0.

runs.csv is read whole once, to plan; then, before each run (under the store's lock, which so is
known to be takeable before anything is launched), only the rows other sweeps appended since
(records.store.Store): recording a run costs the same at 10 rows and at 10,000. A row that cannot be
appended after its run is one line naming the run and its folder (the next sweep appends it from
there without running it again, unless it failed: then it runs again).

The parts: spec (SweepSpec, sweep.json), launch (the one launch path, for runs and benches),
display (dry run, progress, per-run lines), locks, signals (stopping between rows); their public
names used elsewhere are importable from here too.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from hvdbench.errors import HvdbenchError, StoreError, os_error_line
from hvdbench.launchers import guard
from hvdbench.results.records.schema import AllreduceRow, ComputeRow, LinkRow, RunResult
from hvdbench.results.records.store import ALLREDUCE_CSV, COMPUTE_CSV, LINKS_CSV, Store, read_rows
from hvdbench.sweep import locks
from hvdbench.sweep.display import SweepProgress, dry_run, plan_line
from hvdbench.sweep.launch import (bench_dir, bench_launches, command, env_additions, env_left_out, launch_bench,
                                   launch_run)
from hvdbench.sweep.plan import DONE, PlannedRun, latest_status, pending
from hvdbench.sweep.record import build_result, refused_result, time_limit_result
from hvdbench.sweep.signals import SignalGuard, SweepInterrupted, raising_signals
from hvdbench.sweep.spec import SWEEP_OWNED, SweepSpec, check_sweep_record, keep_hardware, run_dir

__all__ = ["SWEEP_OWNED", "SweepInterrupted", "SweepSpec", "check_sweep_record", "command", "dry_run",
           "env_additions", "run_dir", "run_sweep"]


def run_sweep(spec: SweepSpec, console) -> Counter:
    """Run what is pending; returns the latest status of every planned run.

    A run another sweep in the same folder is running (its lock is held) is skipped, and waited
    for once everything else is done: its row then comes from that sweep, or, if that sweep died
    without recording it, this one runs it. So every planned run ends up recorded by one of them."""
    store = Store(spec.store, RunResult)  # read back whole before anything is written or run
    spec.out.mkdir(parents=True, exist_ok=True)
    check_sweep_record(spec)
    runs = spec.runs
    todo = pending(runs, store.rows, spec.retry_failed)
    seen = Counter(row.run_id for row in store.rows)  # rows per run when planned: more later = another sweep's
    console.print(plan_line(spec, len(todo)))
    if env_left_out(spec):
        console.print(env_left_out(spec), markup=False)
    with raising_signals() as signals, SweepProgress(spec, console) as shown:
        _bench_layouts(spec, shown)
        shown.start(total=len(runs), done=len(runs) - len(todo))
        held = []
        for run in todo:
            shown.running(run)
            result = _do_run(spec, store, run, signals, seen)
            if result is HELD:
                held.append(run)
                shown.held(run)
            else:
                shown.finished(run, *result)
        for run in held:  # their sweep may still be running them: wait, then take its row (or run it)
            shown.running(run, waiting=True)
            shown.finished(run, *_do_run(spec, store, run, signals, seen, wait=True))
    with locks.store_lock(spec.out):
        store.refresh()
    status = latest_status(store.rows)
    return Counter(status.get(run.run_id, "not run") for run in runs)


# A bench a sweep runs once per layout: its CSV and row class.
BENCHES = {"allreduce": (ALLREDUCE_CSV, AllreduceRow), "compute": (COMPUTE_CSV, ComputeRow),
           "links": (LINKS_CSV, LinkRow)}


def _bench_layouts(spec: SweepSpec, shown: SweepProgress) -> None:
    """`hvdbench bench allreduce` (or `bench compute`) once per layout, and `bench links` once over every
    host (launch.bench_launches), through the same launcher and hosts, into SWEEP/bench_<bench>.csv,
    where `hvdbench report` reads it to put the interconnect's bus bandwidth (the devices' measured
    peak) beside each layout's training throughput (MFU), and each pair's link. A layout the file
    already has is skipped, so a resumed sweep does not measure it again."""
    done = {}
    for bench, layout in bench_launches(spec):
        if bench not in done:
            csv_name, row_class = BENCHES[bench]
            csv_path = spec.out / csv_name
            done[bench] = {row.layout for row in read_rows(csv_path, row_class)} if csv_path.exists() else set()
        if layout.name in done[bench]:
            continue
        rdir = bench_dir(spec, layout, bench)
        _set_aside(rdir)
        shown.bench(layout, launch_bench(spec, layout, bench).outcome, rdir, bench)


HELD = "held by another sweep"


def _do_run(spec: SweepSpec, store: Store[RunResult], run: PlannedRun, signals: SignalGuard, seen: Counter,
            wait: bool = False) -> tuple[RunResult | None, bool] | str:
    """Claim, (re)run or recover, and record one run: (its row, False); (the row another sweep
    recorded meanwhile, True); or HELD when another sweep is running it (and not `wait`)."""
    with locks.claim(spec.out, run.run_id, wait=wait) as claimed:
        if not claimed:
            return HELD  # another sweep process is running it right now
        with locks.store_lock(spec.out):  # taken before the launch: a lock that cannot be taken stops here
            store.refresh()  # the rows a concurrent sweep appended since, read alone
        rows = store.of(run.run_id)
        if len(rows) > seen[run.run_id]:  # a concurrent sweep recorded it since this one planned
            return rows[-1], True
        status = rows[-1].status if rows else None
        if status is not None and not (spec.retry_failed and status not in DONE):
            return rows[-1], True
        rdir = run_dir(spec, run)
        outcome = guard.read_outcome(rdir / "launch.json")
        if status is None and outcome is not None and _ended_on_its_own(outcome):
            started = _started_at(rdir)  # finished but not appended: record it, do not rerun
        else:
            _set_aside(rdir)
            started = datetime.now(timezone.utc).isoformat(timespec="seconds")
            refused = _busy_refusal(spec, run, started)
            if refused is not None:
                with signals.deferred(), locks.store_lock(spec.out):
                    store.append([refused])
                return refused, False
            try:
                started, outcome = launch_run(spec, run)
            except SweepInterrupted as e:
                if e.time_limit:  # the job's end: this run cannot finish in it; record it as timed out
                    with signals.deferred(), locks.store_lock(spec.out):
                        store.append([time_limit_result(spec, run, rdir, started)])
                raise
        result = build_result(spec, run, rdir, outcome, started)
        if result is not None:
            with signals.deferred():
                _record(spec, store, run, rdir, result, kept=_ended_on_its_own(outcome))
        return result, False


def _record(spec: SweepSpec, store: Store[RunResult], run: PlannedRun, rdir: Path, result: RunResult,
            kept: bool) -> None:
    """Append a finished run's row, then keep its hosts' hardware, under the store's lock. A row that
    cannot be appended is one line naming the run and the folder its result stays in: launch.json
    there holds the outcome, so the next sweep into the same --out appends the row without running
    the run again (`kept`: it ended on its own) or runs it again (it failed)."""
    try:
        with locks.store_lock(spec.out):
            store.append([result])
    except (OSError, HvdbenchError) as e:
        why = os_error_line(e) if isinstance(e, OSError) else str(e)
        raise StoreError(f"run {run.run_id} ended ({result.status}) but its row was not appended to {spec.store} "
                         f"({why}); its result is in {rdir}: `hvdbench sweep` again with the same --out "
                         + ("appends it from there without running it again" if kept else
                            "runs it again (a failed launch without a row is not kept)")) from None
    with locks.store_lock(spec.out):
        keep_hardware(spec, rdir)


def _busy_refusal(spec: SweepSpec, run: PlannedRun, started: str) -> RunResult | None:
    """With --require-idle: None once this machine is idle (within spec.require_idle seconds), else
    the row of a run not started because it stayed busy (failed: a --retry-failed resume reruns it)."""
    if spec.require_idle is None:
        return None
    import time

    from hvdbench.interference import busy_now
    from hvdbench.results.records.schema import BUSY_CPUS

    deadline = time.monotonic() + spec.require_idle
    while True:
        busy = busy_now(1.0)
        if busy < BUSY_CPUS or time.monotonic() >= deadline:
            break
    if busy < BUSY_CPUS:
        return None
    return refused_result(spec, run, started, f"not started: this machine was busy, other processes used "
                          f"{busy:.1f} cores (--require-idle {spec.require_idle:g} s: at most {BUSY_CPUS:g})")


def _ended_on_its_own(outcome: guard.Outcome) -> bool:
    """Whether an unrecorded attempt's outcome is its own: it succeeded, or its guard ended it at its
    timeout. A failure may be the doing of the stop that cut its sweep off, so it is not kept."""
    return outcome.status == "timeout" or (outcome.status == "exited" and outcome.returncode == 0)


def _set_aside(rdir: Path) -> None:
    """Move what an unrecorded attempt left into attempts/<k>/ (after ending any survivor)."""
    if not rdir.exists():
        return
    guard.reap_stale(rdir / "launch.json")
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
