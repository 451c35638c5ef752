"""The run's record: `result.json` (one `RunResult`, the row a sweep appends to runs.csv),
`checks.json` (every rank's parameter digest and the evaluations), and the closing lines.

A finished run's record is never overwritten; a failed one is, by its rerun.
"""

from __future__ import annotations

import contextlib
import json
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

from hvdbench.errors import ConfigError
from hvdbench.files import atomic_write_text
from hvdbench.launchers.launch_info import detect_launcher
from hvdbench.peaks import peak_precision
from hvdbench.results.records.ranks import RANKS_CSV, write_ranks
from hvdbench.results.records.schema import MEASURED, RunResult, write_result
from hvdbench.topology import Layout
from hvdbench.train.compute_window import fill as fill_compute
from hvdbench.train.config import levers_text
from hvdbench.train.loop import say


def identity(cfg, t0: float) -> RunResult:
    """What the run is, known before it starts (a failed run's record carries this much)."""
    return RunResult(
        run_id=cfg.run_id, sweep=cfg.sweep_name, repeat=cfg.repeat, model=cfg.model,
        flavor=cfg.flavor, framework=cfg.framework, engine=cfg.engine, precision=cfg.precision,
        levers=levers_text(cfg), mode=cfg.mode,
        dataset=cfg.dataset, batch_per_gpu=cfg.batch_per_gpu,
        accum_steps=cfg.accum_steps, steps=cfg.steps, warmup_steps=cfg.warmup_steps,
        launcher=detect_launcher(), started_at=datetime.fromtimestamp(t0, timezone.utc)
        .isoformat(timespec="seconds"))


def describe_job(record: RunResult, dist, hosts: list[str], devices: list[str], parameters: int,
                 held: list[int] = ()) -> None:
    """The layout, system and stack the run had, from the job's view of itself; `held`: the
    parameters each rank holds (fsdp shards them)."""
    record.world_size = dist.size
    record.global_batch = record.batch_per_gpu * record.accum_steps * dist.size
    record.nodes, record.gpus_per_node = dist.cross_size, dist.local_size
    record.layout = str(Layout(dist.cross_size, dist.local_size))
    record.scale = "up" if dist.cross_size == 1 else "out"
    record.controller = dist.controller
    record.parameters = parameters
    record.shard_parameters = max(held) if held else None
    record.threads = dist.threads
    record.hosts, record.devices = ";".join(hosts), ";".join(devices)
    record.versions = ";".join(f"{k}={v}" for k, v in
                               {"python": platform.python_version(), **dist.versions}.items())


def finish(record: RunResult, cfg, measures, metric_name: str, out: Path, digests: list[str],
           t0: float, dist) -> None:
    """Rank 0: fill in the measures, write checks.json and result.json, say where they are."""
    for name in MEASURED:
        setattr(record, name, getattr(measures, name))
    if measures.throughput is not None:
        record.throughput_per_gpu = measures.throughput / record.world_size
    fill_compute(record, measures.compute)
    record.metric_name = metric_name
    record.target = cfg.target if cfg.mode == "time_to_accuracy" else None
    record.wall_s = time.time() - t0
    # What every rank ended with: equal digests mean Horovod kept the replicas identical.
    identical = len(set(digests)) == 1
    checks = {"param_digests": digests, "params_identical": identical, "evals": measures.evals}
    atomic_write_text(out / "checks.json", json.dumps(checks, indent=2) + "\n")
    if measures.ranks:  # every rank's own times (multi-rank throughput runs), beside the record
        write_ranks(out / RANKS_CSV, measures.ranks)
    write_result(out / "result.json", record, cfg.to_dict())
    if record.mode == "time_to_accuracy":
        say(dist, f"{record.status}: {record.metric_name} {record.final_metric:.4f} (target {record.target}) "
                  f"after {record.epochs:g} epochs, time-to-train {record.time_to_train_s:.1f} s, "
                  f"{record.time_per_epoch_s:.2f} s/epoch")
    if record.model_tflops_per_gpu is not None:
        say(dist, f"compute: {record.model_tflops_per_gpu:.3g} model TFLOP/s per GPU ({record.flops_per_sample:.3g} "
                  f"FLOPs per sample)" + (f", MFU {100 * record.mfu:.1f} % of {record.peak_tflops:g} TFLOP/s "
                                         f"({peak_precision(record.precision)} peak)"
                                         if record.mfu is not None else ""))
    if record.published_share is not None:
        say(dist, f"per GPU: {100 * record.published_share:.1f} % of {record.published_ref}")
    say(dist, f"parameters identical on all {record.world_size} ranks: {identical}; "
              f"result: {out / 'result.json'}")


def record_failure(cfg, t0: float, message: str, record: RunResult | None = None) -> None:
    """Best effort: a failed record in --out, unless a finished run is there: `record` (the job's
    identity, layout and devices, once known) or the identity of `cfg`."""
    if not cfg.out or finished(Path(cfg.out)):
        return
    with contextlib.suppress(Exception):  # the error line the caller printed is what matters
        record = record or identity(cfg, t0)
        record.status, record.error = "failed", message
        record.wall_s = time.time() - t0
        write_result(Path(cfg.out) / "result.json", record, cfg.to_dict())


def finished(out: Path) -> str | None:
    """The status of a finished run recorded in `out` (success/aborted), else None."""
    try:
        status = json.loads((out / "result.json").read_text()).get("status")
    except (OSError, ValueError, AttributeError):
        return None
    return status if status in ("success", "aborted") else None


def check_out(out: Path) -> None:
    """A finished run's record is never overwritten (a failed one may be, by its rerun)."""
    status = finished(out)
    if status:
        raise ConfigError(f"{out / 'result.json'} holds a finished run ({status}); choose another --out")
    with contextlib.suppress(FileNotFoundError):  # the log of the failed attempt being rerun
        (out / "mllog.txt").unlink()
