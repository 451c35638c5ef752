"""Append-only CSV stores: `results/<sweep>/runs.csv` (one RunResult per run) and the bench CSVs.

Rows are only ever added. Each append writes the previous bytes verbatim plus the new rows to a
temporary file, fsyncs it and renames it over the store, so a crash or kill at any moment leaves
either the old file or the new one, never a partial row. The header is never rewritten: an append
checks that it has every column of the record (not their order: new rows are written in the
record's column order, which is why a record's column order never changes, see schema.BenchRow).
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Iterable, TypeVar

from hvdbench.results.schema import CsvRecord, RunResult, SchemaError

R = TypeVar("R", bound=CsvRecord)


def append_run(store: str | os.PathLike, result: RunResult) -> None:
    append_rows(store, [result])


def read_runs(store: str | os.PathLike) -> list[RunResult]:
    """All rows of a runs.csv, checked against the schema (missing columns, other versions)."""
    return read_rows(store, RunResult, what="run store")


def append_rows(path: str | os.PathLike, rows: Iterable[CsvRecord]) -> Path:
    """Append rows, all of one record class, atomically."""
    rows, path = list(rows), Path(path)
    if not rows:
        return path
    cls = type(rows[0])
    old = path.read_bytes() if path.exists() else b""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cls.columns(), lineterminator="\n")
    if old:
        _check_header(old.split(b"\n", 1)[0].decode(), cls, path)
    else:
        writer.writeheader()
    writer.writerows(row.to_row() for row in rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(old + buf.getvalue().encode())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    return path


def read_rows(path: str | os.PathLike, cls: type[R], what: str = "results file") -> list[R]:
    path = Path(path)
    if not path.is_file():
        raise SchemaError(f"{path}: no such {what}")
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None:
            return []
        _check_header(",".join(reader.fieldnames), cls, path)
        return [cls.from_row(row, where=f"{path}:{i + 2}") for i, row in enumerate(reader)]


def _check_header(header: str, cls: type[CsvRecord], path: Path) -> None:
    have = next(csv.reader([header]))
    missing = [c for c in cls.columns() if c not in have]
    if missing:
        raise SchemaError(f"{path}: missing column(s) {', '.join(missing)}")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
