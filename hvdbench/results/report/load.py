"""The one reader of what a report reads, each file once: sweep folders (runs.csv and sweep.json
through records/store.py, each time-to-accuracy run's config.yaml and mllog.txt, each multi-rank run's
ranks.csv, the `sweep --explain`
twins in explain/, the bench CSVs), study folders (study.json: their sweep folders) and published
MLPerf trees (hvdbench.results.mllog).

    loaded = load(["results/demo"], mllogs=["training_results_v4.0/Oracle"])
    loaded.runs        # LoadedRun records: runs.csv's columns and what was found beside them
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from hvdbench.errors import ConfigError, HvdbenchError
from hvdbench.results import mllog
from hvdbench.results.mllog.events import OWN_LOG_NAME
from hvdbench.results.mllog.groups import DEFAULT_GROUP_BY
from hvdbench.results.mllog.summary import read_run_log
from hvdbench.results.records.ranks import RANKS_CSV, check_ranks, read_ranks
from hvdbench.results.records.schema import ABSURD, TTT_PARTS, AllreduceRow, ComputeRow, IoRow, LinkRow, LoadedRun
from hvdbench.results.records.store import (ALLREDUCE_CSV, COMPUTE_CSV, EXPLAIN_DIR, IO_CSV, LINKS_CSV, RUNS_CSV,
                                            current_runs, load_sweeps, read_rows, read_study_record,
                                            study_sweep_dirs, sweep_folder)


@dataclass
class Loaded:
    """Everything a report (or a prediction) is built from."""

    runs: list[LoadedRun] = field(default_factory=list)  # current runs: a retry supersedes its failed try
    sweeps: list[Path] = field(default_factory=list)  # the sweep folders as given (a study's expanded)
    mllogs: list[Path] = field(default_factory=list)
    studies: dict[str, dict] = field(default_factory=dict)  # study name -> its study.json
    allreduce: list[AllreduceRow] = field(default_factory=list)  # `bench allreduce` rows of the sweeps
    io: list[IoRow] = field(default_factory=list)  # `bench io` rows
    links: list[LinkRow] = field(default_factory=list)  # `bench links` rows (sweep --links-bench)
    peaks: dict[tuple[str, str, str], float] = field(default_factory=dict)  # `bench compute`: measured_peaks
    twins: list[LoadedRun] = field(default_factory=list)  # the `sweep --explain` twins
    notes: list[str] = field(default_factory=list)  # what the tables should say (warnings start "warning: ")

    @property
    def sources(self) -> list[str]:
        return [str(p) for p in (*self.sweeps, *self.mllogs)]


def expand_studies(paths) -> tuple[list[Path], dict[str, dict]]:
    """Each study folder (`hvdbench study run --out DIR`: DIR/study.json) becomes its sweep folders;
    returns the sweep folders and each study's record (name -> study.json), for the study tables."""
    sweeps, studies = [], {}
    for path in map(Path, paths):
        record = read_study_record(path) if path.is_dir() else None
        if record is None:
            sweeps.append(path)
            continue
        found = study_sweep_dirs(path)
        if not found:
            raise ConfigError(f"{path}: a study folder with no runs yet (no <model>/<mode>/runs.csv)")
        sweeps += found
        studies[record["study"]] = record
    return sweeps, studies


def load(paths=(), mllogs=(), group_by: tuple[str, ...] = DEFAULT_GROUP_BY, ruleset: str | None = None,
         progress=None) -> Loaded:
    """Read the sweep and study folders `paths` and the published trees `mllogs` (`progress(root)`
    gives mllog.load's progress wrapper for one tree, or None). Bad input raises before anything is
    written: a report's old files stay as they were."""
    sweeps, studies = expand_studies(paths)
    loaded = Loaded(sweeps=sweeps, mllogs=[Path(m) for m in mllogs], studies=studies)
    rows: list[LoadedRun] = []
    for path in sweeps:
        folder, mine = sweep_folder(path), load_sweeps([path], loaded.notes)
        for r in mine:
            if r.mode == "time_to_accuracy" and r.run_id:
                read_run_folder(r, folder / r.run_id, loaded.notes)
            elif r.run_id and (r.world_size or 0) > 1:
                read_rank_times(r, folder / r.run_id, loaded.notes)
        rows += mine
        read_benches(loaded, folder)
    loaded.runs, superseded = current_runs(rows)
    if superseded:
        loaded.notes.append(f"{superseded} earlier attempt(s) of retried runs are kept in runs.csv and superseded "
                            "by their retry in these tables")
    for root in loaded.mllogs:
        more, said = mllog.load(root, progress(root) if progress else (lambda files: files), group_by, ruleset)
        loaded.runs += more
        loaded.notes += said
    return loaded


