"""Work sharing for prepare: MPI ranks split the shards, worker processes on each rank make them.

`mpirun -np K hvdbench prepare ...` gives rank r the shards r, r+K, r+2K, ...; each rank writes only its
own shard files (no two processes ever write the same file), the ranks then exchange their shard
records, and rank 0 alone writes the manifest. mpi4py is imported only when the process really runs
under an MPI launcher, so a plain `hvdbench prepare` never initialises MPI.
"""

from __future__ import annotations

import contextlib
import sys
import functools
import multiprocessing
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from hvdbench.data.shards import completed_shard
from hvdbench.errors import DatasetError, HvdbenchError

# Set by mpirun (Open MPI), by MPICH/Intel MPI (PMI_*), and by srun with PMIx.
_MPI_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE")
_MPI_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")
_LOCAL_SIZE_VARS = ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE")


def under_mpi_launcher(env=os.environ) -> bool:
    sizes = [env[v] for v in _MPI_SIZE_VARS if v in env]
    if sizes:
        return any(s.isdigit() and int(s) > 1 for s in sizes)
    return any(v in env for v in _MPI_RANK_VARS)


def env_rank(env=os.environ) -> int:
    """This process's MPI rank from the launcher's environment (0 outside MPI), without importing MPI."""
    return next((int(env[v]) for v in _MPI_RANK_VARS if env.get(v, "").isdigit()), 0)


class World:
    """Rank, size and the three collectives prepare needs; a single process when not under MPI."""

    def __init__(self, comm=None):
        self.comm = comm
        self.rank = comm.Get_rank() if comm else 0
        self.size = comm.Get_size() if comm else 1

    @classmethod
    def detect(cls) -> "World":
        if not under_mpi_launcher():
            return cls()
        from mpi4py import MPI  # lazily: importing it initialises MPI

        return cls(MPI.COMM_WORLD)

    def allgather(self, obj: Any) -> list:
        return self.comm.allgather(obj) if self.comm else [obj]

    def bcast(self, obj: Any) -> Any:
        return self.comm.bcast(obj, root=0) if self.comm else obj

    def barrier(self) -> None:
        if self.comm:
            self.comm.Barrier()

    def on_root(self, fn: Callable[[], Any]) -> Any:
        """Run fn on rank 0 and hand its result (or its HvdbenchError) to every rank."""
        value = error = None
        if self.rank == 0:
            try:
                value = fn()
            except HvdbenchError as e:
                error = e
        value, error = self.bcast((value, error))
        if error is not None:
            raise error
        return value


