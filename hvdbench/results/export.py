"""hvdbench's own time-to-accuracy sweeps as an MLPerf training results tree, the folder of one
submitter that MLCommons' tools read:

    OUT/results/<system>/<benchmark>/result_N.txt   each run's mllog.txt, byte for byte
    OUT/systems/<system>.json                        the system description (the checker's fields)

    export_mlperf([Path("results/demo")], Path("mlperf"), env=envinfo.collect())
    python -m mlperf_logging.result_summarizer mlperf training 4.0.0   # scores it as hvdbench report does

A <system> is one layout, batch, framework and flavor of one device type, named the MLPerf way
(`<devices>_<N>x<G>x<BATCH>x<ACCUM>_<framework>_<flavor>`): MLPerf scores one scale per system
folder, and its RCP checker reads one global batch per benchmark folder. The description says
what the runs themselves recorded (devices, layout, framework versions: runs.csv) and what `hvdbench
env` found (CPUs, OS, MPI, NCCL, GPU memory and driver); what neither knows is left empty.

Every time-to-accuracy run of the sweep is exported, converged or not, in its current state (a
retried run once): the summarizer, like hvdbench's olympic mean, counts a run whose log fails its
checks (a failed or timed-out run: no run_stop, or no log at all) as a dropped score, as MLPerf keeps
a submission's aborted runs. A run that crashed before its worker saw the devices is exported with
its sweep's devices (`store.load_sweeps`), in the system folder of its layout beside the runs that
finished, and `Export.notes` names the runs exported as not converged. One
difference is the official tools': in the open division, where hvdbench's runs are, the
summarizer checks neither the quality target nor the run_stop status, so a run that stopped
`aborted` counts with its time there, and as not converged in hvdbench's report; `Export.notes`
says when that happens.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from mlperf_logging.benchmark_meta import get_result_file_counts

from hvdbench.errors import ConfigError, OutputError
from hvdbench.files import atomic_write_bytes, atomic_write_text
from hvdbench.results.mllog import LogSummary, read_run_log
from hvdbench.results.records.schema import RunResult, SchemaError
from hvdbench.results.records.store import current_runs, load_sweeps
from hvdbench.results.stats.aggregate import OLYMPIC_DROP, olympic_score
from hvdbench.topology import Layout

USAGE = "training"
DEFAULT_RULESET = "4.0.0"  # the last training round with ResNet-50; BERT too
# submission_status (the log) -> status (the systems JSON of rounds >= 4.0)
AVAILABILITY = {"onprem": "Available on-premise", "cloud": "Available cloud",
                "research": "Research, Development, or Internal (RDI)", "preview": "Preview"}
FRAMEWORK_NAMES = {"torch": "PyTorch", "tensorflow": "TensorFlow", "keras": "Keras", "horovod": "Horovod"}
# Every field of an MLPerf training systems JSON (mlperf_logging.system_desc_checker's list).
SYSTEM_FIELDS = (
    "submitter", "division", "status", "system_name", "number_of_nodes", "host_processors_per_node",
    "host_processor_model_name", "host_processor_core_count", "host_processor_vcpu_count",
    "host_processor_frequency", "host_processor_caches", "host_processor_interconnect",
    "host_memory_capacity", "host_storage_type", "host_storage_capacity", "host_networking",
    "host_networking_topology", "host_memory_configuration", "accelerators_per_node",
    "accelerator_model_name", "accelerator_host_interconnect", "accelerator_frequency",
    "accelerator_on-chip_memories", "accelerator_memory_configuration", "accelerator_memory_capacity",
    "accelerator_interconnect", "accelerator_interconnect_topology", "cooling", "hw_notes", "framework",
    "other_software_stack", "operating_system", "sw_notes")


@dataclass
class ExportedRun:
    run: RunResult
    log: Path | None  # the run's mllog.txt; None when the run left none
    summary: LogSummary | None
    result_file: Path | None = None


@dataclass
class Benchmark:
    """One results/<system>/<benchmark> folder and hvdbench's score of it."""
    system: str
    benchmark: str
    runs: list[ExportedRun]
    minutes: float | None = None  # hvdbench's olympic mean (None: DNF)
    rule: str = ""
    official: float | None = None  # the summarizer's score, when checked

    @property
    def folder(self) -> str:
        return f"results/{self.system}/{self.benchmark}"


