"""The report's four plots (PNG, matplotlib's Agg canvas, no pyplot state), one panel per group:

    throughput_vs_gpus.png   throughput vs GPUs, one line per layout family, the ideal linear line
    efficiency_vs_gpus.png   scaling efficiency ± 2σ vs GPUs, same families, 100 % line
    layouts_bars.png         for each GPU count run with several layouts, a bar per layout ± 2σ
    time_to_train.png        MLPerf time-to-train score vs GPUs, ± 2σ, the ideal (1/N) line, the
                             epochs beside each point, the target; seconds when all are under a minute

Every panel's title carries, under it, the devices, the runs behind each point, the hosts and the
inter-node link (`context`, which the waterfall, prediction, study and allreduce plots use too), or,
where every panel's is the same, the figure's title says it once;
flagged rows are ringed in red, unless every point of a panel is flagged alike (a busy machine: the
title says it once). Legends sit under their panel, never over its data. On CPUs the counts are ranks ("CPU ranks", "1 rank/node"), not GPUs.

Layout families: "scale-up (1 node)" holds every single-node layout; "scale-out (G GPU(s)/node)"
adds nodes of G GPUs each (starting from the 1xG point), so scale-up and scale-out read as
separate lines from a shared start. Each `*_figure` returns the Figure; `series_labels` lists
each panel's legend entries (what the tests count).
"""

from __future__ import annotations

import math
import textwrap
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator, ScalarFormatter

from hvdbench.files import atomic_write_png
from hvdbench.results.records.rows import ScalingGroup, TttGroup
from hvdbench.results.render.tables import figure_time_unit, pages
from hvdbench.results.stats.aggregate import (LayoutsRow, ScalingRow, Tables, TimeToTrainRow, on_cpus,
                                              where_ran)

IDEAL = "ideal (linear)"
FLAGGED = "check (flags in summary.md)"


def _groups(rows: list, key) -> list[list]:
    """The rows of each group (`key(row)`), in order of first appearance."""
    out: dict[tuple, list] = {}
    for row in rows:
        out.setdefault(key(row), []).append(row)
    return list(out.values())


def _unit(row) -> str:
    return "CPU rank" if on_cpus(row) else "GPU"


def per_node(row) -> str:
    """What one node holds, for legends: 'rank' on CPUs (a CPU run's "GPU" is a process), else 'GPU'."""
    return "rank" if on_cpus(row) else "GPU"


def device_axis(row) -> str:
    """The x-axis label of a device count (`row`: anything with a group's `system`)."""
    return "CPU ranks (processes; no GPU)" if on_cpus(row) else "GPUs"


def context(rows: list, runs: str | None = None) -> str:
    """The subtitle every plot carries under its title, so a figure never travels without where it
    was measured: the devices, the runs behind each point (or `runs`, in words), the hosts and the
    inter-node link (each on a line of its own: a panel is too narrow for them on one). `rows` are
    report rows, or aggregate.Where (system, runs, hosts, nodes, link: aggregate.Placed and `runs`)."""
    first = []
    if rows and rows[0].system:
        first.append("devices: CPUs (no GPU)" if on_cpus(rows[0]) else f"devices: {rows[0].system}")
    repeats = sorted({r.runs for r in rows if r.runs})
    if runs:
        first.append(runs)
    elif repeats:
        first.append(f"{repeats[-1] if len(repeats) == 1 else f'{repeats[0]}-{repeats[-1]}'} run(s) per point")
    where = where_ran(rows)
    # One line while it fits a panel's width, else the runs on a line of their own.
    head = " · ".join(first) if len(" · ".join(first)) <= 60 else "\n".join(first)
    return wrapped("\n".join(part for part in (head, where.replace(" · ", "\n")) if part))


# A panel's title line holds about this many characters at its font size (a 6.4-inch panel, 10 pt);
# a published system's interconnect text can be three times that.
TITLE_CHARS = 64


