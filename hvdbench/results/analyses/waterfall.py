"""Why a layout lost what it lost: each layout's throughput as a waterfall from the ideal.

    rows = waterfall_rows(runs, tables.scaling, twins, compute)   # WaterfallRow per layout above the baseline
    write(rows, Path("report"))                      # waterfall.csv and waterfall.png; markdown(rows)

ideal = the baseline's throughput per GPU x the layout's GPUs. The runs' step-time breakdown
(RunResult.data_s ... other_s: PyTorch throughput runs) says where the step time went; with the
per-GPU batch equal in a group, throughput goes as 1 / step time, so the layout's step-time growth over
the baseline's (step - base_step) costs ideal x (1 - base_step / step), and each part its share of it:
ideal x (its growth) / step, in no order:

    ideal - communication (exposed allreduce wait) - imbalance (waiting for the slowest rank) - data
    stall - compute change (forward, backward, update and the rest of the step) - unattributed = measured

(Taken one after another instead, the part taken first is charged at the baseline's short step and the
last at the layout's long one: a slowed node's 116 ms of imbalance came out smaller than 49 ms of
communication taken before it, issue 47's rehearsal of a bad node.)

Imbalance, where the runs have per-rank times (RUN/ranks.csv): rank 0's wait at the gradient exchange
holds its wait for the slowest rank's compute, which is no communication at all. That part (the
slowest rank's compute minus rank 0's, at most rank 0's whole wait) is taken out of the
communication: a layout with a slow GPU or node loses to imbalance, not to the network. Without
per-rank times (or under fsdp, whose compute holds its all-gathers' waits for the others) the
imbalance column is empty and the communication keeps it.

`unattributed` is what the rank-0 step times do not explain (the measured throughput is the slowest
rank's), so the bars add up to the measured throughput exactly. Without a breakdown (TensorFlow runs,
published logs) the whole loss is unattributed.

With `sweep --explain` twins (the same layouts on --synthetic data, SWEEP/explain/runs.csv) the data
stall is measured differentially instead of from the time spent waiting for batches: r = real
throughput / its twin's at a layout (the share of the synthetic rate real data leaves), and

    data loss = ideal x (1 - r_layout / r_baseline)

what the layout would reach if its data kept up as well as the baseline's did (`data_from` says
which way each row's data loss was measured).
"""

from __future__ import annotations

import math
import statistics
import textwrap
from dataclasses import dataclass
from pathlib import Path

from hvdbench.contracts.engines import waits_for_peers
from hvdbench.results.analyses.efficiency import mfu_of
from hvdbench.results.records.rows import ReportRow, ScalingGroup, beside
from hvdbench.results.render.tables import markdown_table, pages, write_table
from hvdbench.results.stats.aggregate import ScalingRow, group_title, scaling_key, where_ran

PARTS = ("data_s", "compute_s", "comm_s", "update_s", "other_s")
LOSSES = ("comm_loss", "imbalance_loss", "data_loss", "compute_loss", "unattributed")


def rank0_wait(r) -> float | None:
    """What rank 0 of a run waited at the exchange for the slowest rank's compute (s per step, within
    its comm_s), from the run's per-rank times; 0 for one rank; None without per-rank times."""
    if (r.world_size or 1) < 2:
        return 0.0
    if waits_for_peers(r.engine):  # its compute holds the waits for the others (fsdp's all-gathers)
        return None
    timed = {x.rank: x.compute_s for x in r.ranks if x.compute_s is not None}
    if 0 not in timed or len(timed) < 2:
        return None
    return min(max(0.0, max(timed.values()) - timed[0]), r.comm_s or 0.0)


def _timed(runs) -> list:
    return [r for r in runs if r.status == "success" and all(getattr(r, p) is not None for p in PARTS)]


def mean_parts(runs) -> dict[str, float] | None:
    """The mean of each step-time part over the successful runs that have all of them."""
    timed = _timed(runs)
    if not timed:
        return None
    return {p: statistics.fmean(getattr(r, p) for r in timed) for p in PARTS}


def mean_wait(runs) -> float | None:
    """The mean rank0_wait of the runs mean_parts averages, where every one of them has it."""
    waits = [rank0_wait(r) for r in _timed(runs)]
    return None if not waits or None in waits else statistics.fmean(waits)


