"""Why a layout took the time to train it took: each layout's time to train as a waterfall from the
ideal, for time-to-accuracy sweeps and published MLPerf logs alike.

    hvdbench report results/r50-tta                  # ttt_waterfall.csv, ttt_waterfall.png, a summary.md section
    hvdbench report --mllog training_results_v5.1/University-of-Florida
    parts, notes = layout_parts(runs, tables.time_to_train)
    rows = waterfall_rows(parts, tables.time_to_train, falls)     # falls: waterfall.waterfall_rows

A run's time to train (run_start -> run_stop) is S / T + E + O: S what it trained (samples, or
epochs where its log does not give the training set's size), T its training rate (S over the time
spent training, evaluation excluded), E the time evaluating and O the rest. Each comes from the run's
own events (hvdbench.results.mllog.summary._ttt_parts says which, and the table names the source of
every figure): samples_count at run_stop or epochs x train_samples; block or epoch intervals, else
tracked_stats throughput; eval_start/eval_stop.

A layout's figures are the means over the runs its MLPerf score keeps (the olympic mean drops the
fastest and the slowest), so they add up to its score. With k = the layout's GPUs / the baseline's:

    ideal       = ttt(base) / k
    convergence = (S_L - S_base) / T_L                     extra samples, at the layout's own rate
    throughput  = S_base x (1 / T_L - 1 / (k x T_base))    the baseline's samples, slower than k x its rate
                  split into communication / data / compute / unattributed in the shares the throughput
                  waterfall (waterfall.py) finds at the same layout and batch; unattributed otherwise
    evaluation  = E_L - E_base / k
    other       = O_L - O_base / k
    ideal + convergence + throughput + evaluation + other = measured, exactly.

A negative part is a gain (the layout spent less than the baseline's share). The unit is minutes.
"""

from __future__ import annotations

import math
import re
import statistics
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hvdbench.results.analyses.waterfall import WaterfallRow
from hvdbench.results.records.rows import TTT_GROUP, ReportRow, TttGroup, beside
from hvdbench.results.render.tables import figure_time_unit, markdown_table, pages, write_table
from hvdbench.results.stats.aggregate import (OLYMPIC_DROP, OLYMPIC_MIN_RUNS, TimeToTrainRow, device_word, group_title,
                                               system_of, where_ran)
from hvdbench.topology import Layout



def group_values(r) -> tuple:
    """A run's TTT_GROUP values, as the time-to-train table groups it (system: its devices or the
    published system's group name; the other keys are the run's own fields of those names)."""
    return tuple(system_of(r) if k == "system" else getattr(r, k) for k in TTT_GROUP)


@dataclass
class LayoutParts:
    """One time-to-train row's parts: the means over the runs its score keeps (`kept_runs`)."""

    group: TttGroup
    layout: str
    nodes: int
    gpus_per_node: int
    gpus: int
    global_batch: int
    runs_used: int
    unit: str  # samples | epochs
    trained: float  # S
    train_s: float  # S / T
    eval_s: float  # E
    other_s: float  # O
    ttt_s: float  # the score, in seconds
    trained_from: str = ""
    train_from: str = ""
    eval_from: str = ""
    rows: list = field(default_factory=list, repr=False)  # its TimeToTrainRow (hosts, link: the plots)
    result: str = ""  # a published row's systems file (two at one layout: one per round or stack)
    accumulation: int = 1  # micro-batches per optimizer step (a published log's gradient_accumulation_steps)
    evals: float = 0.0  # evaluations per run (the kept runs' mean; 0: not counted)
    repeat_cv: float | None = None  # its runs' spread of time to train (std / mean; None: one run, or unknown)
    # Where a published layout ran (issue 59 item 3: other submitters' results of the same accelerator and
    # benchmark are the time-to-train fit's prior, predict.prior): its systems JSON's accelerator_model_name,
    # its submitter and its round's ruleset ('' for a sweep's runs, which have none of them).
    accelerator: str = ""
    submitter: str = ""
    ruleset: str = ""

    @property
    def throughput(self) -> float:
        """T: what was trained per second while training."""
        return self.trained / self.train_s if self.train_s > 0 else math.nan

    @property
    def key(self) -> tuple:
        return self.group.ttt_key

    @property
    def place(self) -> Layout:
        """Its layout (`layout` is how the tables write it: str(place))."""
        return Layout(self.nodes, self.gpus_per_node)

    @property
    def gpus_per_replica(self) -> float:
        """At least this many GPUs hold one data-parallel replica: GPUs x accumulation / global batch
        (each replica takes one sample or more per micro-batch), and at least 1."""
        return max(1.0, self.gpus * self.accumulation / self.global_batch) if self.global_batch else math.inf

    @property
    def least_model_parallel(self) -> int:
        """The least model-parallel degree the layout needs: its GPUs over the most data-parallel
        replicas its global batch allows (global batch / accumulation), rounded up; 0 where the batch is
        unknown. 1 says only that the batch allows one replica per GPU: a lower bound, since the logs do
        not say whether the layout ran model-parallel all the same."""
        return math.ceil(self.gpus_per_replica - 1e-9) if self.global_batch else 0


