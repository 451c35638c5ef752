"""srun: inside a Slurm allocation (`salloc`, or the sbatch script from `--launcher slurm`).

    srun --nodes 2 --ntasks-per-node 4 --ntasks 8 --nodelist node1,node2 --mpi=pmix \
        --kill-on-bad-exit=1 --export=ALL --output RUN/logs/rank.%t.out \
        --error RUN/logs/rank.%t.err WORKER...

Slurm starts every rank itself, so Horovod runs its MPI controller through Slurm's PMI
(`--mpi=pmix`; a site whose Open MPI wants PMI-2 adds `--launcher-arg=--mpi=pmi2`, and srun keeps
the last value). `--kill-on-bad-exit=1` ends the step when one rank fails instead of leaving the
others blocked in a collective. `%t` is the task (rank) number in srun's file name patterns.
"""

from __future__ import annotations

import re
from typing import Mapping

from hvdbench.launchers import Job
from hvdbench.launchers.registry import Launcher

BINARY = "srun"


def build(job: Job, env: Mapping[str, str], binary: str = BINARY) -> tuple[list[str], dict[str, str]]:
    layout = job.layout
    argv = [binary, "--nodes", str(layout.nodes), "--ntasks-per-node", str(layout.gpus_per_node),
            "--ntasks", str(layout.world_size)]
    if layout.hosts:  # empty when Slurm picks the nodes (inside an sbatch job of this layout)
        argv += ["--nodelist", ",".join(layout.hosts)]
    argv += ["--mpi=pmix", "--kill-on-bad-exit=1", "--export=ALL",
             "--output", str(job.log_dir / "rank.%t.out"), "--error", str(job.log_dir / "rank.%t.err"),
             *job.launcher_args, *job.worker]
    return argv, dict(env)


# Where a Slurm step's rank 0 runs (the first host of its node list) and a port every rank derives
# from the job id, so srun needs no extra agreement (the usual recipe for torch.distributed on Slurm).
PORT_BASE, PORT_SPAN = 20000, 20000


def first_host(nodelist: str) -> str | None:
    """The first host of a Slurm node list: 'gpu[03-05,7],cpu1' -> 'gpu03'; None when unreadable."""
    m = re.match(r"([A-Za-z0-9._-]+?)(\[([0-9]+)[^\]]*\])?(,|$)", nodelist)
    if not m:
        return None
    return m.group(1) + (m.group(3) or "")


def rendezvous(env: Mapping[str, str]) -> tuple[str | None, int | None]:
    """The step's first node, and PORT_BASE plus the job id modulo PORT_SPAN."""
    job = re.match(r"[0-9]+", env.get("SLURM_JOB_ID", ""))
    return (first_host(env.get("SLURM_STEP_NODELIST", env.get("SLURM_JOB_NODELIST", ""))),
            PORT_BASE + (int(job.group()) if job else 0) % PORT_SPAN)


LAUNCHER = Launcher(
    "srun", BINARY, build, detect=lambda env: "SLURM_PROCID" in env and "SLURM_STEP_ID" in env,  # a job step's
    place=("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"), rendezvous=rendezvous)
