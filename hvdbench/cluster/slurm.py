"""A real Slurm on the emulated cluster: munge, one slurmctld, one slurmd per node, all from the
cluster's state folder (`hvdbench cluster up --slurm`). The system's Slurm and munge configuration
(/etc/slurm, /etc/munge) is never read or touched: the daemons get their files by path and the
clients find them through SLURM_CONF.

    STATE/slurm/slurm.conf       the nodes (their addresses and slots as CPUs), one partition `hvd`
    STATE/slurm/cgroup.conf      the cgroup plugin this machine's hierarchy needs (v1 or v2)
    STATE/slurm/mpi.conf         PMIx's client folder (see below)
    STATE/munge/munge.key        a fresh key, 0400; munged's socket beside it
    STATE/NODE/                  the node's slurmd spool, log and PMIx folder

Processes, each recorded in the cluster's journal (pid, start time) and stopped by `cluster down`:

    munged -F -f --key-file STATE/munge/munge.key --socket STATE/munge/munge.socket ...
    slurmctld -D -f STATE/slurm/slurm.conf                               (root namespace)
    ip netns exec NODE unshare --uts --mount -- PYTHON -m hvdbench.cluster.nodeinit \\
        --bind STATE/NODE/pmix:STATE/slurm/pmix NODE /usr/sbin/slurmd -D -N NODE -f STATE/slurm/slurm.conf

Facts found making it work here (Debian 12's slurm-wlm 22.05 and Open MPI 4.1):
- srun's PMI must be PMIx (`--mpi=pmix`, the srun launcher's default). With `--mpi=pmi2` Open MPI
  aborts in MPI_Init ("OMPI was not built with SLURM's PMI support"): Debian builds it with PMIx only.
- PMIx's per-step client folder is named by job and step only (spmix_appdir_UID_JOB.STEP), so nodes
  sharing one file system collide ("File exists"). Each slurmd therefore runs in a mount namespace
  of its own where the PMIx base folder is a bind mount of the node's own folder, as it is on
  separate machines.
- slurmd needs a cgroup plugin even with proctrack/linuxproc and task/none, and its autodetection
  fails on a hybrid (v1) hierarchy: cgroup.conf names the plugin the machine has.
- `SlurmdParameters=config_overrides`: the nodes' CPU count is the cluster's slots, not what the
  hardware reports (a 2-core machine can still emulate nodes of 4 slots).
"""

from __future__ import annotations

import os
from pathlib import Path

from hvdbench.cluster.blueprint import ClusterPlan, Node

PARTITION = "hvd"
CTLD_PORT = 26817  # not Slurm's default 6817, so a system slurmctld on this machine is left alone
SLURMD_PORT = 6818  # each slurmd is in its own network namespace: the usual port does
# tool -> Debian package that provides it
TOOLS = {"munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd", "sinfo": "slurm-client",
         "sbatch": "slurm-client", "srun": "slurm-client", "scancel": "slurm-client", "mount": "mount"}


def slurm_dir(plan: ClusterPlan) -> Path:
    return plan.state_dir / "slurm"


def munge_dir(plan: ClusterPlan) -> Path:
    return plan.state_dir / "munge"


def conf_path(plan: ClusterPlan) -> Path:
    return slurm_dir(plan) / "slurm.conf"


def munge_socket(plan: ClusterPlan) -> Path:
    return munge_dir(plan) / "munge.socket"


def pmix_base(plan: ClusterPlan) -> Path:
    return slurm_dir(plan) / "pmix"


def node_pmix(plan: ClusterPlan, node: Node) -> Path:
    return plan.state_dir / node.name / "pmix"


def client_env(plan: ClusterPlan) -> dict[str, str]:
    """What sinfo, sbatch, srun and scancel need to reach this cluster's Slurm."""
    return {"SLURM_CONF": str(conf_path(plan))}


def slurm_conf_text(plan: ClusterPlan, controller_host: str) -> str:
    """slurm.conf: the controller on the bridge's address in the root namespace, one line per node."""
    s, st = slurm_dir(plan), plan.state_dir
    lines = [
        f"# hvdbench cluster {plan.name}: written by `hvdbench cluster up --slurm`; removed by `cluster down`",
        f"ClusterName=hvd{plan.name}",
        f"SlurmctldHost={controller_host}({plan.gateway})",
        f"SlurmctldPort={CTLD_PORT}",
        f"SlurmdPort={SLURMD_PORT}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket(plan)}",
        f"StateSaveLocation={s / 'ctld'}",
        f"SlurmctldPidFile={s / 'slurmctld.pid'}",
        f"SlurmctldLogFile={s / 'slurmctld.log'}",
        f"SlurmdSpoolDir={st}/%n/slurmd",
        f"SlurmdPidFile={st}/%n/slurmd.pid",
        f"SlurmdLogFile={st}/%n/slurmd.log",
        # No cgroup containment, no accounting daemon: processes are tracked through /proc.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SlurmdParameters=config_overrides",
        "MpiDefault=pmix",
        "ReturnToService=2",
        "SlurmdTimeout=30",
        "InactiveLimit=0",
        "KillWait=5",
        "MinJobAge=3600",
        *(f"NodeName={n.name} NodeAddr={n.address} CPUs={plan.slots} State=UNKNOWN" for n in plan.nodes),
        f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
    ]
    return "\n".join(lines) + "\n"