def _twin_rates(twins) -> dict[tuple, float]:
    """Mean successful throughput of the twins per (scaling group, layout)."""
    rates: dict[tuple, list[float]] = {}
    for r in twins:
        if r.status == "success" and r.throughput:
            rates.setdefault(scaling_key(r) + (r.layout,), []).append(r.throughput)
    return {k: statistics.fmean(v) for k, v in rates.items()}


@dataclass(frozen=True, kw_only=True)
class WaterfallRow(ScalingGroup, ReportRow):
    """waterfall.csv: why one layout lost what it lost against its group's baseline, samples/s."""

    layout: str
    nodes: int
    gpus_per_node: int
    gpus: int
    baseline: str
    ideal: float  # the baseline's throughput per GPU x this layout's GPUs
    # exposed communication's loss: ideal x its step-time growth over the baseline's / step, less the imbalance
    comm_loss: float | None
    # waiting for the slowest rank (runs with RUN/ranks.csv), taken out of what rank 0 waited at the exchange
    imbalance_loss: float | None
    data_loss: float | None  # the data stall's loss: ideal x its growth / step, or from the synthetic twins (data_from)
    # the compute change's loss (forward, backward, update and the rest of the step): ideal x its growth / step
    compute_loss: float | None
    unattributed: float  # ideal - the losses - measured: what rank 0's step times do not explain
    measured: float  # the layout's throughput_mean (scaling.csv's)
    data_from: str  # breakdown | synthetic twin | '' (no breakdown)
    base_step_ms: float | None  # the baseline's mean step: its runs' breakdown summed
    step_ms: float | None
    data_ms: float | None
    compute_ms: float | None
    comm_ms: float | None
    update_ms: float | None
    other_ms: float | None
    # the layout's MFU (the compute section's, efficiency.mfu_of): how far its compute part was from the hardware
    compute_mfu: float | None
    rows: tuple = beside(())  # the scaling rows it came from (baseline, layout): the plot's devices, hosts, runs


def waterfall_rows(runs, scaling: list[ScalingRow], twins=(), compute=()) -> list[WaterfallRow]:
    """One row per layout of each group above its baseline; `compute`: the compute section's rows
    (efficiency.compute_rows), whose MFU each row names."""
    twin = _twin_rates(twins)
    parts: dict[tuple, dict[str, float] | None] = {}
    by_layout: dict[tuple, list] = {}
    for r in runs:
        by_layout.setdefault(scaling_key(r) + (r.layout,), []).append(r)
    waits: dict[tuple, float | None] = {}
    for key, layout_runs in by_layout.items():
        parts[key], waits[key] = mean_parts(layout_runs), mean_wait(layout_runs)
    rows_by_group: dict[tuple, list[ScalingRow]] = {}
    for row in scaling:
        rows_by_group.setdefault(row.scaling_key, []).append(row)
    out = []
    for key, rows in rows_by_group.items():
        base = next((r for r in rows if r.layout == r.baseline and r.throughput_mean), None)
        if base is None:
            continue
        base_parts = parts.get(key + (base.layout,))
        for row in rows:
            if row is base or row.throughput_mean is None or not row.gpus:
                continue
            twins_of = (twin.get(key + (base.layout,)), twin.get(key + (row.layout,)))
            ratios = ((base.throughput_mean / twins_of[0], row.throughput_mean / twins_of[1]) if all(twins_of)
                      else None)
            out.append(_waterfall(base, row, base_parts, parts.get(key + (row.layout,)),
                                  (waits.get(key + (base.layout,)), waits.get(key + (row.layout,))), ratios,
                                  mfu_of(compute, row.scaling_group(), row.layout)))
    return out


