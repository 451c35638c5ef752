"""MLPerf `:::MLLOG {json}` lines and events: the one parser every reader of a log goes through.

    hvdbench report --mllog training_results_v4.0/Oracle      # reads every log under it with this
    from hvdbench.results.mllog import read_events
    events, duplicates, bad_lines = read_events("results/demo/1x2-r0/mllog.txt")

Published files are often raw job logs: every rank's output, each line behind a launcher prefix
(`srun -l`: ` 3: `, Open MPI `--tag-output`: `[1,3]<stdout>:`, horovodrun: `[3]<stdout>:`), mixed
with unrelated output, sometimes several runs one after another (a Slurm job looping over trials).
So the marker is searched anywhere in a line, the rank is read from the prefix, an event logged by
several ranks is counted once (`dedupe`), and a file with several run_start ... run_stop runs is
split into one run each (`split_runs`).

JSON as Python reads it takes NaN, Infinity and numbers like 1e999 (infinite as a float): an event
holding one anywhere (time_ms, value, metadata), or a number past ±1e150 (`LARGEST`), is kept in its
place but flagged (`Event.non_finite` says where and what), and every reader treats it as missing
(`summarize`), so no table, CSV or plot gets `inf` or `nan` and an Infinity accuracy never counts as
converged. An eval_accuracy whose value is no number (text such as "0.759", null) is flagged the same
way: read as missing and warned, never dropped unseen.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, NamedTuple

from mlperf_logging.mllog import constants as C

from hvdbench.results.mllog.mlperf import accuracy_of
from hvdbench.results.records.schema import SchemaError

MARKER = ":::MLLOG"
SYSJSON_MARKER = ":::SYSJSON"  # NVIDIA's launch scripts echo the systems JSON into the log
OWN_LOG_NAME = "mllog.txt"
# Not in mlperf_logging's constants, but what its result summarizer reads for instance scale.
NUMBER_OF_NODES = "number_of_nodes"
ACCELERATORS_PER_NODE = "accelerators_per_node"
TRACKED_STATS = "tracked_stats"  # {"throughput": samples/s}: NVIDIA's logs and hvdbench throughput runs

# The events mlperf-logging's RCP checker reads (rcp_checker.read_submission_file).
RCP_KEYS = frozenset({C.GLOBAL_BATCH_SIZE, C.SUBMISSION_BENCHMARK, C.EVAL_ACCURACY, "eval_error",
                      C.TRAIN_SAMPLES, C.RUN_STOP})
# A file whose events include none of these is not a training run's log (MLPerf power logs:
# results/<system>/<benchmark>/power/result_N/node_0.txt hold power_reading events only).
RUN_KEYS = frozenset({C.RUN_START, C.RUN_STOP, C.INIT_START, C.INIT_STOP, C.SUBMISSION_BENCHMARK, C.EVAL_ACCURACY})
# The record no reader here looks at, left out of a file's events: MLPerf's reference implementations
# log weights_initialization once per tensor at its creation (119,030 of the published v4.1 tree's
# 474,000 records). A line holding the key as mlperf_logging writes it (`_UNREAD_TEXT`) is counted
# among the marker lines and passed over undecoded, a quarter of reading that tree; written any
# other way it is decoded and then left out, so the events are the same either way.
UNREAD_KEY = C.WEIGHTS_INITIALIZATION
_UNREAD_TEXT = f'"key": "{UNREAD_KEY}"'

# Launcher prefixes, matched at the end of the text before the marker; group 1 is the rank.
_RANK_PREFIXES = (
    re.compile(r"\[\d+,(\d+)\]<std(?:out|err)>:\s*$"),  # Open MPI --tag-output: [jobid,rank]
    re.compile(r"\[(\d+)\]<std(?:out|err)>:\s*$"),  # horovodrun: [rank]
    re.compile(r"(?:^|\s)(\d+):\s*$"),  # srun -l: "  3: " (rank, colon)
)
_DECODER = json.JSONDecoder()  # the :::SYSJSON line's (no number in it is walked)
_CANONICAL = json.JSONEncoder(sort_keys=True).encode  # json.dumps(x, sort_keys=True), without its per-call set-up
# The largest magnitude a number read from a log may have: the report sums, averages and squares
# them (two-sigma), which overflows to infinity past about 1e154. No MLPerf quantity (times in ms
# since 1970, samples, accuracies, throughputs) is within a hundred orders of magnitude of it.
LARGEST = 1e150


class Event(NamedTuple):
    """One :::MLLOG record as read (immutable; a named tuple: a frozen dataclass took five times as
    long to make, and a log holds hundreds of thousands)."""
    time_ms: float
    event_type: str
    key: str
    value: Any
    metadata: dict
    rank: int | None  # from the launcher prefix; None when the line has none
    lineno: int
    # Where the record holds a number that is not finite or past ±LARGEST and what it is, e.g.
    # "value Infinity (not a finite number)", or an eval_accuracy that is no number ('value "0.759"
    # (not a number)'); "" for a sound event. Readers treat it as missing.
    non_finite: str = ""

    def line(self) -> str:
        """The event as one official `:::MLLOG {json}` line (what the RCP checker is given)."""
        return f"{MARKER} " + json.dumps({"namespace": "", "time_ms": self.time_ms, "event_type": self.event_type,
                                          "key": self.key, "value": self.value, "metadata": self.metadata})


def parse_line(line: str, lineno: int = 0) -> Event | None:
    """One event from a line holding `:::MLLOG {json}` anywhere; None for other lines.
    Raises ValueError for a marker whose JSON is unreadable (e.g. two ranks' output interleaved)."""
    at = line.find(MARKER)
    return None if at < 0 else _Parser().event(line, at, lineno)[0]


class _Parser:
    """Reads :::MLLOG records with a JSON decoder that notes every number it reads that may be
    non-finite or past ±LARGEST (NaN, Infinity, a float outside ±LARGEST, an integer of 40 digits or
    more): only a record holding one is walked (`_non_finite`; the walk was a third of reading a log,
    and a search of every line's text for such numbers another third). One parser a file."""

    def __init__(self):
        self.suspect = False

        def integer(text: str, _int=int):
            self.suspect = self.suspect or len(text) >= 40
            return _int(text)

        def real(text: str, _float=float):
            value = _float(text)
            self.suspect = self.suspect or not -LARGEST <= value <= LARGEST
            return value

        def constant(text: str, _float=float):  # NaN, Infinity, -Infinity: what json reads them as
            self.suspect = True
            return _float(text)

        self.decode = json.JSONDecoder(parse_int=integer, parse_float=real, parse_constant=constant).raw_decode

    def event(self, line: str, at: int, lineno: int) -> tuple[Event, str]:
        """The event of `line`, whose marker is at `at`, and its JSON text as logged. ValueError
        for a record that cannot be read."""
        text = line[at + len(MARKER):].lstrip()
        self.suspect = False
        try:
            record, end = self.decode(text)  # raw_decode: trailing output after the JSON is fine
        except RecursionError:  # "[[[[..." nested past Python's limit
            raise ValueError("JSON nested too deeply") from None
        if not isinstance(record, dict) or "key" not in record:
            raise ValueError("not an MLLOG record")
        try:
            time_ms = float(record["time_ms"])
        except (KeyError, TypeError, ValueError, OverflowError):  # OverflowError: an integer past float's range
            raise ValueError("MLLOG record without a time_ms") from None
        metadata = record.get("metadata") or {}
        metadata = metadata if isinstance(metadata, dict) else {}
        value = record.get("value")
        # time_ms may be text ("1e999", "inf"), no number to the decoder: its float is looked at here
        walk = self.suspect or not -LARGEST <= time_ms <= LARGEST
        non_finite = "" if not walk else (
            _non_finite(time_ms, "time_ms") or _non_finite(value, "value") or _non_finite(metadata, "metadata"))
        key = record["key"]
        if not non_finite and key == C.EVAL_ACCURACY and accuracy_of(value) is None:
            # Text ("0.759"), null, a list: no score, as a non-finite one is none (said, not dropped unseen).
            shown = json.dumps(value)
            non_finite = f"value {shown if len(shown) <= 24 else shown[:20] + '...'} (not a number)"
        if len(non_finite) > 120:  # a metadata key can be any text: the line quotes it short
            non_finite = non_finite[:60] + "..." + non_finite[-57:]
        event = Event(time_ms, str(record.get("event_type", "")), str(key), value, metadata, _rank(line[:at]), lineno,
                      non_finite)
        return event, text[:end]


def _non_finite(value, where: str, depth: int = 0) -> str:
    """'value Infinity (not a finite number)' for the first number in `value` that is not finite
    (NaN, Infinity, 1e999) or past ±LARGEST; '' when there is none."""
    if isinstance(value, bool):
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where} {'NaN' if math.isnan(value) else 'Infinity' if value > 0 else '-Infinity'} (not a finite number)"
    if isinstance(value, (int, float)) and abs(value) > LARGEST:
        text = f"{value:.3g}" if isinstance(value, float) else f"a {len(str(abs(value)))}-digit number"
        return f"{where} {text} (past ±{LARGEST:g}: sums and squares of it overflow)"
    if depth < 8 and isinstance(value, dict):
        return next((found for k, v in value.items() if (found := _non_finite(v, f"{where}.{k}", depth + 1))), "")
    if depth < 8 and isinstance(value, list):
        return next((found for i, v in enumerate(value) if (found := _non_finite(v, f"{where}[{i}]", depth + 1))),
                    "")
    return ""


