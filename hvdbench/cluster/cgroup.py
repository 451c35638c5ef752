"""A node's CPU quota (`hvdbench cluster up --node-cpu node3=0.5`): a cgroup that the node's sshd,
and its slurmd with --slurm, start in, so every rank started on that node (through ssh by
horovodrun, mpirun's orted, or a Slurm job step) inherits it.

The quota is a CFS bandwidth limit of FRACTION x the CPUs the node would otherwise get: its even
share of this machine (usable CPUs / nodes; every node shares this machine, and a rank on an
emulated cluster sizes its threads to that share), per CPU_PERIOD_US. For `--node-cpu hvd-node3=0.5`
on a 2-CPU machine with 3 nodes (quota = 0.5 x 2/3 CPU = 16667 us per 50000 us):

    cgroup v2 (a cgroup2 mount whose root enables the cpu controller for its children):
        mkdir /sys/fs/cgroup/hvdbench-hvd-node3
        echo "16667 50000" > /sys/fs/cgroup/hvdbench-hvd-node3/cpu.max
    cgroup v1 (a `cpu` hierarchy):
        mkdir /sys/fs/cgroup/cpu/hvdbench-hvd-node3
        echo 50000 > .../cpu.cfs_period_us ; echo 16667 > .../cpu.cfs_quota_us
    then the node's sshd joins it before it starts, and `cluster down` removes the folder once the
    processes in it are gone:
        PYTHON -m hvdbench.cluster.nodeinit --cgroup /sys/fs/cgroup/cpu/hvdbench-hvd-node3 -- \\
            /usr/sbin/ip netns exec hvd-node3 unshare --uts -- ... sshd ...
    (nodeinit writes its own pid to DIR/cgroup.procs and execs the rest, so the pid recorded is
    still sshd's; it goes first because `ip netns exec` mounts a fresh /sys without the cgroups).

v2 is used where it works, else v1; where neither does (no cpu controller, a read-only mount) `up`
refuses in one line before it creates anything. Every function here is pure or reads/writes only
the cgroup folder it is given.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hvdbench.cluster.blueprint import ClusterError, ClusterPlan, Node

MOUNTS = Path("/proc/self/mounts")
EMPTY_TIMEOUT_S = 10.0  # `down`: how long the processes in a node's cgroup may take to exit


@dataclass(frozen=True)
class Hierarchy:
    version: int  # 1 or 2
    root: Path    # its mount point (the cgroups are made right under it)


def _files_of(version: int, quota_us: int, period_us: int) -> list[tuple[str, str]]:
    if version == 2:
        return [("cpu.max", f"{quota_us} {period_us}")]
    return [("cpu.cfs_period_us", str(period_us)), ("cpu.cfs_quota_us", str(quota_us))]


def candidates(mounts_text: str) -> list[Hierarchy]:
    """The mounts that could hold a cpu quota, v2 first, from /proc/self/mounts' text: every cgroup2
    mount, and every v1 `cgroup` mount with the cpu controller among its options."""
    found = []
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        point, fstype, options = fields[1], fields[2], fields[3].split(",")
        if fstype == "cgroup2":
            found.append(Hierarchy(2, Path(point)))
        elif fstype == "cgroup" and "cpu" in options:
            found.append(Hierarchy(1, Path(point)))
    return sorted(found, key=lambda h: -h.version)


def why_unusable(h: Hierarchy, read=lambda p: p.read_text(), writable=lambda p: os.access(p, os.W_OK)) -> str:
    """'' where a node's cgroup with a cpu quota can be made under h, else why not."""
    try:
        if h.version == 2 and "cpu" not in read(h.root / "cgroup.subtree_control").split():
            return f"{h.root} (cgroup v2) does not enable the cpu controller for its children"
        if h.version == 1:
            read(h.root / "cpu.cfs_quota_us")
    except OSError as e:
        return f"{h.root} (cgroup v{h.version}): {e.strerror or e}"
    if not writable(h.root):
        return f"{h.root} (cgroup v{h.version}) is not writable"
    return ""