def _waterfall(base: ScalingRow, row: ScalingRow, base_parts, row_parts, waits=(None, None), twin_ratios=None,
               mfu: float | None = None) -> WaterfallRow:
    """`waits`: the baseline's and the layout's mean rank0_wait (None: no per-rank times). `twin_ratios`:
    (r_baseline, r_layout), real throughput over its synthetic twin's at each layout: the data loss is
    measured differentially instead, and `unattributed` re-balanced (exact sum)."""
    ideal = base.throughput_mean / base.gpus * row.gpus
    measured = row.throughput_mean
    losses = dict.fromkeys(LOSSES[:4])
    step = base_step = None
    if base_parts and row_parts:
        base_step, step = sum(base_parts.values()), sum(row_parts.values())
        delta = {p: row_parts[p] - base_parts[p] for p in PARTS}
        split = None not in waits
        imbalance = waits[1] - waits[0] if split else 0.0
        changes = {"comm_loss": delta["comm_s"] - imbalance, "imbalance_loss": imbalance, "data_loss": delta["data_s"],
                   "compute_loss": delta["compute_s"] + delta["update_s"] + delta["other_s"]}
        # The changes add up to step - base_step, so the losses to ideal x (1 - base_step / step).
        losses = {name: ideal * change / step if step > 0 else 0.0 for name, change in changes.items()}
        if not split:
            losses["imbalance_loss"] = None  # not measured: the communication keeps it
    data_from = "breakdown" if losses["data_loss"] is not None else ""
    if twin_ratios is not None:
        losses["data_loss"] = ideal * (1.0 - twin_ratios[1] / twin_ratios[0])
        data_from = "synthetic twin"
    explained = sum(v for v in losses.values() if v is not None)
    return WaterfallRow(
        **vars(row.scaling_group()), layout=row.layout, nodes=row.nodes, gpus_per_node=row.gpus_per_node,
        gpus=row.gpus, baseline=base.layout, ideal=ideal, **losses, unattributed=ideal - measured - explained,
        measured=measured, data_from=data_from, base_step_ms=None if base_step is None else 1e3 * base_step,
        step_ms=None if step is None else 1e3 * step,
        **{f"{p[:-2]}_ms": None if not row_parts else 1e3 * row_parts[p] for p in PARTS},
        compute_mfu=mfu, rows=(base, row))


def markdown(rows: list[WaterfallRow]) -> str:
    if not rows:
        return ""

    def num(v):
        return "–" if v is None else f"{v:,.1f}"

    groups: dict[ScalingGroup, list[WaterfallRow]] = {}
    for r in rows:
        groups.setdefault(r.scaling_group(), []).append(r)
    parts = ["## Why each layout lost what it lost (throughput waterfall)\n",
             "ideal (the baseline's rate per GPU × GPUs) − exposed communication − imbalance (rank 0 waiting for "
             "the slowest rank's compute, where the runs have per-rank times; – where not, and the communication "
             "keeps it) − data stall − compute change − unattributed = measured, in samples/s; the step times "
             "(rank 0's mean, ms) say where each layout's step went; MFU: the layout's model FLOPs utilisation (the compute table). A negative loss is a gain. (twin): the data stall measured against the "
             "layout's run on synthetic data (`sweep --explain`).\n"]
    bare = len(rows) - len(broken_down(rows))
    if bare:
        parts.append(f"{bare} layout(s) without a step breakdown (published logs, --no-breakdown): their whole loss "
                     "is unattributed, said in their rows here and not drawn in waterfall.png.\n")
    for group, rs in groups.items():
        parts.append(f"### {group_title(group)}\n")  # the scaling tables' heading of the group
        where = where_ran([x for r in rs for x in r.rows])  # as the plots say under each panel
        if where:
            parts.append(f"{where}\n")
        parts.append(markdown_table(
            ["layout", "vs", "ideal", "− comm", "− imbalance", "− data", "− compute", "− unattributed", "= measured",
             "step ms (baseline → layout)", "data / compute / comm / update / other ms"],
            [[r.layout, r.baseline, num(r.ideal), num(r.comm_loss), num(r.imbalance_loss),
              num(r.data_loss) + (" (twin)" if r.data_from == "synthetic twin" else ""),
              num(r.compute_loss) + (f" (MFU {100 * r.compute_mfu:.1f} %)" if r.compute_mfu is not None
                                        else ""), num(r.unattributed), num(r.measured),
              "–" if r.step_ms is None else f"{r.base_step_ms:.1f} → {r.step_ms:.1f}",
              "–" if r.compute_ms is None else " / ".join(f"{ms:.1f}" for ms in
                                                             (r.data_ms, r.compute_ms, r.comm_ms, r.update_ms,
                                                              r.other_ms))]
             for r in rs]) + "\n")
    return "\n".join(parts)