def wrapped(text: str) -> str:
    """`text` with each line longer than TITLE_CHARS broken at spaces, the continuation indented."""
    return "\n".join(part for line in text.split("\n")
                     for part in (textwrap.wrap(line, TITLE_CHARS, subsequent_indent="  ", break_on_hyphens=False)
                                  or [line]))


def waterfall_context(row) -> str:
    """`context` under a waterfall panel (waterfall.py, ttt.py): the rows of its two layouts (its
    `rows`: the baseline's and its own table rows), with each layout's runs in words."""
    runs = {x.layout: x.runs for x in row.rows}
    return context(list(row.rows) or [row], runs=", ".join(f"{n} run{'s' if n != 1 else ''} of {layout}"
                                                          for layout, n in runs.items() if n))


def waterfall_bars(ax, labels: list[str], bottoms, heights, colors, texts, signed: tuple[str, ...],
                   label_size: int) -> None:
    """A waterfall panel's bars (waterfall.py, ttt.py), each with its number above it, in its bar's
    colour for the `signed` colours (the parts that add or take away), dark grey for the others;
    the labels under them."""
    bars = ax.bar(range(len(labels)), heights, bottom=bottoms, color=colors)
    for bar, text, color in zip(bars, texts, colors):
        ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_y() + bar.get_height()),
                    textcoords="offset points", xytext=(0, 2), ha="center", va="bottom", fontsize=7,
                    color=color if color in signed else "0.15")
    ax.set_xticks(range(len(labels)), labels, fontsize=label_size)


def _title(row, group: list | None = None, shared: bool = False) -> str:
    """A panel's title: what ran, then where (`context`), unless `shared`: every panel of the figure
    ran in one place, which the figure's own title says once (_shared_context)."""
    parts = [row.model, row.flavor, row.framework, row.engine, row.precision, row.levers]
    if isinstance(row, ScalingGroup) and row.batch_per_gpu:
        parts.append(f"{row.batch_per_gpu}/{_unit(row)}")
    title = wrapped(" · ".join(str(p) for p in parts if p))
    below = "" if shared else context(group or [row])
    return title + (f"\n{below}" if below else "")


def _shared_context(fig: Figure, groups: list[list]) -> bool:
    """Where every panel's `context` is the same (one machine, one sweep), the figure's title says it
    once and the panels leave it out: True then."""
    said = {context(g) for g in groups}
    if len(groups) < 2 or len(said) != 1 or not next(iter(said)):
        return False
    fig.suptitle(next(iter(said)), fontsize=10)
    return True


def families(rows: list, value: Callable) -> dict[str, list]:
    """Layout family -> rows with a value (`value(row)`), sorted by GPUs (see the module docstring)."""
    rows = [r for r in rows if value(r) is not None and r.gpus]
    fams = {"scale-up (1 node)": [r for r in rows if r.nodes == 1]}
    unit = per_node(rows[0]) if rows else "GPU"
    for g in sorted({r.gpus_per_node for r in rows if r.nodes > 1}):
        fams[f"scale-out ({g} {unit}{'s' if g > 1 else ''}/node)"] = [r for r in rows if r.gpus_per_node == g]
    fams["layout unknown"] = [r for r in rows if not r.nodes]
    return {name: sorted(rs, key=lambda r: (r.gpus, r.nodes)) for name, rs in fams.items() if rs}


def _grid(n: int) -> tuple[Figure, list]:
    cols = min(2, max(n, 1))
    rows = math.ceil(max(n, 1) / cols)
    fig = Figure(figsize=(6.4 * cols, 4.6 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(rows, cols, i + 1) for i in range(max(n, 1))]
    return fig, axes


def _gpu_axis(ax, gpus, row) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(gpus))))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(device_axis(row))
    ax.grid(True, alpha=0.3)


