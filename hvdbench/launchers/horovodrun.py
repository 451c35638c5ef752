"""horovodrun: Horovod's own launcher, with its Gloo or MPI controller.

    horovodrun -np 4 -H node1:2,node2:2 --gloo --output-filename RUN/logs WORKER...

`-H` pins the layout's hosts and slots exactly. `--output-filename` makes per-rank logs: with
`--gloo` horovodrun writes RUN/logs/rank.<r>/{stdout,stderr}; with `--mpi` it hands the option to
mpirun (Open MPI: RUN/logs/1/rank.<r>/{stdout,stderr}). horovodrun passes its whole environment to
every rank (Gloo: on the ssh command line; MPI: as `-x` for each variable), so nothing is listed.

Ending a run: with `--mpi`, mpirun's daemons end the remote ranks when mpirun goes. With `--gloo`
on several hosts the remote ranks hang off ssh sessions, which do not signal them when the
connection drops; they end only if the worker asks the kernel for its parent's death signal
(`guard.die_with_parent()`, to be called by the worker at start).

Horovod 0.28.1 with Gloo crashes on `--output-filename` for a single process (`math domain error`
padding the rank number: log10(0)), so a one-process Gloo run has no per-rank files; its output
is in the launcher's log (RUN/launch.log) anyway.
"""

from __future__ import annotations

from typing import Mapping

from hvdbench.launchers import CONTROLLERS, Job, hosts_arg

BINARY = "horovodrun"


def build(job: Job, env: Mapping[str, str], binary: str = BINARY) -> tuple[list[str], dict[str, str]]:
    if job.controller not in CONTROLLERS:
        raise ValueError(f"controller {job.controller!r} is not one of {', '.join(CONTROLLERS)}")
    argv = [binary, "-np", str(job.layout.world_size), "-H", hosts_arg(job.layout), f"--{job.controller}"]
    if job.layout.world_size > 1 or job.controller == "mpi":
        argv += ["--output-filename", str(job.log_dir)]
    argv += [*job.launcher_args, *job.worker]
    return argv, dict(env)
