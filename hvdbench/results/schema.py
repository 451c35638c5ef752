"""The one result schema. Every CSV column hvdbench writes or reads is declared here, once.

A worker writes one `RunResult` as `result.json` (plus the resolved config); a sweep appends the same
record as one row of `runs.csv`; `hvdbench report` reads only that CSV. Bump SCHEMA_VERSION whenever a
field is added, removed or changes meaning, so old stores are refused with a clear message instead
of being misread.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from hvdbench.errors import HvdbenchError

SCHEMA_VERSION = 1

STATUSES = ("success", "aborted", "failed", "timeout")
MODES = ("throughput", "time_to_accuracy")


class SchemaError(HvdbenchError):
    """A record or CSV that does not match this schema; the message names the file and the field."""


class CsvRecord:
    """Mixin for a @dataclass whose fields are the columns of one CSV file (runs.csv, the bench
    CSVs). The class sets SCHEMA_VERSION and has a `schema_version: int = SCHEMA_VERSION` field."""

    SCHEMA_VERSION = 0

    @classmethod
    def columns(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def to_row(self) -> dict[str, str]:
        """CSV cells: None is an empty cell, floats keep full precision, booleans are 1/0."""
        row = {}
        for f in fields(self):
            v = getattr(self, f.name)
            row[f.name] = ("" if v is None else str(int(v)) if isinstance(v, bool)
                           else repr(v) if isinstance(v, float) else str(v))
        return row

    @classmethod
    def from_row(cls, row: dict[str, str], where: str = "row"):
        missing = [c for c in cls.columns() if c not in row]
        if missing:
            raise SchemaError(f"{where}: missing column(s) {', '.join(missing)}")
        if str(row["schema_version"]) != str(cls.SCHEMA_VERSION):
            raise SchemaError(f"{where}: schema_version {row['schema_version']} "
                              f"(this hvdbench reads version {cls.SCHEMA_VERSION})")
        try:
            return cls(**{f.name: _parse(f, row[f.name], where) for f in fields(cls)})
        except SchemaError as e:  # a check in __post_init__ does not know the file
            if str(e).startswith(where):
                raise
            raise SchemaError(f"{where}: {e}") from None


def _parse(f: dataclasses.Field, cell: str, where: str):
    kind = str(f.type)
    try:
        if kind.startswith("float"):
            return None if cell == "" else float(cell)
        if kind.startswith("int"):
            return None if cell == "" and "None" in kind else int(cell or 0)
        if kind.startswith("bool"):
            return cell in ("1", "True", "true", "yes")
        return cell
    except ValueError:
        raise SchemaError(f"{where}: column {f.name} has {cell!r}, expected {kind}") from None


@dataclass
class RunResult(CsvRecord):
    SCHEMA_VERSION = SCHEMA_VERSION  # a class attribute (no annotation), not a column

    # identity
    run_id: str = ""
    sweep: str = ""
    repeat: int = 0
    model: str = ""
    flavor: str = ""
    framework: str = ""
    precision: str = "fp32"
    mode: str = "throughput"  # one of MODES
    dataset: str = ""  # path of the prepared dataset, or "synthetic"
    # batch
    batch_per_gpu: int = 0
    accum_steps: int = 1
    global_batch: int = 0
    # topology: world_size = nodes x gpus_per_node; layout is the "NxG" string
    world_size: int = 0
    nodes: int = 0
    gpus_per_node: int = 0
    layout: str = ""
    scale: str = ""  # "up" (one node) or "out" (several)
    launcher: str = ""
    controller: str = ""  # gloo | mpi
    hosts: str = ""  # ';'-joined, rank order de-duplicated
    devices: str = ""  # ';'-joined distinct device names
    versions: str = ""  # 'name=version;...'
    parameters: int = 0  # trainable parameters: the gradient bytes each step allreduces (x dtype size)
    # throughput mode: samples/s over all ranks between synchronised points, warm-up excluded
    steps: int = 0
    warmup_steps: int = 0
    throughput: float | None = None
    throughput_per_gpu: float | None = None
    step_time_mean_s: float | None = None
    step_time_std_s: float | None = None
    # time-to-accuracy mode (MLPerf): run_start -> run_stop
    metric_name: str = ""
    target: float | None = None
    final_metric: float | None = None
    epochs: float | None = None
    epochs_to_target: float | None = None
    time_per_epoch_s: float | None = None
    time_to_train_s: float | None = None
    # outcome
    status: str = "success"  # one of STATUSES
    error: str = ""
    started_at: str = ""  # ISO 8601, UTC
    wall_s: float | None = None
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self):
        if self.status not in STATUSES:
            raise SchemaError(f"status {self.status!r} is not one of {', '.join(STATUSES)}")
        if self.mode not in MODES:
            raise SchemaError(f"mode {self.mode!r} is not one of {', '.join(MODES)}")

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "record") -> "RunResult":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SchemaError(f"{where}: unknown field(s) {', '.join(unknown)}")
        version = data.get("schema_version", SCHEMA_VERSION)
        if version != SCHEMA_VERSION:
            raise SchemaError(
                f"{where}: schema_version {version} (this hvdbench reads version {SCHEMA_VERSION})")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --- result.json -----------------------------------------------------------------------------

def write_result(path: str | os.PathLike, result: RunResult, config: dict | None = None) -> None:
    """Write result.json atomically: the record's fields plus the resolved run configuration."""
    data = result.to_dict()
    data_with_config = {**data, "config": config or {}}
    atomic_write_text(Path(path), json.dumps(data_with_config, indent=2, sort_keys=True) + "\n")


def read_result(path: str | os.PathLike) -> tuple[RunResult, dict]:
    """Read a result.json; returns (record, resolved config)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise SchemaError(f"{path}: no result record") from None
    except json.JSONDecodeError as e:
        raise SchemaError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    config = data.pop("config", {})
    return RunResult.from_dict(data, where=str(path)), config


def atomic_write_text(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, fsync, rename: readers see the old or new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
