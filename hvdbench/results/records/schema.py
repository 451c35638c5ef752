"""The one result schema of the runs: the columns of every CSV a run or a bench writes are declared
here, once (the report's tables are typed rows, rows.py's ReportRow, declared beside the section that
fills each).

    runs.csv                    RunResult: one row per training run (a retry appends another);
                                a worker writes the same record as result.json
    bench_allreduce.csv         AllreduceRow: one row per implementation, dtype and message size
    bench_io.csv                IoRow: one row per pass and way of reading
    bench_compute.csv           ComputeRow: one row per rank, operation and precision
    RUN/ranks.csv               RankRow: one row per rank of a multi-rank throughput run (its own
                                step times, gathered to rank 0 once at the end of the timed window)

runs.csv and the bench CSVs share their layout columns (`LayoutFields`), so a bench row joins the
training runs of its layout. A worker writes one `RunResult` as `result.json` (plus the resolved
config); a sweep appends the same record as one row of `runs.csv`; `hvdbench report` reads runs.csv
and the bench CSVs back through these classes. Bump a record's SCHEMA_VERSION whenever a field is
added, removed or changes meaning, so old files are refused with a clear message instead of being
misread.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import uuid
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hvdbench.errors import HvdbenchError
from hvdbench.files import atomic_write_text

SCHEMA_VERSION = 8
# What a run measured of its compute (schema 6; hvdbench.train.compute_window fills them once the loop ends).
COMPUTE_MEASURED = ("flops_per_sample", "model_tflops_per_gpu", "peak_tflops", "mfu", "mem_allocated_gb",
                    "mem_reserved_gb", "mem_resident_gb", "mem_estimate_gb", "energy_j", "energy_j_per_sample",
                    "power_w_per_gpu")
# Columns each runs.csv schema version added, so an older store still reads (its rows have them
# empty) and is upgraded in place by its next append (hvdbench.results.records.store).
ADDED_COLUMNS = {2: ("data_s", "compute_s", "comm_s", "update_s", "other_s"),
                 3: ("other_cpus", "other_gpu_procs", "timeline_negotiate_ms", "timeline_allreduce_ms",
                     "timeline_cycles_per_step", "timeline_fused_mib"),
                 4: ("threads",),
                 5: ("engine", "shard_parameters"),
                 6: COMPUTE_MEASURED + ("compile_s",),
                 7: ("levers", "published_share", "published_ref", "slowest_rank", "slowest_host",
                     "slowest_compute_ratio", "imbalance_s"),
                 8: ("mlperf_samples_per_row",)}
# What a column added later reads as in an older row, where empty would be wrong: every run before
# schema 5 trained under Horovod.
ADDED_DEFAULTS = {"engine": "horovod"}
_OLDER_VERSIONS = frozenset(str(v) for v in range(1, SCHEMA_VERSION))  # as their cells read

STATUSES = ("success", "aborted", "failed", "timeout")
# The RunResult columns a training run measures (hvdbench.train.loop.Measures holds them, with the
# defaults RunResult gives them; hvdbench.train.result copies them into the record).
MEASURED = ("status", "steps", "warmup_steps", "throughput", "step_time_mean_s", "step_time_std_s",
            "final_metric", "epochs", "epochs_to_target", "time_per_epoch_s", "time_to_train_s",
            "data_s", "compute_s", "comm_s", "update_s", "other_s", "other_cpus", "other_gpu_procs",
            "timeline_negotiate_ms", "timeline_allreduce_ms", "timeline_cycles_per_step", "timeline_fused_mib",
            "compile_s", "slowest_rank", "slowest_host", "slowest_compute_ratio", "imbalance_s",
            "mlperf_samples_per_row")
MODES = ("throughput", "time_to_accuracy")


class SchemaError(HvdbenchError):
    """A record or CSV that does not match this schema; the message names the file and the field."""


def new_run_id(now: datetime | None = None) -> str:
    """A run's id, for training and bench runs alike: its UTC start time to the second, then 8
    random hex digits (runs started in the same second still differ), e.g. 20260101T120000Z-1a2b3c4d.
    Ids sort by start time. `now` (UTC) lets a caller stamp the id and its start time from one reading."""
    now = now or datetime.now(timezone.utc)
    return f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


# Larger than anything a run or bench measures in any column (a 405B model's FLOPs per 8k-token sample
# are ~2e16), small enough that products of two figures stay finite: a value past it is an edit or a bug.
ABSURD = 1e20


class CsvRecord:
    """Mixin for a @dataclass whose fields are the columns of one CSV file (runs.csv, the bench
    CSVs), in field order unless the class says otherwise (see BenchRow). The class sets
    SCHEMA_VERSION and has a `schema_version: int = SCHEMA_VERSION` field. FIGURES: the float
    columns that are measured amounts (never negative); None: every float column."""

    SCHEMA_VERSION = 0
    FIGURES: tuple[str, ...] | None = None

    def clear_impossible(self) -> list[str]:
        """Empty every float cell that cannot be a measurement: infinite anywhere, negative or past
        ABSURD in a FIGURES column; one 'column has value: why' line per cell cleared. A store keeps
        such cells empty ("not measured") so no table prints them and no statistic overflows. NaN is
        emptied without a word: it has always meant "not measured" (a metric over no samples)."""
        said = []
        layout, values = _layout(type(self)), vars(self)
        for name in layout.float_fields:
            value = values[name]
            if not isinstance(value, float) or 0.0 <= value <= ABSURD:  # None, an int, or a figure in range
                continue
            if math.isnan(value):
                setattr(self, name, None)
                continue
            figure = layout.figures is None or name in layout.figures
            why = ("not a finite number" if not math.isfinite(value) else
                   "negative" if figure and value < 0 else
                   f"past {ABSURD:g}, no measurement" if figure and abs(value) > ABSURD else "")
            if why:
                said.append(f"column {name} has {value!r}: {why}, left empty")
                setattr(self, name, None)
        return said

    @classmethod
    def columns(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def to_row(self) -> dict[str, str]:
        """CSV cells: None is an empty cell, floats keep full precision, booleans are 1/0."""
        row = {}
        for f in fields(self):
            v = getattr(self, f.name)
            row[f.name] = ("" if v is None else str(int(v)) if isinstance(v, bool)
                           else repr(v) if isinstance(v, float) else str(v))
        return row

    @classmethod
    def from_row(cls, row: dict[str, str], where: str = "row"):
        """The record of one CSV row (column -> cell), each cell read as its field's type; SchemaError
        naming `where` and the column for a missing column, another schema version or a bad cell."""
        layout = _layout(cls)
        if not row.keys() >= layout.column_set:
            missing = [c for c in layout.columns if c not in row]
            raise SchemaError(f"{where}: missing column(s) {', '.join(missing)}")
        if str(row["schema_version"]) != layout.version:
            raise SchemaError(f"{where}: schema_version {row['schema_version']} "
                              f"(this hvdbench reads version {cls.SCHEMA_VERSION})")
        return cls._from_cells([row[c] for c in layout.columns], where)

    @classmethod
    def from_cells(cls, cells: list[str], where: str = "row"):
        """from_row for cells in columns() order (a store whose header is the class's columns: the
        report's read of runs.csv), without a dict per row; another schema version's row is read
        by from_row."""
        layout = _layout(cls)
        if cells[layout.version_at] != layout.version:
            return cls.from_row(dict(zip(layout.columns, cells)), where)
        return cls._from_cells(list(cells), where)

    @classmethod
    def _from_cells(cls, values: list, where: str):
        """The record of `values`, the cells in columns() order, each read in place."""
        layout = _layout(cls)
        try:
            for i in layout.floats:
                cell = values[i]
                values[i] = None if cell == "" else float(cell)
            for i in layout.ints:
                values[i] = int(values[i] or 0)
            for i in layout.optional_ints:
                cell = values[i]
                values[i] = None if cell == "" else int(cell or 0)
        except ValueError:
            raise SchemaError(f"{where}: column {layout.columns[i]} has {values[i]!r}, "
                              f"expected {layout.kinds[layout.columns[i]]}") from None
        for i in layout.bools:
            values[i] = values[i] in ("1", "True", "true", "yes")
        try:
            # By position where the columns are the leading fields in order (runs.csv's): matching
            # ninety keywords to their parameters took as long as reading the row.
            return cls(*values) if layout.positional else cls(**dict(zip(layout.columns, values)))
        except SchemaError as e:  # a check in __post_init__ does not know the file
            if str(e).startswith(where):
                raise
            raise SchemaError(f"{where}: {e}") from None


@dataclass(frozen=True)
class _Layout:
    """What reading a CsvRecord class's rows and clearing their impossible cells needs, worked out
    once per class: dataclasses.fields() recomputed cell by cell, about four times per row, was the
    whole of the report's cost per run (issue 54, item 8). A column is read by its field's
    annotation (a string: `from __future__ import annotations`): float ("" is None), int ("" is 0),
    int | None ("" is None), bool (1/True/true/yes); any other is text, the cell as it is."""

    columns: tuple[str, ...]  # the CSV's columns, in the class's order (its columns())
    column_set: frozenset[str]
    version: str  # SCHEMA_VERSION as its cell reads
    version_at: int  # where schema_version is among the columns
    # the columns' positions by how they read (the rest are text)
    floats: tuple[int, ...]
    ints: tuple[int, ...]
    optional_ints: tuple[int, ...]
    bools: tuple[int, ...]
    positional: bool  # the columns are the leading fields, in order: a record is made from them by position
    kinds: dict[str, str]  # field -> its annotation, for the line naming a bad cell
    float_fields: tuple[str, ...]  # every float field (a LoadedRun's too: clear_impossible looks at each)
    figures: frozenset[str] | None  # FIGURES; None: every float column


@functools.cache
def _layout(cls: type[CsvRecord]) -> _Layout:
    kinds = {f.name: str(f.type) for f in fields(cls)}
    columns = tuple(cls.columns())

    def at(kind: str, optional: bool | None = None) -> tuple[int, ...]:
        return tuple(i for i, c in enumerate(columns) if kinds[c].startswith(kind)
                     and (optional is None or ("None" in kinds[c]) == optional))

    return _Layout(columns=columns, column_set=frozenset(columns), version=str(cls.SCHEMA_VERSION),
                   version_at=columns.index("schema_version"), floats=at("float"), ints=at("int", optional=False),
                   optional_ints=at("int", optional=True), bools=at("bool"),
                   positional=columns == tuple(kinds)[:len(columns)] and all(
                       f.init and not f.kw_only for f in fields(cls)[:len(columns)]), kinds=kinds,
                   float_fields=tuple(name for name, kind in kinds.items() if kind.startswith("float")),
                   figures=None if cls.FIGURES is None else frozenset(cls.FIGURES))


@dataclass
class LayoutFields:
    """Where a run ran: the layout columns of runs.csv and of the bench CSVs, declared once, so a
    bench row joins the training runs of its layout (on `layout`)."""

    world_size: int = 0  # nodes x gpus_per_node
    nodes: int = 0
    gpus_per_node: int = 0
    layout: str = ""  # the "NxG" string
    scale: str = ""  # "up" (one node) or "out" (several)
    launcher: str = ""  # what started the ranks, e.g. horovodrun, mpirun, srun, single
    controller: str = ""  # gloo | mpi
    hosts: str = ""  # ';'-joined, rank order de-duplicated


# --- runs.csv / result.json --------------------------------------------------------------------

@dataclass
class _RunIdentity:
    """RunResult's first columns: what ran, with which batch."""

    run_id: str = ""
    sweep: str = ""
    repeat: int = 0
    model: str = ""
    flavor: str = ""
    framework: str = ""
    precision: str = "fp32"
    mode: str = "throughput"  # one of MODES
    dataset: str = ""  # path of the prepared dataset, or "synthetic"
    # batch
    batch_per_gpu: int = 0
    accum_steps: int = 1
    global_batch: int = 0


# A dataclass takes its bases' fields in reverse order of the bases, then its own: runs.csv's
# columns are _RunIdentity's, then LayoutFields', then RunResult's own (schema version 1's order).
@dataclass
class RunResult(LayoutFields, _RunIdentity, CsvRecord):
    SCHEMA_VERSION = SCHEMA_VERSION  # a class attribute (no annotation), not a column
    # The measured amounts, never negative (a loss target or a final metric may be): empty past ABSURD.
    FIGURES = COMPUTE_MEASURED + ("throughput", "throughput_per_gpu", "step_time_mean_s", "step_time_std_s",
                                  "epochs", "epochs_to_target", "time_per_epoch_s", "time_to_train_s", "wall_s",
                                  "data_s", "compute_s", "comm_s", "update_s", "other_s", "compile_s",
                                  "mlperf_samples_per_row")

    devices: str = ""  # ';'-joined distinct device names
    versions: str = ""  # 'name=version;...'
    parameters: int = 0  # trainable parameters: the gradient bytes each step allreduces (x dtype size)
    # throughput mode: samples/s over all ranks between synchronised points, warm-up excluded
    steps: int = 0
    warmup_steps: int = 0
    throughput: float | None = None
    throughput_per_gpu: float | None = None
    step_time_mean_s: float | None = None
    step_time_std_s: float | None = None
    # time-to-accuracy mode (MLPerf): run_start -> run_stop
    metric_name: str = ""
    target: float | None = None
    final_metric: float | None = None
    epochs: float | None = None
    epochs_to_target: float | None = None
    time_per_epoch_s: float | None = None
    time_to_train_s: float | None = None
    # outcome
    status: str = "success"  # one of STATUSES
    error: str = ""
    started_at: str = ""  # ISO 8601, UTC
    # Seconds the run took, end to end. In runs.csv, for every status (success, aborted, failed,
    # timeout): the launch as the sweep measured it, from starting the launcher to its exit (process
    # start-up and teardown included). In a result.json that `hvdbench train` writes itself (no
    # launcher to time): rank 0's time from the worker's start to its record.
    wall_s: float | None = None
    # Where a throughput run's mean step time went (seconds per step, PyTorch runs; they add up to
    # step_time_mean_s): waiting for the next batch, forward and backward, communication the step
    # waited for after backward (Horovod's synchronize), the optimizer's update, and the rest.
    data_s: float | None = None
    compute_s: float | None = None
    comm_s: float | None = None
    update_s: float | None = None
    other_s: float | None = None
    # What else used the run's machines while it was timed (hvdbench.interference): the busiest
    # machine's cores' worth of other processes' CPU time, and other compute processes on its GPUs
    # (None without a GPU).
    other_cpus: float | None = None
    other_gpu_procs: int | None = None
    # `train --horovod-timeline`: Horovod's timeline of the timed steps, per step (hvdbench.train.timeline)
    timeline_negotiate_ms: float | None = None
    timeline_allreduce_ms: float | None = None
    timeline_cycles_per_step: float | None = None
    timeline_fused_mib: float | None = None
    # CPU math threads per rank (the same in every layout of a sweep: see TrainConfig.thread_share)
    threads: int | None = None
    # How the ranks trained together (horovod, ddp, fsdp: TrainConfig.engine), part of a run's scaling
    # group; and the most parameters one rank held (fsdp: its shard; else every parameter).
    engine: str = "horovod"
    shard_parameters: int | None = None
    # Compute (schema 6; hvdbench.train.compute_window). Empty where not measured, never 0.
    # Training FLOPs per sample (forward + backward, counted on the meta device by
    # hvdbench.frameworks.torch.flops; model FLOPs: no recompute), and what they make of throughput:
    flops_per_sample: float | None = None
    model_tflops_per_gpu: float | None = None  # flops_per_sample x throughput_per_gpu / 1e12
    peak_tflops: float | None = None  # the device's dense datasheet peak in the run's precision (hvdbench.peaks)
    mfu: float | None = None  # model_tflops_per_gpu / peak_tflops (a fraction)
    # Peak memory over the timed window, the most any rank held, GB (1e9 bytes): GPUs' allocated and
    # reserved (torch.cuda.max_memory_*), CPUs' resident set (ru_maxrss: the whole process's life);
    # beside train/memory.py's estimate for one rank.
    mem_allocated_gb: float | None = None
    mem_reserved_gb: float | None = None
    mem_resident_gb: float | None = None
    mem_estimate_gb: float | None = None
    # NVIDIA GPUs (NVML's energy counter, every rank's GPU): joules over the timed window (throughput)
    # or run_start -> run_stop (time to accuracy: the energy to train), all GPUs together; per sample;
    # and the mean power per GPU.
    energy_j: float | None = None
    energy_j_per_sample: float | None = None
    power_w_per_gpu: float | None = None
    # --compile (or a compiled optimizer): the seconds torch.compile spent compiling in the run's steps
    # and evaluations (in the warm-up, out of the throughput; recompiles too); empty when nothing compiled.
    compile_s: float | None = None
    # The levers the run was given where they differ from its model's defaults (schema 7;
    # hvdbench.train.config.levers_text), e.g. "compile=default;channels_last": part of a run's
    # identity as engine and precision are, so a levers sweep is never averaged with a plain one.
    levers: str = ""
    # Schema 7 too: the run's per-GPU rate / MLPerf's published one for its accelerator and benchmark at
    # the benchmark's flavor (hvdbench.published), and that figure's round, system and precision.
    published_share: float | None = None
    published_ref: str = ""
    # Per-rank times (schema 7; a multi-rank throughput run with a step breakdown: RUN/ranks.csv holds
    # every rank's, hvdbench.results.records.ranks summarises them): the rank whose own compute per step
    # was the slowest, its host, its compute over the median of the other ranks', and the imbalance,
    # the slowest rank's compute minus the median rank's (seconds per step: what the others wait for
    # it at each gradient exchange). Empty for one rank, time-to-accuracy runs and failed runs.
    slowest_rank: int | None = None
    slowest_host: str = ""
    slowest_compute_ratio: float | None = None
    imbalance_s: float | None = None
    # Schema 8: how many of MLPerf's samples a row held on average over a throughput run's timed steps,
    # where MLPerf counts something else than rows (packed BERT: its sequences, ~2 a row; an unpacked
    # row, 1): throughput x this is the rate MLPerf's logs count (DatasetKind.mlperf_samples). Empty
    # where a row is one of MLPerf's samples, and for time-to-accuracy runs.
    mlperf_samples_per_row: float | None = None
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self):
        if self.status not in STATUSES:
            raise SchemaError(f"status {self.status!r} is not one of {', '.join(STATUSES)}")
        if self.mode not in MODES:
            raise SchemaError(f"mode {self.mode!r} is not one of {', '.join(MODES)}")

    @classmethod
    def added_since(cls, version: int) -> tuple[str, ...]:
        """The columns schema versions after `version` added (empty in an older store's rows)."""
        return tuple(c for v, cols in sorted(ADDED_COLUMNS.items()) if v > version for c in cols)

    @classmethod
    def from_row(cls, row: dict[str, str], where: str = "row") -> "RunResult":
        """A runs.csv row (an empty cell or nan is "not measured", which the report leaves out; the store
        empties an infinite or impossible figure with a warning: CsvRecord.clear_impossible). A row of
        an older schema version reads with the columns added since empty."""
        if str(row.get("schema_version")) in _OLDER_VERSIONS:
            added = cls.added_since(int(row["schema_version"]))
            row = {**{c: ADDED_DEFAULTS.get(c, "") for c in added}, **row, "schema_version": str(SCHEMA_VERSION)}
        return super().from_row(row, where)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "record") -> "RunResult":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SchemaError(f"{where}: unknown field(s) {', '.join(unknown)}")
        version = data.get("schema_version", SCHEMA_VERSION)
        if version != SCHEMA_VERSION:
            raise SchemaError(
                f"{where}: schema_version {version} (this hvdbench reads version {SCHEMA_VERSION})")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# What loading a run finds beside its record (hvdbench.results.report.load) or reads of a published
