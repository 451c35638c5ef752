"""The bench CSV rows: each bench declares its columns once, as a dataclass with a schema_version.

    append_rows(out / "bench_allreduce.csv", rows)     # atomic: old bytes + new rows, fsync, rename
    rows = read_rows(out / "bench_allreduce.csv", AllreduceRow)

The same discipline as the run store (`hvdbench.results.store`): rows are only ever added, a crash
leaves the old file or the new one, a file written by another schema version is refused with its name.
The store's `append_run` is specific to RunResult, hence this small generic twin.
"""

from __future__ import annotations

import csv
import io
import os
import uuid
from datetime import datetime, timezone
from dataclasses import fields
from pathlib import Path
from typing import Iterable, TypeVar

from hvdbench.results.schema import SchemaError

# The layout columns every bench row carries, so bench CSVs sit in a sweep folder beside runs.csv
# and join with it on `layout` (same meaning as RunResult's fields of the same names).
LAYOUT_COLUMNS = ("world_size", "nodes", "gpus_per_node", "layout", "scale", "hosts", "controller", "launcher")

T = TypeVar("T", bound="BenchRow")


class BenchRow:
    """Mixin for a @dataclass whose fields are the CSV columns; the subclass sets SCHEMA_VERSION
    and has a `schema_version: int = SCHEMA_VERSION` field."""

    SCHEMA_VERSION = 0

    @classmethod
    def columns(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def to_row(self) -> dict[str, str]:
        """CSV cells: None is an empty cell, floats keep full precision, booleans are 1/0."""
        row = {}
        for f in fields(self):
            v = getattr(self, f.name)
            row[f.name] = ("" if v is None else str(int(v)) if isinstance(v, bool)
                           else repr(v) if isinstance(v, float) else str(v))
        return row

    @classmethod
    def from_row(cls: type[T], row: dict[str, str], where: str) -> T:
        missing = [c for c in cls.columns() if c not in row]
        if missing:
            raise SchemaError(f"{where}: missing column(s) {', '.join(missing)}")
        if str(row["schema_version"]) != str(cls.SCHEMA_VERSION):
            raise SchemaError(f"{where}: schema_version {row['schema_version']} (this hvdbench reads "
                              f"version {cls.SCHEMA_VERSION})")
        return cls(**{f.name: _parse(f, row[f.name], where) for f in fields(cls)})


def _parse(f, cell: str, where: str):
    kind = str(f.type)
    try:
        if kind.startswith("float"):
            return None if cell == "" else float(cell)
        if kind.startswith("int"):
            return None if cell == "" and "None" in kind else int(cell or 0)
        if kind.startswith("bool"):
            return cell in ("1", "True", "true", "yes")
        return cell
    except ValueError:
        raise SchemaError(f"{where}: column {f.name} has {cell!r}, expected {kind}") from None


def new_run_id() -> tuple[str, str]:
    """(run id, start time): time + random, as training runs are named; ISO 8601 UTC."""
    now = datetime.now(timezone.utc)
    return f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}", now.isoformat(timespec="seconds")


def append_rows(path: str | os.PathLike, rows: Iterable[BenchRow]) -> Path:
    """Append rows (all of one class) to a CSV atomically; the header is checked, never rewritten."""
    rows = list(rows)
    path = Path(path)
    if not rows:
        return path
    cls = type(rows[0])
    old = path.read_bytes() if path.exists() else b""
    if old:
        _check_header(old.split(b"\n", 1)[0].decode(), cls, path)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cls.columns(), lineterminator="\n")
    if not old:
        writer.writeheader()
    for row in rows:
        writer.writerow(row.to_row())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(old + buf.getvalue().encode())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def read_rows(path: str | os.PathLike, cls: type[T]) -> list[T]:
    path = Path(path)
    if not path.is_file():
        raise SchemaError(f"{path}: no such bench file")
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None:
            return []
        _check_header(",".join(reader.fieldnames), cls, path)
        return [cls.from_row(row, where=f"{path}:{i + 2}") for i, row in enumerate(reader)]


def _check_header(header: str, cls, path: Path) -> None:
    have = next(csv.reader([header]))
    missing = [c for c in cls.columns() if c not in have]
    if missing:
        raise SchemaError(f"{path}: missing column(s) {', '.join(missing)} (written by another "
                          f"bench or hvdbench version?)")


def render(renderable, width: int = 150) -> str:
    """A rich table as plain text (no colour codes), to print a line at a time: under mpirun each
    line then reaches the terminal whole, tagged with its rank, instead of in interleaved chunks."""
    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False)
    console.print(renderable)
    return console.file.getvalue()