def cgroup_conf_text(fs_type: str) -> str:
    """cgroup.conf for the machine's hierarchy: `cgroup2fs` on /sys/fs/cgroup is v2, else v1."""
    plugin = "cgroup/v2" if fs_type == "cgroup2fs" else "cgroup/v1"
    return f"# hvdbench: slurmd's cgroup plugin, named (autodetection fails on hybrid hierarchies)\nCgroupPlugin={plugin}\nIgnoreSystemd=yes\n"


def mpi_conf_text(plan: ClusterPlan) -> str:
    return f"# hvdbench: each node's slurmd sees its own folder here (a bind mount)\nPMIxCliTmpDirBase={pmix_base(plan)}\n"


def cgroup_fs_type(path: str = "/sys/fs/cgroup") -> str:
    """The file system type mounted on `path` ('cgroup2fs', 'tmpfs', ...), from /proc/self/mounts."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return ""
    types = [line.split()[2] for line in mounts if len(line.split()) > 2 and line.split()[1] == path]
    return "cgroup2fs" if "cgroup2" in types else (types[-1] if types else "")


def munged_argv(plan: ClusterPlan, binary: str) -> list[str]:
    m = munge_dir(plan)
    return [binary, "-F", "-f", f"--key-file={m / 'munge.key'}", f"--socket={munge_socket(plan)}",
            f"--pid-file={m / 'munged.pid'}", f"--log-file={m / 'munged.log'}", f"--seed-file={m / 'munged.seed'}"]


def slurmctld_argv(plan: ClusterPlan, binary: str) -> list[str]:
    return [binary, "-D", "-f", str(conf_path(plan))]


def slurmd_argv(plan: ClusterPlan, node: Node, binary: str, python: str) -> list[str]:
    """slurmd of `node`: in the node's network namespace, with its hostname (UTS namespace) and its
    own PMIx folder (mount namespace); every step execs the next, so the recorded pid is slurmd's."""
    return ["ip", "netns", "exec", node.name, "unshare", "--uts", "--mount", "--",
            python, "-m", "hvdbench.cluster.nodeinit", "--bind", f"{node_pmix(plan, node)}:{pmix_base(plan)}",
            node.name, binary, "-D", "-N", node.name, "-f", str(conf_path(plan))]


def write_files(plan: ClusterPlan, controller_host: str) -> None:
    """Every file the daemons read, and a fresh munge key (only root can read it)."""
    s, m = slurm_dir(plan), munge_dir(plan)
    for folder in (s, s / "ctld", pmix_base(plan), m):
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    # munged refuses a socket folder others cannot traverse (it checks the path's permissions).
    m.chmod(0o711)
    (s / "slurm.conf").write_text(slurm_conf_text(plan, controller_host))
    (s / "cgroup.conf").write_text(cgroup_conf_text(cgroup_fs_type()))
    (s / "mpi.conf").write_text(mpi_conf_text(plan))
    key = m / "munge.key"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(1024))
    for node in plan.nodes:
        node_pmix(plan, node).mkdir(mode=0o700, parents=True, exist_ok=True)


def client(plan: ClusterPlan, tool: str, *args: str, timeout: float = 30):
    """Run a Slurm client (sinfo, squeue, scancel) against this cluster's own Slurm: its
    CompletedProcess (output captured), or None when the tool is not installed."""
    import shutil
    import subprocess

    from hvdbench.cluster.runner import search_path

    binary = shutil.which(tool, path=search_path())
    if binary is None:
        return None
    return subprocess.run([binary, *args], capture_output=True, text=True, env={**os.environ, **client_env(plan)},
                          stdin=subprocess.DEVNULL, timeout=timeout)


def sinfo_text(plan: ClusterPlan) -> str:
    """`sinfo -N` of the cluster's Slurm, or why it cannot be had."""
    proc = client(plan, "sinfo", "-N", "-o", "%N %P %T %c")
    if proc is None:
        return "sinfo not found (install slurm-client)"
    return (proc.stdout if proc.returncode == 0 else proc.stderr).rstrip()
