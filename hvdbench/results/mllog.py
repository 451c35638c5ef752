"""The one reader of MLPerf `:::MLLOG {json}` event logs: hvdbench's own `mllog.txt`, the
`result_N.txt` files of MLCommons training results repositories, and raw launcher logs.

    from hvdbench.results.mllog import load
    runs, notes = load("training_results_v4.0/Oracle")      # -> list[MllogRun], what to tell the user

Files. Every text file under the folder that holds a run's `:::MLLOG` lines is read, whatever its
name (`result_N.txt`, `mllog.txt`, `*.log`, `slurm-*.out`); the others (code, binaries, MLPerf power
logs, files without the marker) are counted as skipped, with the reason (`Reading.summary`), except
a submission's `result_N.txt`, which is a run even when it logged nothing (a failed one, as the
summarizer counts it). Published files are often raw job logs: every rank's output, each line
behind a launcher prefix (`srun -l`: ` 3: `, Open MPI `--tag-output`: `[1,3]<stdout>:`, horovodrun:
`[3]<stdout>:`), mixed with unrelated output, sometimes several runs one after another (a Slurm
job looping over trials). So the marker is searched anywhere in a line, the rank is read from the
prefix, an event logged by several ranks is counted once (`dedupe`), and a file with several
run_start ... run_stop runs is split into one run each (`split_runs`).

Layout (nodes x accelerators per node), first source that gives both (`resolve_layout`):
1. the log's `number_of_nodes` / `accelerators_per_node` events (what hvdbench itself logs);
2. the submission's `systems/<system>.json` (`number_of_nodes`, `accelerators_per_node`), or the
   same JSON echoed into the log as a `:::SYSJSON` line;
3. an MLPerf config name `NODESxGPUSxBATCHxACCUM` (`DGXA100_2x8x56x1`, `4x4`) in a folder or file name;
4. the platform text: the log's `submission_platform` (`8xNVIDIA DGX H100` = 8 nodes of 8,
   `8xA100` = one node of 8), then the system folder's name (`XE8640x4H100-SXM-80GB`).
Each run records which one it used (`MllogRun.layout_source`); the report prints it per group.

Groups. A run's system for the report (`MllogRun.devices`) is named by `--group-by` keys, by
default submitter + system: the systems JSON's `submitter` / `system_name`, else the log's
`submission_org` / the system folder, with the size taken out (`system_family`), so one system's
layouts share a group and a speed-up, and two submitters' placeholder platforms never pool.

Reference convergence points: `rcp_check` runs mlperf-logging's own RCP checker on a group of
runs, as the official summarizer does for closed-division results.
"""

from __future__ import annotations

import json
import logging
import os
import re
import statistics
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from mlperf_logging.mllog import constants as C

from hvdbench.errors import ConfigError
from hvdbench.results.schema import RunResult, SchemaError

MARKER = ":::MLLOG"
SYSJSON_MARKER = ":::SYSJSON"  # NVIDIA's launch scripts echo the systems JSON into the log
RESULT_GLOB = "result_*.txt"
OWN_LOG_NAME = "mllog.txt"
# Not in mlperf_logging's constants, but what its result summarizer reads for instance scale.
NUMBER_OF_NODES = "number_of_nodes"
ACCELERATORS_PER_NODE = "accelerators_per_node"
TRACKED_STATS = "tracked_stats"  # {"throughput": samples/s}: NVIDIA's logs and hvdbench throughput runs

# Files a folder walk does not open: code, configuration, documents and archives (a source file
# may quote an MLLOG line; a results repository holds the code that wrote its logs).
NOT_LOGS = frozenset(".py .sh .sub .json .yaml .yml .md .rst .ipynb .c .cc .cpp .cu .h .hpp .toml .cfg "
                     ".ini .html .css .js .png .jpg .jpeg .svg .pdf .gz .bz2 .xz .tar .tgz .zip .h5 .pt".split())
BINARY_PROBE = 8192  # bytes looked at for a NUL

# MLPerf benchmarks whose logs count samples, not epochs, in `epoch_num` (their reference
# convergence points are sample counts too); with the registry's `counts_samples` for hvdbench's
# own models, and any log whose evaluations carry `samples_count`.
SAMPLE_COUNTED_BENCHMARKS = frozenset({
    "bert", "unet3d", "gpt3", "stable_diffusion", "llama2_70b_lora", "llama31_8b", "llama31_405b",
    "flux1", "gpt_oss_20b", "deepseekv3_671b", "dlrmv4"})
# The events mlperf-logging's RCP checker reads (rcp_checker.read_submission_file).
RCP_KEYS = frozenset({C.GLOBAL_BATCH_SIZE, C.SUBMISSION_BENCHMARK, C.EVAL_ACCURACY, "eval_error",
                      C.TRAIN_SAMPLES, C.RUN_STOP})
# A file whose events include none of these is not a training run's log (MLPerf power logs:
# results/<system>/<benchmark>/power/result_N/node_0.txt hold power_reading events only).
RUN_KEYS = frozenset({C.RUN_START, C.RUN_STOP, C.INIT_START, C.INIT_STOP, C.SUBMISSION_BENCHMARK, C.EVAL_ACCURACY})
DEFAULT_RULESET = "4.0.0"  # the last training ruleset with ResNet-50 (hvdbench's own logs follow it)

# Layout sources, in order of precedence (see the module docstring).
SOURCE_LOG = "log events"
SOURCE_SYSTEMS_JSON = "systems JSON"
SOURCE_SYSJSON_LINE = "systems JSON (:::SYSJSON line)"
SOURCE_NAME = "NxGxBxA name"
SOURCE_PLATFORM = "platform text"
SOURCE_FOLDER = "system folder name"
SOURCE_UNKNOWN = "unknown"