# log (hvdbench.results.mllog.record): the time to train in parts (mllog.summary.TTT_FIELDS).
TTT_PARTS = ("trained", "trained_unit", "trained_from", "train_s", "train_from", "eval_s", "eval_from", "evals")


@dataclass
class LoadedRun(RunResult):
    """A run as the report holds it: runs.csv's columns (RunResult) plus what loading found beside
    them. Never written: `columns()` stays runs.csv's. A sweep's runs get the link from its sweep.json,
    the evaluation cadence from each run's config.yaml and the time to train in parts from its
    mllog.txt; a published log's run (mllog.record.MllogRun, a LoadedRun) the same names from the log."""

    # What joins the nodes: sweep.json's link or its hosts' measured one; a systems JSON's host_networking.
    link: str = ""
    intra_link: str = ""  # what joins a node's GPUs (the hosts' hardware record)
    host_cpus: int | None = None  # logical CPUs of the smallest host (sweep.json's hardware record)
    cpu_model: str = ""  # the hosts' CPU model(s), ' | '-joined where they differ (named on CPU runs)
    eval_every: float | None = None  # the run's resolved config: evaluate every so many eval_unit
    eval_unit: str = ""
    # The time to train in parts (TTT_PARTS; hvdbench.results.analyses.ttt): what was trained by run_stop
    # (samples, or epochs), seconds training and evaluating, and where each came from.
    trained: float | None = None
    trained_unit: str = ""
    trained_from: str = ""
    train_s: float | None = None
    train_from: str = ""
    eval_s: float | None = None
    eval_from: str = ""
    evals: int | None = None  # evaluations inside run_start -> run_stop (eval_start/eval_stop intervals)
    # A published log's (empty for a sweep's runs): the result it belongs to (one time-to-train row
    # each, mllog.groups.assign_studies), where its layout came from, its samples to target, the
    # ruleset of its RCP check and the accelerator named in its systems JSON.
    result: str = ""
    layout_source: str = ""
    samples_to_target: float | None = None
    ruleset: str = ""
    accelerator: str = ""
    # A published log's gradient_accumulation_steps: micro-batches per optimizer step, which tells
    # accumulation from model parallelism (ttt.LayoutParts.gpus_per_replica). Not accum_steps: that one
    # splits the scaling groups of hvdbench's own runs, and a published study changes it between layouts.
    accumulation: int = 1
    # A sweep's multi-rank throughput run's RUN/ranks.csv (RankRow each; hvdbench.results.analyses.stragglers),
    # [] where there is none (one rank, time to accuracy, a run recorded before schema 7, a published log).
    ranks: list = dataclasses.field(default_factory=list)

    @classmethod
    def columns(cls) -> list[str]:
        return RunResult.columns()

    def to_row(self) -> dict[str, str]:
        row = super().to_row()
        return {c: row[c] for c in RunResult.columns()}


