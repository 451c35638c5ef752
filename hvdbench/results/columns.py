"""The column dictionary (docs/columns.md): each CSV `hvdbench report`, `predict` and `compare` write, its
columns, their units and meaning, generated from the typed rows (records/rows.py), so it cannot drift from
them. It sits above the report and compare (results/ floors: tests/unit/test_import_rules.py), so it can
read both's row classes.

    .venv/bin/python -m hvdbench.results.columns              # rewrites docs/columns.md
    .venv/bin/python -m hvdbench.results.columns --check      # exit 1 if docs/columns.md is stale

A column's meaning is said once, beside its field: the comment on the field's line, or the comment
lines right above it, in its row class; a column shared by many tables (the group's, the layout's,
the throughput's) is said once in MEANINGS below. Its unit comes from its name (UNITS, then SUFFIXES:
`_ms` ms, `_min` minutes, `_gb_s` GB/s, ...). An empty cell is "not measured" or "not applicable".
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import sys
import typing
from pathlib import Path

from hvdbench.results import compare
from hvdbench.results.analyses import (bench_tables, convergence, cost, efficiency, engines, links, stragglers,
                                       study_tables, ttt, verdict, waterfall)
from hvdbench.results.predict.throughput import PredictionFitRow, PredictionRow
from hvdbench.results.predict.time_to_train import TttPredictionFitRow, TttPredictionRow
from hvdbench.results.records.rows import ReportRow
from hvdbench.results.stats.aggregate import EpochRow, LayoutsRow, ScalingRow, TimeToTrainRow

DOC = Path(__file__).resolve().parents[2] / "docs" / "columns.md"

# Every table the report writes, in the order a report's folder lists them, then `hvdbench compare`'s.
ROWS: tuple[type[ReportRow], ...] = (
    ScalingRow, LayoutsRow, TimeToTrainRow, EpochRow, waterfall.WaterfallRow, stragglers.StragglerRow,
    stragglers.StragglerHostRow, links.LinkPairRow, engines.EngineRow, efficiency.EfficiencyRow,
    ttt.TttWaterfallRow, convergence.ConvergenceRow, study_tables.StudySpeedupRow, PredictionRow, TttPredictionRow,
    PredictionFitRow, TttPredictionFitRow,
    cost.CostRow, verdict.CheckRow, bench_tables.CommRow, bench_tables.IoTableRow, compare.CompareRow,
    compare.EnvRow)

# Units by whole name, for the columns whose name carries none.
UNITS = {
    "throughput_mean": "samples/s", "throughput_std": "samples/s", "throughput_2sigma": "samples/s",
    "throughput_per_gpu": "samples/s per GPU",
    # ttt_waterfall.csv's rate while training and what it trained: samples, or epochs where a log has no set size
    "throughput": "`unit` per s", "base_throughput": "`unit` per s", "trained": "as `unit`", "base_trained": "as `unit`",
    "ideal": "samples/s", "comm_loss": "samples/s", "imbalance_loss": "samples/s", "data_loss": "samples/s",
    "compute_loss": "samples/s", "unattributed": "samples/s", "measured": "samples/s", "predicted_throughput": "samples/s", "predicted_throughput_low": "samples/s",
    "predicted_throughput_high": "samples/s", "measured_throughput": "samples/s", "training_rate": "`trained_unit` per s",
    "training_rate_low": "`trained_unit` per s", "training_rate_high": "`trained_unit` per s",
    "measured_training_rate": "`trained_unit` per s", "predicted_trained": "as `trained_unit`",
    "measured_trained": "as `trained_unit`", "interval": "fraction",
    "efficiency": "fraction (1 = 100 %)", "efficiency_2sigma": "fraction", "fitted_efficiency": "fraction",
    "speedup": "x", "speedup_rcp": "x", "published_speedup": "x", "relative": "x", "vs_published": "x",
    "cv": "fraction", "step_cv": "fraction", "other_cpus": "cores", "mfu": "fraction", "mfu_measured": "fraction",
    "compute_mfu": "fraction", "published_share": "fraction", "comm_share": "fraction", "vs_best": "fraction",
    "vs_others": "ratio", "vs_others_2sigma": "ratio", "threshold": "as the figure", "peak_tflops": "TFLOP/s",
    "measured_peak_tflops": "TFLOP/s", "model_tflops_per_gpu": "TFLOP/s per GPU",
    "flops_per_sample": "FLOPs", "gpu_hours_to_train": "GPU-hours", "run_gpu_hours": "GPU-hours",
    "gpus": "GPUs (CPU ranks on CPUs)", "gpus_per_node": "GPUs (CPU ranks) per node", "batch_per_gpu": "samples",
    "global_batch": "samples", "gpu_hour_price": "money per GPU-hour", "run_cost": "as the price",
    "cost_to_train": "as the price", "change": "fraction", "noise": "fraction",
    "ranks_per_machine_limit": "ranks", "base_global_batch": "samples", "s_min": "as `unit`", "b_crit": "samples",
}
# Units by the end of a name, longest first.
SUFFIXES = (("_gb_s", "GB/s"), ("_kwh_to_train", "kWh"), ("_j_per_sample", "J per sample"), ("_w_per_gpu", "W per GPU"),
            ("_samples_s", "samples/s"), ("_samples_s_min", "samples/s"), ("_to_train_j", "J"), ("_2sigma_min", "min"),
            ("_2sigma_pct", "%"), ("_pct", "%"), ("_min", "min"), ("_ms", "ms"), ("_us", "µs"), ("_s", "s"),
            ("_gb", "GB"), ("_mib", "MiB"), ("_bytes", "bytes"))

# Meanings of the columns many tables share (a table's own columns are said in its class).
MEANINGS = {
    "system": "where the runs ran: their devices (`cpu`, a GPU's name), or a published log's system group",
    "model": "the model (hvdbench's name; a published log's benchmark)",
    "flavor": "the model's size (`debug`, `full`, ...)",
    "framework": "torch or tensorflow", "engine": "the distributed engine (horovod, ddp, fsdp)",
    "precision": "the training precision (fp32, bf16, ...)",
    "levers": "the GPU levers the runs set (`sweep --levers`), empty for none",
    "mode": "throughput (timed steps) or time_to_accuracy (trained to the target)",
    "batch_per_gpu": "samples per GPU (per CPU rank) per step", "accum_steps": "gradient accumulation steps per update",
    "layout": "nodes x GPUs per node (`2x4`)", "nodes": "nodes of the layout",
    "gpus_per_node": "GPUs (CPU ranks) per node", "gpus": "GPUs (CPU ranks) in all: nodes x per node",
    "scale": "up (one node) or out (several)", "runs": "runs of the layout in the inputs, whatever their status",
    "ok": "runs that succeeded", "failed": "runs that failed", "aborted": "runs stopped short of the target",
    "timeout": "runs stopped by the time limit", "n_throughput": "runs with a throughput (the statistics' n)",
    "throughput_mean": "mean throughput over the successful runs, all GPUs together",
    "throughput_std": "sample standard deviation (ddof=1) of the runs' throughput; empty with one run",
    "throughput_2sigma": "2 x throughput_std", "throughput_per_gpu": "throughput_mean / gpus",
    "speedup": "throughput (or 1 / time to train) against the baseline layout's",
    "efficiency": "speedup / (gpus / the baseline's gpus): 1 is linear scaling (summary.md prints it in %)",
    "efficiency_2sigma": "2σ of efficiency: both means' relative spreads in quadrature",
    "layout_source": "MLPerf logs: where the layout was read from (the log, the systems JSON, a guess named); "
                     "a sweep's: its plan",
    "hosts": "the hosts the layout ran on, ';'-joined", "link": "the inter-node link the sweep names (`--link`)",
    "flags": "the checks the row failed, ';'-joined: their meanings are under Flags in summary.md",
    "global_batch": "samples per optimizer step over all GPUs", "epochs_mean": "mean epochs to the target",
    "ttt_min": "MLPerf's time-to-train score (olympic mean of run_start -> run_stop)",
    "baseline": "the layout speed-up and efficiency are measured against",
    "reference": "the layout a row is compared with", "note": "what a reader needs beside the figures",
    "step_ms": "rank 0's mean step", "compute_ms": "forward and backward per step", "data_ms": "waiting for batches",
    "comm_ms": "at the gradient exchange", "update_ms": "the optimizer's update", "other_ms": "the rest of the step",
    "run_id": "the run's folder name in its sweep", "rank": "the rank (process) number", "host": "the rank's host",
    "metric": "the quality metric the target is on", "target": "the metric's value the runs train to",
    "source": "where the row's figures come from (measured, predicted, a log)",
    "steps": "the fewest timed steps of the layout's runs", "warmup_steps": "the fewest warm-up steps of its runs",
    "other_gpu_procs": "the most other processes seen on the runs' GPUs",
    "threshold": "the limit the figure is judged against", "converged": "runs that reached the target",
    "result": "the published result a row comes from (its round or software stack)",
    "gpu_index": "the GPU's index on its host", "local_rank": "the rank's number on its host",
    "device": "the rank's device", "partial": "yes where a run's per-rank file missed ranks",
    "time_per_epoch_min": "mean time per epoch of the successful and aborted runs; empty for sample-counted "
                          "benchmarks (LLMs, BERT, UNet3D)",
    "samples_to_target_mean": "mean samples the converged runs trained to the target (logs that count samples)",
    "time_per_1m_samples_min": "time to train / samples to target x 1e6, the mean over the converged runs",
    # the time-to-train waterfall's parts (ttt_waterfall.csv's, and prediction.csv's against the fitted baseline)
    "convergence_min": "(trained - the baseline's trained) / the layout's rate while training: the extra it trained",
    "throughput_min": "the baseline's trained x (1 / the layout's rate - 1 / (GPU ratio x the baseline's rate)): "
                      "its work at a rate short of the GPU ratio",
    "eval_min": "the layout's time evaluating - the baseline's / the GPU ratio",
    "other_min": "the layout's other time (neither training nor evaluating) - the baseline's / the GPU ratio",
}

_FIELD = re.compile(r"^\s+(\w+)\s*:\s*[^=#]+(?:=[^#]*)?(?:#\s*(.*))?$")


@functools.cache  # inspect.getsource reads and parses the module: once per class
def _comments(cls) -> dict[str, str]:
    """field -> the comment beside it in `cls`'s own source (its line's, else the lines right above)."""
    try:
        lines = inspect.getsource(cls).splitlines()
    except (OSError, TypeError):
        return {}
    out, above = {}, []
    for line in lines[1:]:
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("# "))
            continue
        match = _FIELD.match(line)
        if match and match.group(1) in getattr(cls, "__annotations__", {}):
            said = match.group(2) or " ".join(above)
            if said:
                out[match.group(1)] = said.strip()
        above = []
    return out


def meaning(cls, name: str) -> str:
    """`name`'s meaning: the comment beside it in the class that declares it, else MEANINGS."""
    for klass in cls.__mro__:
        if name in getattr(klass, "__annotations__", {}):
            said = _comments(klass).get(name)
            if said:
                return said
            break
    return MEANINGS.get(name, "")


