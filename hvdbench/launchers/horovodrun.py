"""horovodrun: Horovod's own launcher, with its Gloo or MPI controller.

    horovodrun -np 4 -H node1:2,node2:2 --gloo --output-filename RUN/logs WORKER...

`-H` pins the layout's hosts and slots exactly. `--output-filename` makes per-rank logs: with
`--gloo` horovodrun writes RUN/logs/rank.<r>/{stdout,stderr}; with `--mpi` it hands the option to
mpirun (Open MPI: RUN/logs/1/rank.<r>/{stdout,stderr}). horovodrun passes its whole environment to
every rank (Gloo: on the ssh command line; MPI: as `-x` for each variable), so nothing is listed.

What reaches horovodrun's shell: it builds one /bin/sh command line (Gloo: per rank; MPI: the
mpirun line) and quotes the values and the worker's argv but not the variable names, its own
options' values (`--mpi-args`, `-i FILE`), the `--output-filename` folder (MPI) or its working
directory (Gloo, `cd DIR` on another host). So the environment it gets holds only shell variable
names (`launchers.unsafe_names` are left out: a shell could not set them on the rank anyway), the MPI
log folder is passed shell-quoted (horovodrun hands it to the shell, which unquotes it), a
--launcher-arg with shell syntax in it is refused, and a Gloo launch onto other hosts is refused from
a working directory that is not a plain path.

Ending a run: with `--mpi`, mpirun's daemons end the remote ranks when mpirun goes. With `--gloo`
on several hosts the remote ranks hang off ssh sessions, which do not signal them when the
connection drops; they end only if the worker asks the kernel for its parent's death signal
(`guard.die_with_parent()`, to be called by the worker at start).

Horovod 0.28.1 with Gloo crashes on `--output-filename` for a single process (`math domain error`
padding the rank number: log10(0)), so a one-process Gloo run has no per-rank files; its output
is in the launcher's log (RUN/launch.log) anyway.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Mapping

from hvdbench.errors import HvdbenchError
from hvdbench.launchers import CONTROLLERS, Job, hosts_arg, unsafe_names
from hvdbench.launchers.registry import Launcher

BINARY = "horovodrun"
SHELL_SYNTAX = re.compile(r"[;&|$`<>(){}'\"\\\n]")
LOCAL_HOSTS = ("localhost", "127.0.0.1")  # Gloo starts ranks here without ssh (and without `cd`)


def build(job: Job, env: Mapping[str, str], binary: str = BINARY) -> tuple[list[str], dict[str, str]]:
    if job.controller not in CONTROLLERS:
        raise ValueError(f"controller {job.controller!r} is not one of {', '.join(CONTROLLERS)}")
    argv = [binary, "-np", str(job.layout.world_size), "-H", hosts_arg(job.layout), f"--{job.controller}"]
    if job.controller == "mpi":
        argv += ["--output-filename", shlex.quote(str(job.log_dir))]  # the shell unquotes it
    elif job.layout.world_size > 1:
        argv += ["--output-filename", str(job.log_dir)]  # Gloo opens the files itself
    if job.controller == "gloo" and any(h not in LOCAL_HOSTS for h in job.layout.hosts):
        cwd = os.getcwd()
        if shlex.quote(cwd) != cwd:
            raise HvdbenchError(f"horovodrun --gloo runs `cd {cwd}` unquoted in a shell on the other hosts: "
                                f"start the sweep from a folder whose path holds only ASCII letters, digits and _@%+=:,./-")
    for arg in job.launcher_args:  # horovodrun copies --mpi-args, -i FILE, ... into its shell line as given
        if SHELL_SYNTAX.search(arg):
            raise HvdbenchError(f"--launcher-arg {arg!r}: horovodrun passes its options to /bin/sh unquoted, where "
                                "these characters would be shell syntax (; & | $ ` < > ( ) { } quotes, backslash, "
                                "newline); spaces, which split its --mpi-args, are fine")
    argv += [*job.launcher_args, *job.worker]
    unsafe = set(unsafe_names(env))
    return argv, {k: v for k, v in env.items() if k not in unsafe}


# Its Gloo mode sets HOROVOD_RANK (and the rendezvous server's address); `horovodrun --mpi` runs mpirun
# and looks like it from inside (a sweep's HVDBENCH_LAUNCHER tells them apart).
LAUNCHER = Launcher(
    "horovodrun", BINARY, build, detect=lambda env: "HOROVOD_RANK" in env or "HOROVOD_GLOO_RENDEZVOUS_ADDR" in env,
    place=("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE"),
    needs_horovod=True, takes_controller=True, shell_names=True)
