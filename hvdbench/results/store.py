"""The append-only run store: `results/<sweep>/runs.csv`, one row per run.

Rows are only ever added. Each append writes the previous bytes verbatim plus the new row to a
temporary file, fsyncs it and renames it over runs.csv, so a crash or kill at any moment leaves
either the old file or the new one, never a partial row.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from hvdbench.results.schema import RunResult, SchemaError


def append_run(store: str | os.PathLike, result: RunResult) -> None:
    store = Path(store)
    old = store.read_bytes() if store.exists() else b""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=RunResult.columns(), lineterminator="\n")
    if not old:
        writer.writeheader()
    else:
        _check_header(old.split(b"\n", 1)[0].decode(), store)
    writer.writerow(result.to_row())
    store.parent.mkdir(parents=True, exist_ok=True)
    tmp = store.with_name(f".{store.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(old + buf.getvalue().encode())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, store)
    _fsync_dir(store.parent)


def read_runs(store: str | os.PathLike) -> list[RunResult]:
    """All rows of a runs.csv, checked against the schema (missing columns, other versions)."""
    store = Path(store)
    if not store.exists():
        raise SchemaError(f"{store}: no such run store")
    with open(store, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None:
            return []
        _check_header(",".join(reader.fieldnames), store)
        return [RunResult.from_row(row, where=f"{store}:{i + 2}") for i, row in enumerate(reader)]


def _check_header(header: str, store: Path) -> None:
    have = next(csv.reader([header]))
    missing = [c for c in RunResult.columns() if c not in have]
    if missing:
        raise SchemaError(f"{store}: missing column(s) {', '.join(missing)}")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
