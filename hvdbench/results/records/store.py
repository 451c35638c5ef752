"""Append-only CSV stores: `results/<sweep>/runs.csv` (one RunResult per run) and the bench CSVs,
and the sweep folders that hold them, as every reader of results finds them.

    hvdbench sweep --out results/demo ...     # appends to results/demo/runs.csv (append_run)
    hvdbench report results/demo              # reads it back (load_sweeps, current_runs)

Rows are only ever added. Each append writes the previous bytes verbatim plus the new rows to a
temporary file (created exclusively: never through a link), fsyncs it and renames it over the store,
so a crash or kill at any moment leaves either the old file or the new one, never a partial row. A
store of an older schema version, or holding a cell no run can have (inf, a negative time: read as
empty, with a warning), is rewritten whole by its next append. The header is never rewritten: an append
checks that it has every column of the record (not their order: new rows are written in the
record's column order, which is why a record's column order never changes, see schema.BenchRow).
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from pathlib import Path
from typing import Iterable, TypeVar

from hvdbench.errors import ConfigError, HvdbenchError, OutputError, StoreError, os_error_line
from hvdbench.files import atomic_write_bytes
from hvdbench.output import line
from hvdbench.results.records.schema import CsvRecord, LoadedRun, RunResult, SchemaError

R = TypeVar("R", bound=CsvRecord)

# A sweep folder's layout, declared here where its readers live (the sweep writes it):
RUNS_CSV = "runs.csv"  # one RunResult per run
SWEEP_RECORD = "sweep.json"  # the sweep's model, train arguments and link (sweep/spec.py writes it)
# A run folder's record of each host's hardware (hvdbench/hardware.py, with the framework versions):
# the worker's rank 0 writes it, the sweep keeps each host's first one in sweep.json's "hardware".
HARDWARE_JSON = "hardware.json"
EXPLAIN_DIR = "explain"  # SWEEP/explain/: the --explain twins, a sweep folder of their own
ALLREDUCE_CSV = "bench_allreduce.csv"  # `bench allreduce` rows (sweep --allreduce-bench too)
IO_CSV = "bench_io.csv"  # `bench io` rows
COMPUTE_CSV = "bench_compute.csv"  # `bench compute` rows (sweep --compute-bench too)
LINKS_CSV = "bench_links.csv"  # `bench links` rows (sweep --links-bench too)
# A study folder (`hvdbench study run --out DIR`, hvdbench/study/run.py writes it): DIR/study.json,
# and one sweep folder per model and mode, DIR/<model>/<mode>/runs.csv.
STUDY_RECORD = "study.json"


def append_run(store: str | os.PathLike, result: RunResult) -> None:
    append_rows(store, [result])


def read_runs(store: str | os.PathLike) -> list[RunResult]:
    """All rows of a runs.csv, checked against the schema (missing columns, other versions)."""
    return read_rows(store, RunResult, what="run store")


def check_appendable(path: str | os.PathLike, cls: type[CsvRecord]) -> bytes:
    """The bytes of a store rows may be appended to (b"" when there is none yet); StoreError or
    SchemaError naming the file (and line) when it cannot be read back whole, so a store that is
    not ours, or damaged, is never rewritten. A symbolic link is refused: an append replaces the
    file atomically (rename), which would turn the link into a regular file."""
    path = Path(path)
    if path.is_symlink():
        raise StoreError(f"{path} is a symbolic link (to {os.readlink(path)}): an append replaces the store "
                         f"atomically, which would replace the link; give --out {Path(os.path.realpath(path)).parent} "
                         "or put the file itself in place of the link")
    if not path.exists():
        return b""
    if not path.is_file():
        raise StoreError(f"{path} is not a regular file")
    old = path.read_bytes()
    _parse(old, cls, path, quiet=True)  # every row must read back before one is added
    return old


def append_rows(path: str | os.PathLike, rows: Iterable[CsvRecord]) -> Path:
    """Append rows, all of one record class, atomically. A store written by an older schema
    version (columns missing) is rewritten whole in the current one first: every old row keeps its
    values, and the columns added since are empty."""
    rows, path = list(rows), Path(path)
    if not rows:
        return path
    cls = type(rows[0])
    for row in rows:  # a non-finite or impossible figure is written empty, and the row says why
        cleared = row.clear_impossible()
        if cleared:
            said = "; ".join(cleared)
            if hasattr(row, "error"):
                row.error = f"{row.error} | {said}" if row.error else said
            elif hasattr(row, "note"):
                row.note = f"{row.note}; {said}" if row.note else said
    old = check_appendable(path, cls)
    if old:
        kept, warned = _parse_rows(old, cls, path)
        if warned or _missing_columns(old, cls):  # an older version, or impossible cells: rewritten whole
            _warn(warned)
            rows, old = kept + rows, b""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cls.columns(), lineterminator="\n")
    if old and not old.endswith(b"\n"):
        old += b"\n"  # a last line without its end (an edited file): the new rows start a line
    if not old:
        writer.writeheader()
    writer.writerows(row.to_row() for row in rows)
    atomic_write_bytes(path, old + buf.getvalue().encode())
    _fsync_dir(path.parent)
    return path


def append_or_rescue(path: str | os.PathLike, rows: Iterable[CsvRecord]) -> Path:
    """append_rows for a finished measurement (the bench CSVs): when the store cannot be written
    (a read-only --out, a full disk, a damaged store), the rows go to a new file in the temporary
    folder or the working directory instead, and an OutputError names both files, so the
    measurement is never lost to an output error."""
    rows, path = list(rows), Path(path)
    try:
        return append_rows(path, rows)
    except (OSError, HvdbenchError) as e:
        if isinstance(e, OSError):
            reason = e.strerror or str(e) if e.filename in (None, str(path)) else os_error_line(e)
        else:
            reason = str(e).removeprefix(f"{path}: ").removeprefix(f"{path}")
        saved = rescue_rows(path.name, rows)
        where = f"saved in {saved}" if saved else "printed above only (no writable folder for a copy)"
        raise OutputError(f"{path}: rows not appended ({reason}); the measurement is {where}") from None


def rescue_rows(name: str, rows: list[CsvRecord]) -> Path | None:
    """Write `rows` with their header to a new file named after `name` in the temporary folder,
    else in the working directory; its path, or None when neither can be written."""
    import tempfile

    stem, dot, ext = name.rpartition(".")
    for folder in (tempfile.gettempdir(), os.getcwd()):
        try:
            fd, tmp = tempfile.mkstemp(prefix=f"{stem or name}-", suffix=f".{ext}" if dot else "", dir=folder)
            with os.fdopen(fd, "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=type(rows[0]).columns(), lineterminator="\n")
                writer.writeheader()
                writer.writerows(row.to_row() for row in rows)
            return Path(tmp)
        except OSError:
            continue
    return None


def read_rows(path: str | os.PathLike, cls: type[R], what: str = "results file") -> list[R]:
    path = Path(path)
    if not path.exists():
        raise SchemaError(f"{path}: no such {what}")
    if not path.is_file():  # a folder, or a FIFO (reading it would wait forever)
        raise StoreError(f"{path}: not a regular file (expected a {what})")
    return _parse(path.read_bytes(), cls, path)


def _parse(data: bytes, cls: type[R], path: Path, quiet: bool = False) -> list[R]:
    """Every row of a store's bytes; StoreError/SchemaError naming the file and line of the first
    thing that is not a row of `cls` (not UTF-8, not CSV, a row of the wrong length, a bad cell).
    A cell that cannot be a measurement (CsvRecord.clear_impossible: inf, a negative time) is read
    as empty, with a warning naming file, line and column on stderr once the whole file has read."""
    rows, warned = _parse_rows(data, cls, path)
    if not quiet:
        _warn(warned)
    return rows


def _warn(lines: list[str]) -> None:
    for text in lines:
        line(f"warning: {text}", sys.stderr)


def _parse_rows(data: bytes, cls: type[R], path: Path) -> tuple[list[R], list[str]]:
    """(_parse's rows, its warnings unsaid)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise StoreError(f"{path}:{line}: not a CSV text file (byte {e.start} is not UTF-8)") from None
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            return [], []
        _check_header(header, cls, path)
        # The names as the record's fields hold them: a call's keywords are matched by identity
        # before equality, and a row's 90 cells given as keywords under other strings of the
        # same names took longer to match than to read (CsvRecord.from_row).
        header = [sys.intern(name) for name in header]
        rows, warned, width, prefix = [], [], len(header), f"{path}:"
        in_order = header == cls.columns()  # the cells are the record's columns in order: no dict per row
        for cells in reader:
            if not cells:
                continue  # a blank line
            where = f"{prefix}{reader.line_num}"
            if len(cells) != width:
                raise StoreError(f"{where}: {len(cells)} cell(s), the header has {width} columns "
                                 "(a truncated or edited row)")
            row = cls.from_cells(cells, where) if in_order else cls.from_row(dict(zip(header, cells)), where)
            said = row.clear_impossible()
            if said:
                warned += [f"{where}: {text}" for text in said]
            rows.append(row)
        return rows, warned
    except csv.Error as e:
        raise StoreError(f"{path}:{reader.line_num}: not valid CSV ({e})") from None


def _missing_columns(data: bytes, cls: type[CsvRecord]) -> list[str]:
    header = next(csv.reader(io.StringIO(data.decode("utf-8"), newline="")), [])
    return [c for c in cls.columns() if c not in header]


def _check_header(have: list[str], cls: type[CsvRecord], path: Path) -> None:
    # An older schema version lacks the columns added since; its rows say which version they are.
    optional = set(getattr(cls, "added_since", lambda version: ())(1))
    missing = [c for c in cls.columns() if c not in have and c not in optional]
    if missing:
        raise SchemaError(f"{path}: missing column(s) {', '.join(missing)}")
    duplicate = sorted({c for c in have if have.count(c) > 1})
    if duplicate:
        raise StoreError(f"{path}:1: column(s) {', '.join(duplicate)} appear more than once")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_sweep_record(path: Path) -> dict:
    """sweep.json as a dict; ConfigError naming the file when it is not one."""
    try:
        old = json.loads(Path(path).read_text())
    except ValueError:  # UnicodeDecodeError too
        raise ConfigError(f"{path}: not valid JSON") from None
    if not isinstance(old, dict):
        raise ConfigError(f"{path}: not a sweep record (a JSON object with model and train_args)")
    return old


# --- sweep folders, as the report and predict read them ------------------------------------------

def sweep_folder(path) -> Path:
    """A sweep argument's folder: SWEEP_DIR itself, or the folder of a runs.csv given directly."""
    path = Path(path)
    return path.parent if path.suffix == ".csv" else path


def default_report_folder(sweeps) -> Path:
    """Where `report` and `predict` write without --out: FIRST_SWEEP/report (beside its runs.csv),
    or ./report when there is no sweep."""
    return sweep_folder(sweeps[0]) / "report" if sweeps else Path("report")


def load_sweeps(paths, notes: list | None = None) -> list[LoadedRun]:
    """Rows of each SWEEP_DIR/runs.csv (or a runs.csv given directly), with what their sweep.json
    records of the hosts (links, logical CPUs); schema errors name the file. A sweep.json whose
    hardware cannot be read is a warning naming it (into `notes`, else on stderr)."""
    runs: list[LoadedRun] = []
    for path in map(Path, paths):
        store = path if path.suffix == ".csv" else path / RUNS_CSV
        if not store.is_file():
            raise SchemaError(f"{store}: no such run store (a sweep folder holds runs.csv)")
        try:
            rows = read_rows(store, LoadedRun, what="run store")
        except SchemaError as e:  # a bad cell value's message may lack the file: add it
            raise (e if str(store) in str(e) else SchemaError(f"{store}: {e}")) from None
        found, warning = sweep_hosts(store.parent / SWEEP_RECORD)
        if warning and notes is not None:
            notes.append(warning)
        elif warning:
            line(warning, sys.stderr)
        for row in rows:  # not runs.csv columns: one per sweep, from its record
            for name, value in found.items():
                setattr(row, name, value)
        runs.extend(_with_devices(rows))
    return runs


def _with_devices(rows: list[RunResult]) -> list[RunResult]:
    """A run that failed before its worker saw the devices (a crash at start, a hang, a refused
    launch) has no `devices`, the report's system: it gets the one device set the sweep's other
    runs name, so the report counts it in its layout's row instead of a group of its own."""
    seen = {r.devices for r in rows if r.devices}
    if len(seen) == 1:
        devices = seen.pop()
        for row in rows:
            if not row.devices and row.status in ("failed", "timeout"):
                row.devices = devices
    return rows


def sweep_hosts(path: Path) -> tuple[dict, str]:
    """What a sweep's sweep.json records of its hosts, as LoadedRun fields, and a warning ('' when
    none): `link`, the inter-node link (`sweep --link`, or the emulated cluster's), else the one its
    hosts' hardware records read (hvdbench/hardware.py: the fastest InfiniBand port or Ethernet NIC);
    `intra_link`, the GPU-to-GPU link they read; `host_cpus`, the fewest logical CPUs of a host; `cpu_model`, their CPU model(s).
    Empty when there is no record (a runs.csv copied alone). A hand-edited record whose hardware is
    not a host -> record mapping keeps the link it names and warns, naming the file."""
    found: dict = {"link": "", "intra_link": "", "host_cpus": None, "cpu_model": ""}
    if not path.is_file():
        return found, ""
    try:
        record = read_sweep_record(path)
    except ConfigError as e:
        raise SchemaError(str(e)) from None
    hardware, warning = record.get("hardware") or {}, ""
    if not isinstance(hardware, dict):
        hardware, warning = {}, (f"warning: {path}: \"hardware\" is a {type(hardware).__name__}, not a record per "
                                 "host (hand-edited?): its hosts' links and cores are left out")
    hosts = [h for h in hardware.values() if isinstance(h, dict)]

    def measured(key: str) -> str:
        return " | ".join(dict.fromkeys(str(h[key]) for h in hosts if h.get(key) and isinstance(h[key], str)))

    link = record.get("link")
    found["link"] = link if isinstance(link, str) and link else measured("inter_node_link")
    found["intra_link"] = measured("intra_node_link")
    cpus = [h["cpu"].get("logical") for h in hosts if isinstance(h.get("cpu"), dict)]
    cpus = [c for c in cpus if isinstance(c, int) and not isinstance(c, bool) and c > 0]
    found["host_cpus"] = min(cpus) if cpus and len(cpus) == len(hosts) else None
    models = [h["cpu"].get("model") for h in hosts if isinstance(h.get("cpu"), dict)]
    found["cpu_model"] = " | ".join(dict.fromkeys(m for m in models if isinstance(m, str) and m))
    return found, warning


def sweep_link(path: Path, kind: str = "inter") -> str:
    """The inter-node link of sweep.json (`sweep_hosts`), or with kind "intra" the GPU-to-GPU one."""
    return sweep_hosts(path)[0]["link" if kind == "inter" else "intra_link"]


def current_runs(runs: list[RunResult]) -> tuple[list[RunResult], int]:
    """The last row of each (sweep, run_id), and how many earlier rows it superseded.

    `hvdbench sweep --retry-failed` appends a new row for a run that failed or timed out; runs.csv
    keeps both, and the tables count the run once, in its current state. Rows without a run_id
    (published logs) are all kept.
    """
    latest: dict[tuple, RunResult] = {}
    for i, run in enumerate(runs):
        latest[(run.sweep, run.run_id) if run.run_id else ("", i)] = run
    return list(latest.values()), len(runs) - len(latest)


# --- study folders ---------------------------------------------------------------------------------

def read_study_record(folder: Path) -> dict | None:
    """OUT/study.json, or None when `folder` is not a study folder. Its "study" is a plain name (the
    report writes a study's tables under OUT/<name>/ when it has several): a string without a path
    separator, '..' or a control character, else ConfigError naming the file."""
    path = Path(folder) / STUDY_RECORD
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except ValueError:
        raise ConfigError(f"{path}: not valid JSON") from None
    if not isinstance(data, dict) or "study" not in data or "identity" not in data:
        raise ConfigError(f"{path}: not a study record")
    name = data["study"]
    if (not isinstance(name, str) or not name.strip() or name in (".", "..") or "/" in name or "\\" in name
            or not name.isprintable() or len(name) > 255):
        raise ConfigError(f"{path}: \"study\" is {json.dumps(name)[:80]}, not a study name (a plain name: no "
                          "'/', no '..', as the study file's name)")
    return data


def study_sweep_dirs(folder: Path) -> list[Path]:
    """The sweep folders of a study folder that hold runs: <model>/<mode>/runs.csv."""
    return sorted(p.parent for p in Path(folder).glob(f"*/*/{RUNS_CSV}"))
