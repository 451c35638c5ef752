"""A run's per-rank times: RUN/ranks.csv (records/schema.py RankRow, one row per rank) and their
summary in the run's record (RunResult.slowest_rank, slowest_host, slowest_compute_ratio,
imbalance_s).

    write_ranks(Path("runs/a/ranks.csv"), rows)     # rank 0, once, after the timed window
    summary(rows)                                   # the record's four fields
    read_ranks(Path("runs/a/ranks.csv"))            # the report's loader ([] when there is none)
"""

from __future__ import annotations

import csv
import io
import statistics
from pathlib import Path

from hvdbench.files import atomic_write_text
from hvdbench.results.records.schema import RankRow
from hvdbench.results.records.store import read_rows

RANKS_CSV = "ranks.csv"  # RUN/ranks.csv, beside result.json


def summary(rows: list[RankRow]) -> dict:
    """The slowest rank by its own compute per step, its host, its compute over the median of the
    other ranks' (the others, not all: with two ranks the median of all would halve the gap), and the
    imbalance, slowest minus that median (s per step). Empty ({}) with fewer than two timed ranks."""
    timed = [r for r in rows if r.compute_s is not None]
    if len(timed) < 2:
        return {}
    slowest = max(timed, key=lambda r: (r.compute_s, -r.rank))
    others = statistics.median(r.compute_s for r in timed if r is not slowest)
    return {"slowest_rank": slowest.rank, "slowest_host": slowest.host,
            "slowest_compute_ratio": slowest.compute_s / others if others > 0 else None,
            "imbalance_s": slowest.compute_s - others}


def write_ranks(path: Path, rows: list[RankRow]) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=RankRow.columns(), lineterminator="\n")
    writer.writeheader()
    for row in sorted(rows, key=lambda r: r.rank):
        writer.writerow(row.to_row())
    atomic_write_text(path, buf.getvalue())


def read_ranks(path: Path) -> list[RankRow]:
    """The rows of a RUN/ranks.csv, [] where the run has none; a damaged file raises SchemaError
    naming it (store.read_rows)."""
    if not path.is_file():
        return []
    return read_rows(path, RankRow, "per-rank times")
