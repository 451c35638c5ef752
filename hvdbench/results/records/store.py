"""Append-only CSV stores: `results/<sweep>/runs.csv` (one RunResult per run) and the bench CSVs,
and the sweep folders that hold them, as every reader of results finds them.

    hvdbench sweep --out results/demo ...     # appends to results/demo/runs.csv (Store.append)
    hvdbench report results/demo              # reads it back (load_sweeps, current_runs)

Rows are only ever added. An append writes the new rows at the end of the file in one write(2), in
the header's column order, and fsyncs it; a write that fails midway (a full disk) is cut back to the
old end, so only a machine that stops during that one write can leave a cut row, which every read
then names by its line. What a process read of a store stays read (`Store`): a sweep reads its
runs.csv whole once, then only the rows other sweeps appended since, and records a run without
reading the old rows again (benchmarks/bench_store.py: the same cost at 10 rows and at 10,000).
A store of an older schema version, or holding a cell no run can have (inf, a negative time: read
as empty, with a warning), is rewritten whole by its next append, atomically (a temporary file
created exclusively, never through a link, fsynced and renamed over it: a crash leaves the old file
or the new one). The header is never rewritten otherwise: an append checks that it has every column
of the record, and writes the cells in its order.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import stat
import sys
from collections import defaultdict
from pathlib import Path
from typing import Generic, Iterable, TypeVar

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

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO put there never blocks a read
# At the end of the store as it is, never through a link, never creating one without its header.
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC


class Store(Generic[R]):
    """A store as this process has read it: its rows (each read once), and where the bytes they
    came from end, so that what other processes appended since is read alone (`refresh`) and an
    append writes at the end without reading the old rows again.

        store = Store(SWEEP / "runs.csv", RunResult)   # read whole once, checked (see check_appendable)
        with locks.store_lock(SWEEP):
            store.refresh()                             # the rows another sweep appended since
        store.of("1x2-r1")                              # a run's rows, in order
        with locks.store_lock(SWEEP):
            store.append([row])                         # refresh, then the row at the end

    A store replaced or shortened since it was read (another process upgraded it in place, an edit)
    is read whole again. Where several processes append, they hold a lock around refresh and append
    (hvdbench.sweep.locks.store_lock): reading under it never meets a row half written."""

    def __init__(self, path: str | os.PathLike, cls: type[R], quiet: bool = False):
        self.path, self.cls, self.quiet = Path(path), cls, quiet
        self._read_whole()

    def _read_whole(self) -> None:
        self.rows: list[R] = []
        self._by_id: dict[str, list[R]] = defaultdict(list)
        self.header: list[str] | None = None
        self._identity, self._size, self._lines, self._ends_a_line = None, 0, 0, True
        self._rewrite = False  # an older schema's header, or impossible cells read: the next append rewrites it
        _refuse_link(self.path)
        if not os.path.lexists(self.path):
            return
        self._read(0)

    def _open(self, flags: int) -> int:
        try:
            return os.open(self.path, flags)
        except OSError as e:
            if e.errno == errno.ELOOP:  # a link put in its place since
                _refuse_link(self.path)
            raise

    def _read(self, start: int) -> None:
        """Read the store's bytes from `start` (0: the whole, its header first) and add their rows."""
        with os.fdopen(self._open(_READ), "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise StoreError(f"{self.path} is not a regular file")
            f.seek(start)
            data = f.read()
        header, rows, warned = _parse_rows(data, self.cls, self.path, self.header, self._lines + 1)
        if self.header is None and header is not None:
            self.header = header
            self._rewrite = any(c not in header for c in self.cls.columns())  # an older schema's
        self._rewrite = self._rewrite or bool(warned)
        if not self.quiet:
            _warn(warned)
        self._identity = (st.st_dev, st.st_ino)
        self._added(data, rows)

    def refresh(self) -> None:
        """Add the rows appended since this process last read the store, read alone."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            if self.rows or self.header is not None:  # it was there: read it as it is now (none)
                self._read_whole()
            return
        if (st.st_dev, st.st_ino) != self._identity or st.st_size < self._size or self.header is None:
            self._read_whole()
        elif st.st_size > self._size:
            self._read(self._size)

    def of(self, run_id: str) -> list[R]:
        """The rows of one run, in the order they were appended (a retried run has several)."""
        return self._by_id.get(run_id, [])

    def append(self, rows: Iterable[R]) -> None:
        """Add rows (all of this store's class) at the end, after reading what others appended since.
        A new store gets its header first; one of an older schema version, or holding an impossible
        cell, is rewritten whole, every old row with its values and the columns added since empty."""
        rows = list(rows)
        if not rows:
            return
        _explain_impossible(rows)
        self.refresh()
        if self.header is None or self._rewrite:
            every, header = [*self.rows, *rows], self.cls.columns()
            data = _csv(every, header, with_header=True)
            atomic_write_bytes(self.path, data)
            _fsync_dir(self.path.parent)
            st = os.lstat(self.path)
            self.rows, self._by_id, self.header, self._rewrite = [], defaultdict(list), header, False
            self._identity, self._size, self._lines = (st.st_dev, st.st_ino), 0, 0
            self._added(data, every)
            return
        data = _csv(rows, self.header, with_header=False)
        if not self._ends_a_line:
            data = b"\n" + data  # a last line without its end (an edited file): the new rows start a line
        fd = self._open(_APPEND)
        try:
            st = os.fstat(fd)
            written = os.write(fd, data)
            if written != len(data):  # a full disk: what was written is taken back, no cut row stays
                end = os.lseek(fd, 0, os.SEEK_CUR)
                if os.fstat(fd).st_size == end:  # (nobody appended after it)
                    os.ftruncate(fd, end - written)
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))
            os.fsync(fd)
        finally:
            os.close(fd)
        if ((st.st_dev, st.st_ino), st.st_size) == (self._identity, self._size):
            self._added(data, rows)  # written right after what was read: known without reading it back
        # else another process appended in between (no lock held): the next refresh reads both

    def _added(self, data: bytes, rows: list[R]) -> None:
        """`data`, holding `rows`, is now the end of what this process knows of the store."""
        self._size += len(data)
        self._lines += data.count(b"\n")
        self._ends_a_line = data.endswith(b"\n") if data else self._ends_a_line
        self.rows += rows
        for row in rows:
            self._by_id[getattr(row, "run_id", "")].append(row)


def _csv(rows: list[CsvRecord], columns: list[str], with_header: bool) -> bytes:
    """The rows' CSV text, their cells in `columns`' order."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    if with_header:
        writer.writeheader()
    writer.writerows(row.to_row() for row in rows)
    return buf.getvalue().encode()


def _refuse_link(path: Path) -> None:
    """StoreError naming `path` when it is a symbolic link: a store is replaced atomically by its
    rewrite (rename), which would turn the link into a regular file, and never appended through one."""
    if path.is_symlink():
        raise StoreError(f"{path} is a symbolic link (to {os.readlink(path)}): an append replaces the store "
                         f"atomically, which would replace the link; give --out {Path(os.path.realpath(path)).parent} "
                         "or put the file itself in place of the link")


def _explain_impossible(rows: list[CsvRecord]) -> None:
    """A non-finite or impossible figure is written empty, and the row says why (its error or note)."""
    for row in rows:
        cleared = row.clear_impossible()
        if cleared:
            said = "; ".join(cleared)
            if hasattr(row, "error"):
                row.error = f"{row.error} | {said}" if row.error else said
            elif hasattr(row, "note"):
                row.note = f"{row.note}; {said}" if row.note else said


def append_run(store: str | os.PathLike, result: RunResult) -> None:
    append_rows(store, [result])


def read_runs(store: str | os.PathLike) -> list[RunResult]:
    """All rows of a runs.csv, checked against the schema (missing columns, other versions)."""
    return read_rows(store, RunResult, what="run store")


def check_appendable(path: str | os.PathLike, cls: type[R]) -> Store[R]:
    """The store rows may be appended to, read whole (empty when there is none yet); StoreError or
    SchemaError naming the file (and line) when it cannot be read back whole, so a store that is
    not ours, or damaged, is never appended to. A symbolic link is refused: a rewrite replaces the
    file atomically (rename), which would turn the link into a regular file."""
    return Store(path, cls, quiet=True)


def append_rows(path: str | os.PathLike, rows: Iterable[CsvRecord]) -> Path:
    """Append rows, all of one record class, to the store at `path` (read whole first: Store; a
    process appending many times keeps its Store instead)."""
    rows, path = list(rows), Path(path)
    if rows:
        Store(path, type(rows[0]), quiet=True).append(rows)
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
            with os.fdopen(fd, "wb") as f:
                f.write(_csv(rows, type(rows[0]).columns(), with_header=True))
            return Path(tmp)
        except OSError:
            continue
    return None


def read_rows(path: str | os.PathLike, cls: type[R], what: str = "results file") -> list[R]:
    """Every row of a store; StoreError/SchemaError naming the file and line of the first thing that
    is not a row of `cls` (not UTF-8, not CSV, a row of the wrong length, a bad cell). A cell that
    cannot be a measurement (CsvRecord.clear_impossible: inf, a negative time) is read as empty, with
    a warning naming file, line and column on stderr once the whole file has read."""
    path = Path(path)
    if not path.exists():
        raise SchemaError(f"{path}: no such {what}")
    if not path.is_file():  # a folder, or a FIFO (reading it would wait forever)
        raise StoreError(f"{path}: not a regular file (expected a {what})")
    _, rows, warned = _parse_rows(path.read_bytes(), cls, path)
    _warn(warned)
    return rows


def _warn(lines: list[str]) -> None:
    for text in lines:
        line(f"warning: {text}", sys.stderr)


def _parse_rows(data: bytes, cls: type[R], path: Path, header: list[str] | None = None,
                first_line: int = 1) -> tuple[list[str] | None, list[R], list[str]]:
    """(the header, the rows, their warnings unsaid) of a store's bytes (read_rows); with `header`,
    bytes from after it, whose first line is the file's line `first_line` (Store.refresh). A last line
    cut short (an append the machine stopped in) is left out with a warning; the store's next append
    rewrites it whole without it (Store: a warning read marks it for a rewrite)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        at = data.count(b"\n", 0, e.start) + first_line
        raise StoreError(f"{path}:{at}: not a CSV text file (byte {e.start} is not UTF-8)") from None
    before, prefix = first_line - 1, f"{path}:"  # lines of the file before `data`; where a row is
    text, warned = _without_cut_tail(text, header, f"{prefix}{before + text.count(chr(10)) + 1}")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        if header is None:
            header = next(reader, None)
            if header is None:
                return None, [], warned
            _check_header(header, cls, path)
            # The names as the record's fields hold them: a call's keywords are matched by identity
            # before equality, and a row's 90 cells given as keywords under other strings of the
            # same names took longer to match than to read (CsvRecord.from_row).
            header = [sys.intern(name) for name in header]
        rows, width = [], len(header)
        in_order = header == cls.columns()  # the cells are the record's columns in order: no dict per row
        for cells in reader:
            if not cells:
                continue  # a blank line
            where = f"{prefix}{before + reader.line_num}"
            if len(cells) != width:
                raise StoreError(f"{where}: {len(cells)} cell(s), the header has {width} columns "
                                 "(a truncated or edited row)")
            row = cls.from_cells(cells, where) if in_order else cls.from_row(dict(zip(header, cells)), where)
            said = row.clear_impossible()
            if said:
                warned += [f"{where}: {text}" for text in said]
            rows.append(row)
        return header, rows, warned
    except csv.Error as e:
        raise StoreError(f"{path}:{before + reader.line_num}: not valid CSV ({e})") from None


def _without_cut_tail(text: str, header: list[str] | None, where: str) -> tuple[str, list[str]]:
    """(`text` without a last line cut short, [its warning]): a last line without its end that is not
    a whole row (not CSV, or not the header's number of cells) is what an append stopped in leaves (the
    machine crashed, the disk filled); a whole row without its end is an edited file's, and kept. The
    header itself is never cut: a file of one cut line is refused as it always was."""
    body, newline, tail = text.rpartition("\n")
    if not tail or not newline or (header is None and not body):
        return text, []
    width = len(header) if header is not None else len(next(csv.reader([body.partition("\n")[0]]), []))
    try:
        cells = next(csv.reader([tail], strict=True), [])
    except csv.Error:
        cells = None
    if cells is not None and len(cells) == width:
        return text, []
    return body + newline, [f"{where}: a row cut short (no line end, not {width} cells: an append that never "
                            "finished), left out"]


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
