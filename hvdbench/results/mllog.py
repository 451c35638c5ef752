"""The one reader of MLPerf `:::MLLOG {json}` event logs: hvdbench's own `mllog.txt` and the
`result_N.txt` files published in MLCommons training results repositories.

    from hvdbench.results.mllog import read_mllog_dir
    runs = read_mllog_dir("training_results_v3.0/Dell/results")   # -> list[RunResult]

Published files are often raw job logs: every rank's output, each line behind a launcher prefix
(`srun -l`: ` 3: `, Open MPI `--tag-output`: `[1,3]<stdout>:`, horovodrun: `[3]<stdout>:`), mixed
with unrelated output. So the marker is searched anywhere in a line, the rank is read from the
prefix, and an event logged by several ranks is counted once (see `dedupe`).

Layout (nodes x accelerators per node), in order of trust: the log's `number_of_nodes` and
`accelerators_per_node` events (what MLPerf's result summarizer reads), the submission's
`systems/<system>.json`, then the folder names (see `layout_from_name`).
"""

from __future__ import annotations

import json
import os
import re
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from mlperf_logging.mllog import constants as C

from hvdbench.results.schema import RunResult, SchemaError

MARKER = ":::MLLOG"
# The files a directory walk picks up: MLPerf's submission naming and hvdbench's own run log.
RESULT_GLOB = "result_*.txt"
OWN_LOG_NAME = "mllog.txt"
# Not in mlperf_logging's constants, but what its result summarizer reads for instance scale.
NUMBER_OF_NODES = "number_of_nodes"
TRACKED_STATS = "tracked_stats"  # {"throughput": samples/s}: NVIDIA's logs and hvdbench throughput runs
ACCELERATORS_PER_NODE = "accelerators_per_node"

# Launcher prefixes, matched at the end of the text before the marker; group 1 is the rank.
_RANK_PREFIXES = (
    re.compile(r"\[\d+,(\d+)\]<std(?:out|err)>:\s*$"),  # Open MPI --tag-output: [jobid,rank]
    re.compile(r"\[(\d+)\]<std(?:out|err)>:\s*$"),  # horovodrun: [rank]
    re.compile(r"(?:^|\s)(\d+):\s*$"),  # srun -l: "  3: " (rank, colon)
)
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Event:
    time_ms: float
    event_type: str
    key: str
    value: Any
    metadata: dict
    rank: int | None  # from the launcher prefix; None when the line has none
    lineno: int


@dataclass
class LogSummary:
    """What one run's log says; `to_run_result` turns it into the common record."""
    path: str
    events: int = 0
    duplicates: int = 0  # events dropped because another rank (or an identical line) had them
    bad_lines: int = 0  # lines with the marker whose JSON could not be read
    benchmark: str = ""
    platform: str = ""
    org: str = ""
    division: str = ""
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


def read_events(path: str | os.PathLike) -> tuple[list[Event], int, int]:
    """(de-duplicated events, duplicates dropped, unreadable marker lines) of one log file: the one
    :::MLLOG parser (`read_event_dicts` and every report go through it)."""
    raw, bad = [], 0
    with open(path, encoding="utf-8", errors="replace") as f:  # raw job logs hold any bytes
        for lineno, line in enumerate(f, 1):
            try:
                event = parse_line(line, lineno)
            except ValueError:  # json.JSONDecodeError is a ValueError
                bad += 1
                continue
            if event is not None:
                raw.append(event)
    events, dropped = dedupe(raw)
    return events, dropped, bad


def read_event_dicts(path: str | os.PathLike) -> list[dict]:
    """The events of one run's own log as plain dicts with the :::MLLOG record's keys (time_ms,
    event_type, key, value, metadata), de-duplicated as `read_events` does: for checking what a run
    logged (tests). A worker's log is written whole, so an unreadable marker line here is an error."""
    events, _, bad = read_events(path)
    if bad:
        raise SchemaError(f"{path}: {bad} unreadable :::MLLOG line(s)")
    return [{"time_ms": e.time_ms, "event_type": e.event_type, "key": e.key, "value": e.value,
             "metadata": e.metadata} for e in events]


# --- one run ---------------------------------------------------------------------------------

def summarize(events: list[Event], path: str = "", duplicates: int = 0, bad_lines: int = 0) -> LogSummary:
    s = LogSummary(path=str(path), events=len(events), duplicates=duplicates, bad_lines=bad_lines)
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
                      (C.SUBMISSION_ORG, "org"), (C.SUBMISSION_DIVISION, "division")):
        if key in first and first[key].value is not None:
            setattr(s, attr, str(first[key].value))
    s.global_batch = _int(first.get(C.GLOBAL_BATCH_SIZE))
    s.nodes = _int(first.get(NUMBER_OF_NODES))
    s.gpus_per_node = _int(first.get(ACCELERATORS_PER_NODE))
    epoch_of = _epoch_reader(events, s.benchmark, s.run_start_ms)
    for e in events:
        if e.key == C.EVAL_ACCURACY and isinstance(e.value, (int, float)):
            s.eval_accuracy.append((epoch_of(e), float(e.value)))
        elif e.key == TRACKED_STATS and isinstance(e.value, dict) and isinstance(e.value.get("throughput"), (int, float)):
            s.throughput = float(e.value["throughput"])
    if s.eval_accuracy:
        s.final_metric = s.eval_accuracy[-1][1]
        s.epochs = s.eval_accuracy[-1][0]
    else:  # no evaluation: the last epoch_stop's epoch
        stops = [e for e in events if e.key == C.EPOCH_STOP and C.EPOCH_NUM in e.metadata]
        s.epochs = float(stops[-1].metadata[C.EPOCH_NUM]) if stops else None
    s.epoch_times_s = _epoch_times(events)
    return s


