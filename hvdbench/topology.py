"""Hosts, slots and layouts: where a sweep's processes go.

A *host* is a machine name and its slots (processes it may run, usually its GPUs). A *layout* is
`nodes x gpus_per_node` on concrete hosts: `1x4` is scale-up (one server), `2x2` scale-out.

Hosts come from a hostfile in horovodrun's format, from `--hosts h1:8,h2:8`, or from the current
Slurm allocation:

    hosts = parse_hostfile("hostfiles/example-2node")      # "node1 slots=8" per line
    hosts = parse_hosts_arg("node1:8,node2:8")
    hosts = hosts_from_slurm(os.environ, expand=capture)  # capture runs `scontrol show hostnames NODELIST`
    layouts = select_layouts(hosts, gpus=[4], which="all")  # 4 slots x 2 hosts -> 1x4, 2x2
    Layout.parse("2x4"), str(Layout(2, 4))                  # NxG read and written: here only

Every host name is validated (letters, digits, '-', '.', '_'; no leading '-'), so a name can be
passed as an argv element to ssh/mpirun/srun without being mistaken for an option or reaching a shell.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

from hvdbench.errors import ConfigError, TopologyError

# RFC 1123 labels, plus '_' (seen in real cluster node names). No leading '-': an argv element
# starting with '-' would be read as an option by the launcher.
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOSTNAME = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")
# Slots (processes) per host: GPUs, or cores for CPU runs. Above this a number is a typo, not a
# machine, and would plan layouts up to an absurd -np.
MAX_SLOTS = 1024
# Nodes in one layout. A hostfile lists its hosts one per line; a count read from a log, a systems
# JSON or a command line has no file to bound it, so: at most a million nodes, more than any machine
# built has. Past it a number is a typo or a corrupt file, and would make layouts like 99999...x1.
MAX_NODES = 1_000_000


@dataclass(frozen=True)
class Host:
    name: str
    slots: int

    def __str__(self) -> str:
        return f"{self.name}:{self.slots}"


@functools.total_ordering
@dataclass(frozen=True)
class Layout:
    """`nodes` hosts running `gpus_per_node` processes each: the one form a layout takes in memory.
    `Layout.parse("2x4")` reads one (every NxG hvdbench is given), `str(layout)` writes it ("2x4", the
    one place NxG is formatted: runs.csv's `layout` column, the report's, every message), and layouts
    sort by GPUs, then nodes (scale-up first), as every table lists them."""

    nodes: int
    gpus_per_node: int
    hosts: tuple[str, ...] = ()  # the hosts used, in rank order (empty: chosen by a scheduler)

    @classmethod
    def parse(cls, text: str, option: str = "--baseline") -> "Layout":
        """'2x4' -> Layout(2, 4): every NODESxGPUS hvdbench reads (sweep's and predict's --layouts,
        report's --baseline and --predict, a study's layouts). ConfigError naming `option` (the one
        given; '' names none) and the value. Held to the hostfiles' bounds: at most MAX_SLOTS GPUs per
        node and MAX_NODES nodes."""
        said = f"{option} {_shown(text)}" if option else _shown(text)
        m = re.fullmatch(r"\s*([0-9]+)x([0-9]+)\s*", text or "")  # ASCII digits: int() also reads '٣'
        if not m:
            raise ConfigError(f"{said}: expected NODESxGPUS, e.g. 1x1 or 1x8")
        for digits, most, what in ((m[1], MAX_NODES, "nodes"), (m[2], MAX_SLOTS, "GPUs per node")):
            digits = digits.lstrip("0") or "0"
            if len(digits) > len(str(most)) or int(digits) > most:  # int() of thousands of digits fails
                count = digits if len(digits) <= 24 else f"a {len(digits)}-digit number of"
                bound = " per host (a hostfile's slots)" if what == "GPUs per node" else ""
                raise ConfigError(f"{said}: {count} {what} is above the limit of {most:,}{bound}")
            if digits == "0":
                raise ConfigError(f"{said}: {what} must be at least 1")
        return cls(int(m[1]), int(m[2]))

    def __str__(self) -> str:
        """'2x4'; '' for a layout not known (no nodes: a published log that names none)."""
        return f"{self.nodes}x{self.gpus_per_node}" if self.nodes else ""

    def __lt__(self, other: "Layout") -> bool:
        return (self.world_size, self.nodes, self.hosts) < (other.world_size, other.nodes, other.hosts)

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def name(self) -> str:
        return str(self)

    @property
    def scale(self) -> str:
        """'up' when every process shares one server, 'out' when spread over several."""
        return "up" if self.nodes == 1 else "out"

    @property
    def host_slots(self) -> list[Host]:
        """The hosts with the slots this layout uses on each (what `-H` and a hostfile get)."""
        return [Host(h, self.gpus_per_node) for h in self.hosts]


# --- hosts -------------------------------------------------------------------------------------

def validate_hostname(name: str, where: str = "") -> str:
    if len(name) > 253 or not _HOSTNAME.match(name):
        prefix = f"{where}: " if where else ""
        raise TopologyError(f"{prefix}invalid host name {name!r} (allowed: letters, digits, '-', '.', '_')")
    return name


def parse_hostfile(path: str | os.PathLike) -> list[Host]:
    """Read a horovodrun hostfile: `host slots=N` per line; blank lines and `#` comments allowed;
    Open MPI's `max_slots=M` (or `max-slots=M`) is accepted and ignored (M must be >= N)."""
    path = Path(path)
    if path.exists() and not path.is_file():  # a folder, a FIFO or /dev/zero: reading would fail or never end
        raise TopologyError(f"{path}: not a regular file (a hostfile is 'HOST slots=N' lines)")
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise TopologyError(f"{path}: no such hostfile") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TopologyError(f"{path}: cannot read hostfile ({e})") from None
    hosts: list[Host] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if line:
            host = _parse_hostfile_line(line, f"{path}:{lineno}")
            if any(h.name == host.name for h in hosts):
                raise TopologyError(f"{path}:{lineno}: duplicate host {host.name!r}")
            hosts.append(host)
    if not hosts:
        raise TopologyError(f"{path}: no hosts in hostfile")
    return hosts


