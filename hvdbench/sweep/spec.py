"""What a sweep is: its model, directory, layouts, repeats and launch options, and the record
(sweep.json) that keeps a resume from mixing in runs made with other arguments, and each host's
hardware (hvdbench/hardware.py) once.

    hvdbench sweep resnet50 --hosts localhost:2 --repeats 2 --out results/demo -- --synthetic
    ->  spec = SweepSpec(model="resnet50", out=Path("results/demo"), entries=plan_entries(...),
                         repeats=2, train_args=("--synthetic",))
        check_sweep_record(spec)     # writes results/demo/sweep.json, or refuses a mismatch
        run_dir(spec, run)           # results/demo/<run_id>
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from hvdbench.errors import ConfigError
from hvdbench.files import atomic_write_text
from hvdbench.output import line
from hvdbench.frameworks import SHARED_MACHINE_ENV
from hvdbench.launchers import launch_env
from hvdbench.results.records.store import HARDWARE_JSON, RUNS_CSV, SWEEP_RECORD, read_sweep_record
from hvdbench.sweep.plan import Entry, PlannedRun, interleave
from hvdbench.topology import Layout

# Train options the sweep sets for every run: not allowed after `--`.
SWEEP_OWNED = ("--out", "--run-id", "--sweep-name", "--repeat")


@dataclass
class SweepSpec:
    model: str
    out: Path
    entries: list  # plan.Entry
    repeats: int = 1
    name: str = ""  # default: the name of --out
    launcher: str = "horovodrun"
    controller: str = "gloo"
    timeout: float | None = None
    train_args: tuple[str, ...] = ()
    user_env: dict[str, str] = field(default_factory=dict)
    launcher_args: tuple[str, ...] = ()
    retry_failed: bool = False
    config_path: Path | None = None
    grace_s: float = 10.0
    allreduce_bench: str | None = None  # max message size: run `bench allreduce` once per layout
    compute_bench: bool = False  # run `bench compute` once per layout
    # `bench links` once per sweep over this layout: every host of the sweep with the most ranks per host
    # its layouts use (None: no links bench)
    links_layout: Layout | None = None
    link: str = ""  # the inter-node link, in words (--link, or the emulated cluster's); sweep.json keeps it
    require_idle: float | None = None  # seconds to wait for this machine to be idle before each run

    def __post_init__(self):
        self.out = Path(self.out).absolute()
        self.name = self.name or self.out.name
        for arg in self.train_args:
            if arg.split("=", 1)[0] in SWEEP_OWNED:
                raise ConfigError(f"train argument {arg.split('=', 1)[0]} is set by the sweep for every run")

    @property
    def store(self) -> Path:
        return self.out / RUNS_CSV

    @property
    def runs(self) -> list[PlannedRun]:
        return interleave(self.entries, self.repeats)

    @property
    def controller_name(self) -> str:
        """The Horovod controller a run's row records when its worker wrote none: --controller where
        the launcher takes it (horovodrun), else MPI."""
        from hvdbench.launchers.registry import get_launcher  # (start-up time: the registry reads entry points)

        return self.controller if get_launcher(self.launcher).takes_controller else "mpi"


def run_dir(spec: SweepSpec, run: PlannedRun) -> Path:
    return spec.out / run.run_id


def thread_share(spec: SweepSpec) -> int:
    """`--thread-share` for every run of the sweep: the most ranks any of its layouts puts on one
    machine (every rank of a layout on an emulated cluster, whose nodes share one machine), so the
    1x1 baseline's rank gets the math threads each rank of the largest layout gets, as one GPU per
    rank would. 0 (leave it to the worker) when the user chose the threads: --threads or
    --thread-share after --, in a layout's settings, or OMP_NUM_THREADS in --env."""
    chosen = {a.split("=", 1)[0] for a in spec.train_args} & {"--threads", "--thread-share"}
    settings = {k for e in spec.entries if e.config for k in e.config.settings}
    if chosen or settings & {"threads", "thread_share"} or "OMP_NUM_THREADS" in spec.user_env:
        return 0
    shared = spec.user_env.get(SHARED_MACHINE_ENV) == "1"
    return max(e.layout.world_size if shared else e.layout.gpus_per_node for e in spec.entries)