def kept_runs(done: list, missed: int, drop: int = 1) -> list:
    """The converged runs a layout's MLPerf score averages (aggregate.olympic_score's rule): with at
    least max(OLYMPIC_MIN_RUNS, 2 drop + 1) runs, all but the `drop` fastest and slowest (a run that
    did not converge counts as the slowest); with fewer, every converged run; none for a DNF."""
    n = len(done) + missed
    if missed > drop or (missed and n < max(OLYMPIC_MIN_RUNS, 2 * drop + 1)):
        return []
    ordered = sorted(done, key=lambda r: r.time_to_train_s)
    if n < max(OLYMPIC_MIN_RUNS, 2 * drop + 1):
        return ordered
    return (ordered + [None] * missed)[drop:n - drop]


def layout_parts(runs, ttt_rows: list[TimeToTrainRow]) -> tuple[list[LayoutParts], list[str]]:
    """(each time-to-train row's parts, one line per row that has none and why)."""
    by_key: dict[tuple, list] = {}
    for r in runs:
        if r.mode == "time_to_accuracy" and r.status == "success" and r.time_to_train_s is not None:
            by_key.setdefault(group_values(r) + (r.layout, r.global_batch, r.result), []).append(r)
    out, notes = [], []
    for row in ttt_rows:
        if row.ttt_min is None:
            continue
        done = by_key.get(row.ttt_key + (row.layout, row.global_batch, row.result or ""), [])
        kept = kept_runs(done, row.runs - row.converged, OLYMPIC_DROP.get(row.model, 1))
        where = f"{row.model} {row.layout} (batch {row.global_batch}, {row.system})"
        lacking = [r for r in kept if None in (r.trained, r.train_s, r.eval_s)]
        if not kept or lacking:
            notes.append(f"{where}: no time-to-train parts: "
                         + (f"run {lacking[0].run_id} has no event log to read them from (mllog.txt)"
                            if lacking else "none of its runs is scored"))
            continue
        if any(r.train_s <= 0 or r.trained <= 0 for r in kept):
            notes.append(f"{where}: no time-to-train parts: a run's log gives no training time or nothing trained")
            continue
        units = {r.trained_unit for r in kept}
        if len(units) > 1:
            notes.append(f"{where}: no time-to-train parts: its runs count progress in {' and '.join(sorted(units))}")
            continue
        mean = statistics.fmean
        ttt_s = mean(r.time_to_train_s for r in kept)
        train_s, eval_s = mean(r.train_s for r in kept), mean(r.eval_s for r in kept)
        out.append(LayoutParts(
            group=row.ttt_group(), layout=row.layout, nodes=row.nodes,
            gpus_per_node=row.gpus_per_node, gpus=row.gpus, global_batch=row.global_batch,
            runs_used=len(kept), unit=units.pop(), trained=mean(r.trained for r in kept), train_s=train_s,
            eval_s=eval_s, other_s=ttt_s - train_s - eval_s, ttt_s=ttt_s,
            trained_from=_sources(r.trained_from for r in kept), train_from=_sources(r.train_from for r in kept),
            eval_from=_sources(r.eval_from for r in kept), rows=[row], result=row.result or "",
            accumulation=max(max(r.accumulation or 1, r.accum_steps or 1) for r in kept),
            evals=mean(r.evals or 0 for r in kept),
            repeat_cv=row.ttt_std_min / row.ttt_mean_min if row.ttt_std_min and row.ttt_mean_min else None,
            accelerator=kept[0].accelerator, submitter=getattr(kept[0], "submitter", ""), ruleset=kept[0].ruleset))
    return out, notes


