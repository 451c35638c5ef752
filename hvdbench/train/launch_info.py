"""Who launched this process, and as which rank, read from the launcher's environment before
Horovod is up (a bad option is printed by rank 0 only; the record names the launcher).

    launcher_rank()      # 0 when alone
    detect_launcher()    # "horovodrun" | "mpirun" | "srun" | "single" (or HVDBENCH_LAUNCHER)
"""

from __future__ import annotations

import os

RANK_VARIABLES = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")


def launcher_rank(env=os.environ) -> int:
    """This process's rank as the launcher announced it (before Horovod is up); 0 when alone."""
    for name in RANK_VARIABLES:
        if env.get(name, "").isdigit():
            return int(env[name])
    return 0


def detect_launcher(env=os.environ) -> str:
    """Who started us: HVDBENCH_LAUNCHER when a sweep says so; else horovodrun (its Gloo mode sets
    HOROVOD_RANK), mpirun (Open MPI / PMIx / PMI rank variables; `horovodrun --mpi` runs mpirun
    and looks the same), srun (a job step's SLURM_PROCID), or nothing."""
    if env.get("HVDBENCH_LAUNCHER"):
        return env["HVDBENCH_LAUNCHER"]
    if "HOROVOD_RANK" in env or "HOROVOD_GLOO_RENDEZVOUS_ADDR" in env:
        return "horovodrun"
    if "OMPI_COMM_WORLD_RANK" in env or "PMIX_RANK" in env or "PMI_RANK" in env:
        return "mpirun"
    if "SLURM_PROCID" in env and "SLURM_STEP_ID" in env:
        return "srun"
    return "single"