def train_args(spec: SweepSpec, run: PlannedRun) -> list[str]:
    """The arguments of the run's `hvdbench train MODEL ...` after its --config (the layout's
    settings, RUN_DIR/layout.yaml): the sweep's train arguments, the entry's --engine (`sweep
    --engines`), then what the sweep sets for every run. The one place they are put together: the
    worker is launched with them (launch.train_worker) and resolve_entry resolves them."""
    share = thread_share(spec)
    return [*spec.train_args, *(["--engine", run.entry.engine] if run.entry.engine else []),
            "--out", str(run_dir(spec, run)), "--run-id", run.run_id, "--sweep-name", spec.name,
            "--repeat", str(run.repeat), *(["--thread-share", str(share)] if share else [])]


def resolve_entry(spec: SweepSpec, entry: Entry, repeat: int = 1):
    """The TrainConfig the worker of `entry`'s run `repeat` will resolve (its layout.yaml, the
    train arguments, the options the sweep adds); the error `train` would give."""
    from hvdbench.train.options import resolve_train_args

    return resolve_train_args(spec.model, train_args(spec, PlannedRun(entry, repeat)),
                              layout=dict(entry.config.settings) if entry.config else None,
                              env=launch_env(spec.user_env))  # what a model's `refuse` reads: the ranks' own


def check_sweep_record(spec: SweepSpec) -> None:
    """Write sweep.json the first time; later, refuse a sweep whose model, train arguments or
    config differ (its rows would not be comparable with the ones already there). Layouts,
    repeats, launcher and timeout may change: that is how a sweep is extended."""
    path = spec.out / SWEEP_RECORD
    identity = {"model": spec.model, "train_args": list(spec.train_args),
                "config": str(spec.config_path.resolve()) if spec.config_path else None}
    if path.exists():
        old = read_sweep_record(path)
        for key, value in identity.items():
            if old.get(key) != value:
                raise ConfigError(f"{path}: this sweep was made with {key} {old.get(key)!r}, not "
                                  f"{value!r}; use another --out for a different sweep")
        # The link is what the report names beside the rows: a resume on another link would mix
        # measurements of two interconnects under one name. A resume that names none keeps it.
        recorded = old.get("link") or ""
        if spec.link and recorded and spec.link != recorded:
            raise ConfigError(f"{path}: this sweep was measured over the link {recorded!r}, not "
                              f"{spec.link!r}; use another --out for another interconnect")
        if spec.link and not recorded:
            atomic_write_text(path, json.dumps({**old, "link": spec.link}, indent=2) + "\n")
        spec.link = spec.link or recorded
        return
    atomic_write_text(path, json.dumps({
        **identity, "name": spec.name, "link": spec.link,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "hvdbench": __import__("hvdbench").__version__}, indent=2) + "\n")


def keep_hardware(spec: SweepSpec, rdir: Path) -> None:
    """Each host's hardware record, from a run's RUN/hardware.json (its worker wrote it), kept once per
    host in sweep.json's "hardware": the first run that reached a host records it. A run that wrote
    none (it failed first) adds nothing."""
    try:
        found = json.loads((rdir / HARDWARE_JSON).read_text())
    except (OSError, ValueError):
        return
    path = spec.out / SWEEP_RECORD
    record = read_sweep_record(path)
    known = record.get("hardware") or {}
    if not isinstance(known, dict):  # hand-edited: kept as it is, said once per run that would add to it
        line(f"warning: {path}: \"hardware\" is a {type(known).__name__}, not a record per host (hand-edited?): "
             f"{rdir.name}'s host hardware is not added to it", sys.stderr)
        return
    new = {host: facts for host, facts in found.items() if host not in known} if isinstance(found, dict) else {}
    if new:
        atomic_write_text(path, json.dumps({**record, "hardware": {**known, **new}}, indent=2) + "\n")
