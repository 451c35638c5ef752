"""Launch commands: each launcher is one module (its argv builder, how a process it started knows
it, the variables that place a rank) defining a `Launcher`, plus one line of registry.py's list.
A launcher turns a `Job` into `(argv, env)` and runs nothing.

    argv, env = build("mpirun", job, env=launch_env({"HVDBENCH_X": "1"}))
    outcome = guard.run(argv, env, log=run_dir / "launch.log", record=run_dir / "launch.json", timeout=600)

`guard` runs the launch commands (hvdbench.sweep.launch is the sweep's one way to it). Every argv
element is a separate string (no shell), hostnames were validated by `hvdbench.topology`, so user
values cannot become options or shell syntax. `launch_info` is the other end: what a launched
process reads of its launcher's environment (its rank, its place), for the trainer (train/) and the
engines (frameworks/) alike. docs/adding-a-launcher.md walks through adding one.

The worker is `<venv>/bin/hvdbench train ...`, by absolute path: the console script beside
`sys.executable`. mpirun/srun/ssh start it on other nodes with a non-interactive shell whose PATH
may not hold the venv, so the absolute path (identical on every node: a shared file system or the
same install path, as is usual on clusters) is what makes it found everywhere.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from hvdbench.topology import Layout

CONTROLLERS = ("gloo", "mpi")

# Forwarded explicitly by launchers that do not pass the whole environment to remote ranks
# (mpirun's `-x NAME`): these names when set, plus every name with one of the prefixes.
FORWARD_NAMES = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV", "OMP_NUM_THREADS",
                 "PYTHONUNBUFFERED", "TF_CPP_MIN_LOG_LEVEL",
                 "OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")
FORWARD_PREFIXES = ("HVDBENCH_", "HOROVOD_", "NCCL_")

# A name a POSIX shell can set (`NAME=value`). horovodrun writes every variable of its environment
# into a /bin/sh command line, the value quoted but the name not (Gloo: `NAME='value' ... worker`;
# MPI: `mpirun -x NAME ...`): another name breaks every launch (`A(B)`: a syntax error naming no
# variable) or runs as a command (`X;cmd;Y`). The user's --env names are held to it too.
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Open MPI refuses to start as root unless both are set. Containers and CI runners commonly run
# as root, so a sweep started by root sets them (and only then) for mpirun and horovodrun --mpi.
ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


@dataclass(frozen=True)
class Job:
    """One run: `layout.world_size` copies of `worker`, logs under `run_dir`."""

    layout: Layout
    worker: tuple[str, ...]  # argv of one worker process
    run_dir: Path
    controller: str = "gloo"  # horovodrun only: gloo | mpi
    launcher_args: tuple[str, ...] = ()  # extra launcher options, placed before the worker
    forward: tuple[str, ...] = ()  # extra env names to forward (the user's --env keys)

    @property
    def log_dir(self) -> Path:
        return self.run_dir / "logs"


def bin_dir() -> Path:
    """The venv's bin directory (not resolved: a venv's python is a symlink to the base one)."""
    return Path(sys.executable).parent


def resolve_binary(name: str) -> str:
    """Absolute path of a launcher: the venv's copy first (horovodrun), then PATH; the bare name
    when not installed here (dry runs and Slurm scripts are still rendered)."""
    local = bin_dir() / name
    if local.exists():
        return str(local)
    return shutil.which(name) or name


def worker_argv(model: str, train_args: tuple[str, ...] | list[str] = ()) -> list[str]:
    """`<venv>/bin/hvdbench train MODEL ARGS...`."""
    return [str(bin_dir() / "hvdbench"), "train", model, *train_args]


def launch_env(user_env: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None,
               euid: int | None = None) -> dict[str, str]:
    """The environment launches run with: `base` (default os.environ), the Open MPI root switches
    when running as root, then the user's `--env` values (which win)."""
    env = dict(os.environ if base is None else base)
    if (os.geteuid() if euid is None else euid) == 0:
        for key, value in ROOT_ENV.items():
            env.setdefault(key, value)
    env.update(user_env or {})
    return env


def forwarded_names(env: Mapping[str, str], extra: tuple[str, ...] = ()) -> list[str]:
    """Names to forward to remote ranks, in a stable order: the fixed list, prefixed names
    (sorted), then `extra`; only names set in `env`, each once."""
    names = [n for n in FORWARD_NAMES if n in env]
    names += sorted(n for n in env if n.startswith(FORWARD_PREFIXES))
    names += [n for n in extra if n in env]
    return list(dict.fromkeys(names))


def unsafe_names(env: Mapping[str, str]) -> list[str]:
    """The names in `env` that are not shell variable names (SHELL_NAME), sorted."""
    return sorted(n for n in env if not SHELL_NAME.fullmatch(n))


def hosts_arg(layout: Layout) -> str:
    """`h1:g,h2:g`, the `-H` value horovodrun and mpirun both take."""
    return ",".join(str(h) for h in layout.host_slots)


def build(launcher: str, job: Job, env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """(argv, env) for one run with `launcher` (horovodrun | mpirun | srun | torchrun | a package's)."""
    from hvdbench.launchers.registry import get_launcher, launchers  # (the registry loads every launcher's module)

    found = get_launcher(launcher)
    if found.build is None:
        single = [x.name for x in launchers() if x.build is not None]
        raise ValueError(f"launcher {launcher!r} has no single-run command (one of {', '.join(single)})")
    # The worker records who launched it; `horovodrun --mpi` and mpirun look alike from inside.
    env = {**env, "HVDBENCH_LAUNCHER": launcher}
    return found.build(job, env, binary=resolve_binary(found.binary))