GROUP_KEYS = {
    "submitter": "the systems JSON's submitter, else the log's submission_org, else the folder above results/",
    "system": "the systems JSON's system_name, else the system folder, else the platform, size removed",
    "platform": "the log's submission_platform, size removed",
    "folder": "the system folder (results/<system>/...), else the log's folder, size removed",
    "accelerator": "the systems JSON's accelerator_model_name",
}
DEFAULT_GROUP_BY = "submitter+system"

# Launcher prefixes, matched at the end of the text before the marker; group 1 is the rank.
_RANK_PREFIXES = (
    re.compile(r"\[\d+,(\d+)\]<std(?:out|err)>:\s*$"),  # Open MPI --tag-output: [jobid,rank]
    re.compile(r"\[(\d+)\]<std(?:out|err)>:\s*$"),  # horovodrun: [rank]
    re.compile(r"(?:^|\s)(\d+):\s*$"),  # srun -l: "  3: " (rank, colon)
)
_DECODER = json.JSONDecoder()
_PLACEHOLDER = re.compile(r"placeholder|unknown_mlperf|^\s*unknown\s*$", re.I)


@dataclass(frozen=True)
class Event:
    time_ms: float
    event_type: str
    key: str
    value: Any
    metadata: dict
    rank: int | None  # from the launcher prefix; None when the line has none
    lineno: int

    def line(self) -> str:
        """The event as one official `:::MLLOG {json}` line (what the RCP checker is given)."""
        return f"{MARKER} " + json.dumps({"namespace": "", "time_ms": self.time_ms, "event_type": self.event_type,
                                          "key": self.key, "value": self.value, "metadata": self.metadata})


@dataclass
class LogSummary:
    """What one run's log says; `to_run_result` turns it into the common record."""
    path: str
    events: int = 0
    duplicates: int = 0  # events dropped because another rank (or an identical line) had them
    bad_lines: int = 0  # lines with the marker whose JSON could not be read
    part: int = 0  # 1, 2, ... when the file holds several runs; 0 when it holds one
    benchmark: str = ""
    platform: str = ""
    org: str = ""
    division: str = ""
    submission_status: str = ""  # onprem, cloud, research, preview
    run_start_ms: float | None = None
    run_stop_ms: float | None = None
    stop_status: str | None = None
    global_batch: int = 0
    epochs: float | None = None
    final_metric: float | None = None
    throughput: float | None = None  # the last tracked_stats throughput
    eval_accuracy: list[tuple[float | None, float]] = field(default_factory=list)
    epoch_times_s: list[float] = field(default_factory=list)
    nodes: int = 0
    gpus_per_node: int = 0
    sample_based: bool = False  # evaluations are every N samples (epoch_num is a sample count)
    samples: float | None = None  # samples trained at the last evaluation (sample-based logs)
    sysjson: dict = field(default_factory=dict)  # a :::SYSJSON line's systems JSON
    rcp_lines: list[str] = field(default_factory=list)  # the events the RCP checker reads

    @property
    def status(self) -> str:
        if self.run_start_ms is None or self.run_stop_ms is None:
            return "failed"
        return "success" if self.stop_status == C.SUCCESS else "aborted"

    @property
    def error(self) -> str:
        if self.run_start_ms is None:
            return f"no {C.RUN_START} event"
        if self.run_stop_ms is None:
            return f"no {C.RUN_STOP} event (the log ends early)"
        if self.stop_status != C.SUCCESS:
            return f"{C.RUN_STOP} status {self.stop_status or 'missing'}"
        return ""

    @property
    def time_to_train_s(self) -> float | None:
        if self.run_start_ms is None or self.run_stop_ms is None:
            return None
        return (self.run_stop_ms - self.run_start_ms) / 1000.0


@dataclass
class MllogRun(RunResult):
    """A run read from an MLPerf log: the common record (`devices` holds the report's group name)
    plus what only a log and its submission tree say. Never written to runs.csv."""

    layout_source: str = ""  # one of the SOURCE_* constants, then what it read, e.g. "NxGxBxA name (DGX_2x8x56x1)"
    submitter: str = ""
    system_name: str = ""  # the system as named (systems JSON, folder or platform), with its size
    division: str = ""
    samples_to_target: float | None = None  # sample-based logs: samples trained when the target was reached
    ruleset: str = ""  # MLPerf training ruleset for the RCP check
    ruleset_assumed: bool = False  # no --ruleset and no training_results_vX.Y in the path
    published_scaling: float | None = None  # scaling.json beside the log (the published RCP rescale)
    rcp_lines: list[str] = field(default_factory=list, repr=False)
    link: str = ""  # the systems JSON's host_networking: what joins the nodes


# --- lines and events ----------------------------------------------------------------------

def parse_line(line: str, lineno: int = 0) -> Event | None:
    """One event from a line holding `:::MLLOG {json}` anywhere; None for other lines.
    Raises ValueError for a marker whose JSON is unreadable (e.g. two ranks' output interleaved)."""
    at = line.find(MARKER)
    if at < 0:
        return None
    text = line[at + len(MARKER):].lstrip()
    record, _ = _DECODER.raw_decode(text)  # raw_decode: trailing output after the JSON is fine
    if not isinstance(record, dict) or "key" not in record:
        raise ValueError("not an MLLOG record")
    try:
        time_ms = float(record["time_ms"])
    except (KeyError, TypeError, ValueError):
        raise ValueError("MLLOG record without a time_ms") from None
    metadata = record.get("metadata") or {}
    return Event(time_ms=time_ms, event_type=str(record.get("event_type", "")),
                 key=str(record["key"]), value=record.get("value"),
                 metadata=metadata if isinstance(metadata, dict) else {},
                 rank=_rank(line[:at]), lineno=lineno)


def _rank(prefix: str) -> int | None:
    for pattern in _RANK_PREFIXES:
        m = pattern.search(prefix)
        if m:
            return int(m.group(1))
    return None


