"""The links between hosts, and between the ranks of one host, from `hvdbench bench links`'s rows
(bench_links.csv): one line per pair with its latency and bandwidth, the pairs below the rest flagged,
and the host (or rank) common to every flagged pair named.

    pairs = pair_rows(rows)            # a LinkPairRow per run and pair, `slow` set
    verdicts(pairs)                    # ["every pair with node3 is slow (2 of 2): node3's link (eth0 ...)"]
    markdown(rows); write(rows, Path("report"))      # links.csv, links.png (a host x host matrix per run)

Both `bench links` (its printed table and plot, hvdbench.bench.links_report) and the report read
these rows through this module, so the rule is stated once.

A pair's latency is its smallest message's one-way time (half a ping-pong's round trip, the median
over repeats); its bandwidth is its largest message's bytes over that message's one-way time
(Intel MPI Benchmarks' PingPong definition; GB/s = 1e9 B/s, one direction at a time).

The rule: a pair is **slow** when its bandwidth is below SLOW_FRACTION (half) of the fastest pair of
its kind in the same run (pairs between hosts and pairs within a host are compared apart: NVLink and
a NIC differ by design). Against the fastest, not the median: with three hosts and one bad one, two
of the three pairs hold the bad host, so the median pair is a slow one and a rule around the median
(half of it, or median - k MAD) flags nothing. Half, because the faults this looks for cost a factor
of two or more (a NIC that negotiated 100 of 200 Gb/s or 1 of 10, a PCIe link at x8 of x16, a port
shaped to a tenth), while the pairs of one healthy fabric measured one at a time agree far closer
(on a busy 2-core machine, seven runs over loopback and emulated clusters of 3x1 and 2x2: every pair
at 0.68 of the fastest of its kind or better, 16 MiB messages). Latency is shown, never flagged: a small
message's time on a busy host moved 36 us to 1.6 ms between pairs of one machine in one run.

Naming: the endpoints (hosts for pairs between hosts, `host rank N` within one) common to every
slow pair of a kind. One endpoint common to them all and every pair holding it slow (two or more):
"every pair with node3 is slow: node3's link". Every pair within one host slow, the other hosts'
not: that host's links between its ranks (its GPUs' topology word). One slow pair whose two ends
have fast pairs elsewhere: the path between them (a cable, a switch port, a route), neither host.
With one pair of a kind there is nothing to compare (two hosts: the table shows the rate beside the
NIC's).

Evidence: a pair whose bytes came back wrong, that has no figure at the run's largest message (NaN,
negative, missing), measured 0 GB/s or more than any link carries (linkrate.ABSURD_RATE), or names a
rank paired with itself, is compared with nobody (never the fastest the others are held to, never
"fast"): the table marks it LEFT OUT and the verdicts say why, a line each; an end whose other pairs
were all left out is not told from the path ("node3's link, or the path between them").
"""

from __future__ import annotations

import statistics
import textwrap
from dataclasses import dataclass
from pathlib import Path

from hvdbench.linkrate import ABSURD_RATE
from hvdbench.output import human_bytes
from hvdbench.results.records.rows import ReportRow
from hvdbench.results.records.schema import LinkRow
from hvdbench.results.render.tables import markdown_table, pages, write_table

SLOW_FRACTION = 0.5
RULE = (f"slow: bandwidth below {SLOW_FRACTION:g} x the fastest pair of its kind (between hosts, within a host) in "
        "the run, whose faults (a NIC at half or a tenth of its rate, PCIe x8 of x16) cost 2x or more; latency is "
        "shown, not flagged")
RULE_SHORT = f"slow: below {SLOW_FRACTION:g} x the fastest pair of its kind"
DEFINITIONS = ("latency: the smallest message's one-way time (half a ping-pong round trip, median over repeats); "
               "bandwidth: the largest message's bytes / its one-way time, GB/s = 1e9 B/s (Intel MPI Benchmarks' "
               "PingPong); pairs measured one at a time, the other ranks idle")


def _by_run(rows: list[LinkRow]) -> dict[str, list[LinkRow]]:
    runs: dict[str, list[LinkRow]] = {}
    for r in sorted(rows, key=lambda r: (r.started_at, r.run_id)):
        runs.setdefault(r.run_id, []).append(r)
    return runs