def _sources(values) -> str:
    """The runs' sources of one figure, without each run's counts ("block_start/block_stop (13)"):
    one when they agree, else each (what a table must show)."""
    return " | ".join(dict.fromkeys(re.sub(r"\s*\(\d+[^)]*\)", "", v) for v in values if v))


# --- the waterfall ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Decomposition:
    """A layout's time to train against its baseline's, in minutes (module docstring): ideal +
    convergence + throughput + evaluation + other = measured, exactly."""

    gpu_ratio: float  # k: the layout's GPUs / the baseline's
    ideal_min: float
    convergence_min: float
    throughput_min: float
    eval_min: float
    other_min: float
    measured_min: float


def decompose(base: LayoutParts, row: LayoutParts) -> Decomposition:
    """The exact split of `row`'s time to train against `base`'s (module docstring), in minutes."""
    k = row.gpus / base.gpus
    t_base, t_row = base.throughput, row.throughput
    return Decomposition(
        gpu_ratio=k, ideal_min=base.ttt_s / k / 60, convergence_min=(row.trained - base.trained) / t_row / 60,
        throughput_min=base.trained * (1 / t_row - 1 / (k * t_base)) / 60,
        eval_min=(row.eval_s - base.eval_s / k) / 60, other_min=(row.other_s - base.other_s / k) / 60,
        measured_min=row.ttt_s / 60)


def _split(fall: WaterfallRow | None) -> tuple[float, float, float, float] | None:
    """Shares of the throughput loss (comm, data, compute, unattributed) in a throughput waterfall
    row, or None when it has no breakdown or lost nothing to split. Time to train keeps waiting for
    the slowest rank in its communication (no part of its own there)."""
    if not fall or fall.comm_loss is None:
        return None
    total = fall.ideal - fall.measured
    if not total or not math.isfinite(total):
        return None
    return ((fall.comm_loss / total) + (fall.imbalance_loss or 0.0) / total, fall.data_loss / total,
            fall.compute_loss / total, fall.unattributed / total)


def _matching_fall(falls, base: LayoutParts, row: LayoutParts) -> WaterfallRow | None:
    """The throughput waterfall row of the same model group, layout and baseline, at the per-GPU
    batch of this time-to-accuracy layout (runs of either mode; the sweep's throughput runs)."""
    for fall in falls or ():
        batch = (fall.batch_per_gpu or 0) * (fall.accum_steps or 1) * row.gpus
        if (fall.ttt_key == row.key and fall.layout == row.layout and fall.baseline == base.layout
                and batch == row.global_batch):
            return fall
    return None


