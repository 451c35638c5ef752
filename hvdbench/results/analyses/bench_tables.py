"""The bench results in `hvdbench report`: what the interconnect and the storage allow, beside what
training achieved, per layout.

    loaded = hvdbench.results.report.load(sweeps)   # SWEEP/bench_allreduce.csv and SWEEP/bench_io.csv if present
    bench = build(loaded.runs, loaded.allreduce, loaded.io)
    text = markdown(bench)               # "" when no sweep has bench results
    paths = write_csvs(bench, out)       # comm_vs_training.csv, io_vs_training.csv (only those with rows)

comm_vs_training: for each model and layout with a training throughput, the allreduce busbw of the
latest `bench allreduce` run of that layout at the message size the model's gradients travel in:
min(gradient bytes, Horovod's 128 MiB fusion buffer — HOROVOD_FUSION_THRESHOLD's default), read
off the measured curve by log-log interpolation between the two nearest sizes (none outside the
measured range). The estimated allreduce time per step is gradient bytes / algbw at that size
(fp32 gradients), beside the step time global batch / throughput; their ratio bounds how much of a
step communication can take when nothing overlaps it.

io_vs_training: the reader's samples/s (latest `bench io` run per dataset and layout, mean over
passes; batches as delivered, before the device-side normalisation) beside each model's training
samples/s at the same layout, for datasets of a kind the model trains on; feed = min(1, io /
training) — the share of the demand the storage could meet. The CPU-decoded figure is beside it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from hvdbench.errors import ConfigError
from hvdbench.files import atomic_write_text
from hvdbench.results.records.rows import ReportRow
from hvdbench.results.records.schema import AllreduceRow, IoRow, RunResult
from hvdbench.results.render.tables import DASH, markdown_table, to_csv

FUSION_THRESHOLD_BYTES = 128 << 20  # Horovod >= 0.21's default HOROVOD_FUSION_THRESHOLD
GRADIENT_BYTES_PER_PARAMETER = 4  # fp32 gradients (Horovod allreduces them in fp32 unless compressed)


@dataclass(frozen=True, kw_only=True)
class CommRow(ReportRow):
    """comm_vs_training.csv: one row per model and layout with a training throughput and an allreduce
    bench of that layout."""

    model: str
    flavor: str
    framework: str
    precision: str
    layout: str
    gpus: int
    nodes: int
    controller: str  # the allreduce bench run's Horovod controller (gloo | mpi)
    throughput_mean: float
    step_ms: float | None  # a step's time: the global batch / throughput_mean
    gradient_mib: float | None  # the model's fp32 gradients per step: its parameters x 4 bytes
    message_mib: float | None  # the message size the busbw is read at: min(gradients, Horovod's 128 MiB fusion buffer)
    # Horovod's allreduce bus bandwidth at message_mib, log-log interpolated on the bench's fp32 curve
    busbw_gb_s: float | None
    mpi_busbw_gb_s: float | None  # MPI's, read the same way
    allreduce_ms: float | None  # the gradients' allreduce per step: gradient bytes / Horovod's algbw at message_mib
    # allreduce_ms / step_ms: the most of a step communication can take when nothing overlaps it
    comm_share: float | None
    bench_run_id: str  # the bench allreduce run read (the layout's latest)


@dataclass(frozen=True, kw_only=True)
class IoTableRow(ReportRow):
    """io_vs_training.csv: one row per model, layout and dataset of a kind it trains on with a `bench io`
    run of that layout."""

    model: str
    flavor: str
    framework: str
    layout: str
    gpus: int
    throughput_mean: float
    dataset: str  # the dataset bench io read
    kind: str  # the dataset's kind (one the model trains on)
    # yes where the page cache was dropped before each pass (without, the reader may have read memory)
    caches_dropped: bool
    io_samples_s: float  # the reader's samples/s, all ranks, the mean over its passes
    io_samples_s_min: float  # the reader's slowest pass
    decoded_samples_s: float | None  # the reader with the CPU decode (reader+decode), the mean over its passes
    h5py_samples_s: float | None  # plain h5py reading the same shards, the mean over its passes
    reader_vs_h5py: float | None  # io_samples_s / h5py_samples_s
    feed: float  # min(1, io_samples_s / throughput_mean): the share of training's demand the storage met
    bench_run_id: str  # the bench io run read (the dataset and layout's latest)


@dataclass
class BenchTables:
    comm: list[CommRow] = field(default_factory=list)
    io: list[IoTableRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --- inputs ----------------------------------------------------------------------------------------

def _latest(rows: list, key) -> dict[tuple, list]:
    """Per key, the rows of the run that started last (a rerun supersedes, nothing is deleted)."""
    runs: dict[tuple, dict[str, list]] = {}
    for r in rows:
        runs.setdefault(key(r), {}).setdefault(r.run_id, []).append(r)
    return {k: max(by_run.values(), key=lambda rs: (rs[0].started_at, rs[0].run_id)) for k, by_run in runs.items()}


def interpolate(points: list[tuple[float, float]], x: float) -> float | None:
    """Log-log linear interpolation through (size, value) points; None outside their range."""
    pts = sorted((a, b) for a, b in points if a > 0 and b and b > 0)
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1:
            if x1 == x0:
                return y0
            t = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return math.exp(math.log(y0) + t * (math.log(y1) - math.log(y0)))
    return pts[0][1] if len(pts) == 1 and pts[0][0] == x else None


def parameters_of(run: RunResult) -> int | None:
    """The run's trainable parameters: its record's count, else what the model's spec documents for
    that flavor (a run recorded without one, e.g. a published log); None when neither knows."""
    if run.parameters:
        return int(run.parameters)
    from hvdbench.contracts import expected_parameters  # lazily: the report needs no spec otherwise

    count = expected_parameters(run.model, run.flavor)
    return int(count) if count else None


@dataclass(frozen=True)
class _Training:
    """A model's successful runs of one layout: their mean throughput, and the first of them."""

    throughput_mean: float
    run: RunResult


