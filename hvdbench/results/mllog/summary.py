"""One run's log summed up: `LogSummary` (times, status, batch, evaluations, epochs or samples,
throughput, layout events), from the events of one run (`summarize`) or of a file (`read_runs`).

    hvdbench report --mllog results/demo/1x2-r0     # a run's own mllog.txt, read as a published log
    from hvdbench.results.mllog import read_run_log
    s = read_run_log("results/<system>/resnet/result_0.txt")    # s.status, s.time_to_train_s, s.epochs

An event holding a number that is not finite (NaN, Infinity, 1e999: `Event.non_finite`) is read as
missing and kept in `LogSummary.refused` for the warning; a run that logged a non-finite accuracy
did not converge, whatever its run_stop says. Times, epochs and throughputs computed from sound
events that still come out non-finite (run_start at -1e308, run_stop at 1e308) are missing too.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field

from mlperf_logging.mllog import constants as C

from hvdbench.results.mllog.events import (
    ACCELERATORS_PER_NODE,
    NUMBER_OF_NODES,
    RCP_KEYS,
    TRACKED_STATS,
    Event,
    LogFile,
    read_log,
    split_runs,
)
from hvdbench.results.mllog.mlperf import TRAIN_SAMPLES_NOT_A_SIZE, accuracy_of, counts_samples
from hvdbench.results.records.schema import TTT_PARTS


# The error of a run whose log has a run_start and no run_stop: incomplete (cut off, or still
# running when it was copied), not a run that trained to the end and missed its target.
INCOMPLETE = f"no {C.RUN_STOP} event (the log ends early)"


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
    accumulation: int = 1  # gradient_accumulation_steps where logged: micro-batches per optimizer step
    epochs: float | None = None
    final_metric: float | None = None
    throughput: float | None = None  # the last tracked_stats throughput
    eval_accuracy: list[tuple[float | None, float]] = field(default_factory=list)
    epoch_times_s: list[float] = field(default_factory=list)
    # number_of_nodes / accelerators_per_node as logged: key -> (value, line); checked where the
    # layout is resolved (hvdbench.results.mllog.layouts), which names the line of a bad one
    layout_events: dict = field(default_factory=dict)
    sample_based: bool = False  # evaluations are every N samples (epoch_num is a sample count)
    samples: float | None = None  # samples trained at the last evaluation (sample-based logs)
    sysjson: dict = field(default_factory=dict)  # a :::SYSJSON line's systems JSON
    sysjson_line: int = 0
    rcp_lines: list[str] = field(default_factory=list)  # the events the RCP checker reads
    refused: list[Event] = field(default_factory=list)  # events read as missing: a number not finite
    notes: list[str] = field(default_factory=list)  # 'line N: what was left out and why' (load.py warns them)
    # The time to train in parts (`_ttt_parts`; hvdbench.results.analyses.ttt): what was trained by run_stop
    # (samples, or epochs where the training set's size is not logged), the seconds spent training
    # and evaluating, and where each figure came from; the rest of run_start -> run_stop is "other".
    trained: float | None = None
    trained_unit: str = ""  # samples | epochs
    trained_from: str = ""
    train_s: float | None = None
    train_from: str = ""
    eval_s: float | None = None
    eval_from: str = ""
    evals: int | None = None  # how many evaluations (eval_start/eval_stop intervals) the run made

    @property
    def bad_accuracy(self) -> Event | None:
        """The first eval_accuracy whose number is not finite: the run did not converge."""
        return next((e for e in self.refused if e.key == C.EVAL_ACCURACY), None)

    @property
    def status(self) -> str:
        if self.run_start_ms is None or self.run_stop_ms is None or self.bad_accuracy is not None:
            return "failed"
        return "success" if self.stop_status == C.SUCCESS else "aborted"

    @property
    def error(self) -> str:
        if self.run_start_ms is None:
            return f"no {C.RUN_START} event"
        if self.run_stop_ms is None:
            return INCOMPLETE
        if self.bad_accuracy is not None:
            return (f"{C.EVAL_ACCURACY} at line {self.bad_accuracy.lineno}: {self.bad_accuracy.non_finite}: "
                    "not converged")
        if self.stop_status != C.SUCCESS:
            return f"{C.RUN_STOP} status {self.stop_status or 'missing'}"
        return ""

    @property
    def time_to_train_s(self) -> float | None:
        if self.run_start_ms is None or self.run_stop_ms is None:
            return None
        return _finite((self.run_stop_ms - self.run_start_ms) / 1000.0)


def summarize(events: list[Event], path: str = "", duplicates: int = 0, bad_lines: int = 0,
              sysjson: dict | None = None, part: int = 0) -> LogSummary:
    s = LogSummary(path=str(path), events=len(events), duplicates=duplicates, bad_lines=bad_lines,
                   sysjson=sysjson or {}, part=part)
    s.refused = [e for e in events if e.non_finite]
    events = [e for e in events if not e.non_finite]  # a number that is not finite is missing
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
    s.accumulation = _accumulation(first.get(C.GRADIENT_ACCUMULATION_STEPS), s.global_batch, s.notes)
    s.layout_events = {key: (first[key].value, first[key].lineno) for key in (NUMBER_OF_NODES, ACCELERATORS_PER_NODE)
                       if key in first}
    evals = [e for e in events if e.key == C.EVAL_ACCURACY and accuracy_of(e.value) is not None]
    s.sample_based = counts_samples(s.benchmark) or any(C.SAMPLES_COUNT in e.metadata for e in evals)
    epoch_of = _epoch_reader(events, s.sample_based, s.run_start_ms)
    for e in evals:
        s.eval_accuracy.append((epoch_of(e), accuracy_of(e.value)))
    for e in events:
        if e.key == TRACKED_STATS and isinstance(e.value, dict) and isinstance(e.value.get("throughput"), (int, float)) \
                and not isinstance(e.value["throughput"], bool):
            s.throughput = float(e.value["throughput"])
    if evals:
        s.final_metric = s.eval_accuracy[-1][1]
        s.epochs = s.eval_accuracy[-1][0]
        if s.sample_based:
            s.samples = _samples(evals[-1])
    elif not s.sample_based:  # no evaluation: the last epoch_stop's epoch
        stops = [e for e in events if e.key == C.EPOCH_STOP and _number(e.metadata.get(C.EPOCH_NUM)) is not None]
        s.epochs = _number(stops[-1].metadata[C.EPOCH_NUM]) if stops else None
    # A sample-based log's epoch and block events do not delimit epochs (BERT logs one epoch_start
    # and one epoch_stop around the whole run): no time per epoch from them.
    s.epoch_times_s = [] if s.sample_based else [t for t in _epoch_times(events) if math.isfinite(t)]
    s.rcp_lines = [e.line() for e in events if e.key in RCP_KEYS]
    _ttt_parts(s, events)
    return s


# The fields `_ttt_parts` sets, copied onto a run's record (MllogRun, or a sweep run's row read beside
# its own mllog.txt: hvdbench.results.analyses.ttt.read_parts).
TTT_FIELDS = TTT_PARTS  # declared with the loaded run that carries them (records/schema.py)


def _ttt_parts(s: LogSummary, events: list[Event]) -> None:
    """Split run_start -> run_stop into training, evaluation and the rest, and say what was trained.

    - trained: run_stop's samples_count; else the last evaluation's samples (sample-based logs); else
      its epochs x train_samples where the training set's size was logged before run_start (as
      hvdbench and ResNet do; not SSD and RetinaNet, which log steps per epoch there:
      TRAIN_SAMPLES_NOT_A_SIZE); else its epochs.
    - evaluation: the time inside eval_start -> eval_stop intervals. It wins where a block or epoch
      interval spans it too (BERT and DLRM log one interval around the whole run, evaluations
      inside, and stop training for them); an evaluation that overlapped training (RetinaNet's
      asynchronous one) is counted as evaluation for the time it overlapped.
    - training: the time inside block_start -> block_stop intervals, or epoch_start -> epoch_stop
      where those are finer (ResNet logs blocks of 4 epochs around its evaluations), outside
      evaluation; without either, what was trained / the harmonic mean of the logged tracked_stats
      throughputs (equal sample intervals); without those, the run less its evaluation.
    Intervals are clipped to the run; one left open at run_stop runs to it."""
    if s.run_start_ms is None or s.run_stop_ms is None or s.run_stop_ms <= s.run_start_ms:
        return
    t0, t1 = s.run_start_ms, s.run_stop_ms
    run_s = (t1 - t0) / 1000.0
    evals = _intervals(events, C.EVAL_START, C.EVAL_STOP, t0, t1)
    blocks = _intervals(events, C.BLOCK_START, C.BLOCK_STOP, t0, t1)
    epochs = _intervals(events, C.EPOCH_START, C.EPOCH_STOP, t0, t1)
    eval_ms = _covered(evals)
    s.eval_s, s.evals = eval_ms / 1000.0, len(evals)
    s.eval_from = (f"eval_start/eval_stop ({len(evals)} evaluation{'s' if len(evals) != 1 else ''})" if evals
                   else "no eval_start/eval_stop: none counted")
    s.trained, s.trained_unit, s.trained_from = _trained(s, events)
    rates = [float(e.value["throughput"]) for e in events
             if e.key == TRACKED_STATS and isinstance(e.value, dict) and _number(e.value.get("throughput"))
             and e.value["throughput"] > 0]
    if blocks or epochs:
        name, spans = ("epoch", epochs) if len(epochs) > len(blocks) else ("block", blocks)
        s.train_s = (_covered(spans + evals) - eval_ms) / 1000.0
        s.train_from = f"{name}_start/{name}_stop ({len(spans)}), less evaluation"
    elif rates and s.trained and s.trained_unit == "samples":
        s.train_s = s.trained / statistics.harmonic_mean(rates)
        s.train_from = f"samples / tracked_stats throughput (harmonic mean of {len(rates)})"
    else:
        s.train_s = run_s - s.eval_s
        s.train_from = "run_start -> run_stop less evaluation (no block, epoch or throughput events)"
    if not math.isfinite(s.train_s):
        s.train_s, s.train_from = None, ""


def _trained(s: LogSummary, events: list[Event]) -> tuple[float | None, str, str]:
    """(samples or epochs trained by run_stop, unit, where from): see `_ttt_parts`."""
    stop = next((e for e in events if e.key == C.RUN_STOP), None)
    count = _number(stop.metadata.get(C.SAMPLES_COUNT)) if stop is not None else None
    if count:
        return count, "samples", "run_stop samples_count"
    if s.sample_based:
        return (s.samples, "samples", "the last evaluation's samples_count") if s.samples else (None, "", "")
    if not s.epochs:
        return None, "", ""
    sizes = [e for e in events if e.key == C.TRAIN_SAMPLES and _number(e.value) and e.value > 0
             and e.time_ms <= s.run_start_ms]
    if sizes and s.benchmark not in TRAIN_SAMPLES_NOT_A_SIZE:
        return s.epochs * float(sizes[0].value), "samples", "epochs at the last evaluation x train_samples"
    return s.epochs, "epochs", "epochs at the last evaluation (no training set size logged before run_start)"


def _intervals(events: list[Event], start: str, stop: str, t0: float, t1: float) -> list[tuple[float, float]]:
    """start -> stop intervals in file order (a start opens one, the next stop closes it; one left
    open at the end runs to t1), clipped to [t0, t1]."""
    out, opened = [], None
    for e in events:
        if e.key == start:
            opened = e.time_ms if opened is None else opened
        elif e.key == stop and opened is not None:
            out.append((opened, e.time_ms))
            opened = None
    if opened is not None:
        out.append((opened, t1))
    return [(max(a, t0), min(b, t1)) for a, b in out if min(b, t1) > max(a, t0)]


def _covered(spans: list[tuple[float, float]]) -> float:
    """The length of the union of intervals."""
    total, current = 0.0, None
    for a, b in sorted(spans):
        if current is not None and a <= current[1]:
            current[1] = max(current[1], b)
            continue
        if current is not None:
            total += current[1] - current[0]
        current = [a, b]
    return total + (current[1] - current[0] if current is not None else 0.0)


def _accumulation(event: Event | None, global_batch: int, notes: list[str]) -> int:
    """gradient_accumulation_steps: micro-batches per optimizer step, a whole number from 1 to the
    global batch (each micro-batch holds a sample at least); 1 where it is not logged. Another value
    is no count: noted with its line and left out (1), never read as 1 unsaid (it tells accumulation
    from model parallelism: hvdbench.results.analyses.ttt.LayoutParts)."""
    if event is None:
        return 1
    value = event.value
    whole = isinstance(value, int) and not isinstance(value, bool) or isinstance(value, float) and value.is_integer()
    if whole and 1 <= value <= (global_batch or value):
        return int(value)
    most = f", at most the global batch {global_batch}" if global_batch else ""
    notes.append(f"line {event.lineno}: {C.GRADIENT_ACCUMULATION_STEPS} {value!r} is no count of micro-batches "
                 f"(a whole number, at least 1{most}): left out")
    return 1


def _int(event: Event | None) -> int:
    try:
        return int(event.value) if event is not None else 0
    except (TypeError, ValueError, OverflowError):
        return 0


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


def _number(value) -> float | None:
    """A logged number as a float; None for anything else (text, a list, true/false)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _samples(e: Event) -> float | None:
    value = e.metadata.get(C.SAMPLES_COUNT, e.metadata.get(C.EPOCH_NUM))
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
            if isinstance(ident, (list, dict)):  # not a key: {"epoch_num": [1]} is no epoch
                continue
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
    summaries = [summarize(events, log.path, log.duplicates if i == 0 else 0, log.bad_lines if i == 0 else 0,
                           log.sysjson, i + 1 if numbered else 0) for i, events in enumerate(parts)]
    for s in summaries:
        s.sysjson_line = log.sysjson_line
    return summaries
