"""`hvdbench bench links`'s measuring half: point-to-point ping-pong between every two hosts and every
two ranks of one host, over torch.distributed's send/recv (Gloo on CPU tensors, NCCL on GPU tensors).

    horovodrun -np 3 -H node1:1,node2:1,node3:1 hvdbench bench links --out results/links
    mpirun -np 4 -H node1:2,node2:2 hvdbench bench links --sizes 8,1M,64M --out results/links
    torchrun --standalone --nproc-per-node 8 -m hvdbench bench links --out results/h100

The ranks meet over torch.distributed (process_group.TorchDist: any launcher; under horovodrun and
mpirun the rendezvous is agreed through Horovod, as for `bench compute` and `--engine ddp`). One
pair at a time, the others waiting at a barrier: rank a sends a message, rank b sends it back; the
one-way time is half the round trip. Before timing each size, both ends check the bytes of a first
round trip (`wrong`), and a second, timed, sizes the rest to --budget-s (at 16 MiB a link shaped to
100 Mbit/s gets one round trip a repeat). Then
rank 0 gathers every rank's figures once, prints the table (the slow pairs flagged, the host they
share named: hvdbench.results.analyses.links), appends OUT/bench_links.csv and draws the matrix.

Which NIC a pair used (`sending_interface`): Gloo binds the address its host name resolves to
(GLOO_SOCKET_IFNAME overrides it), so the interface holding that address; NCCL takes an active
InfiniBand port where there is one (NCCL_IB_DISABLE=1 turns that off) and NCCL_SOCKET_IFNAME where
set, else the same interface is named (NCCL's own choice may differ: set NCCL_SOCKET_IFNAME to be
sure). Its rate is the host's hardware record's (hvdbench.hardware), read once per host.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass

import psutil
import torch
import torch.distributed as tdist

from hvdbench import hardware
from hvdbench.bench import defaults as D
from hvdbench.bench import links_report as LR
from hvdbench.frameworks.torch.bench_allreduce import end_rank, layout_columns
from hvdbench.frameworks.torch.process_group import TorchDist
from hvdbench.launchers.launch_info import launcher_rank


@dataclass
class LinksOptions:
    out: str
    sizes: list[int]
    iters: int = D.LINK_ITERS
    warmup_iters: int = D.LINK_WARMUP_ITERS
    repeats: int = D.LINK_REPEATS
    budget_s: float = D.LINK_BUDGET_S


def sending_interface(backend: str, record: dict, env=os.environ) -> str:
    """The interface this host's ranks send through to other hosts (see the module's doc)."""
    if backend == "nccl":
        ib = [n for n in record.get("nics") or [] if n.get("kind") == "infiniband" and
              "ACTIVE" in str(n.get("state", "")).upper()]
        if ib and env.get("NCCL_IB_DISABLE") != "1":
            return max(ib, key=lambda n: n.get("speed_mbps") or 0)["name"]
    named = _named_interface(env.get("NCCL_SOCKET_IFNAME" if backend == "nccl" else "GLOO_SOCKET_IFNAME", ""))
    if named:
        return named
    try:
        address = socket.gethostbyname(socket.gethostname())
    except OSError:
        return ""
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == address for a in addresses):
            return name
    return "lo" if address.startswith("127.") else ""


def _named_interface(value: str) -> str:
    """The first interface of a GLOO_/NCCL_SOCKET_IFNAME list ('=eth0' exact, as NCCL spells it); ''
    for none or NCCL's '^' (the interfaces it must not use: which one it picks is not said)."""
    first = value.split(",")[0].strip()
    return "" if first.startswith("^") else first.lstrip("=")


def _gpu_index(device: torch.device, record: dict) -> int | None:
    """The rank's GPU as `nvidia-smi` numbers it (the topology matrix's GPUn): matched by PCI bus id,
    else the CUDA ordinal; None on CPUs."""
    if device.type != "cuda":
        return None
    props = torch.cuda.get_device_properties(device)
    bus = getattr(props, "pci_bus_id", None)
    for gpu in record.get("gpus") or []:
        parts = str(gpu.get("pci_bus_id", "")).split(":")
        if bus is not None and len(parts) == 3 and parts[1] and int(parts[1], 16) == bus:
            return gpu["index"]
    return device.index