def _int(event: Event | None) -> int:
    try:
        return int(event.value) if event is not None else 0
    except (TypeError, ValueError):
        return 0


def _epoch_reader(events: list[Event], benchmark: str, run_start_ms: float | None):
    """How to read the epochs done at an evaluation. `epoch_num` counts epochs, except where the
    log counts samples: metadata with `samples_count`, and benchmarks that evaluate every N samples
    (MLPerf BERT), whose `epoch_num` is a sample count. Samples become epochs only when
    `train_samples` (the training set size) was logged before run_start, as hvdbench does;
    published BERT logs give the samples trained at the end instead, and their epochs stay unknown
    (None) rather than wrong."""
    from hvdbench.models import counts_samples  # lazily: the model registry, only when a log is read

    sizes = [e for e in events if e.key == C.TRAIN_SAMPLES and isinstance(e.value, (int, float))
             and run_start_ms is not None and e.time_ms <= run_start_ms]
    dataset = float(sizes[0].value) if sizes and sizes[0].value > 0 else None
    epoch_num_is_samples = counts_samples(benchmark)

    def epoch_of(e: Event) -> float | None:
        if C.SAMPLES_COUNT in e.metadata:
            samples = e.metadata[C.SAMPLES_COUNT]
        elif C.EPOCH_NUM in e.metadata and epoch_num_is_samples:
            samples = e.metadata[C.EPOCH_NUM]
        elif C.EPOCH_NUM in e.metadata:
            return float(e.metadata[C.EPOCH_NUM])
        else:
            return None
        return float(samples) / dataset if dataset and isinstance(samples, (int, float)) else None
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
    events, dropped, bad = read_events(path)
    return summarize(events, str(path), dropped, bad)


# --- layout and system from the folders ------------------------------------------------------

# Folder-name conventions for a layout, tried in order (case-insensitive):
#   NxGx...  MLPerf/hvdbench config names NODESxGPUSxBATCHxACCUM (DGXA100_2x8x56x1) or plain 2x8
#   NxSxG    nodes x server model x accelerators (Dell's 1xXE8545x4A100-SXM-80GB)
#   NxACC    a single server with N accelerators (8xA100)
#   SxG      one server model with G accelerators (Dell's DSS8440x8A100-PCIE-40GB)
_NAME_LAYOUTS = (
    (re.compile(r"(?<![0-9a-z])(\d+)x(\d+)(?![0-9])", re.I), lambda m: (int(m[1]), int(m[2]))),
    (re.compile(r"(?<![0-9a-z])(\d+)x[a-z][\w-]*?x(\d+)[a-z]", re.I), lambda m: (int(m[1]), int(m[2]))),
    (re.compile(r"(?<![0-9a-z])(\d+)x[a-z]", re.I), lambda m: (1, int(m[1]))),
    (re.compile(r"(?<=[0-9a-z])x(\d+)[a-z]", re.I), lambda m: (1, int(m[1]))),
)


def layout_from_name(name: str) -> tuple[int, int] | None:
    """(nodes, GPUs per node) from a folder name, or None."""
    for pattern, layout in _NAME_LAYOUTS:
        m = pattern.search(name)
        if m:
            nodes, gpus = layout(m)
            if nodes > 0 and gpus > 0:
                return nodes, gpus
    return None


