"""The hardware behind a number, read off this host: CPU model and cores, the GPUs and their driver
(`nvidia-smi --query-gpu`), the GPU-to-GPU link matrix (`nvidia-smi topo -m`), the network interfaces
with their link rates (Ethernet speed from /sys/class/net/*/speed, InfiniBand rate from
/sys/class/infiniband/*/ports/*/rate), and the intra-node and inter-node link they make, in words.

    python -c 'from hvdbench import hardware; print(hardware.host_record())'
    hvdbench env --json          # its "hardware" key; a sweep keeps one per host in sweep.json

A missing tool or file (no nvidia-smi, no InfiniBand, a virtual NIC without a speed) leaves its
field empty, never an error; a tool that fails, hangs (TOOL_TIMEOUT_S), writes bytes that are not UTF-8
or more than TOOL_MAX_BYTES leaves its fields empty with a line in the record's "notes" (`run_tool`:
the one way hvdbench runs nvidia-smi). nvidia-smi runs as an argv list, never through a shell. The framework
versions (torch, CUDA, NCCL) are the worker's and the probe's to add: this module imports none.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
from pathlib import Path

QUERY_GPU = ("index", "name", "memory.total", "driver_version", "pci.bus_id")
SYS_NET = Path("/sys/class/net")
SYS_IB = Path("/sys/class/infiniband")
# What `nvidia-smi topo -m` calls a GPU pair's connection, best first (its legend).
PCIE_WORDS = {"PIX": "PCIe, one bridge", "PXB": "PCIe, several bridges", "PHB": "PCIe via the host bridge",
              "NODE": "PCIe across host bridges in a NUMA node", "SYS": "PCIe across NUMA nodes (QPI/UPI)"}


# nvidia-smi answers a query in well under a second; a hung driver must not hold a run or `env` for long.
TOOL_TIMEOUT_S = 10.0
TOOL_MAX_BYTES = 1 << 20  # far more than any query's answer (a 64-GPU topology is ~20 KB)


def host_record(smi: str | None = None) -> dict:
    """This host's hardware record (see the module's doc). `smi`: the nvidia-smi to run (PATH's)."""
    smi = smi or shutil.which("nvidia-smi")
    notes: list[str] = []
    query = [smi, f"--query-gpu={','.join(QUERY_GPU)}", "--format=csv,noheader,nounits"] if smi else None
    text = run_tool(query, notes) if query else ""
    gpus = parse_query_gpu(text)
    if text.strip() and not gpus:
        notes.append(f"{smi} --query-gpu: output not understood ({text.strip()[:60]!r}...): no GPUs read")
    topo = parse_topo(run_tool([smi, "topo", "-m"], notes) if smi and gpus else "")
    nics = network_interfaces()
    return {"hostname": socket.gethostname(), "cpu": cpu(), "gpus": gpus,
            "driver": gpus[0]["driver"] if gpus else "", "gpu_topology": topo, "nics": nics,
            "intra_node_link": intra_node_link(gpus, topo), "inter_node_link": inter_node_link(nics),
            "notes": notes}


def run_tool(argv: list[str], notes: list[str] | None = None, timeout: float | None = None) -> str:
    """A tool's stdout as text; '' when it is missing, fails, hangs past `timeout` (TOOL_TIMEOUT_S),
    writes more than TOOL_MAX_BYTES or bytes that are not UTF-8, with the reason appended to `notes`.
    The tool runs in a session of its own, ended whole when it overstays (a wrapper's children too)."""
    timeout = TOOL_TIMEOUT_S if timeout is None else timeout
    what = " ".join([os.path.basename(argv[0]), *argv[1:2]])
    notes = [] if notes is None else notes
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError as e:
        notes.append(f"{what}: {e.strerror or e}")
        return ""
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.read(TOOL_MAX_BYTES + 1)), daemon=True)
    reader.start()
    reader.join(timeout)
    why = (f"no answer in {timeout:g} s" if reader.is_alive() else
           f"more than {TOOL_MAX_BYTES >> 20} MiB of output" if len(got[0]) > TOOL_MAX_BYTES else "")
    if why:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: this tool and whatever it started
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:  # not even SIGKILL ended it (a process in the kernel): leave it
        code, why = None, why or f"no exit in {timeout:g} s"
    reader.join(1.0)
    if not reader.is_alive():
        proc.stdout.close()
    if not why and code != 0:
        why = f"exit status {code}"
    if not why:
        try:
            return got[0].decode("utf-8")
        except UnicodeDecodeError as e:
            why = f"output not UTF-8 (byte {e.start})"
    notes.append(f"{what}: {why}: its fields left empty")
    return ""


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except (OSError, ValueError):  # absent, or EINVAL: a virtual interface has no speed
        return ""