def _rank(prefix: str) -> int | None:
    if ":" not in prefix:  # every prefix a rank is read from ends in a colon (most lines have none)
        return None
    for pattern in _RANK_PREFIXES:
        m = pattern.search(prefix)
        if m:
            return int(m.group(1))
    return None


def dedupe(events: Iterable[Event], texts: list[str] | None = None) -> tuple[list[Event], int]:
    """Count every event once. Two rules, in order:
    1. identical records (same time, type, key, value, metadata) are one event, whatever the rank;
    2. a key logged by several ranks is taken from the lowest rank that logged it (rank 0 is
       MLPerf's logging rank; a line without a prefix counts as rank 0), so rank 3's copy of
       run_start, a few ms off rank 0's, is not a second run_start.
    `texts`: each event's JSON as logged, where the caller has it (`read_log`).
    Returns (kept events in file order, number dropped)."""
    events = list(events)
    # The value and metadata are compared (as sorted JSON) only where two events share a time, type
    # and key and could differ: elsewhere those alone tell them apart (and the JSON was half of
    # de-duplicating). With the texts as logged, a time, type and key whose events were all logged
    # in the same words is one record whatever the count (every rank logs its copy of a line in the
    # same words); only where the words differ are the records encoded, each text once.
    idents = [(e.time_ms, e.event_type, e.key) for e in events]
    if texts is None:
        compared = {ident for ident, n in Counter(idents).items() if n > 1}
    else:
        first: dict[tuple, str] = {}
        compared = {ident for ident, text in zip(idents, texts) if first.setdefault(ident, text) != text}
    encoded: dict[str, tuple[str, str]] = {}
    seen, unique = set(), []
    for i, (e, ident) in enumerate(zip(events, idents)):
        if ident in compared:
            if texts is None:
                ident += (_CANONICAL(e.value), _CANONICAL(e.metadata))
            else:
                if (canonical := encoded.get(texts[i])) is None:
                    canonical = encoded[texts[i]] = (_CANONICAL(e.value), _CANONICAL(e.metadata))
                ident += canonical
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
    sysjson_line: int = 0  # the line of the :::SYSJSON it was read from
    first_bad_line: int = 0  # the first unreadable marker line

    @property
    def non_finite(self) -> list[Event]:
        """The events holding a number that is not finite (read as missing)."""
        return [e for e in self.events if e.non_finite]


