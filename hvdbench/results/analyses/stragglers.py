"""Which rank or host held the others back: each multi-rank layout's per-rank and per-host compute,
from its runs' RUN/ranks.csv (every rank's own forward and backward per step, without waiting for
the others; hvdbench.train.loop gathers them once after the timed window).

    found = stragglers(runs)                    # per-rank and per-host rows, the hosts named across layouts
    write(found, Path("report"))                # stragglers.csv, stragglers_hosts.csv, stragglers.png
    markdown(found)

A rank's `vs_others` is its compute over the median of the other ranks' in the same run (a host's:
the median of its ranks' over the other hosts' ranks'), the mean over the layout's runs. It is named a
straggler when it was slower than the others in every run by more than the spread across the repeats
(the threshold: 2σ of the layout's median rank's compute over their mean, how much the same layout's
compute moved from run to run, which a straggler must stand out of), and never by less than FLOOR
(with one run there is no spread: FLOOR alone). In every run, not on average: on a busy machine two
ranks take turns being slow, and a mean of 3x and 0.4x is no straggler. Compared with one other only
(two ranks, or two hosts), which of the two is off cannot be told, so its mean lead must also stand
out of its own 2σ across the runs by FLOOR (mean - 2σ of its ratio > 1 + FLOOR): two ranks sharing a
busy machine's cores settle into one being slow for a whole run, the same one in two runs as often as
not (an even 2x1 of issue 47's rehearsal: one rank 1.9x, then 3.0x the other, 2.5 ± 1.6). With two
others or more their median is the reference, and a lead in every run names it however much it
moved: a node under a fifth of its CPU share led its two peers 13.4x, then 5.5x (9.4 ± 11.2), and
the swing had kept it unnamed.
A host slow in some layouts but not in others where it ran beside other hosts is named in none (a
note says so: a slow host is slow wherever it runs); a host named in every layout it ran in is named
once, above the tables.

What a verdict was not judged on is said in its line: a rank with no compute figure in any run (a row,
its figures empty), the runs of the layout whose ranks.csv was left out (report.load warns naming the
file: records.ranks.check_ranks). A rank is a row per host it ran on (a launcher may place it elsewhere
from run to run).

Published MLPerf logs carry no per-rank times: their layouts are counted, never guessed at. Under
fsdp a rank's compute holds the parameter all-gathers of its forward and backward, where a fast rank
waits for a slow one: a straggler's delay shows on every rank, so fsdp layouts (an engine whose
descriptor says Engine.compute_waits_for_peers) get their table and no straggler named.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from hvdbench.contracts.engines import waits_for_peers
from hvdbench.results.records.rows import SCALING_GROUP, ReportRow, ScalingGroup
from hvdbench.results.render.tables import markdown_table, pages, write_table
from hvdbench.results.stats.aggregate import Where, scaling_key, stats

# The least excess over the others' median that names a straggler: below it, two ranks of one machine
# differ by scheduling and clocks alone (with one run there is no spread to measure it by).
FLOOR = 0.05


@dataclass(frozen=True, kw_only=True)
class StragglerRow(ScalingGroup, ReportRow):
    """stragglers.csv: one row per group, layout and rank: its compute etc. as means over the layout's
    runs, ms per step; vs_others: its compute over the median of the other ranks', the mean over runs,
    and that ratio's 2σ across them; threshold: the excess over 1 beyond which it is named, a fraction
    (the layout's spread across repeats, at least FLOOR)."""

    layout: str
    rank: int
    host: str
    local_rank: int
    device: str
    gpu_index: int | None
    gpu_uuid: str  # NVML's UUID of the rank's GPU (empty on CPUs)
    runs: int
    step_ms: float | None
    compute_ms: float | None
    data_ms: float | None
    comm_ms: float | None
    vs_others: float | None  # its compute over the median of the other ranks' in the same run, the mean over the runs
    vs_others_2sigma: float | None  # 2σ of that ratio across the runs (empty with one run)
    threshold: float
    # yes where named: slower than the others by more than threshold in every run and out of its own 2σ (never
    # under an engine whose compute waits for its peers: fsdp)
    straggler: bool
    partial: bool  # a run of the layout has per-rank times of only some ranks


@dataclass(frozen=True, kw_only=True)
class StragglerHostRow(ScalingGroup, ReportRow):
    """stragglers_hosts.csv: one row per group, layout and host: its ranks' median compute over the
    other hosts' ranks'."""

    layout: str
    host: str
    ranks: int  # the host's ranks in the layout's runs
    runs: int
    compute_ms: float  # its ranks' mean compute (forward and backward) per step over the runs
    vs_others: float | None  # its ranks' median compute over the other hosts' ranks' median, the mean over the runs
    vs_others_2sigma: float | None  # 2σ of that ratio across the runs (empty with one run)
    threshold: float
    straggler: bool  # yes where named by the ranks' rule; a host slow in only some of its layouts is named in none


@dataclass
class Stragglers:
    ranks: list[StragglerRow] = field(default_factory=list)
    hosts: list[StragglerHostRow] = field(default_factory=list)
    named: list[str] = field(default_factory=list)  # hosts slow in every layout they ran in, one line each
    notes: list[str] = field(default_factory=list)
    # (group, layout) -> its successful runs without per-rank times (left out: a warning named the file),
    # beside runs with them; the layout's verdict says it was judged on the rest
    left_out: dict[tuple, int] = field(default_factory=dict)
    context: dict[tuple, Where] = field(default_factory=dict)  # (group, layout) -> where its plot's runs ran


def _others_ratio(mine: float, others: list[float]) -> float | None:
    median = statistics.median(others) if others else None
    return mine / median if median else None


def _spread(runs) -> float:
    """2σ across the runs of each run's median rank compute, over their mean (0 for one run)."""
    s = stats(statistics.median(x.compute_s for x in r.ranks if x.compute_s is not None) for r in runs
              if any(x.compute_s is not None for x in r.ranks))
    return (s.two_sigma or 0.0) / s.mean if s.mean else 0.0


@dataclass(frozen=True)
class _Verdict:
    """One rank's or host's ratios over a layout's runs, judged (_judge)."""

    mean: float | None  # its ratio to the others, the mean over the runs
    two_sigma: float | None  # that ratio's 2σ across the runs
    threshold: float
    named: bool


def _judge(ratios: list[float], engine: str, spread: float, peers: int) -> _Verdict:
    """One rank's or host's ratios judged; `spread`: the layout's (_spread); `peers`: the fewest others
    (ranks, or hosts for a host) it was compared with in a run. With one other, which of the two is
    off cannot be told from their ratio, so its lead must also hold steady across the runs
    (`stands_out`); with two or more, their median is the reference, and leading it by more than the
    threshold in every run names it however much the lead moved (a node under a CPU quota led its
    two peers 13.4x, then 5.5x)."""
    s = stats(ratios)
    threshold = max(FLOOR, spread)
    if s.mean is None:
        return _Verdict(None, None, threshold, False)
    stands_out = peers >= 2 or s.mean - (s.two_sigma or 0.0) - 1.0 > FLOOR
    return _Verdict(s.mean, s.two_sigma, threshold,
                    min(ratios) - 1.0 > threshold and stands_out and not waits_for_peers(engine))


@dataclass(frozen=True)
class _Host:
    """One host of a layout: its ranks' compute over the other hosts' ranks', judged."""

    host: str
    ranks: int
    runs: int
    compute_ms: float
    verdict: _Verdict


def _hosts(group: ScalingGroup, runs: list) -> list[_Host]:
    """Each host of a layout's runs that ran beside another host, judged."""
    spread = _spread(runs)
    host_ratios: dict[str, list[float]] = {}
    host_compute: dict[str, list[float]] = {}
    host_ranks: dict[str, set] = {}
    host_peers: dict[str, int] = {}
    for r in runs:
        timed = [x for x in r.ranks if x.compute_s is not None]
        hosts = {x.host for x in timed}
        if len(hosts) < 2:
            continue
        for h in hosts:
            host_peers[h] = min(host_peers.get(h, len(hosts) - 1), len(hosts) - 1)
            mine = [x.compute_s for x in timed if x.host == h]
            ratio = _others_ratio(statistics.median(mine), [x.compute_s for x in timed if x.host != h])
            if ratio is not None:
                host_ratios.setdefault(h, []).append(ratio)
            host_compute.setdefault(h, []).extend(mine)
            host_ranks.setdefault(h, set()).update(x.rank for x in timed if x.host == h)
    return [_Host(h, len(host_ranks[h]), len(ratios), 1e3 * statistics.fmean(host_compute[h]),
                  _judge(ratios, group.engine, spread, host_peers[h])) for h, ratios in sorted(host_ratios.items())]


def _rank_rows(group: ScalingGroup, layout: str, runs: list, unnamed: set[str]) -> list[StragglerRow]:
    """Each rank of a layout's runs, a row per host it ran on (a launcher may place a rank on another
    host from run to run: two hosts' times are not averaged); a rank on a host in `unnamed` is named no
    straggler. A rank with no compute figure in any run keeps its row, its figures empty."""
    spread = _spread(runs)
    by_rank: dict[tuple[int, str], list] = {}
    peers: dict[tuple[int, str], int] = {}
    for r in runs:
        timed = [x for x in r.ranks if x.compute_s is not None]
        for x in r.ranks:
            ratio = (_others_ratio(x.compute_s, [y.compute_s for y in timed if y is not x])
                     if x.compute_s is not None else None)
            by_rank.setdefault((x.rank, x.host), []).append((r, x, ratio))
            if ratio is not None:
                peers[(x.rank, x.host)] = min(peers.get((x.rank, x.host), len(timed) - 1), len(timed) - 1)
    rows = []
    for (rank, host), seen in sorted(by_rank.items()):
        last = seen[-1][1]
        verdict = _judge([ratio for _, _, ratio in seen if ratio is not None], group.engine, spread,
                         peers.get((rank, host), 0))

        def ms(name, seen=seen):
            values = [getattr(x, name) for _, x, _ in seen if getattr(x, name) is not None]
            return 1e3 * statistics.fmean(values) if values else None
        rows.append(StragglerRow(
            **vars(group), layout=layout, rank=rank, host=host, local_rank=last.local_rank, device=last.device,
            gpu_index=last.gpu_index, gpu_uuid=last.gpu_uuid, runs=len(seen), step_ms=ms("step_s"),
            compute_ms=ms("compute_s"), data_ms=ms("data_s"), comm_ms=ms("comm_s"), vs_others=verdict.mean,
            vs_others_2sigma=verdict.two_sigma, threshold=verdict.threshold,
            straggler=verdict.named and host not in unnamed,
            partial=any(len(r.ranks) < (r.world_size or 0) for r, _, _ in seen)))
    return rows


def stragglers(runs) -> Stragglers:
    """Every multi-rank layout's per-rank and per-host rows (successful throughput runs with per-rank
    times), the hosts slow in every layout they ran in, and what had no per-rank times."""
    found = Stragglers()
    layouts: dict[tuple, list] = {}
    without, published, partial = {}, set(), 0
    for r in runs:
        if (r.world_size or 0) < 2 or r.status != "success":
            continue
        where = (scaling_key(r), r.layout)
        if r.result:  # a published log's run (mllog.record.MllogRun)
            published.add(where)
        elif not r.ranks:
            without[where] = without.get(where, 0) + 1
        else:
            layouts.setdefault(where, []).append(r)
            partial += len(r.ranks) < r.world_size
    hosts = {(key, layout): _hosts(ScalingGroup(*key), mine) for (key, layout), mine in layouts.items()}
    unnamed, found.notes = _slow_in_some_layouts_only(hosts)
    for (key, layout), mine in layouts.items():
        group, off = ScalingGroup(*key), unnamed.get((key, layout), set())
        found.ranks += _rank_rows(group, layout, mine, off)
        found.hosts += [StragglerHostRow(**vars(group), layout=layout, host=h.host, ranks=h.ranks, runs=h.runs,
                                         compute_ms=h.compute_ms, vs_others=h.verdict.mean,
                                         vs_others_2sigma=h.verdict.two_sigma, threshold=h.verdict.threshold,
                                         straggler=h.verdict.named and h.host not in off)
                        for h in hosts[(key, layout)]]
        first = mine[0]
        found.context[(key, layout)] = Where(
            system=key[0], runs=len(mine), nodes=first.nodes, link=first.link, intra_link=first.intra_link,
            hosts=";".join(dict.fromkeys(x.host for r in mine for x in r.ranks)))
    found.named = _named_across(found.hosts, layouts)
    found.left_out = {where: n for where, n in without.items() if where in layouts}
    without = set(without) - set(layouts)
    if without:
        found.notes.append(f"{len(without)} multi-rank layout(s) have no per-rank times (time-to-accuracy or "
                           "TensorFlow runs, --no-breakdown, or runs recorded before per-rank times): no straggler "
                           "is named there")
    if published:
        found.notes.append(f"{len(published)} multi-rank layout(s) come from published MLPerf logs, which carry no "
                           "per-rank times: whether a rank or host held them back cannot be said from them")
    entangled = sorted({key[SCALING_GROUP.index("engine")] for key, _ in layouts
                        if waits_for_peers(key[SCALING_GROUP.index("engine")])})
    if entangled:
        found.notes.append(f"under {' and '.join(entangled)} each rank's compute includes waits for the other ranks "
                           "(fsdp's parameter all-gathers of its forward and backward), where a fast rank waits for a "
                           "slow one: its table is shown, and no straggler named from it")
    if partial:
        found.notes.append(f"{partial} run(s) have per-rank times of only some ranks (a partial ranks.csv): "
                           "their rows are marked partial, and the missing ranks are not guessed")
    return found


def _slow_in_some_layouts_only(hosts: dict[tuple, list[_Host]]) -> tuple[dict[tuple, set[str]], list[str]]:
    """(group and layout -> the hosts named there that are not to be, a line each): a host named in
    some layouts of a group but not in others where it ran beside other hosts is named in none (nor
    its ranks): a slow host is slow wherever it runs. Ranks sharing a busy machine's cores (an
    emulated cluster) settle into one being slower for whole runs: in issue 47's rehearsal an even
    2x1's node2 computed 1.3x node1's in both runs and, in 3x1 beside the same node1, as fast as it."""
    by_host: dict[tuple, list[tuple[str, _Host]]] = {}
    for (key, layout), mine in hosts.items():
        for h in mine:
            by_host.setdefault((key, h.host), []).append((layout, h))
    unnamed: dict[tuple, set[str]] = {}
    lines = []
    for (key, host), seen in by_host.items():
        slow = [layout for layout, h in seen if h.verdict.named]
        if not slow or len(slow) == len(seen):
            continue
        for layout in slow:
            unnamed.setdefault((key, layout), set()).add(host)
        lines.append(f"{host} computed slower than the others in {', '.join(slow)} but not in "
                     f"{', '.join(layout for layout, _ in seen if layout not in slow)}: not named (a slow host is slow "
                     "wherever it runs; ranks sharing a busy machine's cores take turns at being slow)")
    return unnamed, lines


def _named_across(hosts: list[StragglerHostRow], layouts: dict[tuple, list]) -> list[str]:
    """One line per host named a straggler in every layout where it was compared with other hosts:
    how much of each step those layouts' ranks waited for their slowest rank, and how much slower
    its ranks computed than the others'."""
    by_host: dict[str, list[StragglerHostRow]] = {}
    for row in hosts:
        by_host.setdefault(row.host, []).append(row)
    lines = []
    for h, rows in by_host.items():
        if not all(row.straggler for row in rows):
            continue
        waits = [r.imbalance_s / r.step_time_mean_s for row in rows
                 for r in layouts[(row.scaling_key, row.layout)]
                 if r.imbalance_s is not None and r.step_time_mean_s]
        names = ", ".join(dict.fromkeys(row.layout for row in rows))
        slower = 100 * (statistics.fmean(row.vs_others for row in rows) - 1)
        lines.append(f"every layout with {h} ({names}) waited for it"
                     + (f": {100 * statistics.fmean(waits):.0f} % of each step on average" if waits else "")
                     + f"; {h}'s ranks compute {slower:.0f} % slower than the others")
    return lines


def _pct(ratio, two_sigma=None) -> str:
    if ratio is None:
        return "–"
    return f"{100 * (ratio - 1):+.1f} %" + ("" if two_sigma is None else f" ± {100 * two_sigma:.1f}")


def _ms(value) -> str:
    return "–" if value is None else f"{value:.1f}"


def _verdict(rows: list[StragglerRow], left_out: int) -> str:
    """A layout's line above its table: who was named, and what it was not judged on (ranks without a
    compute figure, runs whose per-rank times were left out)."""
    slow = [f"rank {r.rank} on {r.host}" for r in rows if r.straggler]
    untimed = [f"rank {r.rank} on {r.host}" for r in rows if r.compute_ms is None]
    said = ("Straggler: " + ", ".join(slow) if slow else
            "No straggler: every rank within the threshold" if not untimed else
            "No straggler among the ranks timed")
    if untimed:
        said += f"; {', '.join(untimed)} had no compute figure in any run: not judged"
    if left_out:
        said += (f"; {left_out} run(s) of this layout left out (no per-rank times, or a ranks.csv that is not "
                 "theirs: see the warnings), judged on the rest")
    return said + "."


def markdown(found: Stragglers) -> str:
    if not found.ranks and not found.notes:
        return ""
    parts = ["## Which rank or host held the others back (stragglers)\n",
             "Each rank's own compute per step (forward and backward, without waiting for the others), its "
             "wait for batches and at the gradient exchange, from every run's ranks.csv; vs others: its compute "
             "over the median of the other ranks' (a host: its ranks' median over the other hosts' ranks'), "
             f"the mean over the layout's runs ± 2σ across them. Named a straggler when it was slower in every run by "
             "more than the spread across repeats (the threshold: 2σ of the layout's median rank compute over the runs, "
             "relative: a rank must stand out of how much the whole layout moved from run to run) and by at least "
             f"{100 * FLOOR:.0f} % (two ranks of one machine differ by that much from scheduling alone; with one "
             "run there is no spread, so this floor alone); where it was compared with one other only (two ranks, two "
             "hosts), also its mean vs others less its 2σ still that floor above the other (which of two is off cannot be "
             "told, and a lead that swings from run to run is the busy machine's, not the rank's).\n"]
    parts += [f"**{line}.**\n" for line in found.named]
    groups: dict[tuple, list[StragglerRow]] = {}
    for row in found.ranks:
        groups.setdefault(row.scaling_key + (row.layout,), []).append(row)
    for key, rows in groups.items():
        r0 = rows[0]
        parts.append(f"### {r0.model} · {r0.flavor} · {r0.engine} · {r0.layout} — {r0.system}\n")
        parts.append(_verdict(rows, found.left_out.get((r0.scaling_key, r0.layout), 0)) + "\n")
        parts.append(markdown_table(
            ["rank", "host", "local rank", "device", "runs", "step ms", "compute ms", "data ms", "exchange wait ms",
             "vs others", "threshold", "straggler"],
            [[r.rank, r.host, r.local_rank, r.device + (f" (GPU {r.gpu_index} {r.gpu_uuid})"
                                                                    if r.gpu_uuid else ""),
              r.runs, _ms(r.step_ms), _ms(r.compute_ms), _ms(r.data_ms), _ms(r.comm_ms),
              _pct(r.vs_others, r.vs_others_2sigma), f"{100 * r.threshold:.1f} %",
              ("**yes**" if r.straggler else "no") + (" (partial run)" if r.partial else "")]
             for r in rows]) + "\n")
        hosts = [h for h in found.hosts if h.scaling_key + (h.layout,) == key]
        if hosts:
            parts.append(markdown_table(
                ["host", "ranks", "runs", "compute ms", "vs others", "threshold", "straggler"],
                [[h.host, h.ranks, h.runs, _ms(h.compute_ms), _pct(h.vs_others, h.vs_others_2sigma),
                  f"{100 * h.threshold:.1f} %", "**yes**" if h.straggler else "no"] for h in hosts]) + "\n")
    parts += [f"{note}.\n" for note in found.notes]
    return "\n".join(parts)


def _panels(found: Stragglers) -> dict[tuple, list[StragglerRow]]:
    """(scaling key, layout) -> its ranks' rows: one panel each."""
    groups: dict[tuple, list[StragglerRow]] = {}
    for row in found.ranks:
        groups.setdefault((row.scaling_key, row.layout), []).append(row)
    return groups


def figure(found: Stragglers, keys: list[tuple] | None = None):
    """One panel per layout (those of `keys`, else all: write() pages them, PANELS_PER_PAGE a page):
    each rank's compute per step (red: a straggler), the other ranks' median as a line, each bar
    labelled with its host; under each title the devices, runs, hosts and link."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from hvdbench.results.render.plots import context

    groups = _panels(found)
    panels = [(key, groups[key]) for key in (list(groups) if keys is None else keys)]
    cols = max(1, min(3, len(panels)))
    fig = Figure(figsize=(5.0 * cols, 4.2 * max(1, math.ceil(len(panels) / cols))), layout="constrained")
    FigureCanvasAgg(fig)
    for i, (key, rows) in enumerate(panels):
        ax = fig.add_subplot(math.ceil(len(panels) / cols), cols, i + 1)
        values = [math.nan if r.compute_ms is None else r.compute_ms for r in rows]  # no figure: no bar
        ax.bar(range(len(rows)), values, color=["tab:red" if r.straggler else "tab:blue" for r in rows])
        timed = [v for v in values if not math.isnan(v)]
        if timed:
            ax.axhline(statistics.median(timed), color="0.3", linestyle="--", linewidth=1, label="median rank")
        ax.set_xticks(range(len(rows)), [f"{r.rank}\n{r.host}" for r in rows], fontsize=7)
        ax.set_ylabel("own compute per step (ms)", fontsize=8)
        r0 = rows[0]
        ax.set_title(f"{r0.model} {r0.layout} ({r0.flavor}, {r0.engine}): rank compute\n"
                     + context([found.context[key]]), fontsize=8)
        if timed:  # under the panel: inside, it sat on a bar
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
        ax.grid(True, axis="y", alpha=0.3)
    return fig


def figures(found: Stragglers) -> list:
    """Every layout's panel, PANELS_PER_PAGE to a page: stragglers.png, stragglers-2.png, ..."""
    return pages("stragglers", list(_panels(found)), lambda keys: figure(found, keys))


def write(found: Stragglers, out: Path, formats=("csv", "png")) -> list[Path]:
    if not found.ranks:
        return []
    return [*write_table(out, "stragglers", found.ranks, StragglerRow.columns(), formats,
                         lambda: figures(found)),
            *write_table(out, "stragglers_hosts", found.hosts, StragglerHostRow.columns(),
                         tuple(f for f in formats if f == "csv"))]
