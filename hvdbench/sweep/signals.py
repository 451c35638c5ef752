"""SIGTERM, SIGINT and SIGHUP during a sweep: stop it between rows, never inside one.

    hvdbench sweep ...   (then Ctrl-C, `kill PID` or a closed terminal)
    ->  with raising_signals() as signals:     # the loop in hvdbench.sweep.run
            ...                               # a signal raises SweepInterrupted here: the run in
                                              # flight is ended by its guard and left unrecorded
            with signals.deferred():          # held until the block ends: a row is either
                store.append([result])        # written whole or not attempted

The command line turns SweepInterrupted into exit status 128 + signal, and a rerun resumes.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Iterator

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1)
# Slurm's warning that a job nears its time limit (`#SBATCH --signal=B:USR1@60` in launch/slurm/run.sub):
# the run in flight cannot finish inside the job, so it is ended and recorded as timed out.
TIME_LIMIT_SIGNAL = signal.SIGUSR1


class SweepInterrupted(Exception):
    def __init__(self, signum: int):
        super().__init__("the Slurm job reached its time limit" if signum == TIME_LIMIT_SIGNAL
                         else f"interrupted by signal {signum}")
        self.signum = signum

    @property
    def time_limit(self) -> bool:
        return self.signum == TIME_LIMIT_SIGNAL


class SignalGuard:
    """SIGTERM/SIGINT/SIGHUP/SIGUSR1 raise SweepInterrupted, except inside `deferred()` (appending a row),
    where the signal is held until the block ends, so a row is either written or not attempted."""

    def __init__(self):
        self.depth, self.pending, self.raised = 0, None, False

    def handler(self, signum, frame):
        if self.raised:
            return  # already stopping: let the cleanup of the current run finish
        if self.depth:
            self.pending = signum
        else:
            self.raised = True
            raise SweepInterrupted(signum)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if not self.depth and self.pending is not None:
                signum, self.pending, self.raised = self.pending, None, True
                raise SweepInterrupted(signum)


@contextmanager
def raising_signals() -> Iterator[SignalGuard]:
    """Install a SignalGuard's handler for the block; the previous handlers come back after it."""
    signals = SignalGuard()
    old = {s: signal.signal(s, signals.handler) for s in SIGNALS}
    try:
        yield signals
    finally:
        for s, h in old.items():
            signal.signal(s, h)