def find_hierarchy(mounts_text: str | None = None, read=lambda p: p.read_text(),
                   writable=lambda p: os.access(p, os.W_OK)) -> Hierarchy:
    """The hierarchy a node's CPU quota goes in (v2 where it works, else v1), or a one-line refusal."""
    text = MOUNTS.read_text() if mounts_text is None else mounts_text
    reasons = []
    for h in candidates(text):
        reason = why_unusable(h, read, writable)
        if not reason:
            return h
        reasons.append(reason)
    raise ClusterError("--node-cpu needs a cgroup with the cpu controller, v2 (cpu.max) or v1 "
                       "(cpu.cfs_quota_us), and this machine has none usable: "
                       + ("; ".join(reasons) if reasons else "no cgroup mount in /proc/self/mounts"))


def node_cgroup(h: Hierarchy, node: Node) -> Path:
    return h.root / f"hvdbench-{node.name}"


def quota_files(h: Hierarchy, node: Node, period_us: int) -> list[tuple[Path, str]]:
    """What `up` writes into the node's cgroup, in order (v1: the period before the quota)."""
    d = node_cgroup(h, node)
    return [(d / name, text) for name, text in _files_of(h.version, node.cpu_quota_us, period_us)]


def started_in(folder: Path, argv: list[str], python: str = sys.executable) -> list[str]:
    """argv (argv[0] an absolute path) started inside the cgroup `folder`."""
    return [python, "-m", "hvdbench.cluster.nodeinit", "--cgroup", str(folder), "--", *argv]


def create(h: Hierarchy, node: Node, period_us: int) -> Path:
    """Make the node's cgroup and set its quota; the caller has journalled the folder first."""
    d = node_cgroup(h, node)
    d.mkdir()
    for path, text in quota_files(h, node, period_us):
        path.write_text(text + "\n")
    return d


def read_quota(version: int, folder: Path) -> tuple[int | None, int] | None:
    """(quota us or None for unlimited, period us) as the kernel holds it; None where it is gone."""
    try:
        if version == 2:
            quota, period = folder.joinpath("cpu.max").read_text().split()
        else:
            quota = folder.joinpath("cpu.cfs_quota_us").read_text().strip()
            period = folder.joinpath("cpu.cfs_period_us").read_text().strip()
    except (OSError, ValueError):
        return None
    return (None if quota in ("max", "-1") else int(quota)), int(period)


def describe(quota: tuple[int | None, int] | None) -> str:
    """read_quota's answer in words: '0.33 CPU (16667/50000 us)', 'unlimited', 'absent'."""
    if quota is None:
        return "absent"
    used, period = quota
    return "unlimited" if used is None else f"{used / period:.2f} CPU ({used}/{period} us)"


def procs(folder: Path) -> list[int]:
    """The processes in the cgroup ([] where it is gone)."""
    try:
        return [int(p) for p in folder.joinpath("cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


def remove(folder: Path, timeout_s: float = EMPTY_TIMEOUT_S) -> bool:
    """Remove the node's cgroup once the processes in it are gone (the node's sshd and slurmd have
    been stopped with what they started); False where it was already gone. A process still in it
    after timeout_s is named in the error, and the folder kept for the next `down`."""
    if not folder.is_dir():
        return False
    deadline = time.monotonic() + timeout_s
    while (left := procs(folder)) and time.monotonic() < deadline:
        time.sleep(0.1)
    if left:
        raise ClusterError(f"{folder} still holds process(es) {' '.join(map(str, left))}, which were started on "
                           "its node; end them and run `hvdbench cluster down` again")
    folder.rmdir()
    return True


def plan_needs_one(plan: ClusterPlan) -> bool:
    return any(n.cpu_quota_us is not None for n in plan.nodes)
