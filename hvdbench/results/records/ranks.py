"""A run's per-rank times: RUN/ranks.csv (records/schema.py RankRow, one row per rank) and their
summary in the run's record (RunResult.slowest_rank, slowest_host, slowest_compute_ratio,
imbalance_s).

    write_ranks(Path("runs/a/ranks.csv"), rows)     # rank 0, once, after the timed window
    summary(rows)                                   # the record's four fields
    read_ranks(Path("runs/a/ranks.csv"))            # the report's loader ([] when there is none)
    rows, warnings = check_ranks(rows, run, path)   # what of them belongs to `run` (the report's loader)
"""

from __future__ import annotations

import csv
import io
import statistics
from pathlib import Path

from hvdbench.files import atomic_write_text
from hvdbench.results.records.schema import RankRow, RunResult
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


def check_ranks(rows: list[RankRow], run: RunResult, path: Path) -> tuple[list[RankRow], list[str]]:
    """The rows of `run`'s ranks.csv (`path`) that can be its own, and a warning per thing left out
    (each names the file). The whole file is left out where it cannot be this run's: another run id
    (a file copied from another run), a rank twice, a rank outside the run's world, a host the run
    never used (its record's hosts) -- which of its rows are true cannot be told, and one wrong row
    flips the straggler verdict. A rank whose compute is 0 keeps its row with compute empty (a
    forward and backward take time: 0 is no measurement). Where the record names a slowest rank
    (the worker wrote the file) an empty or missing file, or a folder in its place, is a warning too."""
    where = f"{path}: "
    if not path.is_file():
        if run.slowest_rank is None:
            return [], []  # a run without per-rank times (one rank, --no-breakdown, recorded before them)
        what = "not a regular file" if path.exists() else \
            "missing" + ("" if path.parent.is_dir() else " (its run folder is gone)")
        return [], [where + f"{what}, though runs.csv names rank {run.slowest_rank} slowest"]
    if not rows:
        return [], [where + "no rows" + (f", though runs.csv names rank {run.slowest_rank} slowest"
                                         if run.slowest_rank is not None else "")]
    others = sorted({r.run_id for r in rows if r.run_id != run.run_id})
    ranks = [r.rank for r in rows]
    twice = sorted({k for k in ranks if ranks.count(k) > 1})
    world = run.world_size or 0
    outside = sorted({k for k in ranks if not 0 <= k < world})
    hosts = {h for h in run.hosts.split(";") if h}
    strangers = sorted({r.host for r in rows if hosts and r.host not in hosts})
    why = (f"its run_id column says {', '.join(others)}, not {run.run_id} (copied from another run?)" if others else
           f"rank {', '.join(map(str, twice))} appear(s) twice" if twice else
           f"rank {', '.join(map(str, outside))} outside the run's {world} ranks (0 to {world - 1})" if outside else
           f"host {', '.join(strangers)} is not one the run used ({', '.join(sorted(hosts))})" if strangers else "")
    if why:
        return [], [where + why]
    warnings = []
    zero = [r.rank for r in rows if r.compute_s == 0]
    if zero:
        warnings.append(where + f"rank {', '.join(map(str, zero))}'s compute_s is 0, no measurement: left empty")
        for r in rows:
            if r.compute_s == 0:
                r.compute_s = None
    return rows, warnings