def log_axis(ax) -> None:
    """A log y axis whose ticks a reader can read values off: 1-2-3-5 steps of each decade, and where
    the data span too little of a decade for three of those, evenly spaced round numbers instead
    (a log axis with one or two labels says nothing)."""
    ax.set_yscale("log")
    low, high = ax.get_ylim()
    decades = range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
    for steps in ((1, 2, 3, 5), (1, 1.5, 2, 3, 4, 5, 6, 8)):
        ticks = [t for t in (m * 10.0 ** e for e in decades for m in steps) if low <= t <= high]
        if len(ticks) >= 3:
            break
    if len(ticks) < 3:
        ticks = [t for t in MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]).tick_values(low, high)
                 if low <= t <= high and t > 0]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_ylim(low, high)


def _yerr(values, errors, log_y: bool):
    """Error bars as (below, above): on a log axis the bar below stops short of zero instead of
    running off the axis (a 2σ larger than the mean says the spread is huge, not negative)."""
    below = [e if not log_y or e != e or e < v else 0.95 * v for v, e in zip(values, errors)]
    return [below, errors]


def _baseline(rows: list, value: Callable):
    return next((r for r in rows if r.layout == r.baseline and value(r) is not None), None)


@dataclass(frozen=True)
class Lines:
    """What a line figure draws of its rows, one panel per group: `value(row)` against the device
    count, ± `err(row)`, a line per layout family; `ideal`: 'linear' (the baseline's value x the
    device ratio), 'inverse' (the baseline's value / the device ratio) or '' (none); `flagged`:
    ring the rows the scaling table flags; `label(row)` a note beside each point, `subtitle(group)` a
    line under the panel's title."""

    value: Callable
    err: Callable
    ylabel: str
    ideal: str = ""
    log_y: bool = True
    flagged: bool = False
    label: Callable | None = None
    subtitle: Callable | None = None


def line_groups(rows: list, group_of: Callable, value: Callable) -> tuple[list[list], list[list]]:
    """(the groups a line figure draws, those it leaves out): a group with a value at one device count
    is a point, not a line against the device count, and is left out where another group has a line
    (its row is in the CSV, and write_plots says how many); where none has, every group is drawn."""
    groups = [g for g in _groups(rows, group_of) if families(g, value)]
    drawn = [g for g in groups if len({r.gpus for r in g if value(r) is not None and r.gpus}) > 1]
    return (drawn, [g for g in groups if not any(g is d for d in drawn)]) if drawn else (groups, [])


