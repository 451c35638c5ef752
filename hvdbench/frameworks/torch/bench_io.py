"""`hvdbench bench io`'s driver: the ranks (one alone, or Horovod's under horovodrun/mpirun) read a
prepared dataset as hvdbench.bench.io measures it; rank 0 prints the table and appends
OUT/bench_io.csv (the passes, rows, table and CSV are hvdbench.bench.io's).

    hvdbench bench io --data data/digits --out results/demo
    horovodrun -np 2 -H localhost:2 --mpi hvdbench bench io --data data/digits --out results/demo
"""

from __future__ import annotations

from typing import Callable

from hvdbench.bench import io as bio
from hvdbench.bench.rows import render
from hvdbench.frameworks.torch.bench_allreduce import HorovodComm
from hvdbench.launchers.launch_info import SINGLE, detect_launcher
from hvdbench.results.records.schema import IoRow


def main(opts: bio.IoOptions, say: Callable[[str], None] = print, guard=lambda measure: measure()) -> list[IoRow]:
    """Every rank reads its shards; rank 0 says what it measures, prints the table and writes.
    `guard(measure)` runs the measuring (the CLI's: a user error on another rank exits quietly)."""
    comm = bio.LocalComm() if detect_launcher() == SINGLE else HorovodComm()
    rows = guard(lambda: bio.run(opts, comm, say if comm.rank == 0 else (lambda line: None)))
    comm.barrier()
    if comm.rank != 0:
        comm.shutdown()
        return rows
    for line in render(bio.table(rows)).splitlines():  # shown before anything can fail to write
        say(line.rstrip())
    try:
        written = bio.write_outputs(rows, opts.out)  # saved elsewhere, and said where, if it fails
    finally:
        comm.shutdown()
    for path in written:
        say(f"wrote {path}")
    return rows
