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
(with one run there is no spread: FLOOR alone); and when its mean lead stands out of its own 2σ
across the runs by FLOOR too (mean - 2σ of its ratio > 1 + FLOOR). In every run, not on average: on
a busy machine two ranks take turns being slow, and a mean of 3x and 0.4x is no straggler. Out of its
own spread: ranks sharing a busy machine's cores settle into one being slow for a whole run, the
same one in two runs as often as not (an even 2x1 of issue 47's rehearsal: one rank 1.9x, then 3.0x
the other, 2.5 ± 1.6), where a slowed node's lead holds (3.2 ± 0.9 with a fifth of its CPU share).
A host slow in some layouts but not in others where it ran beside other hosts is named in none (a
note says so: a slow host is slow wherever it runs); a host named in every layout it ran in is named
once, above the tables.

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
from hvdbench.results.records.schema import SCALING_GROUP, STRAGGLER_COLUMNS, STRAGGLER_HOST_COLUMNS
from hvdbench.results.render.tables import markdown_table, write_table
from hvdbench.results.stats.aggregate import scaling_key, stats

# The least excess over the others' median that names a straggler: below it, two ranks of one machine
# differ by scheduling and clocks alone (with one run there is no spread to measure it by).
FLOOR = 0.05


@dataclass
class Stragglers:
    ranks: list[dict] = field(default_factory=list)  # STRAGGLER_COLUMNS
    hosts: list[dict] = field(default_factory=list)  # STRAGGLER_HOST_COLUMNS
    named: list[str] = field(default_factory=list)  # hosts slow in every layout they ran in, one line each
    notes: list[str] = field(default_factory=list)
    context: dict[tuple, dict] = field(default_factory=dict)  # (group, layout) -> its plot's where-ran row


def _others_ratio(mine: float, others: list[float]) -> float | None:
    median = statistics.median(others) if others else None
    return mine / median if median else None


def _spread(runs) -> float:
    """2σ across the runs of each run's median rank compute, over their mean (0 for one run)."""
    s = stats(statistics.median(x.compute_s for x in r.ranks if x.compute_s is not None) for r in runs
              if any(x.compute_s is not None for x in r.ranks))
    return (s.two_sigma or 0.0) / s.mean if s.mean else 0.0


def _judge(ratios: list[float], engine: str, spread: float) -> tuple[float | None, float | None, float, bool]:
    """(mean ratio, its 2σ across runs, the threshold, named?) of one rank's or host's ratios; `spread`:
    the layout's (_spread)."""
    s = stats(ratios)
    threshold = max(FLOOR, spread)
    if s.mean is None:
        return None, None, threshold, False
    stands_out = s.mean - (s.two_sigma or 0.0) - 1.0 > FLOOR
    return s.mean, s.two_sigma, threshold, min(ratios) - 1.0 > threshold and stands_out and not waits_for_peers(engine)


def _layout_rows(key: tuple, layout: str, runs: list) -> tuple[list[dict], list[dict]]:
    base = {**dict(zip(SCALING_GROUP, key)), "layout": layout}
    spread = _spread(runs)
    by_rank: dict[int, list] = {}
    host_ratios: dict[str, list[float]] = {}
    host_compute: dict[str, list[float]] = {}
    host_ranks: dict[str, set] = {}
    for r in runs:
        timed = [x for x in r.ranks if x.compute_s is not None]
        for x in timed:
            by_rank.setdefault(x.rank, []).append((r, x, _others_ratio(x.compute_s, [y.compute_s for y in timed
                                                                                       if y is not x])))
        hosts = {x.host for x in timed}
        if len(hosts) < 2:
            continue
        for h in hosts:
            mine = [x.compute_s for x in timed if x.host == h]
            ratio = _others_ratio(statistics.median(mine), [x.compute_s for x in timed if x.host != h])
            if ratio is not None:
                host_ratios.setdefault(h, []).append(ratio)
            host_compute.setdefault(h, []).extend(mine)
            host_ranks.setdefault(h, set()).update(x.rank for x in timed if x.host == h)
    rank_rows = []
    for rank, seen in sorted(by_rank.items()):
        last = seen[-1][1]
        mean, two_sigma, threshold, named = _judge([ratio for _, _, ratio in seen if ratio is not None],
                                                   base["engine"], spread)

        def ms(name, seen=seen):
            values = [getattr(x, name) for _, x, _ in seen if getattr(x, name) is not None]
            return 1e3 * statistics.fmean(values) if values else None
        rank_rows.append({**base, "rank": rank, "host": last.host, "local_rank": last.local_rank,
                          "device": last.device, "gpu_index": last.gpu_index, "gpu_uuid": last.gpu_uuid,
                          "runs": len(seen), "step_ms": ms("step_s"), "compute_ms": ms("compute_s"),
                          "data_ms": ms("data_s"), "comm_ms": ms("comm_s"), "vs_others": mean,
                          "vs_others_2sigma": two_sigma, "threshold": threshold, "straggler": named,
                          "partial": any(len(r.ranks) < (r.world_size or 0) for r, _, _ in seen)})
    host_rows = []
    for h, ratios in sorted(host_ratios.items()):
        mean, two_sigma, threshold, named = _judge(ratios, base["engine"], spread)
        host_rows.append({**base, "host": h, "ranks": len(host_ranks[h]), "runs": len(ratios),
                          "compute_ms": 1e3 * statistics.fmean(host_compute[h]), "vs_others": mean,
                          "vs_others_2sigma": two_sigma, "threshold": threshold, "straggler": named})
    return rank_rows, host_rows


