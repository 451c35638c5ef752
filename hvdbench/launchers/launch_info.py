"""Who launched this process, and as which rank, read from the launcher's environment before
Horovod is up (a bad option is printed by rank 0 only; the record names the launcher).

    launcher_rank()      # 0 when alone
    detect_launcher()    # "horovodrun" | "mpirun" | "srun" | "torchrun" | a package's | "single" (or HVDBENCH_LAUNCHER)
    place()              # Place(rank, size, local_rank, local_size, master_addr, master_port)

`place` is what torch.distributed needs to start under any launcher (--engine ddp/fsdp): each
launcher announces the rank, the world size and the rank on this host in variables of its own (its
module's `Launcher.place`); torchrun, srun (and a user's MASTER_ADDR/MASTER_PORT) also name a
rendezvous address. Under the others, the engine agrees on one through Horovod's collectives
(hvdbench/frameworks/torch/process_group.py). Every rule here is the launchers' own
(hvdbench/launchers/registry.py): nothing in this file names one.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from hvdbench.launchers.registry import Launcher, find_launcher, launchers

SINGLE = "single"  # no launcher: a process started alone


def detect_launcher(env=os.environ) -> str:
    """Who started us: HVDBENCH_LAUNCHER when a sweep says so (`horovodrun --mpi` and mpirun look
    alike from inside); else the first launcher, in the registry's order, whose detection rule
    matches this environment; else "single"."""
    if env.get("HVDBENCH_LAUNCHER"):
        return env["HVDBENCH_LAUNCHER"]
    return next((x.name for x in launchers() if x.detect(env)), SINGLE)


def _in_turn(env) -> list[Launcher]:
    """The launchers whose variables to read, the one that started this process first."""
    mine = find_launcher(detect_launcher(env))
    return [*([mine] if mine else []), *(x for x in launchers() if x is not mine)]


def launcher_rank(env=os.environ) -> int:
    """This process's rank as the launcher announced it (before Horovod is up); 0 when alone."""
    for launcher in _in_turn(env):
        for name in (*launcher.place[:1], *launcher.rank_variables) if launcher.place else launcher.rank_variables:
            if env.get(name, "").isdigit():
                return int(env[name])
    return 0


@dataclass(frozen=True)
class Place:
    rank: int
    size: int
    local_rank: int
    local_size: int
    master_addr: str | None = None  # None: to be agreed among the ranks
    master_port: int | None = None


def _int(env, name: str, default: int) -> int:
    value = env.get(name, "")
    # SLURM_NTASKS_PER_NODE may read "2(x3)": two tasks on each of three nodes.
    m = re.match(r"\d+", value)
    return int(m.group()) if m else default


def place(env=os.environ) -> Place:
    """This process's place in the job, from the variables of the launcher that started it (the
    first launcher whose rank variable is set; a single process: 0 of 1). The rendezvous comes from
    MASTER_ADDR/MASTER_PORT when set, else from what that launcher tells its ranks
    (`Launcher.rendezvous`), and is left to the ranks' agreement otherwise."""
    placed = next((x for x in _in_turn(env) if x.place and env.get(x.place[0], "").isdigit()), None)
    if placed is None:
        rank, size, local_rank, local_size = 0, 1, 0, 1
    else:
        rank_name, size_name, local_name, local_size_name = placed.place
        rank, size = int(env[rank_name]), _int(env, size_name, 1)
        local_rank, local_size = _int(env, local_name, 0), _int(env, local_size_name, 1)
    addr, port = env.get("MASTER_ADDR") or None, _int(env, "MASTER_PORT", 0) or None
    if placed is not None and placed.rendezvous and (addr is None or port is None):
        told_addr, told_port = placed.rendezvous(env)
        addr, port = addr or told_addr, port or told_port
    if size == 1 and addr is None:
        addr, port = "127.0.0.1", 0  # alone: nothing to agree (0: any free port)
    return Place(rank, size, local_rank, local_size, addr, port)