def dedupe(events: Iterable[Event]) -> tuple[list[Event], int]:
    """Count every event once. Two rules, in order:
    1. identical records (same time, type, key, value, metadata) are one event, whatever the rank;
    2. a key logged by several ranks is taken from the lowest rank that logged it (rank 0 is
       MLPerf's logging rank; a line without a prefix counts as rank 0), so rank 3's copy of
       run_start, a few ms off rank 0's, is not a second run_start.
    Returns (kept events in file order, number dropped)."""
    events = list(events)
    seen, unique = set(), []
    for e in events:
        ident = (e.time_ms, e.event_type, e.key, json.dumps(e.value, sort_keys=True),
                 json.dumps(e.metadata, sort_keys=True))
        if ident not in seen:
            seen.add(ident)
            unique.append(e)
    lowest: dict[str, int] = {}
    for e in unique:
        rank = e.rank or 0
        lowest[e.key] = min(rank, lowest.get(e.key, rank))
    kept = [e for e in unique if (e.rank or 0) == lowest[e.key]]
    return kept, len(events) - len(kept)


@dataclass
class LogFile:
    """One file as read: de-duplicated events and what else its lines said."""
    path: str
    events: list[Event]
    duplicates: int = 0
    bad_lines: int = 0  # marker lines whose JSON could not be read
    marker_lines: int = 0  # lines holding the marker, readable or not
    sysjson: dict = field(default_factory=dict)


def read_log(path: str | os.PathLike) -> LogFile:
    """Every :::MLLOG event of one file (the one parser: `read_events`, `load` and every report go
    through it), and the first :::SYSJSON line's systems JSON."""
    raw, bad, markers, sysjson = [], 0, 0, {}
    with open(path, encoding="utf-8", errors="replace") as f:  # raw job logs hold any bytes
        for lineno, line in enumerate(f, 1):
            if not sysjson and SYSJSON_MARKER in line:
                sysjson = _sysjson(line)
            if MARKER not in line:
                continue
            markers += 1
            try:
                event = parse_line(line, lineno)
            except ValueError:  # json.JSONDecodeError is a ValueError
                bad += 1
                continue
            if event is not None:
                raw.append(event)
    events, dropped = dedupe(raw)
    return LogFile(str(path), events, dropped, bad, markers, sysjson)


def _sysjson(line: str) -> dict:
    text = line[line.find(SYSJSON_MARKER) + len(SYSJSON_MARKER):].strip().rstrip("'\"")
    try:
        record, _ = _DECODER.raw_decode(text)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def read_events(path: str | os.PathLike) -> tuple[list[Event], int, int]:
    """(de-duplicated events, duplicates dropped, unreadable marker lines) of one log file."""
    log = read_log(path)
    return log.events, log.duplicates, log.bad_lines


def read_event_dicts(path: str | os.PathLike) -> list[dict]:
    """The events of one run's own log as plain dicts with the :::MLLOG record's keys (time_ms,
    event_type, key, value, metadata), de-duplicated as `read_events` does: for checking what a run
    logged (tests). A worker's log is written whole, so an unreadable marker line here is an error."""
    events, _, bad = read_events(path)
    if bad:
        raise SchemaError(f"{path}: {bad} unreadable :::MLLOG line(s)")
    return [{"time_ms": e.time_ms, "event_type": e.event_type, "key": e.key, "value": e.value,
             "metadata": e.metadata} for e in events]


def split_runs(events: list[Event]) -> list[list[Event]]:
    """One list of events per run in a file that holds several (a job looping over trials): a run
    ends at its run_stop when another run_start follows; what is logged between that run_stop and
    the next run_start (the next run's header) belongs to the next run. A run cut off without a
    run_stop ends where the next run_start is. One run: the events unchanged."""
    starts = [i for i, e in enumerate(events) if e.key == C.RUN_START]
    if len(starts) < 2:
        return [events]
    bounds = [0]
    for prev, nxt in zip(starts, starts[1:]):
        stops = [i for i in range(prev, nxt) if events[i].key == C.RUN_STOP]
        bounds.append(stops[-1] + 1 if stops else nxt)
    bounds.append(len(events))
    return [events[a:b] for a, b in zip(bounds, bounds[1:])]


# --- one run ---------------------------------------------------------------------------------

def summarize(events: list[Event], path: str = "", duplicates: int = 0, bad_lines: int = 0,
              sysjson: dict | None = None, part: int = 0) -> LogSummary:
    s = LogSummary(path=str(path), events=len(events), duplicates=duplicates, bad_lines=bad_lines,
                   sysjson=sysjson or {}, part=part)
    first: dict[str, Event] = {}
    for e in events:
        first.setdefault(e.key, e)
    # MLPerf's summarizer scores the first run_start and the first run_stop of a file.
    if C.RUN_START in first:
        s.run_start_ms = first[C.RUN_START].time_ms
    if C.RUN_STOP in first:
        s.run_stop_ms = first[C.RUN_STOP].time_ms
        s.stop_status = first[C.RUN_STOP].metadata.get(C.STATUS)
    for key, attr in ((C.SUBMISSION_BENCHMARK, "benchmark"), (C.SUBMISSION_PLATFORM, "platform"),
                      (C.SUBMISSION_ORG, "org"), (C.SUBMISSION_DIVISION, "division"),
                      (C.SUBMISSION_STATUS, "submission_status")):
        if key in first and first[key].value is not None:
            setattr(s, attr, str(first[key].value))
    s.global_batch = _int(first.get(C.GLOBAL_BATCH_SIZE))
    s.nodes = _int(first.get(NUMBER_OF_NODES))
    s.gpus_per_node = _int(first.get(ACCELERATORS_PER_NODE))
    evals = [e for e in events if e.key == C.EVAL_ACCURACY and _accuracy(e.value) is not None]
    s.sample_based = _counts_samples(s.benchmark) or any(C.SAMPLES_COUNT in e.metadata for e in evals)
    epoch_of = _epoch_reader(events, s.sample_based, s.run_start_ms)
    for e in evals:
        s.eval_accuracy.append((epoch_of(e), _accuracy(e.value)))
    for e in events:
        if e.key == TRACKED_STATS and isinstance(e.value, dict) and isinstance(e.value.get("throughput"), (int, float)):
            s.throughput = float(e.value["throughput"])
    if evals:
        s.final_metric = s.eval_accuracy[-1][1]
        s.epochs = s.eval_accuracy[-1][0]
        if s.sample_based:
            s.samples = _samples(evals[-1])
    elif not s.sample_based:  # no evaluation: the last epoch_stop's epoch
        stops = [e for e in events if e.key == C.EPOCH_STOP and C.EPOCH_NUM in e.metadata]
        s.epochs = float(stops[-1].metadata[C.EPOCH_NUM]) if stops else None
    # A sample-based log's epoch and block events do not delimit epochs (BERT logs one epoch_start
    # and one epoch_stop around the whole run): no time per epoch from them.
    s.epoch_times_s = [] if s.sample_based else _epoch_times(events)
    s.rcp_lines = [e.line() for e in events if e.key in RCP_KEYS]
    return s


