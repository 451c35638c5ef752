"""mpirun (Open MPI): the MPI controller without horovodrun in between.

    mpirun -np 4 -H node1:2,node2:2 --map-by ppr:2:node --bind-to none \
        -x PATH -x LD_LIBRARY_PATH ... --output-filename RUN/logs WORKER...

`--map-by ppr:G:node` places exactly G ranks on each listed host (ranks fill a node before the
next, so local ranks are consecutive, as Horovod's hierarchical operations expect). `--bind-to
none` leaves thread placement to the frameworks: Open MPI's default core binding would squeeze a
multi-threaded worker onto one core. Remote ranks get only the variables named with `-x`, so the
ones the worker needs are listed (PATH, LD_LIBRARY_PATH, PYTHONPATH, the Open MPI root switches,
HVDBENCH_*, HOROVOD_*, NCCL_* and the user's --env names). Per-rank logs:
RUN/logs/1/rank.<r>/{stdout,stderr}.
"""

from __future__ import annotations

from typing import Mapping

from hvdbench.launchers import Job, forwarded_names, hosts_arg
from hvdbench.launchers.registry import Launcher

BINARY = "mpirun"


def build(job: Job, env: Mapping[str, str], binary: str = BINARY) -> tuple[list[str], dict[str, str]]:
    layout = job.layout
    argv = [binary, "-np", str(layout.world_size), "-H", hosts_arg(layout),
            "--map-by", f"ppr:{layout.gpus_per_node}:node", "--bind-to", "none"]
    for name in forwarded_names(env, job.forward):
        argv += ["-x", name]
    argv += ["--output-filename", str(job.log_dir), *job.launcher_args, *job.worker]
    return argv, dict(env)


# Open MPI's own rank variable, or a PMIx / PMI one (the process management interface an MPI job's
# ranks are started through).
RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")
LAUNCHER = Launcher(
    "mpirun", BINARY, build, detect=lambda env: any(name in env for name in RANK_VARIABLES),
    place=("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    rank_variables=RANK_VARIABLES[1:])
