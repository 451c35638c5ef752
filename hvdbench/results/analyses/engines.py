"""Engines side by side (`sweep --engines horovod,ddp,fsdp`): per layout, each engine's throughput
± 2σ, its ratio to Horovod's, and where its mean step went (data, compute, exposed communication,
update, other), so a difference between engines is explained, not just shown.

    rows = engine_rows(runs, tables.scaling)     # one row per group, layout and engine
    markdown(rows); write(rows, out, formats)    # engines.csv, engines.png, a summary.md section

Rows exist only for layouts that ran under at least two engines. The ratio's 2σ combines both
engines' relative 2σ (independent runs). The step parts are the means of the runs' own breakdown
(hvdbench.train.loop): under ddp and fsdp the exposed communication is what a synchronised step took
beyond the same step without the reduction (docs/design.md, "Engines").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from hvdbench.contracts.engines import engine_names
from hvdbench.results.analyses.waterfall import PARTS, mean_parts
from hvdbench.results.records.rows import SCALING_GROUP, ReportRow, beside
from hvdbench.results.render.tables import markdown_table, write_table
from hvdbench.results.stats.aggregate import ScalingRow, device_word, scaling_key



def _ratio(a: ScalingRow, b: ScalingRow) -> tuple[float | None, float | None]:
    """(a / b, its 2σ) of two throughput rows; the 2σ is None where either has one run (no spread known)."""
    if not a.throughput_mean or not b.throughput_mean:
        return None, None
    ratio = a.throughput_mean / b.throughput_mean
    if a.throughput_2sigma is None or b.throughput_2sigma is None:
        return ratio, None
    rel = [r.throughput_2sigma / r.throughput_mean for r in (a, b)]
    return ratio, ratio * math.sqrt(sum(x * x for x in rel))


STEP = ("data", "compute", "comm", "update", "other")  # the step's parts, as the columns name them (*_ms)


@dataclass(frozen=True, kw_only=True)
class EngineRow(ReportRow):
    """engines.csv: one row per group (without the engine), layout and engine, where a layout ran under
    two engines or more; vs_reference: throughput / the reference engine's (Horovod's)."""

    system: str
    model: str
    flavor: str
    framework: str
    precision: str
    levers: str
    mode: str
    batch_per_gpu: int
    accum_steps: int
    layout: str
    gpus: int
    engine: str
    reference: str
    runs: int
    throughput_mean: float | None
    throughput_2sigma: float | None
    vs_reference: float | None  # throughput_mean / the reference engine's at the same layout
    # 2σ of vs_reference: both engines' relative 2σ in quadrature; empty where either has one run
    vs_reference_2sigma: float | None
    # yes where |vs_reference - 1| <= vs_reference_2sigma: these runs do not tell the engines apart
    within_noise: bool | None
    data_ms: float | None
    compute_ms: float | None
    comm_ms: float | None
    update_ms: float | None
    other_ms: float | None
    # the most parameters one rank held (fsdp: its shard; else every parameter), the runs' largest
    shard_parameters: int | None
    why: str  # the step parts that differ most from the reference engine's, in words
    flags: str
    # where it ran, for the plot's subtitle (plots.context), not engines.csv's columns
    hosts: str = beside("")
    link: str = beside("")
    nodes: int = beside(0)
    intra_link: str = beside("")
    cpu_model: str = beside("")

    @property
    def step_ms(self) -> tuple[float | None, ...]:
        """The mean step's parts (STEP), ms."""
        return (self.data_ms, self.compute_ms, self.comm_ms, self.update_ms, self.other_ms)


def engine_rows(runs, scaling: list[ScalingRow]) -> list[EngineRow]:
    """One row per (group without the engine, layout, engine) where a layout ran under two engines
    or more; the reference is the first of them in the engine registry's order (Horovod where it
    ran: hvdbench/contracts/engines.py BUILT_IN), engines this install does not have after them in
    name order."""
    by_place: dict[tuple, dict[str, ScalingRow]] = {}
    for row in scaling:
        if row.engine:
            by_place.setdefault((_key(row), row.layout), {})[row.engine] = row
    runs_of: dict[tuple, list] = {}  # (scaling group, layout) -> its runs: one pass, not one per row
    for r in runs:
        runs_of.setdefault((scaling_key(r), r.layout), []).append(r)
    out = []
    for (key, layout), engines in by_place.items():
        if len(engines) < 2:
            continue
        known = engine_names()
        reference = min(engines, key=lambda e: (known.index(e) if e in known else len(known), e))
        ordered = sorted(engines, key=lambda e: (e != reference, e))
        mine = {engine: runs_of.get((engines[engine].scaling_key, layout), []) for engine in ordered}
        step = {engine: _step_ms(mine[engine]) for engine in ordered}
        for engine in ordered:
            row = engines[engine]
            ratio, ratio_2sigma = _ratio(row, engines[reference])
            held = [r.shard_parameters for r in mine[engine] if r.shard_parameters]
            data, compute, comm, update, other = step[engine]
            out.append(EngineRow(
                system=row.system, model=row.model, flavor=row.flavor, framework=row.framework, precision=row.precision,
                levers=row.levers, mode=row.mode, batch_per_gpu=row.batch_per_gpu, accum_steps=row.accum_steps,
                layout=layout, gpus=row.gpus, engine=engine, reference=reference, runs=row.runs,
                throughput_mean=row.throughput_mean, throughput_2sigma=row.throughput_2sigma, vs_reference=ratio,
                vs_reference_2sigma=ratio_2sigma,
                within_noise=None if ratio_2sigma is None else abs(ratio - 1) <= ratio_2sigma,
                data_ms=data, compute_ms=compute, comm_ms=comm, update_ms=update, other_ms=other,
                shard_parameters=max(held) if held else None,
                why="" if engine == reference else _why(step[engine], step[reference]), flags=row.flags,
                hosts=row.hosts, link=row.link, nodes=row.nodes, intra_link=row.intra_link, cpu_model=row.cpu_model))
    return out