def _counts_samples(benchmark: str) -> bool:
    from hvdbench.models import counts_samples  # lazily: the model registry, only when a log is read

    return benchmark in SAMPLE_COUNTED_BENCHMARKS or counts_samples(benchmark)


def _int(event: Event | None) -> int:
    try:
        return int(event.value) if event is not None else 0
    except (TypeError, ValueError):
        return 0


def _samples(e: Event) -> float | None:
    value = e.metadata.get(C.SAMPLES_COUNT, e.metadata.get(C.EPOCH_NUM))
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _accuracy(value) -> float | None:
    """An eval_accuracy's number: the value, or Mask R-CNN's box mAP ({"BBOX": ..., "SEGM": ...},
    the first of its two targets)."""
    if isinstance(value, dict):
        value = value.get("BBOX")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _epoch_reader(events: list[Event], sample_based: bool, run_start_ms: float | None):
    """How to read the epochs done at an evaluation. `epoch_num` counts epochs, except in
    sample-based logs (metadata with `samples_count`, and benchmarks that evaluate every N samples,
    e.g. MLPerf BERT, whose `epoch_num` is a sample count). Samples become epochs only when
    `train_samples` (the training set size) was logged before run_start, as hvdbench does;
    published BERT logs give the samples trained at the end instead, and their epochs stay unknown
    (None) rather than wrong."""
    sizes = [e for e in events if e.key == C.TRAIN_SAMPLES and isinstance(e.value, (int, float))
             and run_start_ms is not None and e.time_ms <= run_start_ms]
    dataset = float(sizes[0].value) if sizes and sizes[0].value > 0 else None

    def epoch_of(e: Event) -> float | None:
        if not sample_based:
            value = e.metadata.get(C.EPOCH_NUM)
            return float(value) if isinstance(value, (int, float)) else None
        samples = _samples(e)
        return samples / dataset if dataset and samples is not None else None
    return epoch_of


def _epoch_times(events: list[Event]) -> list[float]:
    """Seconds per epoch from epoch_start/epoch_stop pairs, or from block_start/block_stop pairs
    divided by the block's epoch_count (MLPerf ResNet logs blocks of several epochs)."""
    def pairs(start_key, stop_key, id_key):
        opened, out = {}, []
        for e in events:
            ident = e.metadata.get(id_key)
            if e.key == start_key:
                opened[ident] = e
            elif e.key == stop_key and ident in opened:
                start = opened.pop(ident)
                out.append((start, e))
        return out

    times = [(b.time_ms - a.time_ms) / 1000 for a, b in pairs(C.EPOCH_START, C.EPOCH_STOP, C.EPOCH_NUM)]
    if times:
        return times
    for a, b in pairs(C.BLOCK_START, C.BLOCK_STOP, C.FIRST_EPOCH_NUM):
        count = a.metadata.get(C.EPOCH_COUNT) or b.metadata.get(C.EPOCH_COUNT)
        if isinstance(count, (int, float)) and count > 0:
            times.append((b.time_ms - a.time_ms) / 1000 / count)
    return times


def read_run_log(path: str | os.PathLike) -> LogSummary:
    """The first run of one file (`read_runs` gives every run of a file that holds several)."""
    return read_runs(read_log(path))[0]


def read_runs(log: LogFile) -> list[LogSummary]:
    parts = split_runs(log.events)
    numbered = len(parts) > 1
    return [summarize(events, log.path, log.duplicates if i == 0 else 0, log.bad_lines if i == 0 else 0,
                      log.sysjson, i + 1 if numbered else 0) for i, events in enumerate(parts)]


# --- layout from names -------------------------------------------------------------------------

# An MLPerf config name NODESxGPUS[xBATCHxACCUM]: DGXA100_2x8x56x1, 4x4, config_1cc_04x08x32.
_NXG = re.compile(r"(?<![0-9a-z.])(\d+)x(\d+)(?![0-9])", re.I)
# An accelerator model right after "N x" means one server with N of them (8xA100, 8xH100-SXM).
_ACCELERATOR = r"(?:nvidia[ _-]?)?(?:[ahvblkpt]\d{1,3}|g[hb]\d{3}|mi\d{3}|gaudi\d?|tpu)(?![0-9])"
_TEXT_LAYOUTS = (
    # N x server x G accelerators: Dell's 2xXE8545x4A100-SXM-80GB
    (re.compile(r"(?<![0-9a-z.])(\d+)x[a-z][\w.-]*?x(\d+)[a-z]", re.I), lambda m: (int(m[1]), int(m[2]))),
    # N accelerators in one server: 8xA100, ESC8000A-E12-8xH100-PCIE-80GB
    (re.compile(r"(?<![0-9a-z.])(\d+)\s*x\s*" + _ACCELERATOR, re.I), lambda m: (1, int(m[1]))),
    # N x server, the server's accelerators read from its name: 8xNVIDIA DGX H100, 16xBM.GPU.H100.8
    (re.compile(r"(?<![0-9a-z.])(\d+)\s*x\s*([a-z].*)", re.I), lambda m: (int(m[1]), _server_gpus(m[2]))),
    # one server with G accelerators: DSS8440x8A100-PCIE-40GB, R760xax4L40S, GX2560M7_H100_SXM_80GBx4
    (re.compile(r"(?<=[0-9a-z])x(\d{1,2})(?:" + _ACCELERATOR + r"|$|[^0-9a-z])", re.I), lambda m: (1, int(m[1]))),
)


