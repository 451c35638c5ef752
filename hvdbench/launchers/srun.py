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

from typing import Mapping

from hvdbench.launchers import Job

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