def unit(name: str) -> str:
    if name in UNITS:
        return UNITS[name]
    return next((u for suffix, u in SUFFIXES if name.endswith(suffix)), "")


@functools.cache
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def _type(cls, name: str) -> str:
    kind = _hints(cls).get(name)
    if not typing.get_args(kind):
        return getattr(kind, "__name__", str(kind))
    return " or ".join("empty" if k is type(None) else getattr(k, "__name__", str(k)) for k in typing.get_args(kind))


def _file(cls) -> str:
    found = re.search(r"[\w-]+\.csv", cls.__doc__ or "")
    return found.group(0) if found else cls.__name__


def document() -> str:
    """docs/columns.md's text."""
    parts = ["# The columns of hvdbench's tables", "",
             "Generated from the typed rows of `report`, `predict` and `compare` by `python -m hvdbench.results.columns` "
             "(tests/unit/test_columns_doc.py fails when it is stale); do not edit by hand. "
             "Floats carry 4 significant digits (records/rows.py `rounded`: 0.8735, 1.235e-05; an integer part is kept whole, 123457; parts rounded one by one add up to their total within that rounding); summary.md and report.html print them from the same rows; an empty cell is not measured or not applicable. A fraction is 0-1 (summary.md prints it in %).", ""]
    for cls in ROWS:
        doc = " ".join((cls.__doc__ or "").split())
        parts += [f"## {_file(cls)} ({cls.__name__})", "", doc, "", "| column | type | unit | meaning |",
                  "|---|---|---|---|"]
        for f in (f for f in dataclasses.fields(cls) if f.name in cls.columns()):
            said = meaning(cls, f.name).replace("|", "\\|")
            parts.append(f"| `{f.name}` | {_type(cls, f.name)} | {unit(f.name)} | {said} |")
        parts.append("")
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    text = document()
    if "--check" in argv:
        if not DOC.exists() or DOC.read_text(encoding="utf-8") != text:
            print(f"{DOC} is stale: run python -m hvdbench.results.columns", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
