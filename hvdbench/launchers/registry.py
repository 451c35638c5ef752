"""The launchers: one module each, one line of BUILT_IN here, or an entry point of another package.

    from hvdbench.launchers.registry import get_launcher, launchers
    get_launcher("torchrun").starts_horovod   # False: its ranks are torch.distributed's
    refusal(get_engine("horovod"), get_launcher("torchrun"))
        # 'torchrun starts torch.distributed ranks, which Horovod cannot join: use --engine ddp or fsdp, ...'

A launcher's module defines `LAUNCHER = Launcher(...)`: its argv builder, its detection rule and its
place variables (hvdbench/launchers/launch_info.py reads every launcher's). A package outside
hvdbench registers its own with an entry point in the `hvdbench.launchers` group, `<name> = <module
defining LAUNCHER>`, e.g. in its pyproject.toml (docs/adding-a-launcher.md walks through one):

    [project.entry-points."hvdbench.launchers"]
    toyrun = "toy_launcher"
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping

from hvdbench.errors import ConfigError
from hvdbench.installed import Registry, entry_points_of

if TYPE_CHECKING:
    from hvdbench.contracts.engines import Engine

ENTRY_POINT_GROUP = "hvdbench.launchers"
# name -> module defining LAUNCHER, one line per built-in launcher, in the order a process's launcher is
# recognised (launch_info.detect_launcher) and the order of the if-chain this replaced: torchrun before
# mpirun (a torchrun of several nodes runs under mpirun, whose variables its ranks inherit), mpirun
# before srun (a step under srun --mpi=pmix carries PMIx's variables too: without a sweep's
# HVDBENCH_LAUNCHER it reads as mpirun, as it did).
BUILT_IN = {
    "torchrun": "hvdbench.launchers.torchrun",
    "horovodrun": "hvdbench.launchers.horovodrun",
    "mpirun": "hvdbench.launchers.mpirun",
    "srun": "hvdbench.launchers.srun",
    "slurm": "hvdbench.launchers.slurm",
}


def never(env: Mapping[str, str]) -> bool:
    """The detection rule of a launcher no process is started by directly (a batch launcher's jobs run another)."""
    return False


@dataclass(frozen=True)
class Launcher:
    """One launcher, as its module declares it (`LAUNCHER = Launcher(...)`): the command it builds,
    how a process it started recognises it and finds its place, and what its ranks can run. The rule
    of which engine runs under which launcher asks `starts_horovod` (registry.refusal)."""

    name: str
    binary: str  # its executable (resolve_binary finds it: the venv's, then PATH)
    # (job, env, binary) -> (argv, env) of one run; None for a launcher that submits batch jobs instead
    # (slurm: each job runs the sweep again with `runs_with`)
    build: Callable[..., tuple[list[str], dict[str, str]]] | None = None
    detect: Callable[[Mapping[str, str]], bool] = never  # whether this process's environment is its ranks'
    # Its variables for (rank, world size, rank on this host, ranks on this host), read by launch_info.place.
    place: tuple[str, str, str, str] | None = None
    rank_variables: tuple[str, ...] = ()  # further variables of its that hold the rank (mpirun: PMIx's, PMI's)
    # (addr, port) where rank 0's torch.distributed store listens, as the launcher tells its ranks (torchrun
    # sets MASTER_ADDR/MASTER_PORT; srun: the step's first node, a port from the job id); None: it tells
    # none, and the ranks agree one through Horovod (or the sweep sets MASTER_* where Horovod is not installed).
    rendezvous: Callable[[Mapping[str, str]], tuple[str | None, int | None]] | None = None
    starts_horovod: bool = True  # Horovod can start in its ranks (an MPI or Gloo job); an engine that needs it can run
    ranks: str = "MPI ranks"  # what it starts, in words (the refusal of an engine its ranks cannot run says it)
    needs_horovod: bool = False  # it comes with Horovod (horovodrun): refused where Horovod is not installed
    takes_controller: bool = False  # the sweep's --controller picks its Horovod controller (else it is MPI)
    # It writes its environment's names into a /bin/sh line (horovodrun): names that are not shell
    # variable names are left out, with a warning (sweep/launch.py env_left_out).
    shell_names: bool = False
    runs_with: str = ""  # a batch launcher: the launcher its jobs' sweep runs (slurm: srun)


def _load() -> dict[str, Launcher]:
    """The built-in launchers, then those of installed packages (a built-in name cannot be taken over)."""
    modules = {ep.name: ep.value for ep in entry_points_of(ENTRY_POINT_GROUP) if ep.name not in BUILT_IN}
    found = {}
    for name, module in {**BUILT_IN, **modules}.items():
        try:
            launcher = getattr(importlib.import_module(module), "LAUNCHER", None)
        except ImportError as e:
            raise ConfigError(f"launcher {name!r}: its module {module!r} does not load ({e})") from None
        if not isinstance(launcher, Launcher) or launcher.name != name:
            raise ConfigError(f"launcher {name!r}: {module} does not define LAUNCHER = Launcher(name={name!r}, ...)")
        found[name] = launcher
    return found


# find: None for "single" (no launcher) or a name HVDBENCH_LAUNCHER gave that this install lacks.
LAUNCHERS: Registry[Launcher] = Registry("launcher", _load)
launchers, launcher_names, find_launcher, get_launcher = (LAUNCHERS.all, LAUNCHERS.names, LAUNCHERS.find,
                                                          LAUNCHERS.get)


def refusal(engine: Engine, launcher: Launcher | None) -> str | None:
    """Why `engine` cannot train under `launcher`, in one line, or None where it can: the one rule of
    which engine runs under which launcher (the sweep says it before any launch, a worker started
    so says it before the ranks meet). An engine that needs Horovod needs ranks Horovod can start
    in (an MPI or Gloo job); torchrun's are torch.distributed's."""
    if launcher is None or not engine.needs_horovod or launcher.starts_horovod:
        return None
    from hvdbench.contracts.engines import engines  # (start-up time: hvdbench.contracts loads numpy)

    others = " or ".join(e.name for e in engines() if not e.needs_horovod)
    able = [x.name for x in launchers() if x.starts_horovod and x.build is not None]
    able_text = " or ".join([", ".join(able[:-1]), able[-1]] if len(able) > 1 else able)
    return (f"{launcher.name} starts {launcher.ranks}, which Horovod cannot join: use --engine {others}, "
            f"or launch --engine {engine.name} with {able_text}")