def _timer(dist: TorchDist):
    """The ping-pong: ranks a and b exchange one message of `nbytes` and back (each end checks what
    it got), then one round trip that rank a times to size the rest (links_report.round_trips: up to `iters` a repeat, the
    repeats within `budget_s`; a tells b how many), `warmup_iters` more untimed, then `repeats` times
    that many round trips timed on rank a (on a GPU between device synchronisations); every other rank
    returns at once."""
    def timer(a: int, b: int, nbytes: int, trips: LR.RoundTrips) -> tuple[list[float], int, int]:
        if dist.rank not in (a, b):
            return [], 0, 0
        peer = b if dist.rank == a else a
        buf = torch.empty(nbytes, dtype=torch.uint8, device=dist.device)

        def round_trip() -> None:
            if dist.rank == a:
                tdist.send(buf, peer)
                tdist.recv(buf, peer)
            else:
                tdist.recv(buf, peer)
                tdist.send(buf, peer)

        # The first round trip checks the bytes at both ends, and sets up what a first message to a peer
        # sets up (NCCL's communicator for the pair, Gloo's buffers): the next, timed, sizes the rest.
        mark = a % 251 + 1
        buf.fill_(mark)
        round_trip()
        wrong = int((buf != mark).sum())
        _sync(dist.device)
        start = time.perf_counter()
        round_trip()
        _sync(dist.device)
        plan = torch.tensor([LR.round_trips(time.perf_counter() - start, trips.iters, trips.repeats, trips.budget_s),
                             0], device=dist.device)
        if dist.rank == a:
            tdist.send(plan, peer)
        else:
            tdist.recv(plan, peer)
        timed = int(plan[0])
        for _ in range(min(trips.warmup_iters, timed)):
            round_trip()
        times = []
        for _ in range(trips.repeats):
            _sync(dist.device)
            start = time.perf_counter()
            for _ in range(timed):
                round_trip()
            _sync(dist.device)
            times.append((time.perf_counter() - start) / timed / 2)
        return times, wrong, timed

    return timer


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _about_me(dist: TorchDist) -> dict:
    """What this rank says of itself for the rows; its host's hardware record and sending interface
    from the host's first local rank only (one nvidia-smi per host)."""
    head = dist.local_rank == 0
    record = hardware.host_record() if head else {}
    gpu = _gpu_index(dist.device, record)  # the other local ranks: their CUDA ordinal
    return {"host": dist.hostname, "backend": dist.controller, "gpu": gpu, "record": record if head else None,
            "interface": sending_interface(dist.controller, record) if head else "",
            "device": "cpu" if gpu is None else f"GPU {gpu} {dist.device_name}"}


def _ends(about: list[dict]) -> list[dict]:
    """Per rank: host, device, backend, its host's NIC in words and rate, its GPU and the host's topology."""
    hosts = {a["host"]: a for a in about if a["record"] is not None}
    ends = []
    for a in about:
        head = hosts.get(a["host"], {})
        record = head.get("record") or {}
        nic, gb_s = LR.nic_words(record, head.get("interface", ""))
        cpu = (record.get("cpu") or {}).get("model")
        device = f"CPU {cpu}" if a["device"] == "cpu" and cpu else a["device"]  # a CPU rank's device is its CPU
        ends.append({"host": a["host"], "device": device, "backend": a["backend"], "gpu": a["gpu"],
                     "nic": nic, "nic_gb_s": gb_s, "topo": (record.get("gpu_topology") or {}).get("matrix")})
    return ends


def main(opts: LinksOptions, say=print) -> None:
    """Every rank runs it; rank 0 prints and writes. A failure prints one line and ends this rank at
    once (as `bench allreduce` does), so the launcher tears the job down."""
    try:
        _run(opts, say)
    except BaseException as e:  # noqa: BLE001 - any failure ends this rank loudly
        end_rank(e, launcher_rank())


def _run(opts: LinksOptions, say) -> None:
    sizes = LR.check_sizes(opts.sizes)
    dist = TorchDist()
    try:
        about = dist.allgather_object(_about_me(dist))
        pairs = LR.plan_pairs([a["host"] for a in about])
        hosts = list(dict.fromkeys(a["host"] for a in about))
        base = LR.new_run(layout_columns(dist.size, len(hosts), dist.local_size, hosts, dist.controller))
        base.run_id, base.started_at = dist.allgather_object((base.run_id, base.started_at))[0]  # rank 0's
        if dist.rank == 0:
            say(f"[hvdbench] links over {dist.size} ranks ({base.layout}, {dist.controller}, hosts "
                f"{base.hosts}): {len(pairs)} pairs x {len(sizes)} sizes, one pair at a time")
        start = time.perf_counter()
        trips = LR.RoundTrips(opts.iters, opts.warmup_iters, opts.repeats, opts.budget_s)
        rows = LR.measure(base, pairs, sizes, _timer(dist), dist.sync, dist.allgather_object, dist.rank, trips)
        took = time.perf_counter() - start
        written = []
        if dist.rank == 0:
            say(f"[hvdbench] {len(pairs)} pair{'s' if len(pairs) != 1 else ''} measured in {took:.1f} s")
            rows = LR.describe(rows, _ends(about))
            for a, b, _ in pairs:
                say(LR.line(a, b, rows))
            for text in LR.report_lines(rows):
                say(text.rstrip())
            written = LR.write_outputs(rows, opts.out)
        dist.sync()
    finally:
        dist.shutdown()
    for path in written:
        say(f"wrote {path}")