# --- the bench CSVs ----------------------------------------------------------------------------

# The order of the layout columns in the bench CSVs, which end with them (then schema_version):
# their first files were written with hosts, controller and launcher in this order, and rows are
# appended under the header a file already has, so that order cannot change.
BENCH_LAYOUT_COLUMNS = ("world_size", "nodes", "gpus_per_node", "layout", "scale", "hosts", "controller", "launcher")


@dataclass
class BenchRow(LayoutFields, CsvRecord):
    """Base of the bench CSV rows: the bench's own columns, then the layout, then schema_version."""

    @classmethod
    def columns(cls) -> list[str]:
        own = [name for name in super().columns() if name not in BENCH_LAYOUT_COLUMNS and name != "schema_version"]
        return [*own, *BENCH_LAYOUT_COLUMNS, "schema_version"]


@dataclass
class AllreduceRow(BenchRow):
    """A row of bench_allreduce.csv: one implementation, dtype and message size of one run."""

    SCHEMA_VERSION = 1

    run_id: str = ""
    started_at: str = ""  # ISO 8601, UTC
    impl: str = ""  # horovod | mpi
    dtype: str = ""  # fp32 | fp16
    bytes: int = 0
    elements: int = 0
    iters: int = 0  # timed operations (scaled down for large messages, see bench.formulas.iterations)
    warmup_iters: int = 0
    time_mean_s: float | None = None  # per operation; mean over ranks
    time_min_s: float | None = None
    time_max_s: float | None = None
    algbw_gb_s: float | None = None  # bytes / time_mean_s / 1e9
    busbw_gb_s: float | None = None  # algbw x 2(n-1)/n
    wrong: int = 0  # elements that differed from the expected sum in the check before timing
    vs_mpi: float | None = None  # horovod rows: mpi time / horovod time at the same dtype and size
    note: str = ""
    schema_version: int = SCHEMA_VERSION


