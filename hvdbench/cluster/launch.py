"""What a launcher in the root namespace needs to run on the emulated cluster.

For cluster `hvd` (state in /run/hvdbench-cluster/hvd) that is:

    PATH=/run/hvdbench-cluster/hvd/bin:$PATH     # its ssh wrapper: the cluster's key and known hosts
    horovodrun -np 2 --hostfile /run/hvdbench-cluster/hvd/hostfile \\
        --network-interfaces hvd-br --gloo|--mpi python -m ...
    mpirun -np 2 --hostfile /run/hvdbench-cluster/hvd/hostfile \\
        -mca btl_tcp_if_include hvd-br -mca oob_tcp_if_include hvd-br -x PATH python -m ...

Naming the interface skips horovodrun's interface probe (a round of ssh sessions) and keeps Open
MPI off the nodes' loopback. The ranks need the launcher's PATH (the venv's python, the wrapper)
and HVDBENCH_SHARED_MACHINE=1: horovodrun forwards both by itself, a direct mpirun with `-x`.
HVDBENCH_SHARED_MACHINE tells the workers that all "nodes" share this machine's cores, so each rank
takes cores / world size math threads rather than cores / ranks per node: oversubscribed, the
2x1 layout of the demo ran 25 times slower than its link allows.

A cluster brought up with `--slurm` runs its own Slurm, which clients reach through SLURM_CONF
(`slurm_conf`, also in `env`): `hvdbench sweep --cluster NAME --launcher slurm` renders and submits
its batch jobs there with the cluster's hostfile, nothing set by hand.
"""

import os
from dataclasses import dataclass, field
from pathlib import Path

from hvdbench.cluster import slurm
from hvdbench.cluster.blueprint import STATE_ROOT, ClusterError, state_dir_for
from hvdbench.cluster.state import Journal
from hvdbench.errors import UsageError
from hvdbench.frameworks import SHARED_MACHINE_ENV


@dataclass(frozen=True)
class ClusterLaunch:
    name: str
    hostfile: Path
    hosts: tuple[str, ...]             # horovodrun -H form: ("hvd-node1:1", "hvd-node2:1")
    horovodrun_args: tuple[str, ...]   # extra options for horovodrun (Gloo and MPI controllers)
    mpirun_args: tuple[str, ...]       # extra options for a direct Open MPI mpirun
    env: dict[str, str] = field(default_factory=dict)  # variables to set on top of the caller's
    link: str = ""  # the inter-node link, as a sweep records it: "emulated veth bridge, 100 Mbit/s"
    slurm_conf: Path | None = None  # its Slurm's slurm.conf (SLURM_CONF); None: brought up without --slurm

    def launcher_args(self, launcher: str) -> tuple[str, ...]:
        """The cluster's own options for `launcher` (a sweep's --cluster): horovodrun's and mpirun's
        interfaces; none for slurm, whose jobs reach its Slurm through SLURM_CONF (refused on a cluster
        brought up without one); UsageError for a launcher the cluster does not run."""
        if launcher == "slurm":
            if self.slurm_conf is None:
                raise UsageError(f"--launcher slurm: cluster {self.name!r} runs no Slurm; bring it up with one: "
                                 f"`hvdbench cluster down --name {self.name}`, then `hvdbench cluster up --name "
                                 f"{self.name} --slurm ...`")
            return ()
        own = {"horovodrun": self.horovodrun_args, "mpirun": self.mpirun_args}
        if launcher not in own:
            raise UsageError(f"--cluster runs with --launcher horovodrun, mpirun or (a cluster brought up "
                             f"with --slurm) slurm, not {launcher}")
        return own[launcher]


def launch_settings(name: str = "hvd", state_root: Path = STATE_ROOT, path: str | None = None) -> ClusterLaunch:
    """Launch settings of the running cluster `name`; `path` is the PATH to extend (default: ours)."""
    journal = Journal.load(state_dir_for(name, state_root))
    if journal is None or journal.phase != "up":
        raise ClusterError(f"cluster {name!r} is not up (no complete {state_dir_for(name, state_root)}); "
                           f"run `hvdbench cluster up --name {name}`")
    plan = journal.plan
    base = os.environ.get("PATH", "") if path is None else path
    return ClusterLaunch(
        name=plan.name,
        hostfile=plan.hostfile,
        hosts=tuple(f"{n.name}:{plan.slots}" for n in plan.nodes),
        horovodrun_args=("--network-interfaces", plan.bridge),
        mpirun_args=("-mca", "btl_tcp_if_include", plan.bridge, "-mca", "oob_tcp_if_include", plan.bridge,
                     "-x", "PATH", "-x", SHARED_MACHINE_ENV),
        env={"PATH": os.pathsep.join(p for p in [str(plan.state_dir / "bin"), base] if p),
             SHARED_MACHINE_ENV: "1", **(slurm.client_env(plan) if plan.slurm else {})},
        link=f"emulated veth bridge, {plan.describe_links()}",
        slurm_conf=slurm.conf_path(plan) if plan.slurm else None,
    )


def cluster_launch_args(name: str = "hvd") -> tuple[list[str], dict[str, str]]:
    """(extra horovodrun argv, extra env) for the sweep and the demo."""
    s = launch_settings(name)
    return list(s.horovodrun_args), dict(s.env)