@dataclass(frozen=True, kw_only=True)
class TttWaterfallRow(TttGroup, ReportRow):
    """ttt_waterfall.csv: one row per group, layout and global batch above the baseline. *_min:
    minutes; `throughput` is what was trained per second while training (`unit` per second)."""

    layout: str
    nodes: int
    gpus_per_node: int
    gpus: int
    global_batch: int
    baseline: str
    base_global_batch: int  # the baseline's global batch
    gpu_ratio: float  # the layout's GPUs / the baseline's (k)
    ideal_min: float  # the baseline's time to train / gpu_ratio
    convergence_min: float
    throughput_min: float
    # the throughput part split as the throughput waterfall splits it (None: no breakdown to split by)
    comm_min: float | None
    data_min: float | None  # the throughput part's data-stall share (the throughput waterfall's)
    compute_min: float | None  # the throughput part's compute share (the throughput waterfall's)
    # the throughput part's unexplained share; all of it where there is no breakdown to split by
    unattributed_min: float
    eval_min: float
    other_min: float
    measured_min: float  # the layout's time to train: the mean over the runs its MLPerf score keeps
    unit: str  # what trained counts: samples, or epochs where the log does not give the training set's size
    trained: float  # what the layout trained to the target (S), the mean over the runs its score keeps
    base_trained: float  # what the baseline trained to the target
    throughput: float  # trained / train_s: what was trained per second while training
    base_throughput: float  # the baseline's
    train_s: float  # the time spent training (evaluation excluded), the runs' mean
    base_train_s: float  # the baseline's
    eval_s: float  # the time spent evaluating (eval_start -> eval_stop), the runs' mean
    base_eval_s: float  # the baseline's
    other_s: float  # the rest of the time to train: ttt - train_s - eval_s
    base_other_s: float  # the baseline's
    runs_used: int  # the layout's runs its MLPerf score keeps, which the figures are the means of
    base_runs_used: int  # the baseline's
    # where each figure came from: the events read (summary._ttt_parts), and the throughput split's source
    trained_from: str
    train_from: str  # the events train_s was read from
    eval_from: str  # the events eval_s was read from
    split_from: str  # the throughput waterfall row the throughput part was split by; empty where none
    note: str
    rows: tuple = beside(())  # the baseline's and the layout's time-to-train rows: where the runs ran (the plot)


def waterfall_rows(parts: list[LayoutParts], ttt_rows: list[TimeToTrainRow], falls=()) -> list[TttWaterfallRow]:
    """One row per layout (and global batch) of each group above its baseline: the time-to-train
    table's baseline row, where it has parts."""
    by_group: dict[tuple, list[LayoutParts]] = {}
    for p in parts:
        by_group.setdefault(p.key, []).append(p)
    base_rows = {r.ttt_key: r for r in ttt_rows if r.layout == r.baseline and r.speedup == 1.0}
    out = []
    for key, group in by_group.items():
        b_row = base_rows.get(key)
        base = next((p for p in group if b_row and p.layout == b_row.layout
                     and p.global_batch == b_row.global_batch), None)
        if base is None:
            continue
        for p in sorted(group, key=lambda p: (p.gpus, p.nodes, p.global_batch)):
            if p is base or not p.gpus:  # a layout the logs do not give has no GPU ratio
                continue
            out.append(_row(base, p, _matching_fall(falls, base, p)))
    return out


def _row(base: LayoutParts, p: LayoutParts, fall: WaterfallRow | None) -> TttWaterfallRow:
    parts = decompose(base, p)
    shares = _split(fall)
    if shares is None:
        comm = data = compute = None
        unattributed, split_from = parts.throughput_min, ""
    else:
        comm, data, compute, unattributed = (share * parts.throughput_min for share in shares)
        split_from = (f"throughput waterfall of the {fall.mode} runs at batch {fall.batch_per_gpu}"
                      f"/GPU ({fall.layout} vs {fall.baseline}, waterfall.csv)")
    return TttWaterfallRow(
        **vars(p.group), layout=p.layout, nodes=p.nodes, gpus_per_node=p.gpus_per_node, gpus=p.gpus,
        global_batch=p.global_batch, baseline=base.layout, base_global_batch=base.global_batch,
        gpu_ratio=parts.gpu_ratio, ideal_min=parts.ideal_min, convergence_min=parts.convergence_min,
        throughput_min=parts.throughput_min, comm_min=comm, data_min=data, compute_min=compute,
        unattributed_min=unattributed, eval_min=parts.eval_min, other_min=parts.other_min,
        measured_min=parts.measured_min, unit=p.unit, trained=p.trained, base_trained=base.trained,
        throughput=p.throughput, base_throughput=base.throughput, train_s=p.train_s, base_train_s=base.train_s,
        eval_s=p.eval_s, base_eval_s=base.eval_s, other_s=p.other_s, base_other_s=base.other_s,
        runs_used=p.runs_used, base_runs_used=base.runs_used, trained_from=p.trained_from, train_from=p.train_from,
        eval_from=p.eval_from, split_from=split_from,
        note=(f"the baseline counts {base.unit} and this layout {p.unit}: the convergence part mixes them"
              if base.unit != p.unit else ""),
        rows=(*base.rows, *p.rows))