@dataclass
class ComputeRow(BenchRow):
    """A row of bench_compute.csv: one operation (a dense matrix product in one precision, or a large
    copy) timed on one rank's device in one run."""

    SCHEMA_VERSION = 1

    run_id: str = ""
    started_at: str = ""  # ISO 8601, UTC
    rank: int = 0
    host: str = ""
    device: str = ""  # the device's name (torch.cuda.get_device_name, or "cpu")
    op: str = ""  # matmul | copy
    dtype: str = ""  # fp32 | tf32 | bf16 | fp16 | fp8 (copy: the element type copied)
    size: int = 0  # matmul: n of n x n x n; copy: bytes of the source tensor
    iters: int = 0  # timed operations
    time_mean_s: float | None = None  # per operation
    tflops: float | None = None  # matmul: 2 n^3 / time / 1e12
    gb_s: float | None = None  # copy: bytes read + written / time / 1e9
    peak_tflops: float | None = None  # matmul: the datasheet's dense peak (hvdbench.peaks), if the device is known
    vs_peak: float | None = None  # tflops / peak_tflops
    note: str = ""  # why a precision has no figure on this device
    schema_version: int = SCHEMA_VERSION


@dataclass
class IoRow(BenchRow):
    """A row of bench_io.csv: one way of reading (reader, reader+decode, h5py) in one pass of one run."""

    SCHEMA_VERSION = 1

    run_id: str = ""
    started_at: str = ""  # ISO 8601, UTC
    dataset: str = ""
    kind: str = ""
    split: str = ""
    impl: str = ""  # reader | reader+decode | h5py
    pass_index: int = 0
    batch_size: int = 0
    samples: int = 0  # read in this pass, all ranks
    dataset_samples: int = 0  # in the split: samples == dataset_samples means every sample once
    bytes: int = 0  # stored bytes read, all ranks
    elapsed_s: float | None = None  # the slowest rank's time
    samples_s: float | None = None  # all ranks
    mb_s: float | None = None  # all ranks, 1e6 bytes
    rank_samples_s_min: float | None = None
    rank_samples_s_max: float | None = None
    rank_mb_s_min: float | None = None
    rank_mb_s_max: float | None = None
    vs_h5py: float | None = None  # reader rows: their samples/s / h5py samples/s in the same pass
    caches_dropped: bool = False
    dataset_bytes: int = 0  # size of the split's shard files
    mem_available_bytes: int = 0  # MemAvailable on rank 0's node at the start
    fits_in_cache: bool = False
    demand_samples_s: float | None = None
    demand_source: str = ""
    feed_fraction: float | None = None  # min(1, samples_s / demand)
    schema_version: int = SCHEMA_VERSION


