"""Who launched this process, and as which rank, read from the launcher's environment before
Horovod is up (a bad option is printed by rank 0 only; the record names the launcher).

    launcher_rank()      # 0 when alone
    detect_launcher()    # "horovodrun" | "mpirun" | "srun" | "torchrun" | "single" (or HVDBENCH_LAUNCHER)
    place()              # Place(rank, size, local_rank, local_size, master_addr, master_port)

`place` is what torch.distributed needs to start under any launcher (--engine ddp/fsdp): each
launcher announces the rank, the world size and the rank on this host in variables of its own;
only torchrun (and a user's MASTER_ADDR/MASTER_PORT) also names a rendezvous address. Under the
others, the engine agrees on one through Horovod's collectives (hvdbench/frameworks/torch/engines.py).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

RANK_VARIABLES = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "RANK")


def launcher_rank(env=os.environ) -> int:
    """This process's rank as the launcher announced it (before Horovod is up); 0 when alone."""
    for name in RANK_VARIABLES:
        if env.get(name, "").isdigit():
            return int(env[name])
    return 0


def detect_launcher(env=os.environ) -> str:
    """Who started us: HVDBENCH_LAUNCHER when a sweep says so; else horovodrun (its Gloo mode sets
    HOROVOD_RANK), mpirun (Open MPI / PMIx / PMI rank variables; `horovodrun --mpi` runs mpirun
    and looks the same), srun (a job step's SLURM_PROCID), torchrun (its elastic agent's run id),
    or nothing."""
    if env.get("HVDBENCH_LAUNCHER"):
        return env["HVDBENCH_LAUNCHER"]
    if "TORCHELASTIC_RUN_ID" in env:
        return "torchrun"
    if "HOROVOD_RANK" in env or "HOROVOD_GLOO_RENDEZVOUS_ADDR" in env:
        return "horovodrun"
    if "OMPI_COMM_WORLD_RANK" in env or "PMIX_RANK" in env or "PMI_RANK" in env:
        return "mpirun"
    if "SLURM_PROCID" in env and "SLURM_STEP_ID" in env:
        return "srun"
    return "single"


# Each launcher's names for (rank, world size, rank on this host, ranks on this host), in the order
# they are tried: torchrun, horovodrun's Gloo mode, Open MPI (mpirun, and horovodrun --mpi), a Slurm
# job step. The first launcher whose rank variable is set is the one that started this process.
PLACE_VARIABLES = (
    ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
)
# Where a Slurm step's rank 0 runs (the first host of its node list) and a port every rank derives
# from the job id, so srun needs no extra agreement (the usual recipe for torch.distributed on Slurm).
SLURM_PORT_BASE, SLURM_PORT_SPAN = 20000, 20000


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


def first_slurm_host(nodelist: str) -> str | None:
    """The first host of a Slurm node list: 'gpu[03-05,7],cpu1' -> 'gpu03'; None when unreadable."""
    m = re.match(r"([A-Za-z0-9._-]+?)(\[([0-9]+)[^\]]*\])?(,|$)", nodelist)
    if not m:
        return None
    return m.group(1) + (m.group(3) or "")


def place(env=os.environ) -> Place:
    """This process's place in the job, from whichever launcher started it (a single process: 0 of
    1). The rendezvous comes from MASTER_ADDR/MASTER_PORT when set (torchrun sets them), from the
    node list and job id under srun, and is left to the ranks' agreement otherwise."""
    for rank_name, size_name, local_name, local_size_name in PLACE_VARIABLES:
        if env.get(rank_name, "").isdigit():
            rank, size = int(env[rank_name]), _int(env, size_name, 1)
            local_rank, local_size = _int(env, local_name, 0), _int(env, local_size_name, 1)
            break
    else:
        rank, size, local_rank, local_size = 0, 1, 0, 1
        rank_name = ""
    addr, port = env.get("MASTER_ADDR") or None, _int(env, "MASTER_PORT", 0) or None
    if rank_name == "SLURM_PROCID" and (addr is None or port is None):
        addr = addr or first_slurm_host(env.get("SLURM_STEP_NODELIST", env.get("SLURM_JOB_NODELIST", "")))
        job = _int(env, "SLURM_JOB_ID", 0)
        port = port or SLURM_PORT_BASE + job % SLURM_PORT_SPAN
    if size == 1 and addr is None:
        addr, port = "127.0.0.1", 0  # alone: nothing to agree (0: any free port)
    return Place(rank, size, local_rank, local_size, addr, port)