def _training(runs: list[RunResult]) -> dict[tuple, _Training]:
    """Mean throughput of successful runs per (model, flavor, framework, precision, layout)."""
    groups: dict[tuple, list[RunResult]] = {}
    for r in runs:
        if r.status == "success" and r.throughput:
            groups.setdefault((r.model, r.flavor, r.framework, r.precision, r.layout), []).append(r)
    return {k: _Training(statistics.fmean(r.throughput for r in rs), rs[0]) for k, rs in sorted(groups.items())}


# --- tables ----------------------------------------------------------------------------------------

def comm_rows(runs: list[RunResult], allreduce: list[AllreduceRow]) -> list[CommRow]:
    benches = _latest([r for r in allreduce if r.dtype == "fp32"], key=lambda r: (r.layout,))
    out = []
    for (model, flavor, framework, precision, layout), t in _training(runs).items():
        rows = benches.get((layout,))
        if not rows:
            continue
        run, params = t.run, parameters_of(t.run)
        grad = params * GRADIENT_BYTES_PER_PARAMETER if params else None
        message = min(grad, FUSION_THRESHOLD_BYTES) if grad else None
        curve = lambda impl, col: [(r.bytes, getattr(r, col)) for r in rows if r.impl == impl]  # noqa: E731
        busbw = interpolate(curve("horovod", "busbw_gb_s"), message) if message else None
        mpi = interpolate(curve("mpi", "busbw_gb_s"), message) if message else None
        algbw = interpolate(curve("horovod", "algbw_gb_s"), message) if message else None
        step_ms = 1e3 * run.global_batch / t.throughput_mean if run.global_batch else None
        allreduce_ms = 1e3 * grad / (algbw * 1e9) if grad and algbw else None
        out.append(CommRow(model=model, flavor=flavor, framework=framework, precision=precision, layout=layout,
                           gpus=run.world_size, nodes=run.nodes, controller=rows[0].controller,
                           throughput_mean=t.throughput_mean, step_ms=step_ms,
                           gradient_mib=grad / 2**20 if grad else None,
                           message_mib=message / 2**20 if message else None, busbw_gb_s=busbw, mpi_busbw_gb_s=mpi,
                           allreduce_ms=allreduce_ms,
                           comm_share=allreduce_ms / step_ms if allreduce_ms and step_ms else None,
                           bench_run_id=rows[0].run_id))
    return out