def cpu(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict:
    """Model, logical CPUs, physical cores (distinct socket/core pairs) and sockets."""
    text, model, pairs = _read(cpuinfo), "", set()
    for block in text.split("\n\n"):
        fields = dict(line.split(":", 1) for line in block.splitlines() if ":" in line)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        model = model or fields.get("model name", "")
        if "core id" in fields:
            pairs.add((fields.get("physical id", "0"), fields["core id"]))
    return {"model": model, "logical": os.cpu_count() or 0, "cores": len(pairs) or os.cpu_count() or 0,
            "sockets": len({s for s, _ in pairs}) or (1 if model else 0)}


def parse_query_gpu(text: str) -> list[dict]:
    """`nvidia-smi --query-gpu=index,name,memory.total,driver_version,pci.bus_id
    --format=csv,noheader,nounits` lines -> [{index, name, memory_mib, driver, pci_bus_id}]."""
    gpus = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(QUERY_GPU):
            continue
        index, name, memory, driver, bus = parts
        gpus.append({"index": int(index) if index.isdigit() else index, "name": name,
                     "memory_mib": int(memory) if memory.isdigit() else None, "driver": driver,
                     "pci_bus_id": bus})
    return gpus


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def parse_topo(text: str) -> dict:
    """`nvidia-smi topo -m` -> {"matrix": {GPU0: {GPU1: "NV18", NIC0: "PXB", ...}}, "nics": {NIC0:
    "mlx5_0"}, "cpu_affinity": {GPU0: "0-55"}}; {} for no text. Rows and columns are tab-separated;
    the header names the devices, then CPU/NUMA affinity columns; the NIC legend maps NICn to its name."""
    # nvidia-smi underlines the header with terminal escapes even when it writes to a pipe
    lines = [ANSI_ESCAPE.sub("", line).rstrip() for line in text.splitlines()]
    header = next((i for i, line in enumerate(lines) if re.match(r"^\s+GPU0\b", line)), None)
    if header is None:
        return {}
    columns = _cells(lines[header])
    devices = [c for c in columns if re.fullmatch(r"(GPU|NIC)\d+", c)]
    affinity = columns.index("CPU Affinity") if "CPU Affinity" in columns else None
    matrix, cpus = {}, {}
    for line in lines[header + 1:]:
        cells = _cells(line)
        if not cells or not re.fullmatch(r"(GPU|NIC)\d+", cells[0]):
            break
        row = cells[1:]
        matrix[cells[0]] = {d: v for d, v in zip(devices, row) if d != cells[0]}
        if affinity is not None and len(row) > affinity:
            cpus[cells[0]] = row[affinity]
    nics = dict(re.findall(r"^\s*(NIC\d+):\s*(\S+)\s*$", text, flags=re.M))
    return {"matrix": matrix, "nics": nics, "cpu_affinity": cpus}


def _cells(line: str) -> list[str]:
    """A topo line's cells: tab-separated as nvidia-smi prints them; runs of 2+ spaces where a copy
    lost its tabs ('CPU Affinity' keeps its one space)."""
    return [c.strip() for c in (line.split("\t") if "\t" in line else re.split(r"\s{2,}", line)) if c.strip()]


def intra_node_link(gpus: list[dict], topo: dict) -> str:
    """The GPU-to-GPU link in words: 'NVLink (NV18) between 8 GPUs', 'PCIe via the host bridge (PHB)
    between 2 GPUs', mixed kinds joined; one GPU has none; no GPU: the CPU ranks' loopback."""
    if not gpus:
        return "CPU ranks on one host (Gloo over loopback)"
    if len(gpus) == 1:
        return "one GPU, no GPU-to-GPU link"
    kinds = sorted({v for g, row in topo.get("matrix", {}).items() if g.startswith("GPU")
                    for d, v in row.items() if d.startswith("GPU")}, key=_link_rank)
    if not kinds:
        return f"not read (no nvidia-smi topo -m) between {len(gpus)} GPUs"
    words = [f"NVLink ({k})" if k.startswith("NV") else f"{PCIE_WORDS.get(k, k)} ({k})" for k in kinds]
    return f"{' / '.join(words)} between {len(gpus)} GPUs"


def _link_rank(kind: str) -> tuple:
    if kind.startswith("NV"):
        return (0, -int(kind[2:]) if kind[2:].isdigit() else 0)
    order = list(PCIE_WORDS)
    return (1, order.index(kind) if kind in order else len(order))


def network_interfaces(net: Path = SYS_NET, ib: Path = SYS_IB) -> list[dict]:
    """Each network interface but the loopback: name, state, kind (ethernet, infiniband, virtual),
    driver, Ethernet speed in Mb/s (None where the kernel reports none: virtual or virtio NICs), and
    each InfiniBand port's rate as sysfs words it ('200 Gb/sec (4X HDR)')."""
    found = []
    for path in sorted(net.iterdir()) if net.is_dir() else []:
        if path.name == "lo":
            continue
        speed = _read(path / "speed")
        kind = {"1": "ethernet", "32": "infiniband"}.get(_read(path / "type"), "other")
        physical = (path / "device").exists()
        found.append({"name": path.name, "state": _read(path / "operstate"),
                      "kind": kind if physical else "virtual",
                      "driver": Path(os.path.realpath(path / "device" / "driver")).name if physical else "",
                      "speed_mbps": int(speed) if speed.lstrip("-").isdigit() and int(speed) > 0 else None})
    for port in sorted(ib.glob("*/ports/*")) if ib.is_dir() else []:
        found.append({"name": f"{port.parent.parent.name}/port{port.name}", "state": _read(port / "state"),
                      "kind": "infiniband", "driver": port.parent.parent.name, "speed_mbps": _ib_mbps(_read(port / "rate")),
                      "rate": _read(port / "rate")})
    return found


def _ib_mbps(rate: str) -> int | None:
    """'200 Gb/sec (4X HDR)' -> 200000."""
    m = re.match(r"([\d.]+)\s*Gb/sec", rate)
    return int(float(m.group(1)) * 1000) if m else None


def inter_node_link(nics: list[dict]) -> str:
    """The fastest link out of this host in words: an active InfiniBand port ('InfiniBand mlx5_0/port1,
    200 Gb/sec (4X HDR)'), else the fastest physical Ethernet NIC that is up ('Ethernet eth0, 25 Gb/s';
    its speed 'not reported' by a virtio NIC); '' when there is none."""
    ib = [n for n in nics if n["kind"] == "infiniband" and "ACTIVE" in n["state"].upper() and n.get("rate")]
    if ib:
        best = max(ib, key=lambda n: n["speed_mbps"] or 0)
        return f"InfiniBand {best['name']}, {best['rate']}"
    eth = [n for n in nics if n["kind"] == "ethernet" and n["state"] == "up"]
    if not eth:
        return ""
    best = max(eth, key=lambda n: n["speed_mbps"] or 0)
    speed = best["speed_mbps"]
    rate = "speed not reported" if speed is None else f"{speed / 1000:g} Gb/s" if speed >= 1000 else f"{speed} Mb/s"
    return f"Ethernet {best['name']} ({best['driver'] or 'no driver'}), {rate}"
