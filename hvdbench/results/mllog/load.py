"""Folders of MLPerf logs: which files hold runs (`find_logs`, `Reading`), and every run under a
folder as the common record (`load`).

    hvdbench report --mllog training_results_v4.0/Oracle
    from hvdbench.results.mllog import load
    runs, notes = load("training_results_v4.0/Oracle")      # -> list[MllogRun], what to tell the user

Every text file under the folder that holds a run's `:::MLLOG` lines is read, whatever its name
(`result_N.txt`, `mllog.txt`, `*.log`, `slurm-*.out`); the others (code, binaries, MLPerf power
logs, files without the marker) are counted as skipped, with the reason (`Reading.summary`). A
submission's `result_N.txt` without a run event is a warning naming it, and a run that did not
converge where result files beside it hold runs (as the summarizer counts it), else no run: a DNF
row made of nothing would hide it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from mlperf_logging.mllog import constants as C

from hvdbench.results.mllog.events import RUN_KEYS, read_log
from hvdbench.results.mllog.groups import DEFAULT_GROUP_BY, assign_studies, parse_group_by
from hvdbench.results.mllog.record import MllogRun, to_run_result
from hvdbench.results.mllog.summary import LogSummary, read_runs
from hvdbench.results.records.schema import SchemaError

RESULT_GLOB = "result_*.txt"
MAX_WARNINGS = 20  # warning lines a load prints; the rest are counted

# Files a folder walk does not open: code, configuration, documents and archives (a source file
# may quote an MLLOG line; a results repository holds the code that wrote its logs).
NOT_LOGS = frozenset(".py .sh .sub .json .yaml .yml .md .rst .ipynb .c .cc .cpp .cu .h .hpp .toml .cfg "
                     ".ini .html .css .js .png .jpg .jpeg .svg .pdf .gz .bz2 .xz .tar .tgz .zip .h5 .pt".split())
BINARY_PROBE = 8192  # bytes looked at for a NUL


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
    seen: set[tuple[int, int]] = set()  # (device, inode): a link to a file read already is not a second run
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
    kept = set()
    for path in sorted(reading.logs, key=Path.is_symlink):  # a file's own name before a link's (stable)
        if _identity(path) in seen:
            reading.skip(path, "the same file as another one read (a link)")
        else:
            seen.add(_identity(path))
            kept.add(path)
    reading.logs = [path for path in reading.logs if path in kept]
    return reading


def _identity(path: Path) -> tuple[int, int]:
    """The file a path names, whatever the path (symbolic and hard links alike)."""
    st = path.stat()
    return st.st_dev, st.st_ino


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
    Files without run events are skipped and counted, except a `results/<system>/<benchmark>/result_N.txt`
    (a warning naming it; see `_empty_results`). SchemaError when no file holds a readable event.
    A number that is not finite, a layout count out of bounds or a systems JSON that cannot be read
    is a warning among the notes (one line per file, naming it, and the line and key), never an
    error: one bad file of a published tree does not stop the report of the rest."""
    root = Path(root)
    keys = parse_group_by(group_by) if isinstance(group_by, str) else group_by
    reading, descs = find_logs(root), {}
    candidates, reading.logs = reading.logs, []
    runs: list[MllogRun] = []
    bad_files, bad_lines, warnings, empty_results = [], 0, [], []
    for path in progress(candidates):
        why = _probe(path)
        log = read_log(path) if why is None else None
        if log is not None and not log.marker_lines:
            why = "without :::MLLOG lines"
        elif log is not None and not log.events:
            why = "with only unreadable :::MLLOG lines"
        elif log is not None and not any(e.key in RUN_KEYS for e in log.events):
            why = "without run events (power readings or the like)"
        if why and path.match(RESULT_GLOB) and path.absolute().parent.parent.parent.name == "results":
            empty_results.append((path, why))  # decided once the folder's other files are read
            continue
        if why:
            reading.skip(path, why)
            continue
        reading.logs.append(path)
        if log.bad_lines:
            bad_files.append(f"{path}:{log.first_bad_line}")
            bad_lines += log.bad_lines
        if log.non_finite:
            warnings.append(non_finite_warning(path, log.non_finite))
        summaries = read_runs(log)
        warnings += [f"{path}:{note.removeprefix('line ')}" for s in summaries for note in s.notes]
        runs += [to_run_result(s, root, keys, ruleset, descs, warnings) for s in summaries
                 if not _impossible_span(s, path, warnings)]
    runs += _empty_results(empty_results, reading, root, keys, ruleset, descs, warnings)
    runs = _published_once(runs, root, warnings)
    assign_studies(runs, keys)
    if not runs:
        raise SchemaError(f"{root}: no file holds a readable :::MLLOG event ({reading.summary(0)})")
    notes = [reading.summary(len(runs))]
    if bad_files:  # e.g. ranks' output interleaved mid-line
        notes.append(f"{root}: {bad_lines} unreadable :::MLLOG line(s) skipped in {len(bad_files)} file(s), "
                     f"first {bad_files[0]}")
    warnings = list(dict.fromkeys(warnings))  # a systems JSON's warning comes once per run: say it once
    notes += [f"warning: {w}" for w in warnings[:MAX_WARNINGS]]
    if len(warnings) > MAX_WARNINGS:
        notes.append(f"warning: {root}: {len(warnings) - MAX_WARNINGS} more file(s) with warnings like these")
    assumed = sorted({r.ruleset for r in runs if r.ruleset_assumed and r.division == "closed"})
    if assumed:
        notes.append(f"{root}: closed-division RCPs checked against ruleset {', '.join(assumed)} (no "
                     "training_results_vX.Y folder in the path; give --ruleset X.Y.0 for another round)")
    return runs, notes