def _parse_hostfile_line(line: str, where: str) -> Host:
    name, *fields = line.split()
    validate_hostname(name, where)
    slots = max_slots = None
    for f in fields:
        key, sep, value = f.partition("=")
        if not sep or key not in ("slots", "max_slots", "max-slots"):
            raise TopologyError(f"{where}: malformed line {line!r} (expected 'HOST slots=N')")
        number = _slots(value, where)
        if key == "slots":
            slots = number
        else:
            max_slots = number
    if slots is None:
        raise TopologyError(f"{where}: malformed line {line!r} (missing slots=N)")
    if max_slots is not None and max_slots < slots:
        raise TopologyError(f"{where}: max_slots={max_slots} is below slots={slots}")
    return Host(name, slots)


def _slots(value: str, where: str) -> int:
    # ASCII digits only: str.isdigit() also takes '²' or '٣', which int() then refuses or reads.
    if not re.fullmatch(r"[0-9]+", value):
        raise TopologyError(f"{where}: slots must be a whole number (digits 0-9), got {value!r}")
    digits = value.lstrip("0")
    if len(digits) > len(str(MAX_SLOTS)) or int(digits or 0) > MAX_SLOTS:  # int() of 5000 digits fails
        shown = value if len(value) <= 24 else value[:20] + "..."
        raise TopologyError(f"{where}: {shown} slots is above the limit of {MAX_SLOTS} per host")
    if not digits:
        raise TopologyError(f"{where}: zero slots")
    return int(digits)


def _check_unique(hosts: list[Host], where: str) -> list[Host]:
    seen = set()
    for h in hosts:
        if h.name in seen:
            raise TopologyError(f"{where}: duplicate host {h.name!r}")
        seen.add(h.name)
    return hosts


def parse_hosts_arg(spec: str) -> list[Host]:
    """`--hosts node1:8,node2:8` -> hosts. Every entry needs its slots."""
    if not spec.strip():
        raise TopologyError("--hosts is empty (expected HOST:SLOTS[,HOST:SLOTS...], e.g. localhost:2)")
    hosts = []
    for item in spec.split(","):
        item = item.strip()
        name, sep, slots = item.rpartition(":")
        if not sep or not name:
            raise TopologyError(f"--hosts: malformed entry {item!r} (expected HOST:SLOTS)")
        hosts.append(Host(validate_hostname(name, "--hosts"), _slots(slots, f"--hosts {item}")))
    return _check_unique(hosts, "--hosts")


def format_hostfile(hosts: Iterable[Host]) -> str:
    return "".join(f"{h.name} slots={h.slots}\n" for h in hosts)


def write_hostfile(path: str | os.PathLike, hosts: Iterable[Host]) -> Path:
    path = Path(path)
    path.write_text(format_hostfile(hosts))
    return path


# --- Slurm -------------------------------------------------------------------------------------

def scontrol_argv(nodelist: str) -> list[str]:
    """`scontrol show hostnames node[01-04]` prints one host per line (Slurm's own expansion)."""
    return ["scontrol", "show", "hostnames", nodelist]


def hosts_from_slurm(env: Mapping[str, str], gpus_per_node: int | None = None, *,
                     expand: Callable[[list[str]], str]) -> list[Host]:
    """Hosts of the current Slurm allocation. Slots: `gpus_per_node` if given, else
    SLURM_NTASKS_PER_NODE, else SLURM_GPUS_PER_NODE (`8` or `a100:8`). `expand` runs an argv and
    returns its output (the caller's runner, launchers.guard.capture: this module runs nothing)."""
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise TopologyError("not inside a Slurm allocation (SLURM_JOB_NODELIST unset): "
                            "give --hostfile or --hosts")
    if gpus_per_node is None:
        for var in ("SLURM_NTASKS_PER_NODE", "SLURM_GPUS_PER_NODE"):
            value = env.get(var, "").rsplit(":", 1)[-1]
            if value:
                gpus_per_node = _slots(value, var)
                break
        else:
            raise TopologyError("Slurm allocation without SLURM_NTASKS_PER_NODE or "
                                "SLURM_GPUS_PER_NODE: give --gpus-per-node")
    names = [n.strip() for n in expand(scontrol_argv(nodelist)).splitlines() if n.strip()]
    if not names:
        raise TopologyError(f"scontrol show hostnames {nodelist}: no hosts")
    hosts = [Host(validate_hostname(n, "SLURM_JOB_NODELIST"), gpus_per_node) for n in names]
    return _check_unique(hosts, "SLURM_JOB_NODELIST")


