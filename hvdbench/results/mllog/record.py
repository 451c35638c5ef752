"""The common record of a run read from an MLPerf log: `MllogRun` (a `LoadedRun` plus what only a log
and its submission tree say), made by `to_run_result` from a `LogSummary` and where the log sits.

    hvdbench report --mllog training_results_v4.0/Oracle    # one MllogRun per run, then the tables
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from mlperf_logging.mllog import constants as C

from hvdbench.linkrate import node_link_reading
from hvdbench.results.mllog.groups import DEFAULT_GROUP_BY, group_name, group_parts, parse_group_by
from hvdbench.results.mllog.layouts import locate, resolve_layout
from hvdbench.results.mllog.summary import TTT_FIELDS, LogSummary
from hvdbench.results.records.schema import LoadedRun

DEFAULT_RULESET = "4.0.0"  # the last training ruleset with ResNet-50 (hvdbench's own logs follow it)


@dataclass
class MllogRun(LoadedRun):
    """A run read from an MLPerf log: the common record (`devices` holds the report's group name)
    plus what only a log and its submission tree say. Never written to runs.csv. What a sweep's
    runs carry too is LoadedRun's: link (the systems JSON's host_networking), intra_link (its
    accelerator_interconnect), result (its systems file), layout_source (one of the SOURCE_* constants,
    then what it read, e.g. "NxGxBxA name (DGX_2x8x56x1)"), samples_to_target (sample-based logs),
    ruleset (for the RCP check), accelerator (accelerator_model_name: its peak,
    hvdbench.results.analyses.efficiency) and the time to train in parts (TTT_PARTS)."""

    submitter: str = ""
    system_name: str = ""  # the system as named (systems JSON, folder or platform), with its size
    division: str = ""
    ruleset_assumed: bool = False  # no --ruleset and no training_results_vX.Y in the path
    published_scaling: float | None = None  # scaling.json beside the log (the published RCP rescale)
    rcp_lines: list[str] = field(default_factory=list, repr=False)
    # That systems file's hardware (the study: runs of one hardware are one group); groups.assign_studies.
    hardware: str = ""

def ruleset_of(path: Path, given: str | None) -> tuple[str, bool]:
    """(ruleset, assumed): --ruleset, else X.Y.0 from a `training_results_vX.Y` folder in the path,
    else DEFAULT_RULESET (assumed=True)."""
    if given:
        return given, False
    m = re.search(r"training_results_v(\d+)\.(\d+)", str(path))
    return (f"{m[1]}.{m[2]}.0", False) if m else (DEFAULT_RULESET, True)


def to_run_result(s: LogSummary, root: str | os.PathLike, group_by: tuple[str, ...] | str = DEFAULT_GROUP_BY,
                  ruleset: str | None = None, descs: dict | None = None, warnings: list | None = None) -> MllogRun:
    """The common record for one published (or hvdbench) run log; unknowns stay empty or 0.
    A log with evaluations is a time-to-accuracy run (with its tracked_stats throughput, when it
    logged one); one with only a throughput (an hvdbench throughput run) a throughput run.
    `warnings` gets a line for each count out of bounds or systems JSON that cannot be read."""
    path, root = Path(s.path), Path(root)
    keys = parse_group_by(group_by) if isinstance(group_by, str) else group_by
    where = locate(path, root, {} if descs is None else descs)
    layout, source = resolve_layout(s, where, warnings)
    nodes, gpus = layout.nodes, layout.gpus_per_node
    parts = group_parts(s, where, nodes)
    try:
        rel = str(path.relative_to(root))
    except ValueError:
        rel = str(path)
    rel += f"#{s.part}" if s.part else ""
    m = re.fullmatch(r"result_(\d+)\.txt", path.name)
    world = nodes * gpus
    ttt = s.time_to_train_s
    throughput_run = not s.eval_accuracy and s.throughput is not None
    epoch_s = _finite(statistics.fmean(s.epoch_times_s) if s.epoch_times_s
                      else ttt / s.epochs if ttt is not None and s.epochs else None)
    framework = framework_of(str(where.desc.get("framework") or s.sysjson.get("framework") or ""))
    rules, assumed = ruleset_of(path.absolute(), ruleset)
    scaling = where.path.parent / "scaling.json"
    record = MllogRun(
        run_id=rel, sweep=f"mllog:{root.name}", repeat=int(m[1]) if m else s.part,
        model=s.benchmark or path.parent.name, flavor="", framework=framework, engine="",
        precision="", mode="throughput" if throughput_run else "time_to_accuracy", dataset="",
        global_batch=s.global_batch, accumulation=s.accumulation, world_size=world, nodes=nodes, gpus_per_node=gpus,
        layout=str(layout), scale=("up" if nodes == 1 else "out") if nodes else "",
        devices=group_name(parts, keys), status=s.status, error=s.error,
        started_at=(datetime.fromtimestamp(s.run_start_ms / 1000, timezone.utc).isoformat()
                    if s.run_start_ms is not None else ""),
        wall_s=ttt, layout_source=source, submitter=parts["submitter"], system_name=parts["_system_name"],
        division=s.division or str(where.desc.get("division") or ""), ruleset=rules, ruleset_assumed=assumed,
        published_scaling=scaling_factor(scaling) if where.system_dir is not None else None,
        rcp_lines=s.rcp_lines, result=parts["_result"], hardware=parts["_hardware"], accelerator=parts["accelerator"],
        link=str(where.desc.get("host_networking") or s.sysjson.get("host_networking") or "").strip(),
        intra_link=str(where.desc.get("accelerator_interconnect") or s.sysjson.get("accelerator_interconnect")
                       or "").strip(),
        **{name: getattr(s, name) for name in TTT_FIELDS})
    _, link_note = node_link_reading(record.link) if nodes and nodes > 1 else (None, "")
    if link_note and warnings is not None:  # a misprinted fabric must not move the predictions silently
        warnings.append(f"{where.desc_path or path}: host_networking {record.link!r} {link_note}")
    if s.throughput is not None:
        record.throughput = s.throughput
        record.throughput_per_gpu = s.throughput / world if world else None
    if not throughput_run:
        record.metric_name, record.final_metric, record.epochs = C.EVAL_ACCURACY, s.final_metric, s.epochs
        record.epochs_to_target = s.epochs if s.status == "success" else None
        record.samples_to_target = s.samples if s.status == "success" else None
        record.time_per_epoch_s, record.time_to_train_s = epoch_s, ttt
    return record


def _finite(value: float | None) -> float | None:
    """None for a result that came out NaN or infinite (sums and quotients of extreme logged numbers)."""
    return value if value is None or math.isfinite(value) else None


# Framework names looked for in a systems JSON's free-text `framework` ("PyTorch NVIDIA Release
# 24.04", "NVIDIA NeMo Framework Release 24.04", "MXNet, PyTorch, DGL NVIDIA Release 24.04").
FRAMEWORK_WORDS = ("pytorch", "tensorflow", "mxnet", "jax", "paxml", "maxtext", "nemo", "hugectr", "dgl",
                   "paddle", "mindspore", "tinygrad")


def framework_of(text: str) -> str:
    """The one framework a systems JSON names ('PyTorch NVIDIA Release 24.04' -> 'pytorch'), or ''
    when it names none or several: a system description listing MXNet, PyTorch and DGL does not
    say which one a benchmark ran on, and a guess would split one system's layouts into groups."""
    named = {word for word in FRAMEWORK_WORDS if word in text.lower()}
    return named.pop() if len(named) == 1 else ""


def scaling_factor(path: Path) -> float | None:
    """The `scaling_factor` of a scaling.json (a published one beside a log, or the one the RCP
    checker writes); None when there is none or it cannot be read."""
    try:
        return float(json.loads(path.read_text())["scaling_factor"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
