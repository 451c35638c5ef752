"""What else used the run's machines while it was timed: numbers that flag their own interference.

    watch = Neighbours(device)        # every rank, when the timed window opens
    ...                               # the timed steps
    busy = watch.stop(dist)           # every rank (a collective): {"other_cpus", "other_gpu_procs"}

A rank reads its machine's CPU time (all processes, /proc/stat through psutil) and its own process's
CPU time at both ends of the window; the ranks' readings are gathered and, per machine (ranks with
the same boot id: the nodes of an emulated cluster are one machine), the CPU time not spent by the
run's ranks is divided by the window: `other_cpus`, the cores' worth of other work on average (the
busiest machine's). The launcher's own processes count as other work; they idle while ranks train.
On a GPU, `nvidia-smi` lists the compute processes on the machine's GPUs at both ends: those that
are not the run's ranks are `other_gpu_procs`.

Measured here on a machine where a neighbour ran: a lone rank's step went from 15 ms to 660 ± 860
ms. The report flags rows whose runs saw other_cpus >= BUSY_CPUS (hvdbench.results.records.schema).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import psutil

from hvdbench.hardware import run_tool


def machine_id() -> str:
    """One id per machine, the same in every network namespace of it (unlike the hostname of a
    node of an emulated cluster): the kernel's boot id."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        import socket

        return socket.gethostname()


def machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy since boot (idle and I/O wait left out)."""
    t = psutil.cpu_times()
    return sum(getattr(t, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq", "steal"))


def own_busy_s() -> float:
    t = psutil.Process().cpu_times()
    return t.user + t.system


def gpu_processes() -> set[int] | None:
    """The pids of compute processes on this machine's GPUs (nvidia-smi), None without one."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    notes: list[str] = []
    out = run_tool([smi, "--query-compute-apps=pid", "--format=csv,noheader"], notes)
    return None if notes else {int(p) for p in out.split() if p.strip().isdigit()}


def other_cpus(readings: list[dict]) -> float:
    """The busiest machine's cores' worth of work not done by the run's ranks, from every rank's
    reading {machine, machine_s, own_s, window_s} (machine_s: the machine's busy seconds in the
    window, the same for the ranks of one machine up to when each read it)."""
    worst = 0.0
    by_machine: dict[str, list[dict]] = {}
    for r in readings:
        by_machine.setdefault(r["machine"], []).append(r)
    for rs in by_machine.values():
        machine = max(r["machine_s"] for r in rs)
        window = max(r["window_s"] for r in rs)
        if window > 0:
            worst = max(worst, max(0.0, machine - sum(r["own_s"] for r in rs)) / window)
    return worst


class Neighbours:
    def __init__(self, device=None):
        self.gpu = getattr(device, "type", "cpu") == "cuda"
        self.t0 = time.monotonic()
        self.machine0, self.own0 = machine_busy_s(), own_busy_s()
        self.gpu_pids0 = gpu_processes() if self.gpu else None

    def stop(self, dist) -> dict:
        """A collective: every rank calls it; every rank gets the same answer."""
        reading = {"machine": machine_id(), "machine_s": machine_busy_s() - self.machine0,
                   "own_s": own_busy_s() - self.own0, "window_s": time.monotonic() - self.t0,
                   "pid": os.getpid(), "gpu_pids": sorted((self.gpu_pids0 or set()) | (gpu_processes() or set()))
                   if self.gpu else None}
        readings = dist.allgather_object(reading)
        ours = {r["pid"] for r in readings}
        gpu = None
        if self.gpu:
            gpu = max((len(set(r["gpu_pids"] or ()) - ours) for r in readings), default=0)
        return {"other_cpus": other_cpus(readings), "other_gpu_procs": gpu}


def busy_now(interval_s: float = 1.0) -> float:
    """Cores' worth of work on this machine over the next `interval_s` (for `sweep --require-idle`,
    which runs it between runs, when nothing of the sweep's computes)."""
    before, t0 = machine_busy_s(), time.monotonic()
    time.sleep(interval_s)
    return (machine_busy_s() - before) / (time.monotonic() - t0)
