"""summary.md's first lines, before the verdict and the tables: what a reader came for, read off the
rows the sections computed (nothing measured here): per group the layout that gives the most per GPU
and what the largest layout kept, the biggest loss and its largest part, the stragglers and slow
links named, and the runs that did not succeed.

    lines = findings(tables.scaling, falls, found, link_lines, runs)   # the report's sections' rows
    markdown(lines)                                                    # '## Findings' and a line each

`hvdbench report results/demo` prints them first (Report.text).
"""

from __future__ import annotations

from collections import Counter

from hvdbench.results.analyses.stragglers import Stragglers
from hvdbench.results.analyses.waterfall import WaterfallRow
from hvdbench.results.stats.aggregate import ScalingRow, device_word, group_title

MOST_GROUPS = 5  # groups named one line each; the others are counted ("and 2 more groups")

# the waterfall's parts, in the words a finding names its largest in
PARTS = {"comm_loss": "communication", "imbalance_loss": "waiting for the slowest rank",
         "data_loss": "waiting for data", "compute_loss": "slower compute", "unattributed": "unattributed"}


def _check(row: ScalingRow) -> str:
    return f" (check: {', '.join(row.flags.split(';'))})" if row.flags else ""


def best_per_gpu(scaling: list[ScalingRow], most: int = MOST_GROUPS) -> list[str]:
    """Per scaling group: the layout with the most samples/s per GPU, and the largest layout's speed-up
    and efficiency (with the scaling table's flags: a noisy figure says so)."""
    groups: dict[tuple, list[ScalingRow]] = {}
    for r in scaling:
        if r.throughput_per_gpu is not None:
            groups.setdefault(r.scaling_key, []).append(r)
    lines = []
    for rows in list(groups.values())[:most]:
        unit = device_word(rows[0])
        best = max(rows, key=lambda r: r.throughput_per_gpu)
        line = (f"{group_title(rows[0].scaling_group())}: most per {unit} on {best.layout} "
                f"({best.throughput_per_gpu:,.4g} samples/s per {unit}){_check(best)}")
        largest = max(rows, key=lambda r: (r.gpus, -r.nodes))
        if largest is not best and largest.speedup is not None:
            line += (f"; the largest layout, {largest.layout}, {largest.speedup:.2f}× the {largest.baseline}"
                     + (f" ({100 * largest.efficiency:.0f} % efficiency)" if largest.efficiency is not None else "")
                     + _check(largest))
        lines.append(line + ".")
    if len(groups) > most:
        lines.append(f"And {len(groups) - most} more groups (the scaling tables).")
    return lines


def biggest_loss(falls: list[WaterfallRow]) -> str:
    """The layout that lost the largest share of its ideal rate, and its largest part ('' with none)."""
    lost = [f for f in falls if f.ideal]
    if not lost:
        return ""
    worst = max(lost, key=lambda f: (f.ideal - f.measured) / f.ideal)
    if worst.measured >= worst.ideal:
        return ""
    parts = {name: getattr(worst, name) for name in PARTS if getattr(worst, name) is not None}
    part = max(parts, key=parts.get) if parts else None
    cause = (f", most of it {PARTS[part]} ({parts[part]:,.4g} samples/s)" if part and parts[part] > 0 else "")
    return (f"Biggest loss: {worst.model} {worst.layout} measured {worst.measured:,.4g} of an ideal "
            f"{worst.ideal:,.4g} samples/s ({100 * (1 - worst.measured / worst.ideal):.0f} % lost){cause} "
            "(the throughput waterfall).")


def stragglers_said(found: Stragglers) -> list[str]:
    """The hosts slow in every layout, else each straggler rank; nothing where no layout had per-rank times."""
    if found.named:
        return [f"Straggler: {line}." for line in found.named]
    slow = [r for r in found.ranks if r.straggler]
    if slow:
        return ["Straggler" + ("s" if len(slow) > 1 else "") + ": " + "; ".join(
            f"rank {r.rank} on {r.host} ({r.model} {r.layout}, compute {100 * (r.vs_others - 1):+.0f} % vs the others)"
            for r in slow[:4] if r.vs_others is not None) + (f" and {len(slow) - 4} more" if len(slow) > 4 else "") + "."]
    return ["No straggler rank or host."] if found.ranks else []


def links_said(lines: list[str]) -> list[str]:
    """The links section's slow pairs (links.verdicts), in the findings' words."""
    slow = [line for line in lines if "slow" in line and not line.startswith("no slow pair")]
    return [f"Slow link: {line}." for line in slow[:3]] + (
        [f"And {len(slow) - 3} more slow-link findings (the links section)."] if len(slow) > 3 else [])


def failed_said(runs) -> str:
    """How many runs did not succeed, by status; or that all did."""
    if not runs:
        return ""
    bad = Counter(r.status for r in runs if r.status != "success")
    if not bad:
        return f"All {len(runs)} runs succeeded."
    return (f"{sum(bad.values())} of {len(runs)} runs did not succeed ("
            + ", ".join(f"{n} {status}" for status, n in bad.most_common()) + "): Runs that did not succeed.")


def findings(scaling, falls, found: Stragglers, link_lines: list[str], runs) -> list[str]:
    """Every finding line, in the order summary.md reads them (see the module's docstring)."""
    return [line for line in (*best_per_gpu(scaling), biggest_loss(falls), *stragglers_said(found),
                              *links_said(link_lines), failed_said(runs)) if line]


def markdown(lines: list[str]) -> str:
    return "## Findings\n\n" + "\n".join(f"- {line}" for line in lines) + "\n" if lines else ""