def read_log(path: str | os.PathLike) -> LogFile:
    """Every :::MLLOG event of one file (the one parser: `read_events`, `load` and every report go
    through it) but UNREAD_KEY's, and the first :::SYSJSON line's systems JSON that can be read."""
    raw, texts, bad, markers, sysjson, sysjson_line, first_bad = [], [], 0, 0, {}, 0, 0
    parser = _Parser()
    for block, first_line in _blocks(path):
        for lineno, line, at in _lines_holding(block, MARKER, first_line):
            markers += 1
            if _UNREAD_TEXT in line:
                continue
            try:
                event, text = parser.event(line, at, lineno)
            except ValueError:  # json.JSONDecodeError is a ValueError
                bad += 1
                first_bad = first_bad or lineno
                continue
            if event.key != UNREAD_KEY:
                raw.append(event)
                texts.append(text)
        for lineno, line, _ in ([] if sysjson else _lines_holding(block, SYSJSON_MARKER, first_line)):
            sysjson, sysjson_line = _sysjson(line), lineno
            if sysjson:  # an unreadable :::SYSJSON line is passed over for the next one
                break
    events, dropped = dedupe(raw, texts)
    return LogFile(str(path), events, dropped, bad, markers, sysjson, sysjson_line, first_bad)


def _lines_holding(block: str, marker: str, first_line: int) -> Iterator[tuple[int, str, int]]:
    """(number, text, where the marker is in it) of each line of `block` that holds `marker`, in order.
    Only those lines are cut out (most lines of a raw job log hold none: a Python loop over every line
    was a fifth of reading), each numbered by the newlines before it."""
    at, lineno, counted = block.find(marker), first_line, 0
    while at >= 0:
        start = block.rfind("\n", 0, at) + 1
        stop = block.find("\n", at)
        stop = len(block) if stop < 0 else stop
        lineno += block.count("\n", counted, start)
        counted = start
        yield lineno, block[start:stop], at - start
        at = block.find(marker, stop)


BLOCK = 1 << 22  # characters read at once: whole lines, however long the file


def _blocks(path: str | os.PathLike) -> Iterator[tuple[str, int]]:
    """The file's text in blocks of whole lines (the last may lack its newline), each with the
    number of its first line. Text as Python reads it: undecodable bytes replaced (raw job logs
    hold any bytes), CR LF and CR read as LF."""
    with open(path, encoding="utf-8", errors="replace") as f:
        carry, lineno = "", 1
        while chunk := f.read(BLOCK):
            cut = chunk.rfind("\n") + 1
            if not cut:  # no line ends in this block: a line longer than BLOCK
                carry += chunk
                continue
            block, carry = carry + chunk[:cut], chunk[cut:]
            yield block, lineno
            lineno += block.count("\n")
        if carry:
            yield carry, lineno


def _sysjson(line: str) -> dict:
    text = line[line.find(SYSJSON_MARKER) + len(SYSJSON_MARKER):].strip().rstrip("'\"")
    try:
        record, _ = _DECODER.raw_decode(text)
    except (ValueError, RecursionError):
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
