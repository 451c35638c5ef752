"""What an emulated cluster is made of: validated names, addresses and link shaping, and nothing else.

A plan is pure data computed from the user's options; building it touches nothing on the machine, so
every name and address can be checked (and unit-tested) before anything is created. Naming scheme for
a cluster called NAME with N nodes (interface names stay within Linux's 15 characters):

    node k (1..N)   network namespace = hostname = NAME-nodeK, address = subnet host k+1
    bridge          NAME-br in the root namespace, address = subnet host 1 (the nodes' gateway)
    veth pair k     NAME-vK in the root namespace (enslaved to the bridge) <-> NAME-br inside node k
    cgroup k        hvdbench-NAME-nodeK at the cpu hierarchy's root, only for a node given --node-cpu

The node end of each veth carries the bridge's name on purpose: Horovod picks the network interface
by *name* on every host (`--network-interfaces NAME-br`), and with the same name in the root
namespace too, the launcher finds its own address on that interface for Gloo's rendezvous server.
"""

import ipaddress
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from hvdbench.errors import HvdbenchError

NAME_RE = re.compile(r"[a-z][a-z0-9]{0,7}")  # short enough for NAME-vKK (<= 15 characters)
MAX_NODES = 64
MAX_SLOTS = 256
DEFAULT_NAME = "hvd"
DEFAULT_SUBNET = "10.213.0.0/24"
STATE_ROOT = Path("/run/hvdbench-cluster")  # tmpfs: state vanishes on reboot, with the namespaces

_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_DELAY_UNITS = {"us": 1, "ms": 10**3, "s": 10**6}
# The fastest link tc can shape: tbf's burst (cluster/shaping.py: 1 ms of traffic) is a 32-bit byte
# count, and tc refuses a larger one ('illegal value for "burst"') after the namespaces were made.
MAX_RATE_BIT = (2**32 - 1) * 8 * 1000
_NUMBER = r"(\d+(?:\.\d+)?)"
# The CFS period of a node's CPU quota: shorter than a training step, so every step meets the quota
# (with the kernel's 100 ms a short step may run at full speed, then the next one stalls).
CPU_PERIOD_US = 50_000
MIN_QUOTA_US = 1_000  # the kernel's least cpu.cfs_quota_us / cpu.max quota


class ClusterError(HvdbenchError):
    """A cluster cannot be created, inspected or removed; the message names what and where."""


@dataclass(frozen=True)
class Node:
    index: int      # 1-based
    name: str       # hostname, network namespace name and hostfile entry
    address: str    # IPv4 address inside the node
    host_veth: str  # the root-namespace end of the node's veth pair
    # --node-cpu: the share of the CPUs the node would otherwise get, and the CFS quota (us of CPU time
    # per CPU_PERIOD_US) it comes to; None: no quota
    cpu_fraction: float | None = None
    cpu_quota_us: int | None = None
    rate_bit: int | None = None  # --node-rate: this node's own link rate (None: the cluster's shaping)


@dataclass(frozen=True)
class Shaping:
    """Inter-node link emulation: bits/s and one-way delay in microseconds (None = not shaped)."""
    rate_bit: int | None = None
    delay_us: int | None = None

    @property
    def active(self) -> bool:
        return self.rate_bit is not None or self.delay_us is not None

    def describe(self) -> str:
        if not self.active:
            return "unshaped"
        parts = []
        if self.rate_bit is not None:
            parts.append(format_rate(self.rate_bit))
        if self.delay_us is not None:
            parts.append(f"{self.delay_us}us one-way")
        return ", ".join(parts)


