"""The one reader of MLPerf `:::MLLOG {json}` event logs: hvdbench's own `mllog.txt`, the
`result_N.txt` files of MLCommons training results repositories, and raw launcher logs.

    hvdbench report --mllog training_results_v4.0/Oracle --group-by submitter+system
    from hvdbench.results.mllog import load
    runs, notes = load("training_results_v4.0/Oracle")      # -> list[MllogRun], what to tell the user

By concern, each module lower in this list reading only those above it:
    events.py    lines -> events: the marker anywhere in a line, launcher rank prefixes, one copy of an
                 event several ranks logged, a file of several runs split into runs
    mlperf.py    what a benchmark's logs mean where the format leaves it to the benchmark (sample
                 counts, several-valued accuracies): the registry for hvdbench's models, MLPerf's facts
                 for the others
    summary.py   one run's events -> LogSummary (times, status, evaluations, epochs or samples)
    layouts.py   nodes x accelerators per node from log events, systems JSON, NxGxBxA and platform names
    groups.py    --group-by: the system a run is reported under; a result is one systems file, a study
                 one hardware (HARDWARE_FIELDS, assign_studies)
    record.py    LogSummary + where the log sits -> MllogRun, the common record
    load.py      a folder: which files hold runs, every run under it
    rcp.py       mlperf-logging's RCP checker on a group of runs
"""

from hvdbench.results.mllog.events import (
    ACCELERATORS_PER_NODE,
    MARKER,
    NUMBER_OF_NODES,
    OWN_LOG_NAME,
    RCP_KEYS,
    RUN_KEYS,
    SYSJSON_MARKER,
    TRACKED_STATS,
    Event,
    LogFile,
    dedupe,
    parse_line,
    read_event_dicts,
    read_events,
    read_log,
    split_runs,
)
from hvdbench.results.mllog.groups import DEFAULT_GROUP_BY, GROUP_KEYS, group_name, parse_group_by
from hvdbench.results.mllog.layouts import (
    SOURCE_FOLDER,
    SOURCE_LOG,
    SOURCE_NAME,
    SOURCE_PLATFORM,
    SOURCE_SYSJSON_LINE,
    SOURCE_SYSTEMS_JSON,
    SOURCE_UNKNOWN,
    Where,
    layout_from_name,
    layout_from_text,
    locate,
    resolve_layout,
    system_family,
)
from hvdbench.results.mllog.load import BINARY_PROBE, NOT_LOGS, RESULT_GLOB, Reading, find_logs, load, read_mllog_dir
from hvdbench.results.mllog.mlperf import SAMPLE_COUNTED_BENCHMARKS
from hvdbench.results.mllog.rcp import NOT_CHECKED, Rcp, rcp_check
from hvdbench.results.mllog.record import (
    DEFAULT_RULESET,
    FRAMEWORK_WORDS,
    MllogRun,
    framework_of,
    ruleset_of,
    to_run_result,
)
from hvdbench.results.mllog.summary import TTT_FIELDS, LogSummary, read_run_log, read_runs, summarize

__all__ = [
    "ACCELERATORS_PER_NODE", "MARKER", "NUMBER_OF_NODES", "OWN_LOG_NAME", "RCP_KEYS", "RUN_KEYS", "SYSJSON_MARKER",
    "TRACKED_STATS", "Event", "LogFile", "dedupe", "parse_line", "read_event_dicts", "read_events", "read_log",
    "split_runs", "DEFAULT_GROUP_BY", "GROUP_KEYS", "group_name", "parse_group_by", "SOURCE_FOLDER", "SOURCE_LOG",
    "SOURCE_NAME", "SOURCE_PLATFORM", "SOURCE_SYSJSON_LINE", "SOURCE_SYSTEMS_JSON", "SOURCE_UNKNOWN", "Where",
    "layout_from_name", "layout_from_text", "locate", "resolve_layout", "system_family", "BINARY_PROBE", "NOT_LOGS",
    "RESULT_GLOB", "Reading", "find_logs", "load", "read_mllog_dir", "SAMPLE_COUNTED_BENCHMARKS", "NOT_CHECKED",
    "Rcp", "rcp_check", "DEFAULT_RULESET", "FRAMEWORK_WORDS", "MllogRun", "framework_of", "ruleset_of",
    "to_run_result", "LogSummary", "TTT_FIELDS", "read_run_log", "read_runs", "summarize",
]