def read_run_folder(r: LoadedRun, run_dir: Path, notes: list[str]) -> None:
    """A time-to-accuracy run's evaluation cadence from its resolved config (RUN/config.yaml, which
    the worker writes) and its time to train in parts (summary.TTT_FIELDS) from its own event log
    (RUN/mllog.txt). A run without them keeps none: the report then says nothing of the cadence, and
    its layout gets no time-to-train waterfall (the table says why). A config.yaml that is not YAML,
    or whose eval_every is no cadence (`_cadence`), is a warning naming the file and the cadence is
    left out."""
    path = run_dir / "config.yaml"
    try:
        config = yaml.safe_load(path.read_text())
    except OSError as e:  # none (a run recorded before it, a runs.csv copied alone) is no warning
        if path.exists() or path.is_symlink():
            notes.append(f"warning: {path}: {e.strerror or e}; that run's evaluation cadence is left out")
        config = None
    except (ValueError, yaml.YAMLError) as e:
        mark = getattr(e, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        notes.append(f"warning: {path}{at}: not YAML ({getattr(e, 'problem', None) or type(e).__name__}); "
                     "that run's evaluation cadence is left out")
        config = None
    if isinstance(config, dict) and "eval_every" in config:
        unit = str(config.get("eval_unit") or "epochs")
        every, why = _cadence(config["eval_every"], unit, config.get("max_epochs"))
        if why:
            notes.append(f"warning: {path}: eval_every {config['eval_every']!r} is {why}: left out")
        else:
            r.eval_every, r.eval_unit = every, unit
    try:
        s = read_run_log(run_dir / OWN_LOG_NAME)
    except (OSError, ValueError):
        return
    (r.trained, r.trained_unit, r.trained_from, r.train_s, r.train_from, r.eval_s, r.eval_from,
     r.evals) = (getattr(s, name) for name in TTT_PARTS)


def _cadence(value, unit: str, max_epochs) -> tuple[float | None, str]:
    """(eval_every as a float, '') where it is a cadence: a positive finite number, in epochs at most
    max_epochs (an evaluation past the last epoch never happens); else (None, why it is not)."""
    def number(x) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0

    if not number(value):
        return None, f"no evaluation cadence (a positive number of {unit})"
    if unit == "epochs" and number(max_epochs) and value > max_epochs:
        return None, f"past max_epochs {max_epochs:g}, no evaluation cadence"
    if value > ABSURD:
        return None, f"past {ABSURD:g}, no evaluation cadence"
    return float(value), ""


def read_rank_times(r: LoadedRun, run_dir: Path, notes: list[str]) -> None:
    """A multi-rank run's per-rank times (RUN/ranks.csv); a damaged file, or one that cannot be this
    run's (records.ranks.check_ranks), is a warning and the run keeps none (its record and the rest of
    the report stand; the straggler section counts the runs left out)."""
    try:
        rows = read_ranks(run_dir / RANKS_CSV)
    except (HvdbenchError, OSError) as e:
        notes.append(f"warning: {e}; that run's per-rank times are left out")
        return
    r.ranks, said = check_ranks(rows, r, run_dir / RANKS_CSV)
    notes += [f"warning: {text}" + ("" if r.ranks else "; that run's per-rank times are left out") for text in said]


def read_benches(loaded: Loaded, folder: Path) -> None:
    """A sweep folder's bench rows (bench_allreduce.csv, bench_io.csv, bench_links.csv), the median matmul TFLOP/s of
    its `bench compute` (bench_compute.csv: `measured_peaks`) and its `sweep --explain` twins
    (explain/runs.csv); schema errors name the file."""
    if (folder / ALLREDUCE_CSV).is_file():
        loaded.allreduce += read_rows(folder / ALLREDUCE_CSV, AllreduceRow)
    if (folder / IO_CSV).is_file():
        loaded.io += read_rows(folder / IO_CSV, IoRow)
    if (folder / LINKS_CSV).is_file():
        loaded.links += read_rows(folder / LINKS_CSV, LinkRow)
    if (folder / COMPUTE_CSV).exists():
        loaded.peaks.update(measured_peaks(read_rows(folder / COMPUTE_CSV, ComputeRow, "compute bench")))
    if (folder / EXPLAIN_DIR / RUNS_CSV).is_file():
        loaded.twins += load_sweeps([folder / EXPLAIN_DIR], loaded.notes)


def measured_peaks(rows: list[ComputeRow]) -> dict[tuple[str, str, str], float]:
    """(layout, device, dtype) -> the median over ranks of one sweep's `bench compute` matmul TFLOP/s
    (the latest run of a layout where there are several)."""
    rows = [r for r in rows if r.op == "matmul" and r.tflops is not None]
    latest: dict[str, str] = {}
    for r in rows:
        latest[r.layout] = max(latest.get(r.layout, ""), r.run_id)
    by_key: dict[tuple, list[float]] = {}
    for r in rows:
        if r.run_id == latest[r.layout]:
            by_key.setdefault((r.layout, r.device, r.dtype), []).append(r.tflops)
    return {k: statistics.median(v) for k, v in by_key.items()}