@dataclass(frozen=True)
class ClusterPlan:
    name: str
    nodes: tuple[Node, ...]
    slots: int
    subnet: str         # e.g. 10.213.0.0/24
    gateway: str        # the bridge's address in the root namespace
    bridge: str         # bridge name in the root namespace = interface name inside every node
    shaping: Shaping
    state_dir: Path
    hostfile: Path
    slurm: bool = False  # munge, slurmctld and a slurmd per node (hvdbench.cluster.slurm)

    @property
    def prefixlen(self) -> int:
        return ipaddress.ip_network(self.subnet).prefixlen

    def node_shaping(self, node: Node) -> Shaping:
        """The node's link: the cluster's shaping, at the node's own rate where --node-rate gave one."""
        if node.rate_bit is None:
            return self.shaping
        return Shaping(rate_bit=node.rate_bit, delay_us=self.shaping.delay_us)

    def describe_links(self) -> str:
        """'100mbit' or, with --node-rate, '1gbit, except hvd-node3 at 100mbit'."""
        own = [f"{n.name} at {format_rate(n.rate_bit)}" for n in self.nodes if n.rate_bit is not None]
        return self.shaping.describe() + (f", except {', '.join(own)}" if own else "")


def validate_name(name: str) -> str:
    if not NAME_RE.fullmatch(name or ""):
        raise ClusterError(f"cluster name {name!r} is invalid: use 1-8 lowercase letters and digits, "
                           "starting with a letter")
    return name


def state_dir_for(name: str, state_root: Path = STATE_ROOT) -> Path:
    return Path(state_root) / validate_name(name)


def parse_rate(text: str, label: str | None = None) -> int:
    """'10gbit' -> 10_000_000_000 bits/s (tc's units: bit, kbit, mbit, gbit, tbit); `label`: the option
    as the error names it (default: --bandwidth 'TEXT')."""
    m = re.fullmatch(_NUMBER + r"(" + "|".join(_RATE_UNITS) + r")", text.strip().lower())
    value = float(m.group(1)) * _RATE_UNITS[m.group(2)] if m else 0
    if not m or value < 8000:
        raise ClusterError(f"{label or f'--bandwidth {text!r}'} is invalid: give a rate such as 100mbit or 10gbit "
                           "(at least 8kbit)")
    if value > MAX_RATE_BIT:
        raise ClusterError(f"{label or f'--bandwidth {text!r}'} is too fast for tc: at most "
                           f"{format_rate(MAX_RATE_BIT // 10**12 * 10**12)} (its tbf holds a link's 1 ms burst in 32 bits)")
    return int(value)


def parse_node_values(option: str, items, node_names: list[str], cluster: str) -> dict[str, str]:
    """`--node-cpu node3=0.5` (or NAME-node3=0.5), each given once: {full node name: value text}."""
    found: dict[str, str] = {}
    short = {n.removeprefix(f"{cluster}-"): n for n in node_names}
    for item in items or ():
        node, sep, value = str(item).partition("=")
        if not sep or not node or not value:
            raise ClusterError(f"{option} {item!r} is invalid: give NODE=VALUE, e.g. {option} node3=...")
        full = short.get(node, node)
        if full not in node_names:
            raise ClusterError(f"{option} {node}: no such node (cluster {cluster} has "
                               f"{next(iter(short))}..{list(short)[-1]})")
        if full in found:
            raise ClusterError(f"{option} {node}: given twice")
        found[full] = value
    return found


def cpu_quota_us(fraction_text: str, node: str, cpus: float, nodes: int) -> tuple[float, int]:
    """(fraction, CFS quota in us per CPU_PERIOD_US) of `--node-cpu NODE=FRACTION`: FRACTION of the
    CPUs the node would otherwise get, its even share of this machine's (cpus / nodes: every node
    shares this machine, and each rank sizes its threads to that share)."""
    try:
        fraction = float(fraction_text)
    except ValueError:
        fraction = math.nan
    if not 0 < fraction <= 1:
        raise ClusterError(f"--node-cpu {node}={fraction_text}: give a fraction above 0 and at most 1 of the "
                           f"CPUs the node would otherwise get (its share of this machine: {cpus:g} CPUs / "
                           f"{nodes} nodes), e.g. 0.5")
    quota = round(fraction * cpus / nodes * CPU_PERIOD_US)
    if quota < MIN_QUOTA_US:
        raise ClusterError(f"--node-cpu {node}={fraction_text} comes to {quota} us of CPU per "
                           f"{CPU_PERIOD_US} us, below the kernel's least quota ({MIN_QUOTA_US} us)")
    return fraction, quota


