"""Fault injection, so tests and users can see what a sweep does with a crashed or hung rank.

    HVDBENCH_INJECT_FAULT=hang HVDBENCH_INJECT_FAULT_STEP=3 horovodrun -np 2 hvdbench train ...
    HVDBENCH_INJECT_FAULT=kill mpirun -np 2 hvdbench train resnet50 --flavor debug --synthetic ...
"""

from __future__ import annotations

import os
import signal
import time

from hvdbench.errors import ConfigError


class Fault:
    """HVDBENCH_INJECT_FAULT=crash|hang|kill on rank HVDBENCH_INJECT_FAULT_RANK (default: the last) at
    training step HVDBENCH_INJECT_FAULT_STEP (default 2; steps count from 0, warm-up included);
    kill: the rank sends itself SIGKILL, as the kernel's out-of-memory killer or a user's `kill -9`
    would end it: no Python runs after it, no error line, no note.
    HVDBENCH_INJECT_READ_DELAY_S=SECONDS makes every rank wait that long for each step's batches:
    a slow reader, whose cost the step-time breakdown must show as data stall.
    HVDBENCH_INJECT_COMPUTE_DELAY_S=SECONDS adds that much to each forward and backward of rank
    HVDBENCH_INJECT_FAULT_RANK (default: the last): a straggler, which the per-rank times must name
    and the others' breakdown must show as waiting at the gradient exchange."""

    def __init__(self, rank: int, size: int, env=os.environ):
        try:
            self.read_delay_s = float(env.get("HVDBENCH_INJECT_READ_DELAY_S", 0) or 0)
            compute_delay_s = float(env.get("HVDBENCH_INJECT_COMPUTE_DELAY_S", 0) or 0)
        except ValueError:
            raise ConfigError("HVDBENCH_INJECT_READ_DELAY_S and _COMPUTE_DELAY_S must be numbers of seconds") from None
        self.kind = env.get("HVDBENCH_INJECT_FAULT", "")
        if self.kind not in ("", "crash", "hang", "kill"):
            raise ConfigError(f"HVDBENCH_INJECT_FAULT={self.kind!r}: use crash, hang or kill")
        try:
            target_rank = int(env.get("HVDBENCH_INJECT_FAULT_RANK", size - 1))
            self.step = int(env.get("HVDBENCH_INJECT_FAULT_STEP", 2))
        except ValueError:
            raise ConfigError("HVDBENCH_INJECT_FAULT_RANK and _STEP must be integers") from None
        self.armed = bool(self.kind) and target_rank == rank
        self.compute_delay_s = compute_delay_s if target_rank == rank else 0.0

    def check(self, step: int) -> None:
        if self.armed and step == self.step:
            if self.kind == "crash":
                raise RuntimeError("injected fault")
            if self.kind == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            while True:  # "hang": what a deadlocked or stuck rank looks like to the launcher
                time.sleep(3600)

    def before_read(self) -> None:
        if self.read_delay_s > 0:
            time.sleep(self.read_delay_s)