def _empty_results(empty: list[tuple[Path, str]], reading: Reading, root: Path, keys, ruleset, descs,
                   warnings: list) -> list[MllogRun]:
    """A submission's result_N.txt without a run event, each said in a warning naming it. Beside
    result files that hold runs it is a run that did not converge, as the official summarizer counts
    it (its olympic score drops it, and a second one makes the score DNF); in a benchmark folder where
    no result file holds a run it is no run: a DNF row made of nothing would only hide it."""
    folders = {path.parent for path in reading.logs}
    runs = []
    for path, why in empty:
        said = f"{path}: a result file with no MLPerf run event ({why})"
        if path.parent in folders:
            reading.logs.append(path)
            warnings.append(f"{said}: counted as a run that did not converge, as the summarizer counts it")
            runs.append(to_run_result(LogSummary(str(path)), root, keys, ruleset, descs, warnings))
        else:
            reading.skip(path, why)
            warnings.append(f"{said}: not counted as a run (no result file beside it holds one)")
    return runs


def _published_once(runs: list[MllogRun], root: Path, warnings: list) -> list[MllogRun]:
    """Each run once in its score: a result file that repeats another of the same folder (tinycorp's
    v4.1 BERT result_8.txt is its result_3.txt but for the seed's value: one run, scored as two of its
    ten) is left out, the first by name kept, with a warning naming both. Across folders the same runs
    stay in each (Dell's 8xXE9680x8H100-SXM-80GB-POWER in v4.1 repeats 8xXE9680x8H100-SXM-80GB's runs:
    two systems files, each scored, as the summarizer scores them) and a warning says so, as their
    rows are not two measurements. The same run: same submitter, benchmark, batch and status,
    run_start to the millisecond and the same time to train."""
    def same(r: MllogRun) -> tuple:
        return r.submitter, r.model, r.global_batch, r.status, r.started_at, r.wall_s

    def folder(r: MllogRun) -> Path:
        return Path(r.run_id.split("#")[0]).parent

    by_run: dict[tuple, list[MllogRun]] = {}
    for r in runs:
        if r.started_at:
            by_run.setdefault(same(r), []).append(r)
    dropped: set[int] = set()
    repeats: dict[Path, list[tuple[str, str]]] = {}  # a folder -> (a file, the earlier one it repeats)
    again: dict[tuple[Path, Path], int] = {}  # (a folder, the folder it repeats) -> runs
    for copies in (c for c in by_run.values() if len(c) > 1):
        copies = sorted(copies, key=lambda r: Path(r.run_id).parts)
        for i, r in enumerate(copies[1:], 1):
            earlier = next((x for x in copies[:i] if folder(x) == folder(r)), None)
            if earlier is not None:
                dropped.add(id(r))
                repeats.setdefault(folder(r), []).append((r.run_id, earlier.run_id))
            else:
                where = (folder(r), folder(copies[0]))
                again[where] = again.get(where, 0) + 1
    for where, pairs in repeats.items():
        copy, first = pairs[0]
        warnings.append(f"{root / where}: {len(pairs)} result file(s) repeat a run of another in the folder (run_start "
                        f"and time to train to the millisecond; {Path(copy).name} is {Path(first).name}): each run "
                        "counted once, as the first by name")
    for (mine, theirs), n in again.items():
        warnings.append(f"{root / mine}: {n} run(s) the same as in {root / theirs} (run_start and time to train to "
                        "the millisecond): each folder's score counts them, as the summarizer does; not two measurements")
    return [r for r in runs if id(r) not in dropped]


def _impossible_span(s, path: Path, warnings: list) -> bool:
    """Whether a run's run_stop is not after its run_start (an edited or broken log: it would score a
    negative or zero time to train and pass): dropped, with a warning naming the file. A throughput
    log (tracked_stats, no time to train) may start and stop in one millisecond."""
    if s.run_start_ms is None or s.run_stop_ms is None or s.run_stop_ms > s.run_start_ms:
        return False
    if s.run_stop_ms == s.run_start_ms and s.throughput is not None and not s.eval_accuracy:
        return False
    how = "at the same time as" if s.run_stop_ms == s.run_start_ms else f"{s.run_start_ms - s.run_stop_ms:.0f} ms before"
    run = f" (run {s.part})" if s.part else ""
    warnings.append(f"{path}{run}: run_stop {how} run_start, an impossible time to train: run dropped")
    return True


def non_finite_warning(path, events) -> str:
    """One line for a file's events holding a number that is not finite, naming the first (an
    eval_accuracy first: its run does not count as converged)."""
    accuracy = [e for e in events if e.key == C.EVAL_ACCURACY]
    e = (accuracy or events)[0]
    key = e.key if len(e.key) <= 40 else e.key[:36] + "..."
    what = e.non_finite if len(e.non_finite) <= 120 else e.non_finite[:116] + "..."
    line = f"{path}:{e.lineno}: {key} {what}: read as missing"
    if accuracy:
        line += ", and its run does not count as converged"
    return line + (f" ({len(events)} such events in this file)" if len(events) > 1 else "")


def read_mllog_dir(root: str | os.PathLike) -> list[MllogRun]:
    return load(root)[0]