def _server_gpus(server: str) -> int:
    """Accelerators per node a server's name gives: x4A100, BM.GPU.H100.8, DGX (8; DGX-2: 16)."""
    for pattern in (r"x(\d{1,2})" + _ACCELERATOR, r"\.(\d{1,2})$"):
        m = re.search(pattern, server.strip(), re.I)
        if m:
            return int(m[1])
    if re.search(r"dgx[ -_]?2(?![0-9])", server, re.I):
        return 16
    return 8 if re.search(r"dgx", server, re.I) else 0


def layout_from_name(name: str) -> tuple[int, int] | None:
    """(nodes, GPUs per node) from an MLPerf config name NODESxGPUS[xBATCHxACCUM], or None."""
    m = _NXG.search(name)
    return (int(m[1]), int(m[2])) if m and int(m[1]) > 0 and int(m[2]) > 0 else None


def layout_from_text(text: str) -> tuple[int, int] | None:
    """(nodes, GPUs per node) from a platform or system name, or None when it does not say both:
    NxG first, then `2xXE8545x4A100` (2 x 4), `8xA100` (1 x 8), `8xNVIDIA DGX H100` (8 x 8),
    `16xBM.GPU.H100.8` (16 x 8), `DSS8440x8A100` (1 x 8). `1xSUBMISSION_PLATFORM_PLACEHOLDER`
    names one node but not its accelerators: None."""
    found = layout_from_name(text)
    if found:
        return found
    for pattern, layout in _TEXT_LAYOUTS:
        m = pattern.search(text)
        if m:
            nodes, gpus = layout(m)
            return (nodes, gpus) if nodes > 0 and gpus > 0 else None
    return None


def system_family(name: str) -> str:
    """A system name without its size, so one system's layouts share a group (and a speed-up):
    '2xXE8545x4A100-SXM-80GB' and '1xXE8545x4A100-SXM-80GB' -> 'XE8545x4A100-SXM-80GB';
    'DGXA100_2x8x56x1' -> 'DGXA100'; 'dgxa100_n8_ngc21.05' -> 'dgxa100_ngc21.05'; '1x2 cpu' -> 'cpu';
    'Eos_n8' -> 'Eos'; '16xBM.GPU.H100.8' -> 'BM.GPU.H100.8'; 'Acme H100 2-node' -> 'Acme H100'."""
    for pattern in (r"(?<![0-9a-z])\d+x\d+(?:x\d+)*(?![0-9a-z])",  # NxG[xBxA]
                    r"(?<![0-9a-z])\d+x(?=[a-z])",  # N x server
                    r"(?<![0-9a-z])n\d+(?![0-9a-z])",  # NVIDIA's _n8: node count
                    r"\(?(?<![0-9a-z])\d+[- ]?nodes?\b\)?"):  # '2-node', '(4 nodes)'
        name = re.sub(pattern, "", name, flags=re.I)
    name = re.sub(r"([_\- ])[_\- ]+", r"\1", name)
    return name.strip("_- ")


def _real_name(text: str) -> str:
    """A name, or '' for a placeholder (SUBMISSION_PLATFORM_PLACEHOLDER, UNKNOWN_MLPERF_SYSTEM_NAME)."""
    text = str(text or "").strip()
    return "" if _PLACEHOLDER.search(text) else text


# --- the submission tree around a log ----------------------------------------------------------

@dataclass
class Where:
    """Where a log sits: `<org>/results/<system>/<benchmark>/result_N.txt` when it is in a
    submission tree (then `system_dir` is set), else just its folders up to the root."""
    path: Path
    root: Path
    system_dir: Path | None = None
    org_dir: Path | None = None
    desc: dict = field(default_factory=dict)  # systems/<system>.json
    desc_path: Path | None = None

    @property
    def folders(self) -> list[Path]:
        folders, folder = [], self.path.parent
        while True:
            folders.append(folder)
            if folder == self.root or folder == folder.parent:
                return folders
            folder = folder.parent


def locate(path: Path, root: Path, descs: dict) -> Where:
    """The submission tree around `path`, when it is `<org>/results/<system>/<benchmark>/<file>`
    (looked for above the root too, so `--mllog Org/results/sys/resnet` still finds
    `Org/systems/sys.json`); `descs` caches the JSONs read."""
    where = Where(path, root)
    system = path.absolute().parent.parent
    if system.parent.name == "results":
        where.system_dir, where.org_dir = system, system.parent.parent
    if where.system_dir is not None:
        desc_path = where.org_dir / "systems" / f"{where.system_dir.name}.json"
        if desc_path not in descs:
            descs[desc_path] = _read_desc(desc_path)
        where.desc = descs[desc_path]
        where.desc_path = desc_path if where.desc else None
    return where


