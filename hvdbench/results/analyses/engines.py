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
from pathlib import Path

from hvdbench.contracts.engines import engine_names
from hvdbench.results.analyses.waterfall import PARTS, mean_parts
from hvdbench.results.records.schema import ENGINE_COLUMNS, SCALING_GROUP
from hvdbench.results.render.tables import markdown_table, write_table
from hvdbench.results.stats.aggregate import device_word, scaling_key

_KEY = tuple(k for k in SCALING_GROUP if k != "engine")


def _ratio(a: dict, b: dict) -> tuple[float | None, float | None]:
    """(a / b, its 2σ) of two throughput rows; the 2σ is None where either has one run (no spread known)."""
    if not a.get("throughput_mean") or not b.get("throughput_mean"):
        return None, None
    ratio = a["throughput_mean"] / b["throughput_mean"]
    if a.get("throughput_2sigma") is None or b.get("throughput_2sigma") is None:
        return ratio, None
    rel = [r["throughput_2sigma"] / r["throughput_mean"] for r in (a, b)]
    return ratio, ratio * math.sqrt(sum(x * x for x in rel))


def engine_rows(runs, scaling: list[dict]) -> list[dict]:
    """One row per (group without the engine, layout, engine) where a layout ran under two engines
    or more; the reference is the first of them in the engine registry's order (Horovod where it
    ran: hvdbench/contracts/engines.py BUILT_IN), engines this install does not have after them in
    name order."""
    by_place: dict[tuple, dict[str, dict]] = {}
    for row in scaling:
        if row.get("engine"):
            by_place.setdefault((tuple(row[k] for k in _KEY), row["layout"]), {})[row["engine"]] = row
    out = []
    for (key, layout), engines in by_place.items():
        if len(engines) < 2:
            continue
        known = engine_names()
        reference = min(engines, key=lambda e: (known.index(e) if e in known else len(known), e))
        for engine in sorted(engines, key=lambda e: (e != reference, e)):
            row = engines[engine]
            group = dict(zip(SCALING_GROUP, (*key[:4], engine, *key[4:])))
            mine = [r for r in runs if scaling_key(r) == tuple(group[k] for k in SCALING_GROUP)
                    and r.layout == layout]
            parts = mean_parts(mine) or {}
            ratio, ratio_2sigma = _ratio(row, engines[reference])
            held = [r.shard_parameters for r in mine if r.shard_parameters]
            out.append({
                **{k: row[k] for k in _KEY}, "layout": layout, "gpus": row["gpus"], "engine": engine,
                "reference": reference, "runs": row["runs"], "throughput_mean": row["throughput_mean"],
                "throughput_2sigma": row["throughput_2sigma"], "vs_reference": ratio,
                "vs_reference_2sigma": ratio_2sigma,
                "within_noise": None if ratio_2sigma is None else abs(ratio - 1) <= ratio_2sigma,
                **{f"{p.removesuffix('_s')}_ms": 1e3 * parts[p] if p in parts else None for p in PARTS},
                "shard_parameters": max(held) if held else None, "flags": row.get("flags", ""),
                # where it ran, for the plot's subtitle (plots.context), not engines.csv's columns
                **{k: row.get(k) for k in ("hosts", "link", "nodes", "intra_link", "cpu_model")}})
    for row in out:
        row["why"] = _why(row, [r for r in out if r["layout"] == row["layout"] and r["engine"] == row["reference"]
                                and all(r[k] == row[k] for k in _KEY)])
    return out


def _why(row: dict, reference: list[dict]) -> str:
    """The step parts that differ most from the reference engine's, in words: 'comm -3.1 ms,
    compute +0.8 ms'."""
    if row["engine"] == row["reference"] or not reference:
        return ""
    ref = reference[0]
    deltas = [(name, row[f"{name}_ms"] - ref[f"{name}_ms"]) for name in ("data", "compute", "comm", "update", "other")
              if row.get(f"{name}_ms") is not None and ref.get(f"{name}_ms") is not None]
    deltas.sort(key=lambda d: -abs(d[1]))
    return ", ".join(f"{name} {delta:+.1f} ms" for name, delta in deltas[:2] if abs(delta) >= 0.05)