# --- Markdown, plot, files --------------------------------------------------------------------------

PARTS_SHOWN = ("convergence", "comm", "data", "compute", "throughput (unattributed)", "evaluation", "other")


def _shown(r: TttWaterfallRow) -> tuple[float | None, ...]:
    """The row's parts in PARTS_SHOWN's order, minutes."""
    return (r.convergence_min, r.comm_min, r.data_min, r.compute_min, r.unattributed_min, r.eval_min, r.other_min)


def layout_names(rows: list[TttWaterfallRow]) -> dict[int, str]:
    """Each row's layout as its table and panel name it: with its systems file's folder after it where
    another row of the group has the same layout, or where it is its baseline's layout (another systems
    file's: a -POWER submission repeating its system's runs drew two identical Dell LoRA 8x8 panels in
    v4.1), so that no two panels read the same."""
    def result(r: TttWaterfallRow) -> str:
        return r.rows[-1].result if r.rows else ""

    seen = Counter((r.ttt_group(), r.layout) for r in rows)
    return {id(r): r.layout + (f" [{result(r)}]" if result(r) and (seen[(r.ttt_group(), r.layout)] > 1
                                                                   or r.layout == r.baseline) else "")
            for r in rows}


def markdown(rows: list[TttWaterfallRow]) -> str:
    if not rows:
        return ""

    def num(v):
        return "–" if v is None else f"{v:+,.2f}" if v else "0.00"

    def rate(r, value):
        unit = r.unit or "samples"
        return f"{value:,.4g} {unit}/s"

    parts = ["## Why each layout took the time to train it took (time-to-train waterfall)\n",
             "ideal (the baseline's time to train / GPU ratio) + convergence (extra samples at the layout's rate) "
             "+ throughput (the baseline's samples, slower than the GPU ratio × its rate; comm / data / compute from "
             "the throughput waterfall where the runs had a step breakdown) + evaluation + other = measured, in "
             "minutes; a negative part is a gain. From each run's own events (hvdbench/results/analyses/ttt.py), "
             "over the runs the MLPerf score keeps.\n"]
    groups: dict[TttGroup, list[TttWaterfallRow]] = {}
    for r in rows:
        groups.setdefault(r.ttt_group(), []).append(r)
    named = layout_names(rows)
    for group, rs in groups.items():
        parts.append(f"### {group_title(group)}\n")
        where = where_ran([x for r in rs for x in r.rows])  # as the plots say under each panel
        if where:
            parts.append(f"{where}\n")
        parts.append(markdown_table(
            ["layout (batch)", "vs", "ideal", *[f"+ {name}" for name in PARTS_SHOWN], "= measured",
             "trained (layout vs baseline)", "rate while training"],
            [[f"{named[id(r)]} ({r.global_batch})", f"{r.baseline} ({r.base_global_batch})",
              f"{r.ideal_min:,.2f}", *[num(v) for v in _shown(r)], f"{r.measured_min:,.2f}",
              f"{r.trained:,.4g} vs {r.base_trained:,.4g} {r.unit}",
              f"{rate(r, r.throughput)} vs {rate(r, r.base_throughput)}"] for r in rs]) + "\n")
        sources = dict.fromkeys(f"{what}: {source}" for r in rs for what, source in
                                (("trained", r.trained_from), ("training time", r.train_from),
                                 ("evaluation", r.eval_from), ("throughput split", r.split_from)) if source)
        parts.append("From: " + "; ".join(sources) + ".\n")
        parts += [f"- {r.layout}: {r.note}\n" for r in rs if r.note]
    return "\n".join(parts)