@dataclass
class Export:
    out: Path
    ruleset: str
    benchmarks: list[Benchmark] = field(default_factory=list)
    systems: dict[str, dict] = field(default_factory=dict)  # name -> systems JSON
    notes: list[str] = field(default_factory=list)

    @property
    def summarizer_command(self) -> list[str]:
        return [sys.executable, "-m", "mlperf_logging.result_summarizer", str(self.out), USAGE, self.ruleset]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-.") or "unknown"


def system_name(run: RunResult) -> str:
    """The results/<system> folder of a run: '<devices>_<N>x<G>x<B>x<A>_<framework>_<flavor>'."""
    devices = _slug(run.devices.split(";")[0] if run.devices else "unknown")
    name = f"{devices}_{Layout(run.nodes, run.gpus_per_node)}x{run.batch_per_gpu}x{run.accum_steps}_{_slug(run.framework)}"
    name += f"_{_slug(run.flavor)}" if run.flavor else ""
    return name + (f"_{_slug(run.precision)}" if run.precision and run.precision != "fp32" else "")


def _benchmark(run: RunResult, summary: LogSummary | None) -> str:
    if summary is not None and summary.benchmark:
        return summary.benchmark
    from hvdbench.contracts import get_spec

    try:
        return get_spec(run.model).benchmark
    except ConfigError:
        return run.model


def _versions(run: RunResult) -> dict[str, str]:
    return dict(part.split("=", 1) for part in run.versions.split(";") if "=" in part)


def _framework_text(runs: list[RunResult], env: dict) -> str:
    """'PyTorch 2.13.0, Horovod 0.28.1' from what the runs recorded, else from `hvdbench env`."""
    versions = next((_versions(r) for r in runs if r.versions), {})
    framework = runs[0].framework
    if not versions and env:
        entry = env.get(framework) or {}
        versions = {framework: entry.get("version", "")} if entry.get("installed", True) else {}
        versions["horovod"] = (env.get("horovod") or {}).get("version", "")
    parts = [f"{FRAMEWORK_NAMES.get(k, k)} {v}".strip() for k, v in versions.items() if k != "python" and v]
    return ", ".join(parts) or FRAMEWORK_NAMES.get(framework, framework)


def system_description(runs: list[RunResult], summaries: list[LogSummary | None], env: dict) -> dict:
    """The systems JSON of one system: every field the checker asks for, empty where unknown."""
    run = runs[0]
    said = next((s for s in summaries if s is not None), None)
    gpus = env.get("gpus") or []
    gpu = gpus[0] if gpus else {}
    on_gpus = bool(gpus) and "cpu" not in run.devices.lower()
    mpi, python = env.get("mpi") or {}, env.get("python") or {}
    stack = {"python": _versions(run).get("python") or python.get("version", ""),
             "horovod": _versions(run).get("horovod") or (env.get("horovod") or {}).get("version", ""),
             "mpi": mpi.get("implementation") or "", "nccl": env.get("nccl") or "",
             "cuda_driver_version": gpu.get("driver", "") if on_gpus else "",
             "hvdbench": env.get("hvdbench", "")}
    desc = dict.fromkeys(SYSTEM_FIELDS, "")
    desc.update({
        "submitter": said.org if said and said.org else "hvdbench",  # the logs' submission_org
        "division": (said.division if said and said.division else "open"),
        "status": AVAILABILITY.get(said.submission_status if said else "onprem", "Available on-premise"),
        # Without the size, so `hvdbench report --mllog` groups a system's layouts together.
        "system_name": " ".join(p for p in (run.devices.split(";")[0] or "unknown", run.framework, run.flavor) if p),
        "number_of_nodes": str(run.nodes),
        # hvdbench env does not count sockets: one host processor per node is written, and said.
        "host_processors_per_node": "1",
        "host_processor_vcpu_count": str(env.get("cpu_count") or ""),
        "accelerators_per_node": str(run.gpus_per_node),
        "accelerator_model_name": run.devices.split(";")[0] or "unknown",
        "accelerator_memory_capacity": gpu.get("memory", "") if on_gpus else "",
        "hw_notes": ("one rank per CPU slot, no accelerator; " if not on_gpus else "")
                    + "host_processors_per_node not measured (hvdbench env counts CPUs, not sockets)",
        "framework": _framework_text(runs, env),
        "other_software_stack": {k: v for k, v in stack.items() if v},
        "operating_system": env.get("platform", ""),
        "sw_notes": f"exported by hvdbench {env.get('hvdbench', '')} from sweep(s) "
                    + ", ".join(sorted({r.sweep for r in runs})),
    })
    return desc