@dataclass
class LinkRow(BenchRow):
    """A row of bench_links.csv: one pair of ranks and one message size of one `bench links` run, the
    two measured alone (every other rank idle). `time_s` is one way: half a ping-pong's round trip
    (Intel MPI Benchmarks' PingPong: t = round trip / 2), the median over the repeats, each repeat the
    mean of `iters` round trips; bandwidth = bytes / time_s (GB/s = 1e9 B/s, one direction)."""

    SCHEMA_VERSION = 1

    run_id: str = ""
    started_at: str = ""  # ISO 8601, UTC
    kind: str = ""  # between (two hosts: each host's first rank) | within (two ranks of one host)
    host_a: str = ""
    host_b: str = ""
    rank_a: int = 0
    rank_b: int = 0
    device_a: str = ""  # "cpu", or "GPU <index> <name>"
    device_b: str = ""
    backend: str = ""  # gloo (CPU tensors) | nccl (GPU tensors)
    bytes: int = 0
    iters: int = 0  # timed round trips per repeat (fewer where they are slow: bench links --budget-s)
    repeats: int = 0
    time_s: float | None = None  # one way (half a round trip), median over the repeats
    time_min_s: float | None = None  # the fastest and slowest repeat
    time_max_s: float | None = None
    bandwidth_gb_s: float | None = None  # bytes / time_s / 1e9
    wrong: int = 0  # bytes that differed from what was sent, at either end, in the round trip before timing
    nic_a: str = ""  # between hosts: the interface each end sent through, with its rate (the hardware record's)
    nic_b: str = ""
    nic_gb_s: float | None = None  # the slower end's rated rate, GB/s (empty where a NIC reports none)
    intra_link: str = ""  # within a host: `nvidia-smi topo -m`'s word for its two GPUs (NV18, PIX), or loopback
    note: str = ""
    schema_version: int = SCHEMA_VERSION