ADDS, SAVES = "tab:red", "tab:green"


def figure(rows: list[TttWaterfallRow], every: list[TttWaterfallRow] | None = None):
    """One panel per layout (write() puts 12 a page, tables.pages): the ideal, each part (red: time it
    adds, green: time it saves), the measured time, as a waterfall in minutes (seconds when every time
    of `every`, default `rows`, is under one), each bar with its number; under each title the devices,
    runs, hosts and link."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    from hvdbench.results.render.plots import waterfall_bars, waterfall_context

    cols = min(3, len(rows))
    nrows = math.ceil(len(rows) / cols)
    fig = Figure(figsize=(5.6 * cols, 4.6 * nrows + 0.4), layout="constrained")
    FigureCanvasAgg(fig)
    labels = ["ideal", "converg.", "comm", "data", "compute", "thru.\n(unattr.)", "eval", "other", "measured"]
    # Seconds when every time is under a minute, the baselines' scores too: as time_to_train.png draws them.
    unit, k = figure_time_unit([r.measured_min for r in every or rows]
                               + [x.ttt_min for r in every or rows for x in r.rows])
    digits = 1 if unit == "s" else 2
    named = layout_names(every or rows)
    for i, r in enumerate(rows):
        ax = fig.add_subplot(nrows, cols, i + 1)
        level = r.ideal_min * k
        tops = [level]
        bottoms, heights, colors, texts = [0], [level], ["tab:blue"], [f"{level:,.{digits}f}"]
        for value in _shown(r):
            part = None if value is None else value * k
            if part is None or abs(part) < 0.5 * 10 ** -digits:  # not measured (a dash), or 0 at this precision
                bottoms.append(level)
                heights.append(0)
                colors.append("none")
                texts.append("–" if part is None else f"{0:.{digits}f}")
                level += part or 0.0
                continue
            bottoms.append(min(level, level + part))
            heights.append(abs(part))
            colors.append(ADDS if part > 0 else SAVES)
            texts.append(f"{part:+,.{digits}f}")
            level += part
            tops.append(level)
        measured = r.measured_min * k
        bottoms.append(0)
        heights.append(measured)
        colors.append("tab:gray")
        texts.append(f"{measured:,.{digits}f}")
        top = max(tops + [measured])
        least = 0.01 * top  # a hairline bar is drawn this tall; its number is exact
        heights = [h if h == 0 or h >= least or c == "none" else least for h, c in zip(heights, colors)]
        waterfall_bars(ax, labels, bottoms, heights, colors, texts, signed=(ADDS, SAVES), label_size=7)
        ax.set_ylabel("seconds" if unit == "s" else "minutes", fontsize=8)
        ax.set_ylim(0, top * 1.15)
        below = waterfall_context(r)
        # The group as its section's heading names it: engines, precisions and levers told apart.
        ax.set_title(textwrap.fill(f"{named[id(r)]} (batch {r.global_batch}) vs {r.baseline} (batch "
                                   f"{r.base_global_batch}): {group_title(r)}", 64)
                     + (f"\n{below}" if below else ""), fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    fig.legend(handles=[Patch(color="tab:blue", label=f"ideal: the baseline's time / {device_word(rows[0])} ratio"),
                        Patch(color=ADDS, label="adds time"), Patch(color=SAVES, label="saves time"),
                        Patch(color="tab:gray", label="measured (MLPerf score)")],
               loc="outside lower center", ncol=2 if cols == 1 else 4, fontsize=8, frameon=False)
    return fig


def write(rows: list[TttWaterfallRow], out, formats=("csv", "png")) -> list[Path]:
    """ttt_waterfall.csv (always, with its header) and ttt_waterfall.png (when there are rows)."""
    return write_table(out, "ttt_waterfall", rows, TttWaterfallRow.columns(), formats,
                       (lambda: pages("ttt_waterfall", rows, lambda page: figure(page, rows))) if rows else None)