def _read_desc(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except json.JSONDecodeError as e:
        raise SchemaError(f"{path}: not valid JSON ({e})") from None
    return data if isinstance(data, dict) else {}


def _int_field(desc: dict, key: str) -> int:
    try:
        return int(desc.get(key) or 0)
    except (TypeError, ValueError):
        return 0


def resolve_layout(s: LogSummary, where: Where) -> tuple[int, int, str]:
    """(nodes, accelerators per node, source) by the precedence of the module docstring."""
    if s.nodes and s.gpus_per_node:
        return s.nodes, s.gpus_per_node, SOURCE_LOG
    for desc, source in ((where.desc, SOURCE_SYSTEMS_JSON), (s.sysjson, SOURCE_SYSJSON_LINE)):
        nodes, gpus = _int_field(desc, NUMBER_OF_NODES), _int_field(desc, ACCELERATORS_PER_NODE)
        if nodes and gpus:
            detail = where.desc_path.name if source == SOURCE_SYSTEMS_JSON and where.desc_path else ""
            return nodes, gpus, source + (f" ({detail})" if detail else "")
    names = [where.path.stem] + [folder.name for folder in where.folders]
    for name in names:
        found = layout_from_name(name)
        if found:
            return *found, f"{SOURCE_NAME} ({name})"
    texts = [(s.platform, SOURCE_PLATFORM)]
    if where.system_dir is not None:
        texts.append((where.system_dir.name, SOURCE_FOLDER))
    for text, source in texts:
        found = layout_from_text(text) if text else None
        if found:
            return *found, f"{source} ({text})"
    said = "; ".join(f"{source} {text!r}" for text, source in texts if text)
    return 0, 0, SOURCE_UNKNOWN + (f" ({said} give no nodes x accelerators)" if said else "")


# --- groups ------------------------------------------------------------------------------------

def parse_group_by(text: str) -> tuple[str, ...]:
    """'submitter+system' -> ('submitter', 'system'); ConfigError naming the valid keys."""
    keys = tuple(k.strip() for k in (text or "").split("+") if k.strip())
    unknown = [k for k in keys if k not in GROUP_KEYS]
    if unknown or not keys:
        raise ConfigError(f"--group-by {text!r}: '+'-joined keys of {', '.join(GROUP_KEYS)}")
    return keys


def _group_parts(s: LogSummary, where: Where, nodes: int = 0) -> dict[str, str]:
    """The values of the --group-by keys for one run. Names lose their size (`system_family`),
    and a trailing node count equal to the run's nodes (Supermicro's SYS-421GE-TNHR2-LCC-8)."""
    desc, sysjson = where.desc, s.sysjson

    def family(name: str) -> str:
        name = system_family(name)
        return re.sub(rf"(?<=[a-z0-9])[-_ ]0*{nodes}$", "", name, flags=re.I) if nodes else name
    folder = where.system_dir.name if where.system_dir is not None else where.path.parent.name
    systems = [_real_name(desc.get("system_name", "")), _real_name(sysjson.get("system_name", "")),
               where.system_dir.name if where.system_dir is not None else "", _real_name(s.platform),
               where.path.parent.name]
    submitters = [desc.get("submitter", ""), sysjson.get("submitter", ""), s.org,
                  where.org_dir.name if where.org_dir is not None else ""]
    return {
        "submitter": _first(map(str, submitters)),
        "system": _first(family(name) for name in systems if name),
        "platform": family(s.platform),
        "folder": family(folder) or folder,
        "accelerator": str(desc.get("accelerator_model_name") or sysjson.get("accelerator_model_name") or ""),
        "_system_name": _first(n for n in systems if n),
    }


def _first(values) -> str:
    return next((v.strip() for v in values if v and v.strip()), "")


def group_name(parts: dict[str, str], keys: tuple[str, ...]) -> str:
    return " / ".join(parts[k] for k in keys if parts[k]) or "unknown system"


# --- the record ----------------------------------------------------------------------------------

def ruleset_of(path: Path, given: str | None) -> tuple[str, bool]:
    """(ruleset, assumed): --ruleset, else X.Y.0 from a `training_results_vX.Y` folder in the path,
    else DEFAULT_RULESET (assumed=True)."""
    if given:
        return given, False
    m = re.search(r"training_results_v(\d+)\.(\d+)", str(path))
    return (f"{m[1]}.{m[2]}.0", False) if m else (DEFAULT_RULESET, True)


def to_run_result(s: LogSummary, root: str | os.PathLike, group_by: tuple[str, ...] | str = DEFAULT_GROUP_BY,
                  ruleset: str | None = None, descs: dict | None = None) -> MllogRun:
    """The common record for one published (or hvdbench) run log; unknowns stay empty or 0.
    A log with evaluations is a time-to-accuracy run (with its tracked_stats throughput, when it
    logged one); one with only a throughput (an hvdbench throughput run) a throughput run."""
    path, root = Path(s.path), Path(root)
    keys = parse_group_by(group_by) if isinstance(group_by, str) else group_by
    where = locate(path, root, {} if descs is None else descs)
    nodes, gpus, source = resolve_layout(s, where)
    parts = _group_parts(s, where, nodes)
    try:
        rel = str(path.relative_to(root))
    except ValueError:
        rel = str(path)
    rel += f"#{s.part}" if s.part else ""
    m = re.fullmatch(r"result_(\d+)\.txt", path.name)
    world = nodes * gpus
    ttt = s.time_to_train_s
    throughput_run = not s.eval_accuracy and s.throughput is not None
    epoch_s = (statistics.fmean(s.epoch_times_s) if s.epoch_times_s
               else ttt / s.epochs if ttt is not None and s.epochs else None)
    framework = framework_of(str(where.desc.get("framework") or s.sysjson.get("framework") or ""))
    rules, assumed = ruleset_of(path.absolute(), ruleset)
    scaling = where.path.parent / "scaling.json"
    record = MllogRun(
        run_id=rel, sweep=f"mllog:{root.name}", repeat=int(m[1]) if m else s.part,
        model=s.benchmark or path.parent.name, flavor="", framework=framework,
        precision="", mode="throughput" if throughput_run else "time_to_accuracy", dataset="",
        global_batch=s.global_batch, world_size=world, nodes=nodes, gpus_per_node=gpus,
        layout=f"{nodes}x{gpus}" if nodes else "", scale=("up" if nodes == 1 else "out") if nodes else "",
        devices=group_name(parts, keys), status=s.status, error=s.error,
        started_at=(datetime.fromtimestamp(s.run_start_ms / 1000, timezone.utc).isoformat()
                    if s.run_start_ms is not None else ""),
        wall_s=ttt, layout_source=source, submitter=parts["submitter"], system_name=parts["_system_name"],
        division=s.division or str(where.desc.get("division") or ""), ruleset=rules, ruleset_assumed=assumed,
        published_scaling=_scaling_factor(scaling) if where.system_dir is not None else None,
        rcp_lines=s.rcp_lines,
        link=str(where.desc.get("host_networking") or s.sysjson.get("host_networking") or "").strip())
    if s.throughput is not None:
        record.throughput = s.throughput
        record.throughput_per_gpu = s.throughput / world if world else None
    if not throughput_run:
        record.metric_name, record.final_metric, record.epochs = C.EVAL_ACCURACY, s.final_metric, s.epochs
        record.epochs_to_target = s.epochs if s.status == "success" else None
        record.samples_to_target = s.samples if s.status == "success" else None
        record.time_per_epoch_s, record.time_to_train_s = epoch_s, ttt
    return record


# Framework names looked for in a systems JSON's free-text `framework` ("PyTorch NVIDIA Release
# 24.04", "NVIDIA NeMo Framework Release 24.04", "MXNet, PyTorch, DGL NVIDIA Release 24.04").
FRAMEWORK_WORDS = ("pytorch", "tensorflow", "mxnet", "jax", "paxml", "maxtext", "nemo", "hugectr", "dgl",
                   "paddle", "mindspore", "tinygrad")


def framework_of(text: str) -> str:
    """The one framework a systems JSON names ('PyTorch NVIDIA Release 24.04' -> 'pytorch'), or ''
    when it names none or several: a system description listing MXNet, PyTorch and DGL does not
    say which one a benchmark ran on, and a guess would split one system's layouts into groups."""
    named = {word for word in FRAMEWORK_WORDS if word in text.lower()}
    return named.pop() if len(named) == 1 else ""


def _scaling_factor(path: Path) -> float | None:
    try:
        return float(json.loads(path.read_text())["scaling_factor"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


# --- folders -----------------------------------------------------------------------------------

@dataclass
class Reading:
    """What a folder walk found: the log files read and every file skipped, with the reason."""
    root: Path
    logs: list[Path] = field(default_factory=list)
    skipped: dict[str, list[Path]] = field(default_factory=dict)  # reason -> files

    def skip(self, path: Path, reason: str) -> None:
        self.skipped.setdefault(reason, []).append(path)

    @property
    def skipped_count(self) -> int:
        return sum(map(len, self.skipped.values()))

    def summary(self, runs: int) -> str:
        line = f"{self.root}: {runs} run(s) from {len(self.logs)} log file(s)"
        if self.skipped:
            reasons = sorted(self.skipped.items(), key=lambda kv: (-len(kv[1]), kv[0]))
            line += (f"; {self.skipped_count} file(s) skipped: "
                     + ", ".join(f"{len(files)} {reason} (e.g. {files[0].relative_to(self.root)})"
                                 for reason, files in reasons))
        return line


def find_logs(root: str | os.PathLike) -> Reading:
    """The candidate log files under root (every file but code, configuration, documents and
    binaries), sorted; which :::MLLOG lines they hold is decided when they are read (`load`)."""
    root = Path(root)
    if not root.is_dir():
        raise SchemaError(f"{root}: no such directory of MLPerf logs")
    reading = Reading(root)
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))  # .git and the like
        for name in sorted(files):
            path = Path(folder) / name
            suffix = path.suffix.lower()
            if name.startswith("."):
                reading.skip(path, "hidden")
            elif suffix in NOT_LOGS:
                reading.skip(path, "code, configuration or documents" if suffix not in
                             {".gz", ".bz2", ".xz", ".tar", ".tgz", ".zip"} else "compressed (unpack to read)")
            elif not path.is_file():
                reading.skip(path, "not a regular file")
            else:
                reading.logs.append(path)
    return reading


def _probe(path: Path) -> str | None:
    """Why a file cannot be a log (binary, unreadable), or None."""
    try:
        with open(path, "rb") as f:
            head = f.read(BINARY_PROBE)
    except OSError as e:
        return f"unreadable ({e.strerror or e})"
    return "binary" if b"\0" in head else None


def load(root: str | os.PathLike, progress=lambda files: files, group_by: str | tuple = DEFAULT_GROUP_BY,
         ruleset: str | None = None) -> tuple[list[MllogRun], list[str]]:
    """(one record per run under root, notes for the user); `progress` wraps the file list.
    A `results/<system>/<benchmark>/result_N.txt` that holds no event is a failed run; other files
    without events are skipped and counted. SchemaError when no file holds a readable event."""
    root = Path(root)
    keys = parse_group_by(group_by) if isinstance(group_by, str) else group_by
    reading, descs = find_logs(root), {}
    candidates, reading.logs = reading.logs, []
    runs: list[MllogRun] = []
    bad_files, bad_lines = [], 0
    for path in progress(candidates):
        why = _probe(path)
        log = read_log(path) if why is None else None
        if log is not None and not log.marker_lines:
            why = "without :::MLLOG lines"
        elif log is not None and not log.events:
            why = "with only unreadable :::MLLOG lines"
        elif log is not None and not any(e.key in RUN_KEYS for e in log.events):
            why = "without run events (power readings or the like)"
        # A result_N.txt is a run, whatever it holds: one that logged nothing did not converge
        # (the summarizer drops it as a non-converged run too).
        if why and path.match(RESULT_GLOB) and path.absolute().parent.parent.parent.name == "results":
            why = None
        if why:
            reading.skip(path, why)
            continue
        reading.logs.append(path)
        if log is None or not log.events:  # an MLPerf result file of a run that logged nothing
            runs.append(to_run_result(LogSummary(str(path)), root, keys, ruleset, descs))
            continue
        if log.bad_lines:
            bad_files.append(path)
            bad_lines += log.bad_lines
        runs += [to_run_result(s, root, keys, ruleset, descs) for s in read_runs(log)]
    if not runs:
        raise SchemaError(f"{root}: no file holds a readable :::MLLOG event ({reading.summary(0)})")
    notes = [reading.summary(len(runs))]
    if bad_files:  # e.g. ranks' output interleaved mid-line
        notes.append(f"{root}: {bad_lines} unreadable :::MLLOG line(s) skipped in {len(bad_files)} file(s), "
                     f"first {bad_files[0]}")
    assumed = sorted({r.ruleset for r in runs if r.ruleset_assumed and r.division == "closed"})
    if assumed:
        notes.append(f"{root}: closed-division RCPs checked against ruleset {', '.join(assumed)} (no "
                     "training_results_vX.Y folder in the path; give --ruleset X.Y.0 for another round)")
    return runs, notes


def read_mllog_dir(root: str | os.PathLike) -> list[MllogRun]:
    return load(root)[0]


# --- reference convergence points (RCP) ----------------------------------------------------------

@dataclass(frozen=True)
class Rcp:
    """The RCP check of one group of runs (one benchmark, system, layout and batch), as the official
    result summarizer makes it. `factor` is what the summarizer multiplies the score by (the
    scaling.json the checker writes; 1.0 when it writes none); None when no check applies."""
    check: str  # Pass | Fail | Interp. Fail | Missing | No RCP | not checked
    note: str  # the checker's message, or why it was not run
    ruleset: str = ""
    factor: float | None = None
    rcp_mean: float | None = None  # the RCP's olympic mean epochs (or samples) to converge
    rcp_min: float | None = None  # the fewest mean epochs (samples) the checker accepts
    converge_mean: float | None = None  # these runs' olympic mean epochs (samples), as the checker computes it


NOT_CHECKED = "not checked"


def rcp_check(runs: list[RunResult]) -> Rcp | None:
    """Run mlperf-logging's RCP checker (`rcp_checker.check_directory`, pruned RCPs, no bypass,
    set_scaling: exactly the call the result summarizer makes for a closed-division benchmark
    folder) on these runs' logs, and read back the scaling.json it writes. None for runs that are
    not MLPerf logs (runs.csv rows)."""
    logs = [r for r in runs if isinstance(r, MllogRun)]
    if not logs:
        return None
    ruleset, division = logs[0].ruleset, logs[0].division
    if division != "closed":
        return Rcp(NOT_CHECKED, f"{division or 'no'} division: the summarizer checks RCPs in the closed "
                   "division only", ruleset, 1.0)
    if len(logs) < 3:
        return Rcp(NOT_CHECKED, f"{len(logs)} run(s): the checker's olympic mean needs 3", ruleset, 1.0)
    from mlperf_logging.rcp_checker import rcp_checker  # numpy and scipy: only when a check runs

    capture = _Capture()
    root_logger = logging.getLogger()
    old_level = root_logger.level
    root_logger.addHandler(capture)  # also keeps logging.info from installing a stderr handler
    root_logger.setLevel(logging.INFO)
    try:
        with tempfile.TemporaryDirectory(prefix="hvdbench-rcp-") as tmp:
            for i, run in enumerate(logs):
                Path(tmp, f"result_{i}.txt").write_text("\n".join(run.rcp_lines) + "\n", encoding="latin-1")
            try:
                passed, message, _ = rcp_checker.check_directory(
                    tmp, "training", ruleset, False, False, rcp_file=None, rcp_pass="pruned_rcps",
                    rcp_bypass=False, set_scaling=True)
            except Exception as e:  # no RCP file or entry for this benchmark and round, a bad ruleset
                return Rcp("No RCP", f"the RCP checker did not run ({type(e).__name__}: {e}): training "
                           f"ruleset {ruleset} may have no RCPs for {logs[0].model!r}", ruleset, 1.0)
            factor = _scaling_factor(Path(tmp, "scaling.json")) or 1.0
    finally:
        root_logger.removeHandler(capture)
        root_logger.setLevel(old_level)
    record = capture.arg(" RCP Record: %s")
    rcp_mean = record.get("RCP Mean") if isinstance(record, dict) else None
    speedup = record.get("Max Speedup") if isinstance(record, dict) else None
    check = "Pass" if passed else (
        "Fail" if message == "RCP found" else "Interp. Fail" if message == "RCP Interpolation"
        else "Missing" if "Missing" in message else "No RCP" if message == "Cannot find any RCPs" else "Fail")
    converge = capture.arg(" Submission mean epochs: %.4f")
    published = {r.published_scaling for r in logs}
    if len(published) == 1 and None not in published and abs(published.pop() - factor) > 1e-9:
        message += f"; the published scaling.json says ×{logs[0].published_scaling:.4f}"
    return Rcp(check, message, ruleset, factor, _float(rcp_mean),
               _float(rcp_mean / speedup) if rcp_mean and speedup else None, _float(converge))


def _float(value) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


class _Capture(logging.Handler):
    """The RCP checker's log records (it reports through the root logger), kept, never printed."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def arg(self, msg: str):
        """The argument of the last record logged with this format string."""
        for record in reversed(self.records):
            if record.msg == msg and record.args:
                return record.args[0] if isinstance(record.args, tuple) else record.args
        return None
