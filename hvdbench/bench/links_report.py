"""`hvdbench bench links`, framework-neutral part: which pairs it measures, the loop over them, its
rows, the NICs named from the hardware record, the terminal table and the CSV and matrix plot. Its
CSV row, `LinkRow`, is declared in `hvdbench.results.records.schema`; the per-pair summary, the rule
that flags a slow pair and the naming of the host they share are hvdbench.results.analyses.links
(the report reads the same rows through it).

    horovodrun -np 3 -H node1:1,node2:1,node3:1 hvdbench bench links --out results/links

The worker (`hvdbench.frameworks.torch.bench_links`) supplies a *timer*,
`timer(a, b, nbytes, trips) -> (one-way seconds of each repeat, wrong elements, round trips each
repeat timed)` (called on every rank; ranks a and b ping-pong, the others return at once; `trips`,
a `RoundTrips`, and `round_trips` are how it sizes them), a barrier over all ranks and a gather;
`measure` does the rest.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from hvdbench.bench import formulas as F
from hvdbench.bench.rows import render, run_identity
from hvdbench.errors import ConfigError, HvdbenchError
from hvdbench.output import human_bytes
from hvdbench.results.analyses import links as L
from hvdbench.results.records.schema import LinkRow
from hvdbench.results.records.store import LINKS_CSV, SWEEP_RECORD, append_or_rescue, sweep_link

CSV_NAME = LINKS_CSV
MAX_SIZE = 4 << 30  # a single message past 4 GiB is no link test; and Gloo's sizes are 32-bit on some builds



@dataclass(frozen=True)
class RoundTrips:
    """How each pair is timed at each size: `repeats` repeats of up to `iters` round trips (as many as
    fit `budget_s` over the repeats: `round_trips`) after up to `warmup_iters` untimed.
    `hvdbench bench links --iters 20 --warmup-iters 3 --repeats 5 --budget-s 1`."""

    iters: int
    warmup_iters: int
    repeats: int
    budget_s: float


Timer = Callable[[int, int, int, RoundTrips], tuple[list[float], int, int]]


def check_sizes(sizes: list[int]) -> list[int]:
    """The message sizes, smallest first: the smallest gives the latency, the largest the bandwidth."""
    if not sizes:
        raise ConfigError("--sizes: give at least one message size, e.g. 8,1M,16M")
    bad = [s for s in sizes if not 1 <= s <= MAX_SIZE]
    if bad:
        raise ConfigError(f"--sizes {bad[0]}: a message is 1 byte to {human_bytes(MAX_SIZE)}")
    return sorted(set(sizes))


def plan_pairs(hosts: list[str]) -> list[tuple[int, int, str]]:
    """(rank a, rank b, kind) of every pair measured, given each rank's host (in rank order): between
    every two hosts their first ranks ("between"), then every two ranks of a host with several
    ("within"). A host's first rank stands for its NIC: the ranks of a host share it (a rail per GPU
    is not told apart)."""
    first: dict[str, int] = {}
    for rank, host in enumerate(hosts):
        first.setdefault(host, rank)
    heads = list(first.values())
    pairs = [(a, b, "between") for i, a in enumerate(heads) for b in heads[i + 1:]]
    for host in first:
        ranks = [r for r, h in enumerate(hosts) if h == host]
        pairs += [(a, b, "within") for i, a in enumerate(ranks) for b in ranks[i + 1:]]
    return pairs


def round_trips(seconds: float, iters: int, repeats: int, budget_s: float) -> int:
    """Timed round trips per repeat, from one round trip's `seconds`: as many as fit `budget_s` over
    the repeats, at least 1, at most `iters`."""
    return max(1, min(iters, int(budget_s / repeats / seconds) if seconds > 0 else iters))


def measure(base: LinkRow, pairs: list[tuple[int, int, str]], sizes: list[int], timer: Timer, barrier, gather,
            rank: int, trips: RoundTrips) -> list[LinkRow]:
    """Every pair at every size, one pair at a time (a barrier between: the other ranks idle). Each
    rank keeps what it timed; one gather at the end brings rank a's figures of each pair to every
    rank (no collective inside a timed loop). Rows with the figures only; the ends' hosts, devices and
    NICs are the caller's (`describe`)."""
    mine = {}
    for a, b, _ in pairs:
        for nbytes in sizes:
            barrier()
            times, wrong, timed = timer(a, b, nbytes, trips)
            if rank == a:
                mine[(a, b, nbytes)] = (times, timed, wrong)
            elif rank == b:
                mine[(a, b, nbytes, "wrong")] = wrong
    barrier()
    found = {}
    for part in gather(mine):
        found.update(part)
    rows = []
    for a, b, kind in pairs:
        for nbytes in sizes:
            times, timed, wrong_a = found[(a, b, nbytes)]
            t = statistics.median(times)
            rows.append(replace(base, kind=kind, rank_a=a, rank_b=b, bytes=nbytes, iters=timed, repeats=len(times),
                                time_s=t, time_min_s=min(times), time_max_s=max(times),
                                bandwidth_gb_s=nbytes / t / F.GB if t > 0 else None,
                                wrong=wrong_a + found.get((a, b, nbytes, "wrong"), 0)))
    return rows