@dataclass(frozen=True, kw_only=True)
class LinkPairRow(ReportRow):
    """links.csv: one row per run and pair; latency_us: the smallest message's one-way time;
    bandwidth_gb_s: the largest message's one-way bandwidth; vs_best: that over the fastest pair of its
    kind in the run; slow: below SLOW_FRACTION of the fastest."""

    run_id: str
    started_at: str  # when the bench run started (ISO 8601, UTC)
    layout: str
    kind: str  # between (two hosts) | within (two ranks of one host)
    host_a: str  # the pair's first end's host
    host_b: str  # the other end's host
    rank_a: int  # the first end's rank
    rank_b: int  # the other end's rank
    device_a: str  # the first end's device: cpu, or GPU <index> <name>
    device_b: str  # the other end's device
    backend: str  # gloo (CPU tensors) | nccl (GPU tensors)
    latency_bytes: int | None  # the smallest message timed, whose time is latency_us
    latency_us: float | None  # that message's one-way time: half a ping-pong round trip, the median over the repeats
    bandwidth_bytes: int | None  # the largest message timed, whose rate is bandwidth_gb_s
    bandwidth_gb_s: float | None  # that message's bytes / its one-way time / 1e9
    # bandwidth_gb_s / the fastest sound pair's of its kind in the run; empty for a pair left out (fault)
    vs_best: float | None
    slow: bool  # yes where vs_best < 0.5 (SLOW_FRACTION) and its kind has another pair to compare with
    nic_a: str  # between hosts: the interface the first end sent through, with its rate (the hardware record's)
    nic_b: str  # the other end's interface
    nic_gb_s: float | None  # the slower end's rated NIC rate; empty where a NIC reports none
    intra_link: str  # within a host: nvidia-smi topo -m's word for its two GPUs (NV18, PIX), or loopback
    wrong: int  # bytes that came back different from what was sent, over the pair's message sizes
    fault: str  # why its bandwidth is no evidence, left out of the comparison ('' when it is: pair_rows)


def _fault(first: LinkRow, sizes: list[LinkRow], large: LinkRow | None, largest: int) -> str:
    """Why a pair's bandwidth is no evidence ('' when it is): it is then compared with nobody, is never
    the fastest the others are held to, and its verdict line says why it was left out. `largest`: the
    largest message of its kind in the run (every pair of a run is timed at the same sizes)."""
    wrong = sum(x.wrong for x in sizes)
    bandwidth = large.bandwidth_gb_s if large else None
    if first.rank_a == first.rank_b:
        return f"rank {first.rank_a} paired with itself"
    if (first.kind == "between") == (first.host_a == first.host_b):
        return (f"a pair {first.kind} hosts with ends on " +
                (f"one host ({first.host_a})" if first.host_a == first.host_b else f"{first.host_a} and {first.host_b}"))
    if wrong:
        return f"{wrong:,} byte(s) came back wrong"
    if large is None or large.bytes < largest or bandwidth is None:
        return f"no bandwidth figure at the run's largest message ({human_bytes(largest)})"
    if bandwidth <= 0:
        return "0 GB/s: nothing measured"
    if bandwidth * 1e9 > ABSURD_RATE:
        return f"{bandwidth:g} GB/s, which no link carries (past {ABSURD_RATE / 1e9:g} GB/s)"
    return ""