def _key(row: ScalingRow) -> tuple:
    """A scaling row's group without its engine: the layouts engines are compared at."""
    return tuple(v for k, v in zip(SCALING_GROUP, row.scaling_key) if k != "engine")


def _step_ms(runs) -> tuple[float | None, ...]:
    """The mean of each step part (STEP) over the runs that have them all, ms (None: not measured)."""
    parts = mean_parts(runs) or {}
    return tuple(1e3 * parts[p] if p in parts else None for p in PARTS)


def _why(step: tuple, reference: tuple) -> str:
    """The step parts that differ most from the reference engine's, in words: 'comm -3.1 ms,
    compute +0.8 ms'."""
    deltas = [(name, mine - ref) for name, mine, ref in zip(STEP, step, reference)
              if mine is not None and ref is not None]
    deltas.sort(key=lambda d: -abs(d[1]))
    return ", ".join(f"{name} {delta:+.1f} ms" for name, delta in deltas[:2] if abs(delta) >= 0.05)


def markdown(rows: list[EngineRow]) -> str:
    if not rows:
        return ""

    def pm(mean, two_sigma, fmt):  # "± 2σ" only where the runs have a spread: one run has none, not 0
        return f"{mean:{fmt}}" + ("" if two_sigma is None else f" ± {two_sigma:{fmt}}")

    lines = []
    for r in rows:
        ratio = "" if r.vs_reference is None else pm(r.vs_reference, r.vs_reference_2sigma, ".3f")
        step = ["" if ms is None else f"{ms:.1f}" for ms in r.step_ms[:4]]  # data, compute, comm, update
        lines.append([r.model, r.layout, r.engine, r.runs,
                      pm(r.throughput_mean, r.throughput_2sigma, ".1f") if r.throughput_mean else "",
                      ratio + (" (noise)" if r.within_noise and r.engine != r.reference else ""), *step,
                      r.why])
    ref = rows[0].reference
    return ("## Engines side by side\n\nThroughput (samples/s ± 2σ) per engine on the same layouts, its ratio to "
            f"{ref} (± 2σ; '(noise)': within it), and the mean step's parts in ms; 'why' names the parts that differ "
            f"most from {ref}'s. Under ddp/fsdp, comm is what a step with the gradient reduction took beyond the same "
            "step without it.\n\n"
            + markdown_table(["model", "layout", "engine", "runs", "throughput", f"vs {ref}", "data", "compute",
                              "comm", "update", "why"], lines) + "\n")


def figure(rows: list[EngineRow]):
    """Left: throughput ± 2σ per layout, a bar per engine; right: the mean step's parts per layout
    and engine, stacked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layouts = list(dict.fromkeys(r.layout for r in rows))
    engines = list(dict.fromkeys(r.engine for r in rows))
    width = 0.8 / len(engines)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for i, engine in enumerate(engines):
        mine = {r.layout: r for r in rows if r.engine == engine}
        xs = [j + i * width for j, lay in enumerate(layouts) if lay in mine]
        # An error bar only where the runs have a spread (one run has none: no bar, not a zero-length one).
        spread = [mine[lay].throughput_2sigma for lay in layouts if lay in mine]
        left.bar(xs, [mine[lay].throughput_mean or 0 for lay in layouts if lay in mine], width,
                 yerr=[math.nan if e is None else e for e in spread] if any(e is not None for e in spread) else None,
                 capsize=3, label=engine)
        bottom = [0.0] * len(xs)
        for k, (p, colour) in enumerate(zip(STEP, ("#8c8c8c", "#4c72b0", "#dd8452", "#55a868", "#c4c4c4"))):
            values = [mine[lay].step_ms[k] or 0.0 for lay in layouts if lay in mine]
            right.bar(xs, values, width, bottom=bottom, color=colour, edgecolor="white",
                      label=p if i == 0 else None)
            bottom = [b + v for b, v in zip(bottom, values)]
        for x, engine_label in zip(xs, [engine] * len(xs)):
            right.text(x, 0, engine_label, rotation=90, ha="center", va="bottom", fontsize=7, color="white")
    for ax in (left, right):
        ax.set_xticks([j + width * (len(engines) - 1) / 2 for j in range(len(layouts))], layouts)
        ax.set_xlabel(f"layout (nodes x {device_word(rows[0], plural=True)} per node)")
    # The label promises a 2σ only where a bar carries one (one run each: none is drawn).
    drawn = any(r.throughput_2sigma is not None for r in rows)
    left.set_ylabel("samples/s (± 2σ)" if drawn else "samples/s (one run each: no 2σ)")
    left.set_title("throughput per engine")
    right.set_ylabel("ms per step")
    right.set_title("where the mean step went")
    left.legend(fontsize=8)
    right.legend(fontsize=8)
    from hvdbench.results.render.plots import context

    first = rows[0]
    fig.suptitle(f"{first.model} · {first.flavor} · {first.framework} · {first.precision} · batch "
                 f"{first.batch_per_gpu}/{device_word(first)}: engines\n{context(rows)}", fontsize=10)
    fig.tight_layout()
    return fig


def write(rows: list[EngineRow], out: Path, formats=("csv", "png")) -> list[Path]:
    if not rows:  # no layout ran under two engines: no table at all
        return []
    return write_table(out, "engines", rows, EngineRow.columns(), formats, lambda: figure(rows))