def markdown(rows: list[dict]) -> str:
    if not rows:
        return ""

    def pm(mean, two_sigma, fmt):  # "± 2σ" only where the runs have a spread: one run has none, not 0
        return f"{mean:{fmt}}" + ("" if two_sigma is None else f" ± {two_sigma:{fmt}}")

    lines = []
    for r in rows:
        ratio = "" if r["vs_reference"] is None else pm(r["vs_reference"], r["vs_reference_2sigma"], ".3f")
        step = [f"{r[f'{p}_ms']:.1f}" if r.get(f"{p}_ms") is not None else "" for p in
                ("data", "compute", "comm", "update")]
        lines.append([r["model"], r["layout"], r["engine"], r["runs"],
                      pm(r["throughput_mean"], r["throughput_2sigma"], ".1f") if r["throughput_mean"] else "",
                      ratio + (" (noise)" if r["within_noise"] and r["engine"] != r["reference"] else ""), *step,
                      r["why"]])
    ref = rows[0]["reference"]
    return ("## Engines side by side\n\nThroughput (samples/s ± 2σ) per engine on the same layouts, its ratio to "
            f"{ref} (± 2σ; '(noise)': within it), and the mean step's parts in ms; 'why' names the parts that differ "
            f"most from {ref}'s. Under ddp/fsdp, comm is what a step with the gradient reduction took beyond the same "
            "step without it.\n\n"
            + markdown_table(["model", "layout", "engine", "runs", "throughput", f"vs {ref}", "data", "compute",
                              "comm", "update", "why"], lines) + "\n")


def figure(rows: list[dict]):
    """Left: throughput ± 2σ per layout, a bar per engine; right: the mean step's parts per layout
    and engine, stacked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layouts = list(dict.fromkeys(r["layout"] for r in rows))
    engines = list(dict.fromkeys(r["engine"] for r in rows))
    width = 0.8 / len(engines)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for i, engine in enumerate(engines):
        mine = {r["layout"]: r for r in rows if r["engine"] == engine}
        xs = [j + i * width for j, lay in enumerate(layouts) if lay in mine]
        # An error bar only where the runs have a spread (one run has none: no bar, not a zero-length one).
        spread = [mine[lay]["throughput_2sigma"] for lay in layouts if lay in mine]
        left.bar(xs, [mine[lay]["throughput_mean"] or 0 for lay in layouts if lay in mine], width,
                 yerr=[math.nan if e is None else e for e in spread] if any(e is not None for e in spread) else None,
                 capsize=3, label=engine)
        bottom = [0.0] * len(xs)
        for p, colour in zip(("data", "compute", "comm", "update", "other"),
                             ("#8c8c8c", "#4c72b0", "#dd8452", "#55a868", "#c4c4c4")):
            values = [mine[lay].get(f"{p}_ms") or 0.0 for lay in layouts if lay in mine]
            right.bar(xs, values, width, bottom=bottom, color=colour, edgecolor="white",
                      label=p if i == 0 else None)
            bottom = [b + v for b, v in zip(bottom, values)]
        for x, engine_label in zip(xs, [engine] * len(xs)):
            right.text(x, 0, engine_label, rotation=90, ha="center", va="bottom", fontsize=7, color="white")
    for ax in (left, right):
        ax.set_xticks([j + width * (len(engines) - 1) / 2 for j in range(len(layouts))], layouts)
        ax.set_xlabel(f"layout (nodes x {device_word(rows[0], plural=True)} per node)")
    # The label promises a 2σ only where a bar carries one (one run each: none is drawn).
    drawn = any(r["throughput_2sigma"] is not None for r in rows)
    left.set_ylabel("samples/s (± 2σ)" if drawn else "samples/s (one run each: no 2σ)")
    left.set_title("throughput per engine")
    right.set_ylabel("ms per step")
    right.set_title("where the mean step went")
    left.legend(fontsize=8)
    right.legend(fontsize=8)
    from hvdbench.results.render.plots import context

    first = rows[0]
    fig.suptitle(f"{first['model']} · {first['flavor']} · {first['framework']} · {first['precision']} · batch "
                 f"{first['batch_per_gpu']}/{device_word(first)}: engines\n{context(rows)}", fontsize=10)
    fig.tight_layout()
    return fig


def write(rows: list[dict], out: Path, formats=("csv", "png")) -> list[Path]:
    if not rows:  # no layout ran under two engines: no table at all
        return []
    return write_table(out, "engines", rows, ENGINE_COLUMNS, formats, lambda: figure(rows))