def collect_runs(sweeps: list[Path], others: list[RunResult] | None = None) -> list[ExportedRun]:
    """The current state of every time-to-accuracy run of the sweeps, with its log; `others`, when
    given, gets the rest (for saying what the sweeps hold when none is a time-to-accuracy run). A
    run that failed before its worker saw the devices takes its sweep's (`store.load_sweeps`)."""
    found = []
    for sweep in map(Path, sweeps):
        store = sweep if sweep.suffix == ".csv" else sweep / "runs.csv"
        if not store.is_file():
            raise SchemaError(f"{store}: no such run store (a sweep folder holds runs.csv)")
        runs, _ = current_runs(load_sweeps([store]))
        for run in runs:
            if run.mode != "time_to_accuracy":
                if others is not None:
                    others.append(run)
                continue
            log = store.parent / run.run_id / "mllog.txt"
            log = log if run.run_id and log.is_file() else None
            found.append(ExportedRun(run, log, read_run_log(log) if log else None))
    return found


def nothing_to_export(sweeps: list[Path], runs: list[RunResult]) -> str:
    """Why the sweeps have no time-to-accuracy run to export, as true as the rows can say it."""
    where = ", ".join(map(str, sweeps))
    if not runs:
        return f"{where}: no runs yet (runs.csv has no rows): nothing to export"
    unfinished = ("failed", "timeout")
    failed = sum(r.status in unfinished for r in runs)
    # A failed row written before hvdbench recorded a failed run's mode (or whose configuration
    # could not be resolved) has no framework and the default mode: it may have been either.
    unknown = sum(r.status in unfinished and not r.framework for r in runs)
    line = (f"{where}: no time-to-accuracy runs to export: its {len(runs)} run(s) are recorded as throughput "
            f"runs ({failed} of them failed or timed out)")
    if unknown:
        return (line + f"; {unknown} failed row(s) do not record the run's mode (written before hvdbench "
                "recorded it): if they were time-to-accuracy runs, rerun them with `hvdbench sweep ... "
                "--retry-failed`, then export")
    return line + "; an MLPerf result is a time to train: a sweep with --data and no --steps after --"