def nic_words(record: dict, name: str) -> tuple[str, float | None]:
    """('eth0 (virtio_net), 10 Gb/s', 1.25) for interface `name` of a host's hardware record
    (hvdbench.hardware: its "nics"), the rate in GB/s (None where the NIC reports none); an InfiniBand
    port is named by the record's words for it."""
    for nic in record.get("nics") or []:
        if nic.get("name") == name:
            mbps = nic.get("speed_mbps")
            rate = nic.get("rate") or ("speed not reported" if not mbps else
                                       f"{mbps / 1000:g} Gb/s" if mbps >= 1000 else f"{mbps} Mb/s")
            kind = nic.get("driver") or nic.get("kind") or ""
            return f"{name} ({kind}), {rate}" if kind else f"{name}, {rate}", (mbps / 8000 if mbps else None)
    return (f"{name} (not in the hardware record)" if name else ""), None


def describe(rows: list[LinkRow], ends: list[dict]) -> list[LinkRow]:
    """Each row with its ends' hosts, devices, backend and path: `ends[rank]` is what that rank said of
    itself ({host, device, backend, nic, nic_gb_s, gpu}) and its host's GPU-to-GPU matrix ("topo")."""
    out = []
    for r in rows:
        a, b = ends[r.rank_a], ends[r.rank_b]
        rates = [x for x in (a["nic_gb_s"], b["nic_gb_s"]) if x]
        between = r.kind == "between"
        intra = "" if between else _within_link(a, b)
        out.append(replace(r, host_a=a["host"], host_b=b["host"], device_a=a["device"], device_b=b["device"],
                           backend=a["backend"], nic_a=a["nic"] if between else "", nic_b=b["nic"] if between else "",
                           nic_gb_s=min(rates) if between and len(rates) == 2 else None, intra_link=intra))
    return out


def _within_link(a: dict, b: dict) -> str:
    """`nvidia-smi topo -m`'s word for two GPUs of one host (NV18, PIX, SYS, ...), 'loopback' for CPU ranks."""
    if a["gpu"] is None or b["gpu"] is None:
        return "loopback (CPU ranks)"
    word = (a.get("topo") or {}).get(f"GPU{a['gpu']}", {}).get(f"GPU{b['gpu']}", "")
    return word or "not read (no nvidia-smi topo -m)"


def new_run(layout: dict) -> LinkRow:
    run_id, started_at = run_identity()
    return LinkRow(run_id=run_id, started_at=started_at, **layout)


def line(a: int, b: int, rows: list[LinkRow]) -> str:
    """One pair's figures, as the run prints them."""
    return f"ranks {a}-{b}: " + ", ".join(
        f"{human_bytes(r.bytes)} {r.time_s * 1e6:,.1f} us {r.bandwidth_gb_s:.3g} GB/s"
        for r in rows if r.rank_a == a and r.rank_b == b and r.time_s)


def table(rows: list[LinkRow]):
    """A rich Table of the pairs (analyses.links' lines), the rule and definitions under it."""
    from rich.box import ASCII2  # ASCII: mpirun's output forwarding may split a line mid-character
    from rich.table import Table

    pairs = L.pair_rows(rows)
    header, lines = L.table_lines(pairs)
    r = rows[0]
    t = Table(title=f"links: {r.world_size} ranks ({r.layout}), {len(pairs)} pairs, one at a time",
              caption=f"{L.RULE}. {L.DEFINITIONS}.", caption_justify="left", box=ASCII2)
    for name in header:
        t.add_column(name, justify="right" if name in ("latency us", "bandwidth GB/s", "of fastest") else "left")
    for cells in lines:
        t.add_row(*map(str, cells))
    return t


def report_lines(rows: list[LinkRow]) -> list[str]:
    """The table, then what the slow pairs share (or that none is slow), as printed lines."""
    said = L.verdicts(L.pair_rows(rows)) or ["no slow pair"]
    return [*render(table(rows)).splitlines(), *said]


def write_outputs(rows: list[LinkRow], out) -> list[Path]:
    """Append to OUT/bench_links.csv (saved elsewhere, and said where, if it cannot be written) and draw
    OUT/bench_links_<layout>.png (the bandwidth matrix, naming the inter-node link OUT/sweep.json
    records, when OUT is a sweep's folder)."""
    from hvdbench.files import atomic_write_png

    out = Path(out)
    written = [append_or_rescue(out / CSV_NAME, rows)]
    try:
        link = sweep_link(out / SWEEP_RECORD)
    except HvdbenchError:  # a damaged sweep.json is the sweep's to report, not the bench's
        link = ""
    figs = L.figure(rows, link)
    written.append(atomic_write_png(figs[0], out / f"bench_links_{rows[0].layout}.png"))
    return written