def pair_rows(rows: list[LinkRow]) -> list[LinkPairRow]:
    """One row per run and pair, in the order measured, `slow` set by the rule (the module's): each
    kind against its own fastest pair at the run's largest message; a pair whose figure is no evidence
    (`_fault`: bytes that came back wrong, no figure at that size, 0 or past any link, a rank paired
    with itself) is compared with nobody and says why in `fault`."""
    out = []
    for run in _by_run(rows).values():
        pairs: dict[tuple, list[LinkRow]] = {}
        for r in run:
            pairs.setdefault((r.rank_a, r.rank_b), []).append(r)
        largest: dict[str, int] = {}  # kind -> the largest message timed in the run
        for r in run:
            if r.time_s is not None:
                largest[r.kind] = max(largest.get(r.kind, 0), r.bytes)
        ends = []  # (the pair's rows, its smallest and largest timed message, why it is no evidence)
        for sizes in pairs.values():
            timed = [r for r in sizes if r.time_s is not None]
            large = max(timed, key=lambda r: r.bytes, default=None)
            ends.append((sizes, min(timed, key=lambda r: r.bytes, default=None), large,
                         _fault(sizes[0], sizes, large, largest.get(sizes[0].kind, 0))))
        kinds: dict[str, list[float]] = {}  # kind -> its sound pairs' bandwidths
        for sizes, _, large, fault in ends:
            if not fault:
                kinds.setdefault(sizes[0].kind, []).append(large.bandwidth_gb_s)
        for sizes, small, large, fault in ends:
            r = sizes[0]
            compared = None if fault else kinds[r.kind]
            vs_best = large.bandwidth_gb_s / max(compared) if compared else None
            out.append(LinkPairRow(
                run_id=r.run_id, started_at=r.started_at, layout=r.layout, kind=r.kind, host_a=r.host_a,
                host_b=r.host_b, rank_a=r.rank_a, rank_b=r.rank_b, device_a=r.device_a, device_b=r.device_b,
                backend=r.backend, latency_bytes=small.bytes if small else None,
                latency_us=small.time_s * 1e6 if small else None, bandwidth_bytes=large.bytes if large else None,
                bandwidth_gb_s=large.bandwidth_gb_s if large else None, vs_best=vs_best,
                slow=bool(compared) and len(compared) > 1 and vs_best < SLOW_FRACTION,
                nic_a=r.nic_a, nic_b=r.nic_b, nic_gb_s=r.nic_gb_s, intra_link=r.intra_link,
                wrong=sum(x.wrong for x in sizes), fault=fault))
    return out


def _ends(p: LinkPairRow) -> tuple[str, str]:
    if p.kind == "between":
        return p.host_a, p.host_b
    return f"{p.host_a} rank {p.rank_a}", f"{p.host_b} rank {p.rank_b}"


def _nic_of(p: LinkPairRow, end: str) -> str:
    nic = p.nic_a if _ends(p)[0] == end else p.nic_b
    return f" ({nic})" if nic else ""


def _name(p: LinkPairRow) -> str:
    return f"{p.host_a}-{p.host_b}" if p.kind == "between" else f"ranks {p.rank_a}-{p.rank_b}"


def verdicts(pairs: list[LinkPairRow]) -> list[str]:
    """What the slow pairs of each run and kind have in common, one line each, over the pairs whose
    figure is evidence; then a line per pair left out and why (none: no slow pair, nothing left out)."""
    said = []
    groups: dict[tuple, list[LinkPairRow]] = {}
    for p in pairs:
        groups.setdefault((p.run_id, p.kind), []).append(p)
    for (_, kind), everything in groups.items():
        where = "between hosts" if kind == "between" else "within a host"
        group = [p for p in everything if not p.fault]
        left = [p for p in everything if p.fault]
        said += _slow_said(kind, where, group)
        if left and not any(p.slow for p in group):
            said.append(f"no slow pair {where} among the {len(group)} measured soundly")
        said += [f"{_name(p)} left out of the comparison {where}: {p.fault}" for p in left]
    return said


def _slow_said(kind: str, where: str, group: list[LinkPairRow]) -> list[str]:
    """verdicts' line for one run's sound pairs of a kind ([] with no slow pair)."""
    slow = [p for p in group if p.slow]
    if not slow:
        return []
    on = {p.host_a for p in slow}
    mine = [p for p in group if p.host_a in on]
    if kind == "within" and len(on) == 1 and len(mine) == len(slow) < len(group):
        host = on.pop()
        return [f"every pair within {host} is slow ({len(slow)} of {len(mine)}), the other hosts' are not: "
                f"{host}'s links between its ranks ({slow[0].intra_link or 'not read'})"]
    common = set(_ends(slow[0])).intersection(*(set(_ends(p)) for p in slow[1:]))
    names = ", ".join(_name(p) for p in slow)
    if len(common) == 1:
        end = common.pop()
        holding = [p for p in group if end in _ends(p)]
        if len(slow) == len(holding) >= 2:
            what = f"{end}'s link{_nic_of(slow[0], end)}" if kind == "between" else f"{end}'s link to the others"
            return [f"every pair with {end} is slow ({len(slow)} of {len(holding)} pairs {where}): {what}"]
        return [f"the slow pairs {where} ({names}) all include {end}, but {len(holding) - len(slow)} "
                f"pair(s) with {end} are not slow: not {end} alone"]
    if len(slow) == 1:
        a, b = _ends(slow[0])
        alone = [end for end in (a, b) if not any(end in _ends(p) and not p.slow for p in group)]
        if alone:  # an end with no fast pair measured soundly: its link cannot be told from the path
            return [f"only {a}-{b} is slow ({where}), and {' and '.join(alone)} has no other pair measured soundly: "
                    f"{' or '.join(alone)}'s link, or the path between them"]
        return [f"only {a}-{b} is slow ({where}), and both have fast pairs: the path between them "
                "(a cable, a switch port, a route), not either end"]
    return [f"{len(slow)} slow pairs {where} ({names}) share no end: look at what they cross "
            "(a switch, a route), not one host"]