def stragglers(runs) -> Stragglers:
    """Every multi-rank layout's per-rank and per-host rows (successful throughput runs with per-rank
    times), the hosts slow in every layout they ran in, and what had no per-rank times."""
    found = Stragglers()
    layouts: dict[tuple, list] = {}
    without, published, partial = set(), set(), 0
    for r in runs:
        if (r.world_size or 0) < 2 or r.status != "success":
            continue
        where = (scaling_key(r), r.layout)
        if r.result:  # a published log's run (mllog.record.MllogRun)
            published.add(where)
        elif not r.ranks:
            without.add(where)
        else:
            layouts.setdefault(where, []).append(r)
            partial += len(r.ranks) < r.world_size
    for (key, layout), mine in layouts.items():
        rank_rows, host_rows = _layout_rows(key, layout, mine)
        found.ranks += rank_rows
        found.hosts += host_rows
        first = mine[0]
        found.context[(key, layout)] = {
            "system": key[0], "runs": len(mine), "nodes": first.nodes, "link": first.link,
            "intra_link": first.intra_link, "hosts": ";".join(dict.fromkeys(x.host for r in mine for x in r.ranks))}
    found.notes += _slow_in_some_layouts_only(found)
    found.named = _named_across(found.hosts, layouts)
    without -= set(layouts)
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


def _slow_in_some_layouts_only(found: Stragglers) -> list[str]:
    """Un-name a host (and its ranks) named in some layouts of a group but not in others where it
    ran beside other hosts, and say so: a slow host is slow wherever it runs. Ranks sharing a busy
    machine's cores (an emulated cluster) settle into one being slower for whole runs: in issue 47's
    rehearsal an even 2x1's node2 computed 1.3x node1's in both runs and, in 3x1 beside the same
    node1, as fast as it."""
    by_host: dict[tuple, list[dict]] = {}
    for row in found.hosts:
        by_host.setdefault(tuple(row[k] for k in SCALING_GROUP) + (row["host"],), []).append(row)
    lines = []
    for rows in by_host.values():
        slow = [row["layout"] for row in rows if row["straggler"]]
        if not slow or len(slow) == len(rows):
            continue
        host = rows[0]["host"]
        for row in found.hosts + found.ranks:
            if row["host"] == host and row["layout"] in slow and all(row[k] == rows[0][k] for k in SCALING_GROUP):
                row["straggler"] = False
        lines.append(f"{host} computed slower than the others in {', '.join(slow)} but not in "
                     f"{', '.join(r['layout'] for r in rows if r['layout'] not in slow)}: not named (a slow host is slow "
                     "wherever it runs; ranks sharing a busy machine's cores take turns at being slow)")
    return lines


