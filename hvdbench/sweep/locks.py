"""The sweep's locks, so that several sweeps can share one directory (the per-layout Slurm jobs of
`hvdbench sweep --launcher slurm --submit` do):

    with claim(spec.out, run.run_id) as mine:     # SWEEP/.locks/<run_id>.lock, never waits
        if mine:                                   # False: another sweep is running it: skip it
            with store_lock(spec.out):             # SWEEP/.locks/runs.csv.lock, waits its turn:
                store.refresh()                    # taken before the launch too, so a lock that
            ...run it...                           # cannot be taken stops the sweep before it trains
            with store_lock(spec.out):
                store.append([result])
        (and comes back with wait=True at the end)

Both are hvdbench.files.LockFile, an flock(2) on the lock file: the kernel releases it when the
holder exits in any way, SIGKILL included, so a killed sweep never leaves a run claimed. The lock
files stay in place (removing one would let two processes lock two different files of one name); a
link planted at one is refused in one line, never written through.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from hvdbench.files import LockFile

LOCK_DIR = ".locks"


def lock_path(sweep_dir: Path, name: str) -> Path:
    path = Path(sweep_dir) / LOCK_DIR / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def claim(sweep_dir: Path, run_id: str, wait: bool = False) -> Iterator[bool]:
    """Hold the run's lock for the block; yields False at once (holding nothing) when another
    process holds it, or with `wait`, waits until that process lets it go (finished or died)."""
    lock = LockFile(lock_path(sweep_dir, run_id))
    if not lock.acquire(wait=wait):
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


@contextmanager
def store_lock(sweep_dir: Path) -> Iterator[None]:
    """Hold the lock of the sweep's runs.csv for the block, waiting as long as another holds it."""
    with LockFile(lock_path(sweep_dir, "runs.csv")):
        yield