def io_rows(runs: list[RunResult], io: list[IoRow]) -> list[IoTableRow]:
    from hvdbench.contracts import get_spec

    benches = _latest(io, key=lambda r: (r.dataset, r.split, r.layout))
    out = []
    for (model, flavor, framework, _, layout), t in _training(runs).items():
        try:
            kinds = get_spec(model).data_kinds
        except ConfigError:  # a published log's model name: no spec, match any dataset
            kinds = None
        for (dataset, _, io_layout), rows in sorted(benches.items()):
            reader = [r.samples_s for r in rows if r.impl == "reader" and r.samples_s]
            if io_layout != layout or not reader or (kinds and rows[0].kind not in kinds):
                continue
            h5 = [r.samples_s for r in rows if r.impl == "h5py" and r.samples_s]
            decoded = [r.samples_s for r in rows if r.impl == "reader+decode" and r.samples_s]
            mean = statistics.fmean(reader)
            out.append(IoTableRow(model=model, flavor=flavor, framework=framework, layout=layout,
                                  gpus=t.run.world_size, throughput_mean=t.throughput_mean, dataset=dataset,
                                  kind=rows[0].kind, caches_dropped=rows[0].caches_dropped, io_samples_s=mean,
                                  io_samples_s_min=min(reader),
                                  decoded_samples_s=statistics.fmean(decoded) if decoded else None,
                                  h5py_samples_s=statistics.fmean(h5) if h5 else None,
                                  reader_vs_h5py=mean / statistics.fmean(h5) if h5 else None,
                                  feed=min(1.0, mean / t.throughput_mean), bench_run_id=rows[0].run_id))
    return out


def build(runs: list[RunResult], allreduce: list[AllreduceRow], io: list[IoRow]) -> BenchTables:
    """The benches' rows beside the training runs of their layouts (hvdbench.results.report.load reads them)."""
    tables = BenchTables(comm_rows(runs, allreduce), io_rows(runs, io))
    if any(r.gradient_mib is None for r in tables.comm):
        tables.notes.append("gradient size unknown for some models (the run records no parameter count): "
                            "their busbw column is empty")
    return tables


# --- output ----------------------------------------------------------------------------------------

def _cell(v, fmt=".3g") -> str:
    if v is None:
        return DASH
    if isinstance(v, bool):
        return "yes" if v else "no"
    return f"{v:{fmt}}" if isinstance(v, float) else str(v)


def markdown(tables: BenchTables) -> str:
    parts = []
    if tables.comm:
        parts.append("## Interconnect: allreduce at the gradient size vs training\n\n" + markdown_table(
            ["model", "layout", "controller", "samples/s", "step ms", "gradients MiB", "message MiB",
             "busbw GB/s", "MPI busbw GB/s", "allreduce ms", "allreduce / step"],
            [[f"{r.model}/{r.flavor}", r.layout, r.controller, _cell(r.throughput_mean, ",.1f"),
              _cell(r.step_ms, ".1f"), _cell(r.gradient_mib, ".1f"), _cell(r.message_mib, ".1f"),
              _cell(r.busbw_gb_s), _cell(r.mpi_busbw_gb_s), _cell(r.allreduce_ms, ".1f"),
              DASH if r.comm_share is None else f"{100 * r.comm_share:.0f} %"] for r in tables.comm])
            + "\n\nbusbw = algbw × 2(n−1)/n (nccl-tests) at min(gradient bytes, 128 MiB fusion buffer), "
              "interpolated on the measured curve; allreduce ms = fp32 gradient bytes / algbw.\n")
    if tables.io:
        parts.append("## Storage: reader throughput vs training\n\n" + markdown_table(
            ["model", "layout", "training samples/s", "dataset", "caches dropped", "reader samples/s (min)",
             "+ CPU decode", "h5py samples/s", "reader / h5py", "feed"],
            [[f"{r.model}/{r.flavor}", r.layout, _cell(r.throughput_mean, ",.1f"), r.dataset,
              _cell(r.caches_dropped), f"{_cell(r.io_samples_s, ',.0f')} ({_cell(r.io_samples_s_min, ',.0f')})",
              _cell(r.decoded_samples_s, ",.0f"), _cell(r.h5py_samples_s, ",.0f"), _cell(r.reader_vs_h5py, ".2f"),
              f"{100 * r.feed:.0f} %"] for r in tables.io])
            + "\n\nfeed = min(1, reader samples/s / training samples/s): the share of the demand the "
              "storage meets; without dropped caches the reader may have read from memory.\n")
    parts += [f"- {n}" for n in tables.notes]
    return "\n".join(parts)


def write_csvs(tables: BenchTables, out) -> list[Path]:
    written = []
    for name, rows, row_type in (("comm_vs_training", tables.comm, CommRow), ("io_vs_training", tables.io, IoTableRow)):
        if rows:
            path = Path(out) / f"{name}.csv"
            atomic_write_text(path, to_csv(rows, row_type.columns()))
            written.append(path)
    return written