LOSS, GAIN = "tab:red", "tab:green"


def figure(rows: list[WaterfallRow]):
    """One panel per layout (write() puts 12 a page, tables.pages): ideal, the losses (red) and gains
    (green), measured, as a waterfall, each bar with its number; under each title the devices, runs,
    hosts and link. A loss too small to see at the panel's scale is drawn at a visible least height
    (its number is exact)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    from hvdbench.results.render.plots import waterfall_bars, waterfall_context

    cols = min(3, len(rows))
    nrows = math.ceil(len(rows) / cols)
    fig = Figure(figsize=(5.0 * cols, 4.4 * nrows + 0.4), layout="constrained")
    FigureCanvasAgg(fig)
    labels = ["ideal", "comm", "imbal.", "data", "compute", "unattrib.", "measured"]
    for i, r in enumerate(rows):
        ax = fig.add_subplot(nrows, cols, i + 1)
        top = max(r.ideal, r.measured)
        least = 0.012 * top  # a bar thinner than this is a hairline: drawn this tall, labelled exactly
        level, bottoms, heights, colors, texts = r.ideal, [0], [r.ideal], ["tab:blue"], [f"{r.ideal:,.1f}"]
        for loss in (r.comm_loss, r.imbalance_loss, r.data_loss, r.compute_loss, r.unattributed):
            if loss is None:  # not measured (no breakdown): no bar, a dash
                bottoms.append(level)
                heights.append(0)
                colors.append("none")
                texts.append("–")
                continue
            if abs(loss) < 0.05:  # nothing at the numbers' precision: no bar, and no sign to misread
                bottoms.append(level)
                heights.append(0)
                colors.append("none")
                texts.append("0.0")
                level -= loss
                continue
            drawn = max(abs(loss), least)
            bottoms.append(level - drawn if loss >= 0 else level)
            heights.append(drawn)
            colors.append(LOSS if loss >= 0 else GAIN)
            texts.append(f"−{loss:,.1f}" if loss >= 0 else f"+{-loss:,.1f}")
            level -= loss
        bottoms.append(0)
        heights.append(r.measured)
        colors.append("tab:gray")
        texts.append(f"{r.measured:,.1f}")
        waterfall_bars(ax, labels, bottoms, heights, colors, texts, signed=(LOSS, GAIN), label_size=8)
        ax.set_ylabel("samples/s", fontsize=8)
        ax.set_ylim(0, top * 1.12)  # room for the numbers above the tallest bar
        below = waterfall_context(r)
        # The group as the scaling tables name it: engines, precisions and levers told apart.
        ax.set_title(textwrap.fill(f"{r.layout} vs {r.baseline}: {group_title(r)}", 64)
                     + (f"\n{below}" if below else ""), fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    fig.legend(handles=[Patch(color="tab:blue", label="ideal: the baseline's rate per device × devices"),
                        Patch(color=LOSS, label="loss: samples/s it takes away"),
                        Patch(color=GAIN, label="gain: samples/s it adds"),
                        Patch(color="tab:gray", label="measured")],
               loc="outside lower center", ncol=2 if cols == 1 else 4, fontsize=8, frameon=False)
    return fig


def broken_down(rows: list[WaterfallRow]) -> list[WaterfallRow]:
    """The rows whose loss is split into parts: those waterfall.png draws. A layout without a step
    breakdown (published logs, runs with --no-breakdown) has its whole loss unattributed: a panel of
    ideal and measured alone, which its table row already says (the published v4.1 tree: every one
    of its 24 panels, 2 of the report's 5 pages of waterfalls)."""
    return [r for r in rows if any(v is not None for v in (r.comm_loss, r.imbalance_loss, r.data_loss,
                                                           r.compute_loss))]


def write(rows: list[WaterfallRow], out: Path, formats=("csv", "png")) -> list[Path]:
    drawn = broken_down(rows)
    return write_table(out, "waterfall", rows, WaterfallRow.columns(), formats,
                       (lambda: pages("waterfall", drawn, figure)) if drawn else None)