def export_mlperf(sweeps: list[Path], out: Path, env: dict, ruleset: str = DEFAULT_RULESET) -> Export:
    """Write OUT/results and OUT/systems (see the module docstring). OUT must be new or empty."""
    from mlperf_logging.benchmark_meta import get_allowed_benchmarks

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise OutputError(f"--mlperf {out}: exists and is not an empty folder (an older export's result "
                          "files would be scored with the new ones); give a new folder")
    try:
        allowed = set(get_allowed_benchmarks(USAGE, ruleset))
    except ValueError as e:
        raise ConfigError(f"--ruleset {ruleset}: {e}") from None
    others: list[RunResult] = []
    exported = collect_runs(sweeps, others)
    if not exported:
        raise ConfigError(nothing_to_export(sweeps, others))
    result = Export(out, ruleset)
    groups: dict[tuple, list[ExportedRun]] = {}
    for e in exported:
        groups.setdefault((system_name(e.run), _benchmark(e.run, e.summary)), []).append(e)
    for (system, benchmark), members in sorted(groups.items()):
        if benchmark not in allowed:
            result.notes.append(f"{system}: {len(members)} {benchmark} run(s) not exported: training ruleset "
                                f"{ruleset} has no {benchmark!r} benchmark ({', '.join(sorted(allowed))})")
            continue
        members.sort(key=lambda e: (e.run.started_at, e.run.repeat, e.run.run_id))
        folder = out / "results" / system / benchmark
        folder.mkdir(parents=True, exist_ok=True)
        for i, e in enumerate(members):
            e.result_file = folder / f"result_{i}.txt"
            if e.log is not None:
                atomic_write_bytes(e.result_file, Path(e.log).read_bytes())
            else:  # no event log: a file the summarizer drops as a run that did not converge
                atomic_write_text(e.result_file, f"hvdbench: run {e.run.run_id} ended {e.run.status} without an event log "
                                  f"({e.run.error or 'no error recorded'})\n")
            if e.summary is not None and e.summary.status == "aborted":
                result.notes.append(f"{e.result_file.relative_to(out)}: run {e.run.run_id} stopped aborted; "
                                    "in the open division the summarizer counts its time as a finished run, "
                                    "hvdbench as not converged")
        crashed = [e for e in members if e.run.status in ("failed", "timeout")
                   and not (e.summary is not None and e.summary.status == "aborted")]
        if crashed:
            result.notes.append(
                f"{folder.relative_to(out)}: {', '.join(e.result_file.name for e in crashed)}: "
                f"{len(crashed)} run(s) that ended {'/'.join(sorted({e.run.status for e in crashed}))} "
                "before reaching the target, exported as runs that did not converge (the summarizer drops "
                "each as one; so does hvdbench)")
        done = [e.run.time_to_train_s / 60 for e in members
                if e.run.status == "success" and e.run.time_to_train_s is not None]
        score = olympic_score(done, len(members) - len(done), OLYMPIC_DROP.get(benchmark, 1))
        result.benchmarks.append(Benchmark(system, benchmark, members, score.minutes, score.rule))
        if system not in result.systems:
            runs = [m.run for g in groups for m in groups[g] if g[0] == system]
            summaries = [m.summary for g in groups for m in groups[g] if g[0] == system]
            result.systems[system] = system_description(runs, summaries, env)
    if not result.benchmarks:
        raise ConfigError(f"nothing to export: {'; '.join(result.notes)}")
    for system, desc in result.systems.items():
        atomic_write_text(out / "systems" / f"{system}.json", json.dumps(desc, indent=4) + "\n")
    return result


def no_score_reason(b: Benchmark) -> str:
    """Why the summarizer gave folder `b` no score, from its rules (result_summarizer's olympic mean
    drops the fastest and the slowest run, a log without run_stop counting as the slowest, and scores
    nothing past that many such logs), with the runs MLPerf asks of the benchmark
    (mlperf-logging's result file count): 'its olympic mean drops the fastest and slowest of 2 runs,
    leaving none; MLPerf scores resnet from 5 runs, this system has 2'."""
    n, drop = len(b.runs), OLYMPIC_DROP.get(b.benchmark, 1)
    missed = sum(1 for r in b.runs if r.summary is None or r.summary.run_stop_ms is None)  # what it cannot time
    if missed > drop:
        why = f"{missed} of {n} runs have no run_stop (it drops at most {drop})"
    elif n <= 2 * drop:
        why = f"its olympic mean drops the {drop} fastest and {drop} slowest of {n} run(s), leaving none"
    else:
        why = "the summarizer's output says why (`score it:` below)"
    needed = get_result_file_counts(USAGE).get(b.benchmark)
    if needed and n < needed:
        why += f"; MLPerf scores {b.benchmark} from {needed} runs, this system has {n}"
    return why


def check(result: Export, timeout: float = 600) -> str:
    """Score the exported tree with the official result summarizer (in a temporary folder: it writes
    its summary files in the working directory) and set each Benchmark's `official` score.
    Returns the summarizer's output."""
    import csv

    with tempfile.TemporaryDirectory(prefix="hvdbench-summarizer-") as tmp:
        proc = subprocess.run([*result.summarizer_command[:3], str(result.out.resolve()), USAGE, result.ruleset,
                               "--csv", "summary.csv"], cwd=tmp, capture_output=True, text=True, timeout=timeout)
        table = Path(tmp, "summary.csv")
        if proc.returncode != 0 or not table.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise ConfigError(f"the MLPerf result summarizer failed on {result.out}: {tail[0]}")
        with open(table, newline="") as f:
            rows = list(csv.DictReader(f))
    for b in result.benchmarks:  # a row per systems JSON, named in its details_url
        row = next((r for r in rows if r.get("details_url", "").endswith(f"/systems/{b.system}.json")), {})
        cell = row.get(b.benchmark)
        b.official = float(cell) if cell not in (None, "", "nan") else None
    return proc.stdout + proc.stderr