def _named_across(hosts: list[dict], layouts: dict[tuple, list]) -> list[str]:
    """One line per host named a straggler in every layout where it was compared with other hosts:
    how much of each step those layouts' ranks waited for their slowest rank, and how much slower
    its ranks computed than the others'."""
    by_host: dict[str, list[dict]] = {}
    for row in hosts:
        by_host.setdefault(row["host"], []).append(row)
    lines = []
    for h, rows in by_host.items():
        if not all(row["straggler"] for row in rows):
            continue
        waits = [r.imbalance_s / r.step_time_mean_s for row in rows
                 for r in layouts[(tuple(row[k] for k in SCALING_GROUP), row["layout"])]
                 if r.imbalance_s is not None and r.step_time_mean_s]
        names = ", ".join(dict.fromkeys(row["layout"] for row in rows))
        slower = 100 * (statistics.fmean(row["vs_others"] for row in rows) - 1)
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
             "run there is no spread, so this floor alone), and its mean vs others less its 2σ still that floor above "
             "the others (a lead that swings from run to run is the busy machine's, not the rank's).\n"]
    parts += [f"**{line}.**\n" for line in found.named]
    groups: dict[tuple, list[dict]] = {}
    for row in found.ranks:
        groups.setdefault(tuple(row[k] for k in SCALING_GROUP) + (row["layout"],), []).append(row)
    for key, rows in groups.items():
        r0 = rows[0]
        slow = [f"rank {r['rank']} on {r['host']}" for r in rows if r["straggler"]]
        parts.append(f"### {r0['model']} · {r0['flavor']} · {r0['engine']} · {r0['layout']} — {r0['system']}\n")
        parts.append(("Straggler: " + ", ".join(slow) if slow else "No straggler: every rank within the threshold")
                     + ".\n")
        parts.append(markdown_table(
            ["rank", "host", "local rank", "device", "runs", "step ms", "compute ms", "data ms", "exchange wait ms",
             "vs others", "threshold", "straggler"],
            [[r["rank"], r["host"], r["local_rank"], r["device"] + (f" (GPU {r['gpu_index']} {r['gpu_uuid']})"
                                                                    if r["gpu_uuid"] else ""),
              r["runs"], _ms(r["step_ms"]), _ms(r["compute_ms"]), _ms(r["data_ms"]), _ms(r["comm_ms"]),
              _pct(r["vs_others"], r["vs_others_2sigma"]), f"{100 * r['threshold']:.1f} %",
              ("**yes**" if r["straggler"] else "no") + (" (partial run)" if r["partial"] else "")]
             for r in rows]) + "\n")
        hosts = [h for h in found.hosts if tuple(h[k] for k in SCALING_GROUP) + (h["layout"],) == key]
        if hosts:
            parts.append(markdown_table(
                ["host", "ranks", "runs", "compute ms", "vs others", "threshold", "straggler"],
                [[h["host"], h["ranks"], h["runs"], _ms(h["compute_ms"]), _pct(h["vs_others"], h["vs_others_2sigma"]),
                  f"{100 * h['threshold']:.1f} %", "**yes**" if h["straggler"] else "no"] for h in hosts]) + "\n")
    parts += [f"{note}.\n" for note in found.notes]
    return "\n".join(parts)


def figure(found: Stragglers, most: int = 12):
    """One panel per layout (up to `most`): each rank's compute per step (red: a straggler), the other
    ranks' median as a line, each bar labelled with its host; under each title the devices, runs,
    hosts and link."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from hvdbench.results.render.plots import context

    groups: dict[tuple, list[dict]] = {}
    for row in found.ranks:
        groups.setdefault((tuple(row[k] for k in SCALING_GROUP), row["layout"]), []).append(row)
    panels = list(groups.items())[:most]
    cols = min(3, len(panels))
    fig = Figure(figsize=(5.0 * cols, 4.2 * math.ceil(len(panels) / cols)), layout="constrained")
    FigureCanvasAgg(fig)
    for i, (key, rows) in enumerate(panels):
        ax = fig.add_subplot(math.ceil(len(panels) / cols), cols, i + 1)
        values = [r["compute_ms"] or 0.0 for r in rows]
        ax.bar(range(len(rows)), values, color=["tab:red" if r["straggler"] else "tab:blue" for r in rows])
        ax.axhline(statistics.median(values), color="0.3", linestyle="--", linewidth=1, label="median rank")
        ax.set_xticks(range(len(rows)), [f"{r['rank']}\n{r['host']}" for r in rows], fontsize=7)
        ax.set_ylabel("own compute per step (ms)", fontsize=8)
        r0 = rows[0]
        ax.set_title(f"{r0['model']} {r0['layout']} ({r0['flavor']}, {r0['engine']}): rank compute\n"
                     + context([found.context[key]]), fontsize=8)
        ax.legend(fontsize=7)
        ax.grid(True, axis="y", alpha=0.3)
    return fig


def write(found: Stragglers, out: Path, formats=("csv", "png")) -> list[Path]:
    if not found.ranks:
        return []
    return [*write_table(out, "stragglers", found.ranks, STRAGGLER_COLUMNS, formats, lambda: figure(found)),
            *write_table(out, "stragglers_hosts", found.hosts, STRAGGLER_HOST_COLUMNS,
                         tuple(f for f in formats if f == "csv"))]