def _system_json(path: Path) -> dict:
    """`<org>/systems/<system>.json` for `<org>/results/<system>/<benchmark>/result_N.txt`."""
    system_dir = path.parent.parent
    if system_dir.parent.name != "results":
        return {}
    desc = system_dir.parent.parent / "systems" / f"{system_dir.name}.json"
    if not desc.is_file():
        return {}
    try:
        data = json.loads(desc.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SchemaError(f"{desc}: not valid JSON ({e})") from None
    return data if isinstance(data, dict) else {}


def system_family(name: str) -> str:
    """A system name without its size, so one system's layouts share a group (and a speed-up):
    '2xXE8545x4A100-SXM-80GB' and '1xXE8545x4A100-SXM-80GB' -> 'XE8545x4A100-SXM-80GB';
    'DGXA100_2x8x56x1' -> 'DGXA100'; 'dgxa100_n8_ngc21.05' -> 'dgxa100_ngc21.05'; '1x2 cpu' -> 'cpu'."""
    for pattern in (r"(?<![0-9a-z])\d+x\d+(?:x\d+)*(?![0-9a-z])",  # NxG[xBxA]
                    r"(?<![0-9a-z])\d+x(?=[a-z])",  # N x server
                    r"(?<![0-9a-z])n\d+(?![0-9a-z])"):  # NVIDIA's _n8: node count
        name = re.sub(pattern, "", name, flags=re.I)
    name = re.sub(r"([_\- ])[_\- ]+", r"\1", name)
    return name.strip("_- ")


def to_run_result(s: LogSummary, root: str | os.PathLike) -> RunResult:
    """The common record for one published (or hvdbench) run log; unknowns stay empty or 0.
    The system (submission_platform, else the system description's name, else the system
    folder), without its size, goes in `devices`: that is what the report groups by.
    A log with evaluations is a time-to-accuracy run; one with only a tracked_stats throughput
    (an hvdbench throughput run) a throughput run."""
    path, root = Path(s.path), Path(root)
    desc = _system_json(path)
    nodes, gpus = s.nodes, s.gpus_per_node
    if not (nodes and gpus):
        nodes, gpus = _int_field(desc, NUMBER_OF_NODES), _int_field(desc, ACCELERATORS_PER_NODE)
    if not (nodes and gpus):
        names = [s.platform] + [folder.name for folder in _folders_up_to(path, root)]
        nodes, gpus = next(filter(None, map(layout_from_name, names)), (0, 0))
    try:
        rel = str(path.relative_to(root))
    except ValueError:
        rel = str(path)
    system = s.platform or str(desc.get("system_name", "")) or _system_folder(path).name
    m = re.fullmatch(r"result_(\d+)\.txt", path.name)
    world = nodes * gpus
    ttt = s.time_to_train_s
    throughput_run = not s.eval_accuracy and s.throughput is not None
    epoch_s = (statistics.fmean(s.epoch_times_s) if s.epoch_times_s
               else ttt / s.epochs if ttt is not None and s.epochs else None)
    record = RunResult(
        run_id=rel, sweep=f"mllog:{root.name}", repeat=int(m[1]) if m else 0,
        model=s.benchmark or _benchmark_folder(path).name, flavor="",
        framework=str(desc.get("framework", "")).split(" ")[0].lower(), precision="",
        mode="throughput" if throughput_run else "time_to_accuracy", dataset="", global_batch=s.global_batch,
        world_size=world, nodes=nodes, gpus_per_node=gpus,
        layout=f"{nodes}x{gpus}" if nodes else "", scale=("up" if nodes == 1 else "out") if nodes else "",
        devices=system_family(system), status=s.status, error=s.error,
        started_at=(datetime.fromtimestamp(s.run_start_ms / 1000, timezone.utc).isoformat()
                    if s.run_start_ms is not None else ""),
        wall_s=ttt)
    if throughput_run:
        record.throughput = s.throughput
        record.throughput_per_gpu = s.throughput / world if world else None
    else:
        record.metric_name, record.final_metric, record.epochs = C.EVAL_ACCURACY, s.final_metric, s.epochs
        record.epochs_to_target = s.epochs if s.status == "success" else None
        record.time_per_epoch_s, record.time_to_train_s = epoch_s, ttt
    return record


def _int_field(desc: dict, key: str) -> int:
    try:
        return int(desc.get(key) or 0)
    except (TypeError, ValueError):
        return 0


def _folders_up_to(path: Path, root: Path) -> list[Path]:
    folders, folder = [], path.parent
    while True:
        folders.append(folder)
        if folder == root or folder == folder.parent:
            return folders
        folder = folder.parent


def _benchmark_folder(path: Path) -> Path:
    return path.parent  # MLPerf: results/<system>/<benchmark>/result_N.txt


def _system_folder(path: Path) -> Path:
    return path.parent.parent if path.name != OWN_LOG_NAME else path.parent


# --- directories -----------------------------------------------------------------------------

def find_logs(root: str | os.PathLike) -> list[Path]:
    """Every `result_*.txt` and `mllog.txt` under root, sorted; SchemaError when there is none."""
    root = Path(root)
    if not root.is_dir():
        raise SchemaError(f"{root}: no such directory of MLPerf logs")
    files = sorted(p for p in root.rglob("*.txt")
                   if p.is_file() and (p.match(RESULT_GLOB) or p.name == OWN_LOG_NAME))
    if not files:
        raise SchemaError(f"{root}: no {RESULT_GLOB} or {OWN_LOG_NAME} files")
    return files


def load(root: str | os.PathLike, progress=lambda files: files) -> tuple[list[RunResult], list[str]]:
    """(one record per log under root, notes for the user); `progress` wraps the file list."""
    logs = [read_run_log(p) for p in progress(find_logs(root))]
    bad = [log for log in logs if log.bad_lines]
    notes = [f"{root}: {sum(log.bad_lines for log in bad)} unreadable :::MLLOG line(s) skipped in "
             f"{len(bad)} file(s), first {bad[0].path}"] if bad else []  # e.g. ranks' output interleaved
    return [to_run_result(log, root) for log in logs], notes


def read_mllog_dir(root: str | os.PathLike) -> list[RunResult]:
    return load(root)[0]