# --- a run's per-rank times (RUN/ranks.csv) ----------------------------------------------------

@dataclass
class RankRow(CsvRecord):
    """A row of RUN/ranks.csv: one rank's own times per step over the timed window (seconds, means
    over the window's steps), where it ran and on what. Rank 0 writes the file once, from one gather
    at the end of the window; a run that died before it has none (never an invented row)."""

    SCHEMA_VERSION = 1

    run_id: str = ""
    rank: int = 0
    host: str = ""
    local_rank: int = 0
    device: str = ""  # the device's name (the CPU's: "cpu")
    gpu_index: int | None = None  # NVML's index of the rank's GPU (empty on CPUs or without NVML)
    gpu_uuid: str = ""  # NVML's UUID of it
    step_s: float | None = None  # the rank's mean step time
    compute_s: float | None = None  # its own forward and backward, without waiting for the others
    data_s: float | None = None  # waiting for its next batch
    comm_s: float | None = None  # waiting at the gradient exchange (for the others, and the transfer)
    schema_version: int = SCHEMA_VERSION


# --- what the report reads of the runs ---------------------------------------------------------

# Cores' worth of other work that makes a run's numbers suspect (the report's `busy` flag, sweep
# --require-idle): half a core on average is a neighbour busy half the time, enough to stretch a CPU
# rank's steps (it spins on the same cores).
BUSY_CPUS = 0.5


# --- result.json -----------------------------------------------------------------------------

def write_result(path: str | os.PathLike, result: RunResult, config: dict | None = None) -> None:
    """Write result.json atomically: the record's fields plus the resolved run configuration."""
    data = result.to_dict()
    data_with_config = {**data, "config": config or {}}
    atomic_write_text(Path(path), json.dumps(data_with_config, indent=2, sort_keys=True) + "\n")


def read_result(path: str | os.PathLike) -> tuple[RunResult, dict]:
    """Read a result.json; returns (record, resolved config)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise SchemaError(f"{path}: no result record") from None
    except json.JSONDecodeError as e:
        raise SchemaError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    except (OSError, UnicodeDecodeError) as e:  # a read error has no file name of its own: name it
        raise SchemaError(f"{path}: unreadable result record ({getattr(e, 'strerror', None) or e})") from None
    if not isinstance(data, dict):
        raise SchemaError(f"{path}: not a result record (a JSON object)")
    config = data.pop("config", {})
    return RunResult.from_dict(data, where=str(path)), config