# --- layouts -----------------------------------------------------------------------------------

def capacity(hosts: list[Host]) -> int:
    return sum(h.slots for h in hosts)


def default_gpu_counts(hosts: list[Host]) -> list[int]:
    """Powers of two up to the total slots, keeping those some layout fits."""
    counts, n = [], 1
    while n <= capacity(hosts):
        if layouts_for(hosts, n):
            counts.append(n)
        n *= 2
    return counts


def layouts_for(hosts: list[Host], total: int) -> list[Layout]:
    """Every `nodes x g` with nodes * g == total that fits: the first `nodes` hosts (in the
    hostfile's order) with at least g slots each. Fewest nodes first."""
    layouts = []
    for nodes in range(1, min(total, len(hosts)) + 1):
        if total % nodes:
            continue
        g = total // nodes
        fitting = [h.name for h in hosts if h.slots >= g]
        if len(fitting) >= nodes:
            layouts.append(Layout(nodes, g, tuple(fitting[:nodes])))
    return layouts


def parse_layout(text: str, option: str = "--baseline") -> tuple[int, int]:
    """(nodes, GPUs per node) of Layout.parse(text, option): for a caller that wants the two numbers."""
    layout = Layout.parse(text, option)
    return layout.nodes, layout.gpus_per_node


def parse_layouts(text: str, option: str = "--layouts") -> list[Layout]:
    """'2x2,4x1, 8x8' -> [Layout(2, 2), Layout(4, 1), Layout(8, 8)] (predict's --layouts and --fit-on,
    report's --predict); ConfigError naming `option` and a malformed or out-of-bounds one ('' names
    none: click adds the option's name)."""
    out = [Layout.parse(part, option=option) for part in (p.strip() for p in text.split(",")) if part]
    if not out:
        raise ConfigError(f"{text!r}: give layouts as NxG, comma-separated (e.g. 2x2,8x8)")
    return out


def parse_layout_name(name: str) -> tuple[int, int]:
    """A sweep's --layouts entry: parse_layout's, as a TopologyError (worded as the sweep words it)."""
    try:
        return parse_layout(name, "--layouts")
    except ConfigError as e:
        malformed = "expected NODESxGPUS" in str(e)
        said = f"--layouts: {_shown(name)} is not NODESxGPUS (e.g. 2x4)" if malformed else str(e)
        raise TopologyError(said) from None


def _shown(value: str) -> str:
    """The value as an error quotes it: repr, cut to about 24 characters."""
    return repr(value) if len(value) <= 20 else repr(value[:20])[:-1] + f"...' ({len(value):,} characters)"


def select_layouts(hosts: list[Host], gpus: list[int] | None = None, which: str = "all") -> list[Layout]:
    """Layouts to sweep. `which`: all | packed (fewest nodes per GPU count) | spread (most nodes)
    | an explicit list `2x4,4x2` (kept in the given order). `gpus`: total GPU counts (default:
    powers of two up to the capacity)."""
    if which not in ("all", "packed", "spread"):
        return _explicit_layouts(hosts, gpus, which)
    if gpus is None:
        gpus = default_gpu_counts(hosts)
    chosen = []
    for total in gpus:
        fits = layouts_for(hosts, total)
        if not fits:
            raise TopologyError(_no_fit(hosts, total))
        chosen += fits if which == "all" else [fits[0] if which == "packed" else fits[-1]]
    return chosen


def _explicit_layouts(hosts: list[Host], gpus: list[int] | None, spec: str) -> list[Layout]:
    chosen = []
    for item in spec.split(","):
        nodes, g = parse_layout_name(item)
        if gpus is not None and nodes * g not in gpus:
            raise TopologyError(f"--layouts {item}: {nodes * g} GPUs is not in --gpus "
                                f"{','.join(map(str, gpus))}")
        match = [lay for lay in layouts_for(hosts, nodes * g) if lay.nodes == nodes]
        if not match:
            raise TopologyError(f"--layouts {item}: needs {nodes} host(s) with {g} slots each; "
                                f"have {_describe(hosts)}")
        if match[0] not in chosen:
            chosen.append(match[0])
    return chosen


def _no_fit(hosts: list[Host], total: int) -> str:
    if total > capacity(hosts):
        return f"{total} GPUs requested but only {capacity(hosts)} slots on {_describe(hosts)}"
    return f"no nodes x GPUs layout of {total} GPUs fits {_describe(hosts)}"


def _describe(hosts: list[Host]) -> str:
    return f"{len(hosts)} host(s) ({','.join(map(str, hosts))})"
