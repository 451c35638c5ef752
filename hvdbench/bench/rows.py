"""The bench CSV rows: each bench declares its columns once, as a dataclass with a schema_version.

    append_rows(out / "bench_allreduce.csv", rows)     # atomic: old bytes + new rows, fsync, rename
    rows = read_rows(out / "bench_allreduce.csv", AllreduceRow)

The same record and store machinery as runs.csv (`hvdbench.results.schema.CsvRecord`,
`hvdbench.results.store`): rows are only ever added, a crash leaves the old file or the new one, a
file written by another schema version is refused with its name.
"""

from __future__ import annotations

import io
import uuid
from datetime import datetime, timezone

from hvdbench.results.schema import CsvRecord as BenchRow  # noqa: F401 - the bench rows' base
from hvdbench.results.store import append_rows, read_rows  # noqa: F401 - re-exported for the benches

# The layout columns every bench row carries, so bench CSVs sit in a sweep folder beside runs.csv
# and join with it on `layout` (same meaning as RunResult's fields of the same names).
LAYOUT_COLUMNS = ("world_size", "nodes", "gpus_per_node", "layout", "scale", "hosts", "controller", "launcher")


def new_run_id() -> tuple[str, str]:
    """(run id, start time): time + random, as training runs are named; ISO 8601 UTC."""
    now = datetime.now(timezone.utc)
    return f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}", now.isoformat(timespec="seconds")


def render(renderable, width: int = 150) -> str:
    """A rich table as plain text (no colour codes), to print a line at a time: under mpirun each
    line then reaches the terminal whole, tagged with its rank, instead of in interleaved chunks."""
    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False)
    console.print(renderable)
    return console.file.getvalue()
