"""What the benches share: their run identity and their terminal output.

    run_id, started_at = run_identity()
    for line in render(table).splitlines(): print(line)

Their rows (`AllreduceRow`, `IoRow`, their `BenchRow` base with the layout columns) are declared
in `hvdbench.results.records.schema` beside runs.csv's `RunResult`, and stored with the same machinery
(`hvdbench.results.records.store`: append_rows / read_rows): rows are only ever added, in one write
at the end of the file, and a file written by another schema version is refused with its name.
"""

from __future__ import annotations

import io
from datetime import datetime, timezone

from hvdbench.results.records.schema import new_run_id


def run_identity() -> tuple[str, str]:
    """(run id, start time as ISO 8601 UTC) of a bench run, from one clock reading, so the two agree."""
    now = datetime.now(timezone.utc)
    return new_run_id(now), now.isoformat(timespec="seconds")


def render(renderable, width: int = 150) -> str:
    """A rich table as plain text (no colour codes), to print a line at a time: under mpirun each
    line then reaches the terminal whole, tagged with its rank, instead of in interleaved chunks."""
    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False)
    console.print(renderable)
    return console.file.getvalue()
