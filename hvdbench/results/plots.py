"""The report's four plots (PNG, matplotlib's Agg canvas, no pyplot state), one panel per group:

    throughput_vs_gpus.png   throughput vs GPUs, one line per layout family, the ideal linear line
    efficiency_vs_gpus.png   scaling efficiency vs GPUs, same families, 100 % line
    layouts_bars.png         for each GPU count run with several layouts, a bar per layout ± 2σ
    time_to_train.png        MLPerf time-to-train score vs GPUs, ± 2σ, the ideal (1/N) line

Layout families: "scale-up (1 node)" holds every single-node layout; "scale-out (G GPU(s)/node)"
adds nodes of G GPUs each (starting from the 1xG point), so scale-up and scale-out read as
separate lines from a shared start. Each `*_figure` returns the Figure; `series_labels` lists
each panel's legend entries (what the tests count).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator, ScalarFormatter

from hvdbench.results.aggregate import Tables, where_ran
from hvdbench.results.schema import SCALING_GROUP, TTT_GROUP

IDEAL = "ideal (linear)"
FLAGGED = "check (flags in summary.md)"


def _groups(rows: list[dict], keys: tuple) -> list[list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for row in rows:
        out.setdefault(tuple(row[k] for k in keys), []).append(row)
    return list(out.values())


def _on_cpus(row: dict) -> bool:
    """hvdbench's own CPU runs record their device as "cpu": their "GPUs" are CPU processes."""
    return str(row.get("system") or "").lower() == "cpu"


def _unit(row: dict) -> str:
    return "CPU rank" if _on_cpus(row) else "GPU"


def _title(row: dict, group: list[dict] | None = None) -> str:
    parts = [row["model"], row.get("flavor"), row.get("framework"), row.get("precision")]
    if row.get("batch_per_gpu"):
        parts.append(f"{row['batch_per_gpu']}/{_unit(row)}")
    title = " · ".join(str(p) for p in parts if p)
    context = []
    if row.get("system"):
        context.append("devices: CPUs (no GPU)" if _on_cpus(row) else str(row["system"]))
    repeats = sorted({r["runs"] for r in group or [] if r.get("runs")})
    if repeats:
        context.append(f"{repeats[-1] if len(repeats) == 1 else f'{repeats[0]}-{repeats[-1]}'} run(s) per point")
    where = where_ran(group or [row])
    # Hosts and link on lines of their own: a panel is too narrow for both on one.
    return title + (f"\n{' · '.join(context)}" if context else "") + (f"\n{where.replace(' · ', chr(10))}"
                                                                      if where else "")


def families(rows: list[dict], value: str) -> dict[str, list[dict]]:
    """Layout family -> rows with a value, sorted by GPUs (see the module docstring)."""
    rows = [r for r in rows if r[value] is not None and r["gpus"]]
    fams = {"scale-up (1 node)": [r for r in rows if r["nodes"] == 1]}
    for g in sorted({r["gpus_per_node"] for r in rows if r["nodes"] > 1}):
        fams[f"scale-out ({g} GPU{'s' if g > 1 else ''}/node)"] = [r for r in rows if r["gpus_per_node"] == g]
    fams["layout unknown"] = [r for r in rows if not r["nodes"]]
    return {name: sorted(rs, key=lambda r: (r["gpus"], r["nodes"])) for name, rs in fams.items() if rs}


def _grid(n: int) -> tuple[Figure, list]:
    cols = min(2, max(n, 1))
    rows = math.ceil(max(n, 1) / cols)
    fig = Figure(figsize=(6.4 * cols, 4.6 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(rows, cols, i + 1) for i in range(max(n, 1))]
    return fig, axes


def _gpu_axis(ax, gpus, row: dict) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(gpus))))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("CPU ranks (processes; no GPU)" if _on_cpus(row) else "GPUs")
    ax.grid(True, alpha=0.3)


def _yerr(values, errors, log_y: bool):
    """Error bars as (below, above): on a log axis the bar below stops short of zero instead of
    running off the axis (a 2σ larger than the mean says the spread is huge, not negative)."""
    below = [e if not log_y or e != e or e < v else 0.95 * v for v, e in zip(values, errors)]
    return [below, errors]


def _baseline(rows: list[dict], value: str) -> dict | None:
    return next((r for r in rows if r["layout"] == r.get("baseline") and r[value] is not None), None)


def _lines_figure(rows, keys, value, err, ylabel, ideal, log_y=True) -> Figure:
    groups = [g for g in _groups(rows, keys) if families(g, value)]
    fig, axes = _grid(len(groups))
    for ax, group in zip(axes, groups):
        fams = families(group, value)
        for name, rs in fams.items():
            up = name.startswith("scale-up")  # on top and thicker: scale-out lines share its points
            ys = [r[value] for r in rs]
            ax.errorbar([r["gpus"] for r in rs], ys,
                        yerr=_yerr(ys, [_nan(r.get(err)) for r in rs], log_y) if err else None, capsize=3, label=name,
                        marker="o" if up else "s", markersize=7 if up else 5,
                        linewidth=2.4 if up else 1.4, zorder=3 if up else 2)
        flagged = [r for rs in fams.values() for r in rs if r.get("flags")]
        if flagged:  # what the report's `check` column warns about, marked where it is plotted
            ax.scatter([r["gpus"] for r in flagged], [r[value] for r in flagged], s=180, facecolors="none",
                       edgecolors="red", linewidths=1.5, zorder=4, label=FLAGGED)
        xs = sorted({r["gpus"] for rs in fams.values() for r in rs})
        base = _baseline(group, value)
        if ideal and base:
            ax.plot(xs, [ideal(base, x) for x in xs], "k--", linewidth=1, label=IDEAL)
        _gpu_axis(ax, xs, group[0])
        if log_y:  # log-log: ideal scaling is a straight line; plain numbers on the ticks
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 3, 5)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_locator(NullLocator())
        ax.set_ylabel(ylabel)
        ax.set_title(_title(group[0], group), fontsize=10)
        ax.legend(fontsize=8)
    if not groups:
        axes[0].text(0.5, 0.5, "no data", ha="center", va="center", transform=axes[0].transAxes)
    return fig