def _lines_figure(rows: list, group_of: Callable, lines: Lines, groups: list[list] | None = None) -> Figure:
    """One panel per group of `rows` (`group_of(row)`; `groups`: those only, a page's), as `lines` says."""
    value, err, log_y = lines.value, lines.err, lines.log_y
    if groups is None:
        groups = [g for g in _groups(rows, group_of) if families(g, value)]
    fig, axes = _grid(len(groups))
    shared = _shared_context(fig, groups)
    for ax, group in zip(axes, groups):
        fams = families(group, value)
        # Where several families have a point at one device count, their error bars are drawn side
        # by side (a few % apart on the log axis), not over each other; the points stay where they are.
        # A row shared by two families (a scale-out line starts at its 1xG point) gets one bar.
        distinct = {id(r): r for rs in fams.values() for r in rs if err(r) is not None}
        with_err = Counter(r.gpus for r in distinct.values())
        drawn: set[int] = set()
        for i, (name, rs) in enumerate(fams.items()):
            up = name.startswith("scale-up")  # on top and thicker: scale-out lines share its points
            ys = [value(r) for r in rs]
            container = ax.errorbar([r.gpus for r in rs], ys, capsize=3, label=name,
                                    marker="o" if up else "s", markersize=7 if up else 5,
                                    linewidth=2.4 if up else 1.4, zorder=3 if up else 2)
            bars = [r for r in rs if id(r) in distinct and id(r) not in drawn]
            drawn |= {id(r) for r in bars}
            if bars:
                shift = 2 ** (0.04 * (i - (len(fams) - 1) / 2))
                bar_ys = [value(r) for r in bars]
                ax.errorbar([r.gpus * (shift if with_err[r.gpus] > 1 else 1) for r in bars], bar_ys,
                            yerr=_yerr(bar_ys, [err(r) for r in bars], log_y), fmt="none", capsize=3,
                            ecolor=container.lines[0].get_color(), elinewidth=1.8 if up else 1.2,
                            zorder=3 if up else 2)
        flagged = [r for rs in fams.values() for r in rs if r.flags] if lines.flagged else []
        shown = {id(r): r for rs in fams.values() for r in rs}
        everywhere = ""
        if flagged and len({id(r) for r in flagged}) == len(shown) and len({r.flags for r in flagged}) == 1:
            # every point flagged alike (a busy machine): a ring on each says nothing; the title says it once
            everywhere = "every point flagged: " + ", ".join(dict.fromkeys(
                f for r in flagged for f in r.flags.split(";") if f)) + " (summary.md)"
            flagged = []
        if flagged:  # what the report's `check` column warns about, marked where it is plotted
            ax.scatter([r.gpus for r in flagged], [value(r) for r in flagged], s=180, facecolors="none",
                       edgecolors="red", linewidths=1.5, zorder=4, label=FLAGGED)
        xs = sorted({r.gpus for rs in fams.values() for r in rs})
        base = _baseline(group, value)
        if lines.ideal and base:
            ratio = (lambda x: x / base.gpus) if lines.ideal == "linear" else (lambda x: base.gpus / x)
            ax.plot(xs, [value(base) * ratio(x) for x in xs], "k--", linewidth=1, label=IDEAL)
        _gpu_axis(ax, xs, group[0])
        if lines.label:
            # a row two families share (a scale-out line starts at its 1xG point) gets one label, not two on top
            for r in {id(r): r for rs in fams.values() for r in rs}.values():
                if lines.label(r):
                    ax.annotate(lines.label(r), (r.gpus, value(r)), textcoords="offset points", xytext=(8, -10),
                                fontsize=7, color="0.2", bbox={"boxstyle": "round,pad=0.15", "fc": "white",
                                                              "ec": "none", "alpha": 0.8}, zorder=5)
        if log_y:  # log-log: ideal scaling is a straight line; plain numbers on the ticks
            log_axis(ax)
        ax.set_ylabel(lines.ylabel)
        extra = "\n".join(x for x in (lines.subtitle(group) if lines.subtitle else "", everywhere) if x)
        ax.set_title(_title(group[0], group, shared) + (f"\n{extra}" if extra else ""), fontsize=10)
        legend_below(ax)
    if not groups:
        axes[0].text(0.5, 0.5, "no data", ha="center", va="center", transform=axes[0].transAxes)
    return fig


def legend_below(ax, handles=None, names=None) -> None:
    """The panel's legend under its axis, never over its lines and points (constrained layout makes
    the room): every line plot's, convergence.png's."""
    if handles is None:
        handles, names = ax.get_legend_handles_labels()
    ax.legend(handles, names, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)


def _nan(x):
    return math.nan if x is None else x


def _pct(v):
    return None if v is None else 100 * v


THROUGHPUT = Lines(lambda r: r.throughput_mean, lambda r: r.throughput_2sigma, "throughput (samples/s), mean ± 2σ",
                   ideal="linear", flagged=True)
EFFICIENCY = Lines(lambda r: _pct(r.efficiency), lambda r: _pct(r.efficiency_2sigma), "scaling efficiency (%), ± 2σ",
                   log_y=False, flagged=True)


def throughput_figure(scaling: list[ScalingRow], groups: list[list] | None = None) -> Figure:
    return _lines_figure(scaling, ScalingGroup.scaling_group, THROUGHPUT, groups)