def default_workers() -> int:
    """All cores this process may use. A process bound to a subset (srun --cpus-per-task, mpirun
    --bind-to) uses its own cores; an unbound one shares the node's cores with its local ranks."""
    cores = len(os.sched_getaffinity(0))
    if cores < (os.cpu_count() or cores):
        return cores
    local = next((int(os.environ[v]) for v in _LOCAL_SIZE_VARS if os.environ.get(v, "").isdigit()), 1)
    return max(1, cores // max(1, local))


@dataclass(frozen=True)
class PrepareOptions:
    """How one prepare runs, the same for every prepare_* function: worker processes per rank (None:
    `default_workers`; the prepares whose commands have no --workers make their shards in one
    process and ignore it), whether it may replace a different dataset already in `out`, and the
    command line its manifest records (None: this process's). None of them changes a byte it writes,
    so none enters the dataset's params; a prepare's own knobs are its own (`BertOptions`, `C4Options`,
    ...). The click commands build it from --workers and --overwrite:
    `hvdbench prepare images --src tree --out data/images --workers 2 --overwrite`."""

    workers: int | None = None
    overwrite: bool = False
    command: str | None = None


@dataclass
class ShardJob:
    """Work for one maker call: the shard files it writes as (split, file name), the hash of what goes
    into them (a finished file with this hash is kept on a rerun), and the maker's input."""

    outputs: list[tuple[str, str]]
    source: str
    work: Any

    @property
    def file(self) -> str:
        """The (first) output file."""
        return self.outputs[0][1]

    @classmethod
    def single(cls, split: str, file: str, source: str, work: Any) -> "ShardJob":
        return cls([(split, file)], source, work)


PLAIN_PROGRESS_S = 15.0  # a line this often when stderr is not a terminal


@contextlib.contextmanager
def progress(label: str, total: int, completed: int = 0, enabled: bool = True) -> Iterator[Callable[[], None]]:
    """Progress on stderr (rank 0 only): a rich bar on a terminal, else a plain line every
    PLAIN_PROGRESS_S seconds (a pipe or a batch job's log); yields the function that advances it."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if enabled and not console.is_terminal:
        yield _plain_progress(label, total, completed)
        return
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=console, disable=not enabled, transient=False)
    with bar:
        task = bar.add_task(label, total=total, completed=completed)
        yield lambda: bar.advance(task)


def _plain_progress(label: str, total: int, completed: int) -> Callable[[], None]:
    import time

    state = {"done": completed, "start": time.monotonic(), "last": time.monotonic()}

    def advance() -> None:
        state["done"] += 1
        now = time.monotonic()
        if now - state["last"] >= PLAIN_PROGRESS_S or state["done"] == total:
            state["last"] = now
            print(f"{label}: {state['done']}/{total} shards, {now - state['start']:.0f} s", file=sys.stderr,
                  flush=True)
    return advance


def _make_one(make: Callable[[ShardJob, Path], dict | list[dict]], out: str, job: ShardJob) -> list[dict]:
    records = make(job, Path(out))
    return records if isinstance(records, list) else [records]


def run_jobs(out: Path, jobs: list[ShardJob], make: Callable[[ShardJob, Path], dict], *,
             world: World, workers: int | None = None, label: str = "shards") -> dict[str, dict]:
    """Make every job's shards that are not already finished; return {file: record} for all jobs.

    `make(job, out)` writes the job's output files with `shards.write_shard` and returns their records
    (one record or a list, in output order); it must be a module-level function (worker processes
    receive it by reference). Jobs whose files are all finished, from an earlier interrupted run, are
    skipped. An HvdbenchError on any rank is raised on every rank.
    """
    out = Path(out)
    mine = jobs[world.rank::world.size]
    done, pending = {}, []
    for job in mine:
        records = [completed_shard(out / file, job.source) for _, file in job.outputs]
        if any(r is None for r in records):
            pending.append(job)
        else:
            done.update((r["file"], r) for r in records)
    made = map_gathered(functools.partial(_make_one, make, str(out)), pending, world, workers, label,
                        total=len(mine), done=len(done))
    records = {}
    for part in world.allgather(done):  # shards an earlier run finished, on every rank
        records.update(part)
    records.update((r["file"], r) for rank_results in made for job_records in rank_results for r in job_records)
    missing = [file for job in jobs for _, file in job.outputs if file not in records]
    if missing:
        raise DatasetError(f"{out}: shards {missing[:3]} were not produced")
    return records


def map_gathered(fn: Callable, items: list, world: World, workers: int | None = None, label: str = "items",
                 total: int | None = None, done: int = 0) -> list[list]:
    """`fn` over this rank's `items` in up to `workers` processes, with progress on rank 0; returns
    every rank's results (a list per rank, in rank order, each in completion order). An HvdbenchError
    on any rank is raised on every rank. `fn` must be a module-level function (workers get it by
    reference). `total`/`done`: the progress bar's size and start, when it counts more than `items`."""
    workers = min(workers or default_workers(), max(1, len(items)))
    results, error = [], None
    with progress(label, len(items) if total is None else total, done, enabled=world.rank == 0) as advance:
        try:
            for result in _map(fn, items, workers, world):
                results.append(result)
                advance()
        except HvdbenchError as e:
            error = e
    gathered = world.allgather((results, error))
    errors = [e for _, e in gathered if e is not None]
    if errors:
        raise errors[0]
    return [part for part, _ in gathered]


def _map(fn: Callable, items: list, workers: int, world: World) -> Iterator:
    if workers <= 1:
        yield from map(fn, items)
        return
    # Forking a process that has initialised MPI is unsafe with some transports: under MPI the workers
    # come from a fork server (slower to start); otherwise a plain fork.
    ctx = multiprocessing.get_context("forkserver" if world.comm else "fork")
    with ctx.Pool(workers) as pool:
        yield from pool.imap_unordered(fn, items)


def start(out: Path, kind: str, params: dict, overwrite: bool, world: World) -> None:
    """Before any shard is written: refuse a directory holding another dataset, then drop the old
    manifest, so that until this run ends the directory reads as an unfinished prepare."""
    from hvdbench.data.manifest import MANIFEST, check_reusable

    def check():
        out.mkdir(parents=True, exist_ok=True)
        check_reusable(out, kind, params, overwrite)
        (out / MANIFEST).unlink(missing_ok=True)

    world.on_root(check)


def finish(out: Path, jobs: list[ShardJob], records: dict[str, dict], manifest: dict, world: World) -> dict:
    """Fill the manifest's splits from the shard records (in job order); rank 0 deletes leftover shard
    files of earlier runs and writes the manifest, last and atomically."""
    from hvdbench.data.manifest import write_manifest
    from hvdbench.data.shards import stale_files

    splits: dict[str, dict] = {}
    for job in jobs:
        for split_name, file in job.outputs:
            record = records[file]
            split = splits.setdefault(split_name, {"samples": 0, "shards": []})
            split["shards"].append({"file": file, "samples": record["samples"], "sha256": record["sha256"]})
            split["samples"] += record["samples"]
    manifest["splits"] = {name: splits[name] for name in sorted(splits, key=("train", "val").index)}
    if world.rank == 0:
        for path in stale_files(out, {file for job in jobs for _, file in job.outputs}):
            path.unlink()
        write_manifest(out, manifest)
    world.barrier()
    return manifest