def _cell(value, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


def _hardware(run: list[LinkRow], link: str = "") -> list[str]:
    """The devices and NICs a run measured, in words, a line each (its table's and plot's hardware):
    one NIC line where every host's reads the same, else one per host; then the inter-node link the
    sweep names (`sweep --link`, the emulated cluster's shaping: what a virtual NIC's rate is not)."""
    devices = ", ".join(dict.fromkeys(d for r in run for d in (r.device_a, r.device_b) if d))
    nics = dict.fromkeys((h, n) for r in run if r.kind == "between"
                         for h, n in ((r.host_a, r.nic_a), (r.host_b, r.nic_b)) if n)
    words = list(dict.fromkeys(n for _, n in nics))
    said = [f"NIC of every host: {words[0]}"] if len(words) == 1 else [f"NIC of {h}: {n}" for h, n in nics]
    between = any(r.kind == "between" for r in run)
    return [f"devices: {devices or 'not recorded'}", *said, *([f"inter-node link: {link}"] if link and between else [])]


def table_lines(pairs: list[LinkPairRow]) -> tuple[list[str], list[list]]:
    """The header and lines of the pairs' table (the report's Markdown and the bench's terminal table)."""
    header = ["pair", "ranks", "backend", "latency us", "bandwidth GB/s", "of fastest", "slow", "NICs / link"]
    lines = []
    for p in pairs:
        pair = f"{p.host_a} - {p.host_b}" if p.kind == "between" else f"{p.host_a} (within)"
        size = f" @ {human_bytes(p.bandwidth_bytes)}" if p.bandwidth_bytes else ""
        via = p.intra_link if p.kind != "between" else (
            f"{p.nic_a} at both ends" if p.nic_a == p.nic_b else f"{p.nic_a} -> {p.nic_b}")
        if p.kind == "between" and p.nic_gb_s and p.bandwidth_gb_s:
            via += f" ({100 * p.bandwidth_gb_s / p.nic_gb_s:.0f} % of the slower NIC's rate)"
        at = f" @ {human_bytes(p.latency_bytes)}" if p.latency_bytes else ""
        latency = _cell(p.latency_us, ".1f") + at
        lines.append([pair, f"{p.rank_a}-{p.rank_b}", p.backend, latency,
                      _cell(p.bandwidth_gb_s, ".3g") + size, _cell(p.vs_best, ".2f"),
                      "SLOW" if p.slow else "LEFT OUT" if p.fault else "",
                      via + (f"; {p.wrong} WRONG" if p.wrong else "")])
    return header, lines


def markdown(rows: list[LinkRow], link: str = "") -> str:
    """summary.md's links section: per run its hardware, the pairs' table, the rule and the verdicts;
    '' without rows (published logs carry no link measurement: nothing to show)."""
    if not rows:
        return ""
    parts = ["## Links between hosts and ranks (bench links)",
             "Each pair of hosts (their first ranks) and of a host's ranks, timed alone: the pairs in links.csv, "
             "the bandwidth matrix of each run in links.png, the slow pairs and what they share below each table."]
    for run_id, run in _by_run(rows).items():
        pairs = pair_rows(run)
        header, lines = table_lines(pairs)
        said = verdicts(pairs) or ["no slow pair"]
        parts += [f"### {run[0].layout}, {run[0].started_at} ({run_id})", " · ".join(_hardware(run, link)),
                  markdown_table(header, lines), "\n".join(f"- {text}" for text in said),
                  f"_{RULE}. {DEFINITIONS}._"]
    return "\n\n".join(parts) + "\n"  # a blank line before the next section


def _matrix(pairs: list[LinkPairRow]) -> tuple[list[str], list[list], list[list]]:
    """(labels, bandwidths, slow) of one run's matrix: hosts x hosts where it has several hosts (the
    diagonal: the median of the pairs within the host), ranks x ranks of its one host otherwise."""
    hosts = list(dict.fromkeys(h for p in pairs for h in (p.host_a, p.host_b)))
    if len(hosts) > 1:
        labels = hosts
        index = {h: i for i, h in enumerate(hosts)}
        key = {(p.rank_a, p.rank_b): (index[p.host_a], index[p.host_b]) for p in pairs}
    else:
        ranks = sorted({r for p in pairs for r in (p.rank_a, p.rank_b)})
        labels = [f"rank {r}" for r in ranks]
        index = {r: i for i, r in enumerate(ranks)}
        key = {(p.rank_a, p.rank_b): (index[p.rank_a], index[p.rank_b]) for p in pairs}
    cells: dict[tuple, list[LinkPairRow]] = {}
    for p in pairs:
        if p.bandwidth_gb_s is not None:
            cells.setdefault(key[(p.rank_a, p.rank_b)], []).append(p)
    n = len(labels)
    values = [[None] * n for _ in range(n)]
    slow = [[False] * n for _ in range(n)]
    for (i, j), ps in cells.items():
        for a, b in ((i, j), (j, i)):
            values[a][b] = statistics.median(p.bandwidth_gb_s for p in ps)
            slow[a][b] = any(p.slow for p in ps)
    return labels, values, slow


def figure(rows: list[LinkRow], link: str = ""):
    """One panel per run: the bandwidth matrix (GB/s, one direction), slow cells outlined in red,
    the hardware (devices, NICs) and hosts under the title."""
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend

    runs = list(_by_run(rows).values())

    def draw(chunk: list[list[LinkRow]]) -> Figure:
        fig = Figure(figsize=(5.5 * len(chunk), 6.5), layout="constrained")
        for k, run in enumerate(chunk):
            ax = fig.add_subplot(1, len(chunk), k + 1)
            pairs = pair_rows(run)
            labels, values, slow = _matrix(pairs)
            shown = [[float("nan") if v is None else v for v in line] for line in values]
            top = max((v for line in values for v in line if v is not None), default=1.0)
            # From 0: a cell's colour is its rate, so a pair at half reads as half, not as the scale's bottom.
            image = ax.imshow(shown, cmap="viridis", vmin=0, vmax=top)
            fig.colorbar(image, ax=ax, shrink=0.7, label="bandwidth GB/s (one way, largest message)")
            ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=8)
            ax.set_yticks(range(len(labels)), labels, fontsize=8)
            for i, line in enumerate(values):
                for j, v in enumerate(line):
                    if v is not None:
                        ax.text(j, i, f"{v:.3g}" + ("\nSLOW" if slow[i][j] else ""), ha="center", va="center",
                                fontsize=8, color="red" if slow[i][j] else "black" if v > 0.6 * top else "white",
                                fontweight="bold" if slow[i][j] else "normal")
            hosts = list(dict.fromkeys(h for p in pairs for h in (p.host_a, p.host_b)))
            below = "\n".join([*_hardware(run, link), f"hosts: {', '.join(hosts)}",
                                f"run {run[0].run_id} ({run[0].backend or 'no backend'})"])
            said = verdicts(pairs) or ["no slow pair"]
            ax.set_xlabel("\n".join(textwrap.fill(text, 70) for text in said) + f"\n({RULE_SHORT})", fontsize=7)
            ax.set_title(f"bench links, {run[0].layout}: bandwidth between "
                         f"{'hosts (diagonal: within each)' if len(hosts) > 1 else 'ranks'}\n{below}", fontsize=8)
        return fig

    return pages("links", runs, draw, per=3)


def write(rows: list[LinkRow], out: Path, formats=("csv", "png"), link: str = "") -> list[Path]:
    """links.csv (one row per run and pair) and links.png (a matrix per run); nothing without rows."""
    if not rows:
        return []
    return write_table(out, "links", pair_rows(rows), LinkPairRow.columns(), formats, lambda: figure(rows, link))
