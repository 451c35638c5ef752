"""What each layout costs, the answer a buyer wants (cost.csv; report.html's second block): per group
and layout, measured and predicted, the speed-up and efficiency, the time to train, the GPU-hours the
runs took and a time to train takes, the energy NVML measured, and with `--gpu-hour-price` money.

    hvdbench report results/demo --gpu-hour-price 2.50      # cost.csv, report.html's "the answer"
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from hvdbench.results.records.rows import TTT_GROUP, ReportRow, TttGroup
from hvdbench.results.render.tables import write_table
from hvdbench.results.stats.aggregate import scaling_key

MEASURED, PREDICTED = "measured", "predicted"


@dataclass(frozen=True, kw_only=True)
class CostRow(TttGroup, ReportRow):
    """cost.csv: one row per group (the time-to-train table's), layout and source (measured | predicted).
    run_gpu_hours: what the sweep's runs of the layout took (wall_s x GPUs, every status); ttt_min: the
    time to train (measured: MLPerf's olympic mean; predicted: the fit's, with its grade);
    gpu_hours_to_train: ttt_min x GPUs; energy_kwh_to_train: NVML's, where measured; *_cost: the GPU-hours
    x gpu_hour_price (empty without --gpu-hour-price)."""

    layout: str
    gpus: int
    source: str
    # predicted rows: the time-to-train prediction's grade (tight, usable, indicative); empty for measured ones
    grade: str
    runs: int
    throughput_per_gpu: float | None
    speedup: float | None
    efficiency: float | None
    ttt_min: float | None
    # wall_s x GPUs summed over the sweep's runs of the layout, every status (empty: predicted, published)
    run_gpu_hours: float | None
    gpu_hours_to_train: float | None  # ttt_min x GPUs / 60: the GPU-hours one time to train takes
    # NVML's energy of the successful time-to-accuracy runs, run_start -> run_stop, all GPUs, their mean
    energy_kwh_to_train: float | None
    gpu_hour_price: float | None  # --gpu-hour-price as given; empty without it
    run_cost: float | None  # run_gpu_hours x gpu_hour_price
    cost_to_train: float | None  # gpu_hours_to_train x gpu_hour_price


def _price(hours: float | None, price: float | None) -> float | None:
    return hours * price if hours is not None and price is not None else None


def _gpus_of(layout: str) -> int:
    nodes, _, per = layout.partition("x")
    return int(nodes) * int(per) if nodes.isdigit() and per.isdigit() else 0


def cost_rows(runs, scaling, time_to_train, ttt_predictions, price: float | None = None) -> list[CostRow]:
    """Measured rows (every group and layout the runs have: throughput's scaling row, time to train's
    row) then the predicted ones (prediction.csv's time-to-train rows not measured)."""
    keyed: dict[tuple, dict] = {}
    for row in scaling:
        if row.mode == "throughput":
            keyed.setdefault((row.ttt_key, row.layout), {}).setdefault("scaling", row)
    for row in time_to_train:
        keyed.setdefault((row.ttt_key, row.layout), {}).setdefault("ttt", row)
    hours: dict[tuple, list[float]] = {}
    energy: dict[tuple, list[float]] = {}
    for r in runs:
        if r.result:  # a published log's: no wall time of ours
            continue
        key = (scaling_key(r)[:len(TTT_GROUP)], r.layout)
        if r.wall_s is not None:
            hours.setdefault(key, []).append(r.wall_s * (r.world_size or 1) / 3600)
        if r.mode == "time_to_accuracy" and r.status == "success" and r.energy_j is not None:
            energy.setdefault(key, []).append(r.energy_j / 3.6e6)
    out = []
    for (key, layout), found in keyed.items():
        s, t = found.get("scaling"), found.get("ttt")
        gpus = (s or t).gpus
        ttt_min = t.ttt_min if t else None
        to_train = ttt_min * gpus / 60 if ttt_min is not None else None
        run_hours = sum(hours[(key, layout)]) if (key, layout) in hours else None
        out.append(CostRow(
            **vars(TttGroup(*key)), layout=layout, gpus=gpus, source=MEASURED, grade="",
            runs=(s.runs if s else 0) + (t.runs if t else 0),
            throughput_per_gpu=s.throughput_per_gpu if s else None, speedup=s.speedup if s else t.speedup,
            efficiency=s.efficiency if s else t.efficiency, ttt_min=ttt_min, run_gpu_hours=run_hours,
            gpu_hours_to_train=to_train,
            energy_kwh_to_train=statistics.fmean(energy[(key, layout)]) if (key, layout) in energy else None,
            gpu_hour_price=price, run_cost=_price(run_hours, price), cost_to_train=_price(to_train, price)))
    for p in ttt_predictions:
        if p.predicted_ttt_min is None or p.measured_ttt_min is not None:
            continue
        gpus = p.gpus or _gpus_of(p.layout)
        to_train = p.predicted_ttt_min * gpus / 60
        out.append(CostRow(
            **vars(p.ttt_group()), layout=p.layout, gpus=gpus, source=PREDICTED, grade=p.grade or "", runs=0,
            throughput_per_gpu=p.predicted_throughput / gpus if p.predicted_throughput and gpus else None,
            speedup=p.speedup, efficiency=p.efficiency, ttt_min=p.predicted_ttt_min, run_gpu_hours=None,
            gpu_hours_to_train=to_train, energy_kwh_to_train=None, gpu_hour_price=price, run_cost=None,
            cost_to_train=_price(to_train, price)))
    return out


def _money(value: float | None) -> str:
    return "" if value is None else f"{value:,.2f}"


def markdown(rows: list[CostRow]) -> str:
    if not rows:
        return ""
    lines = ["## What each layout costs", "",
             "| model | layout | source | per GPU | speed-up | efficiency | time to train (min) | GPU-h to train | "
             "cost to train | GPU-h of the runs |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.model}/{r.flavor} {r.engine} {r.precision} | {r.layout} | {r.source}"
                     f"{f' ({r.grade})' if r.grade else ''} | {_g(r.throughput_per_gpu)} | {_g(r.speedup)} | "
                     f"{_g(r.efficiency)} | {_g(r.ttt_min)} | {_g(r.gpu_hours_to_train)} | {_money(r.cost_to_train)} | "
                     f"{_g(r.run_gpu_hours)} |")
    price = next((r.gpu_hour_price for r in rows if r.gpu_hour_price is not None), None)
    lines.append("\n" + (f"Cost at {price:g} a GPU-hour (--gpu-hour-price)." if price is not None
                         else "No --gpu-hour-price: GPU-hours only.") + "\n")
    return "\n".join(lines)


def _g(value: float | None) -> str:
    return "" if value is None else f"{value:.3g}"


def write(rows: list[CostRow], out: Path, formats=("csv",)) -> list[Path]:
    return write_table(out, "cost", rows, CostRow.columns(), tuple(f for f in formats if f == "csv"))