def _nan(x):
    return math.nan if x is None else x


def throughput_figure(scaling: list[dict]) -> Figure:
    return _lines_figure(scaling, SCALING_GROUP, "throughput_mean", "throughput_2sigma",
                         "throughput (samples/s), mean ± 2σ",
                         lambda b, x: b["throughput_mean"] * x / b["gpus"])


def efficiency_figure(scaling: list[dict]) -> Figure:
    rows = [{**r, "efficiency_pct": None if r["efficiency"] is None else 100 * r["efficiency"]} for r in scaling]
    fig = _lines_figure(rows, SCALING_GROUP, "efficiency_pct", None, "scaling efficiency (%)", None, log_y=False)
    for ax in fig.axes:
        if ax.get_legend() is not None:  # panels with data: the 100 % line is the ideal
            ax.axhline(100, color="k", linestyle="--", linewidth=1, label="ideal (100 %)")
            ax.set_ylim(bottom=0)
            ax.legend(fontsize=8)
    return fig


def time_to_train_figure(ttt: list[dict]) -> Figure:
    return _lines_figure(ttt, TTT_GROUP, "ttt_min", "ttt_2sigma_min", "time to train (min), MLPerf score",
                         lambda b, x: b["ttt_min"] * b["gpus"] / x)


def layouts_figure(layouts: list[dict], scaling: list[dict] | None = None) -> Figure:
    """One panel per group; one bar container per GPU count, one bar per layout, 2σ error bars, and
    per GPU count the ideal: the single-device (baseline) throughput times the device count."""
    groups = _groups([r for r in layouts if r["throughput_mean"] is not None], SCALING_GROUP)
    fig, axes = _grid(len(groups))
    for ax, group in zip(axes, groups):
        key = tuple(group[0][k] for k in SCALING_GROUP)
        base = _baseline([r for r in scaling or [] if tuple(r[k] for k in SCALING_GROUP) == key], "throughput_mean")
        ticks, labels, x, ideal_drawn = [], [], 0, False
        for rows in _groups(group, ("gpus",)):
            xs = [x + i for i in range(len(rows))]
            ax.bar(xs, [r["throughput_mean"] for r in rows], yerr=[_nan(r["throughput_2sigma"]) for r in rows],
                   capsize=4, label=f"{rows[0]['gpus']} {_unit(rows[0])}s")
            if base and base["gpus"]:
                ideal = base["throughput_mean"] * rows[0]["gpus"] / base["gpus"]
                ax.hlines(ideal, xs[0] - 0.45, xs[-1] + 0.45, colors="k", linestyles="--", linewidth=1,
                          label=None if ideal_drawn else f"ideal: {base['layout']} x N")
                ideal_drawn = True
            ticks += xs
            labels += [r["layout"] for r in rows]
            x += len(rows) + 1
        ax.set_xticks(ticks, labels)
        ax.set_ylim(bottom=0)  # a 2σ bar longer than its bar stops at zero
        ax.set_xlabel("layout (nodes x " + ("CPU ranks" if _on_cpus(group[0]) else "GPUs") + " per node)")
        ax.set_ylabel("throughput (samples/s), mean ± 2σ")
        ax.set_title(_title(group[0], group), fontsize=10)
        ax.legend(fontsize=8)
    return fig


def series_labels(fig: Figure) -> list[list[str]]:
    """Each panel's legend entries, in order (lines, error-bar and bar containers)."""
    return [ax.get_legend_handles_labels()[1] for ax in fig.axes]


def _any(rows, key) -> bool:
    return any(r[key] is not None for r in rows)


# file -> (does the report have data for it, figure maker, why it is not written otherwise)
PLOTS = {
    "throughput_vs_gpus.png": (lambda t: _any(t.scaling, "throughput_mean"),
                               lambda t: throughput_figure(t.scaling), "no successful throughput runs"),
    "efficiency_vs_gpus.png": (lambda t: _any(t.scaling, "efficiency"),
                               lambda t: efficiency_figure(t.scaling), "no speed-up could be computed"),
    "layouts_bars.png": (lambda t: _any(t.layouts, "throughput_mean"), lambda t: layouts_figure(t.layouts, t.scaling),
                         "no GPU count was run with more than one layout"),
    "time_to_train.png": (lambda t: _any(t.time_to_train, "ttt_min"),
                          lambda t: time_to_train_figure(t.time_to_train), "no time-to-train score"),
}


def write_plots(tables: Tables, out: Path) -> tuple[list[Path], list[str]]:
    """Write each plot that has data; returns (written paths, one reason per plot not written)."""
    written, skipped = [], []
    for name, (has_data, make, reason) in PLOTS.items():
        if not has_data(tables):
            skipped.append(f"{name} not written: {reason}")
            continue
        fig = make(tables)
        path = Path(out) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{name}.tmp{os.getpid()}")
        fig.savefig(tmp, format="png", dpi=100)
        os.replace(tmp, path)
        written.append(path)
    return written, skipped