def efficiency_figure(scaling: list[ScalingRow], groups: list[list] | None = None) -> Figure:
    """Efficiency against the device count, ± 2σ (both means' spread, aggregate._efficiency_2sigma)."""
    fig = _lines_figure(scaling, ScalingGroup.scaling_group, EFFICIENCY, groups)
    for ax in fig.axes:
        if ax.get_legend() is not None:  # panels with data: the 100 % line is the ideal
            ax.axhline(100, color="k", linestyle="--", linewidth=1, label="ideal (100 %)")
            ax.set_ylim(bottom=0)
            legend_below(ax)
    return fig


def time_to_train_figure(ttt: list[TimeToTrainRow], groups: list[list] | None = None) -> Figure:
    """MLPerf's time-to-train score against the device count, ± 2σ, each point with the epochs its
    runs took, the target under the title; in seconds when every score is under a minute (over all
    of `ttt`, so every page of it says one unit)."""
    return _lines_figure(ttt, TttGroup.ttt_group, _ttt_lines(ttt), groups)


def _ttt_lines(ttt: list[TimeToTrainRow]) -> Lines:
    unit, scale = figure_time_unit(r.ttt_min for r in ttt)

    def epochs(r):
        return "" if r.epochs_mean is None else f"{r.epochs_mean:.3g} epochs"

    def target(group):
        metric = next((r.metric for r in group if r.metric), None)
        value = next((r.target for r in group if r.target is not None), None)
        return "" if value is None else f"target: {metric or 'metric'} {value:g}"

    return Lines(
        lambda r: None if r.ttt_min is None else r.ttt_min * scale,
        lambda r: None if r.ttt_2sigma_min is None else r.ttt_2sigma_min * scale,
        f"time to train ({unit}), MLPerf score ± 2σ", ideal="inverse", label=epochs, subtitle=target)


def layouts_figure(layouts: list[LayoutsRow], scaling: list[ScalingRow] | None = None,
                   groups: list[list] | None = None) -> Figure:
    """One panel per group (of `groups` only: a page's); one bar container per GPU count, one bar per
    layout, 2σ error bars, and per GPU count the ideal: the single-device (baseline) throughput times
    the device count."""
    if groups is None:
        groups = _groups([r for r in layouts if r.throughput_mean is not None], ScalingGroup.scaling_group)
    fig, axes = _grid(len(groups))
    shared = _shared_context(fig, groups)
    for ax, group in zip(axes, groups):
        key = group[0].scaling_key
        mine = [r for r in scaling or [] if r.scaling_key == key]
        base = _baseline(mine, lambda r: r.throughput_mean)
        # The scaling table's flags, by layout: a flagged bar is ringed as the line plots ring a point.
        flags = {r.layout: r.flags for r in mine}
        ticks, labels, x, ideal_drawn, ringed = [], [], 0, False, False
        for rows in _groups(group, lambda r: r.gpus):
            xs = [x + i for i in range(len(rows))]
            bars = ax.bar(xs, [r.throughput_mean for r in rows], yerr=[_nan(r.throughput_2sigma) for r in rows],
                          capsize=4, label=f"{rows[0].gpus} {_unit(rows[0])}s")
            for bar, r in zip(bars, rows):
                if flags.get(r.layout):
                    bar.set_edgecolor("red")
                    bar.set_linewidth(2.5)
                    ringed = True
            if base and base.gpus:
                ideal = base.throughput_mean * rows[0].gpus / base.gpus
                ax.hlines(ideal, xs[0] - 0.45, xs[-1] + 0.45, colors="k", linestyles="--", linewidth=1,
                          label=None if ideal_drawn else f"ideal: {base.layout} x N")
                ideal_drawn = True
            ticks += xs
            labels += [r.layout for r in rows]
            x += len(rows) + 1
        ax.set_xticks(ticks, labels)
        ax.set_ylim(bottom=0)  # a 2σ bar longer than its bar stops at zero
        ax.set_xlabel("layout (nodes x " + ("CPU ranks" if on_cpus(group[0]) else "GPUs") + " per node)")
        ax.set_ylabel("throughput (samples/s), mean ± 2σ")
        ax.set_title(_title(group[0], group, shared), fontsize=10)
        handles, names = ax.get_legend_handles_labels()
        if ringed:  # the legend's entry for the red outline of the ringed bars
            handles.append(Patch(facecolor="none", edgecolor="red", linewidth=2.5))
            names.append(FLAGGED)
        # Below the panel: inside, the legend would sit on the bars or on the ideal lines above them.
        ax.legend(handles, names, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=4, frameon=False)
    return fig