def usable_cpus() -> int:
    """The CPUs this process (and so every node's processes) may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def parse_delay(text: str) -> int:
    """'100us' -> 100, '1.5ms' -> 1500 (microseconds, one way)."""
    m = re.fullmatch(_NUMBER + r"(us|ms|s)", text.strip().lower())
    value = float(m.group(1)) * _DELAY_UNITS[m.group(2)] if m else 0
    if not m or not 1 <= value <= 10**7:
        raise ClusterError(f"--latency {text!r} is invalid: give a delay such as 100us or 2ms "
                           "(1us to 10s)")
    return int(round(value))


def format_rate(bits: int) -> str:
    for unit in ("tbit", "gbit", "mbit", "kbit"):
        if bits >= _RATE_UNITS[unit] and bits % _RATE_UNITS[unit] == 0:
            return f"{bits // _RATE_UNITS[unit]}{unit}"
    return f"{bits}bit"


def make_plan(name: str = DEFAULT_NAME, nodes: int = 2, slots: int = 1, subnet: str = DEFAULT_SUBNET,
              bandwidth: str | None = None, latency: str | None = None, hostfile: str | Path | None = None,
              state_root: Path = STATE_ROOT, slurm: bool = False, node_cpu=(), node_rate=(),
              cpus: int | None = None) -> ClusterPlan:
    """Validate the options of `hvdbench cluster up` and derive every name and address from them.
    node_cpu, node_rate: `--node-cpu`/`--node-rate` items ('node3=0.5', 'node3=100mbit'); cpus: the
    machine's usable CPUs (default: this process's)."""
    validate_name(name)
    if not 1 <= nodes <= MAX_NODES:
        raise ClusterError(f"--nodes {nodes} is out of range: 1 to {MAX_NODES}")
    if not 1 <= slots <= MAX_SLOTS:
        raise ClusterError(f"--slots {slots} is out of range: 1 to {MAX_SLOTS}")
    try:
        net = ipaddress.ip_network(subnet, strict=True)
    except ValueError as e:
        raise ClusterError(f"--subnet {subnet!r} is invalid: {e}") from None
    if net.version != 4:
        raise ClusterError(f"--subnet {subnet} is not IPv4")
    hosts = list(net.hosts()) if net.num_addresses <= 2**16 else None
    if hosts is None or len(hosts) < nodes + 1:
        raise ClusterError(f"--subnet {subnet} must be a /16../30 network holding {nodes + 1} addresses "
                           f"(the bridge and {nodes} nodes)")
    state_dir = state_dir_for(name, state_root)
    shaping = Shaping(rate_bit=parse_rate(bandwidth) if bandwidth else None,
                      delay_us=parse_delay(latency) if latency else None)
    names = [f"{name}-node{k}" for k in range(1, nodes + 1)]
    cpu = {n: cpu_quota_us(v, n.removeprefix(f"{name}-"), usable_cpus() if cpus is None else cpus, nodes)
           for n, v in parse_node_values("--node-cpu", node_cpu, names, name).items()}
    rate = {n: parse_rate(v, f"--node-rate {n.removeprefix(f'{name}-')}={v}")
            for n, v in parse_node_values("--node-rate", node_rate, names, name).items()}
    node_list = tuple(Node(index=k, name=names[k - 1], address=str(hosts[k]), host_veth=f"{name}-v{k}",
                           cpu_fraction=cpu.get(names[k - 1], (None, None))[0],
                           cpu_quota_us=cpu.get(names[k - 1], (None, None))[1], rate_bit=rate.get(names[k - 1]))
                      for k in range(1, nodes + 1))
    return ClusterPlan(name=name, nodes=node_list, slots=slots, subnet=str(net), gateway=str(hosts[0]),
                       bridge=f"{name}-br", shaping=shaping, state_dir=state_dir,
                       hostfile=Path(hostfile).absolute() if hostfile else state_dir / "hostfile", slurm=slurm)