def series_labels(fig: Figure) -> list[list[str]]:
    """Each panel's legend entries, in order (lines, error-bar and bar containers, and the legend's
    own entries such as the ringed bars' outline)."""
    return [[t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else
            ax.get_legend_handles_labels()[1] for ax in fig.axes]


def _any(values) -> bool:
    return any(v is not None for v in values)


# Panels a page of a two-column figure: 4 rows of 460 px, 1,840 px tall (under two screens)
PER_PAGE = 8


def _line_pages(name: str, rows: list, group_of: Callable, value: Callable, draw: Callable):
    """(pages, what was left out) of a line figure: the groups line_groups draws, PER_PAGE a page."""
    drawn, alone = line_groups(rows, group_of, value)
    said = [f"{name}: {len(alone)} group(s) with one {_unit(alone[0][0])} count not drawn (a point, not a line; "
            "their rows are in the CSV)"] if alone else []
    return pages(name.removesuffix(".png"), drawn, lambda chunk: draw(rows, chunk), PER_PAGE), said


def _layout_pages(t: Tables):
    groups = _groups([r for r in t.layouts if r.throughput_mean is not None], ScalingGroup.scaling_group)
    return pages("layouts_bars", groups, lambda chunk: layouts_figure(t.layouts, t.scaling, chunk), PER_PAGE), []


# file -> (does the report have data for it, (pages, what was left out) maker, why it is not written otherwise)
PLOTS = {
    "throughput_vs_gpus.png": (lambda t: _any(r.throughput_mean for r in t.scaling),
                               lambda t: _line_pages("throughput_vs_gpus.png", t.scaling, ScalingGroup.scaling_group,
                                                     THROUGHPUT.value, throughput_figure),
                               "no successful throughput runs"),
    "efficiency_vs_gpus.png": (lambda t: _any(r.efficiency for r in t.scaling),
                               lambda t: _line_pages("efficiency_vs_gpus.png", t.scaling, ScalingGroup.scaling_group,
                                                     EFFICIENCY.value, efficiency_figure),
                               "no speed-up could be computed"),
    "layouts_bars.png": (lambda t: _any(r.throughput_mean for r in t.layouts), _layout_pages,
                         "no GPU count was run with more than one layout"),
    "time_to_train.png": (lambda t: _any(r.ttt_min for r in t.time_to_train),
                          lambda t: _line_pages("time_to_train.png", t.time_to_train, TttGroup.ttt_group,
                                                _ttt_lines(t.time_to_train).value, time_to_train_figure),
                          "no time-to-train score"),
}


def write_plots(tables: Tables, out: Path) -> tuple[list[Path], list[str]]:
    """Write each plot that has data, PER_PAGE panels a page (NAME.png, NAME-2.png, ...);
    returns (written paths, one line per plot not written or group not drawn, and why)."""
    written, skipped = [], []
    for name, (has_data, make, reason) in PLOTS.items():
        if not has_data(tables):
            skipped.append(f"{name} not written: {reason}")
            continue
        figs, said = make(tables)
        skipped += said
        for i, fig in enumerate(figs):
            written.append(atomic_write_png(fig, Path(out) / (name if i == 0 else name.replace(".png", f"-{i + 1}.png"))))
    return written, skipped
