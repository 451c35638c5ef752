"""A study run: one sweep per model and mode, in one folder, resumable, with one progress line
over the whole study between the sweeps' own views.

    hvdbench study run dgx1-mlperf-v05-suite --flavor debug --hosts localhost:2 \\
        --layouts 1x1,1x2 --skip-missing --out results/dgx1
    ->  study = load_study(FILE)
        options = StudyOptions(SweepOptions(out=..., hosts="localhost:2", layouts="1x1,1x2"), flavor="debug",
                               skip_missing=True)
        sweeps, notes = plan_study(study, options, config_dir)
        counts = run_study(study, sweeps, options, console)

The study folder (--out) holds:
    study.json                      the study's name, file, identity (a resume must match) and
                                    published figures (for `hvdbench report`)
    configs/<model>-<mode>.yaml     each sweep's per-layout config (`hvdbench sweep --config`)
    <model>/<mode>/                 an ordinary sweep folder: runs.csv, sweep.json, one folder per run

A model's sweep is exactly `hvdbench sweep MODEL --config configs/<model>-<mode>.yaml --layouts ...
--out <model>/<mode>`: the config carries the model's train settings (flavor, data, the study's
and the model's `train:`, the throughput settings for throughput runs) and one NODESxGPUSxBATCHxACCUM
entry per layout: the model's own per-layout settings when the study runs in its own flavor,
otherwise the flavor's default batch for every layout the study selects.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shlex
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

from hvdbench import topology
from hvdbench.contracts import get_spec, specs
from hvdbench.errors import ConfigError, DatasetError, HvdbenchError
from hvdbench.files import atomic_write_text
from hvdbench.launchers import launch_env
from hvdbench.results.records.store import STUDY_RECORD, read_study_record
from hvdbench.study.schema import ModelPlan, Study
from hvdbench.sweep.build import build_spec, hosts_of
from hvdbench.sweep.options import SweepOptions
from hvdbench.sweep.spec import SweepSpec
from hvdbench.train.config import parse_run_name, run_name

DEFAULT_THROUGHPUT = {"steps": 100}  # a throughput run on real data needs a step count
MANIFEST = "manifest.json"


@dataclass
class StudyOptions:
    """What the command line adds to or overrides in the study file: the options every sweep of the
    study takes (`sweep.out` is the study's folder; layouts, gpus, repeats, launcher and timeout given
    there replace the study's), and the study's own."""

    sweep: SweepOptions
    flavor: str | None = None
    only: tuple[str, ...] = ()
    skip_missing: bool = False

    @property
    def out(self) -> Path:
        return self.sweep.out


@dataclass
class StudySweep:
    model: str
    mode: str
    spec: SweepSpec
    data: str  # the dataset folder, "" for synthetic
    prepare: list[str]  # argv that makes `data` when its manifest is missing ([] when nothing to do)

    @property
    def label(self) -> str:
        return f"{self.model} · {self.mode.replace('_', '-')}"

    @property
    def prepare_command(self) -> str:
        """The prepare recipe as a user would type it, shell-quoted: `hvdbench prepare digits --out ...`."""
        return shlex.join(["hvdbench", *self.prepare[3:]]) if self.prepare else ""


def sweep_dir(out: Path, model: str, mode: str) -> Path:
    return Path(out) / model / mode


def plan_study(study: Study, opts: StudyOptions, config_dir: Path) -> tuple[list[StudySweep], list[str]]:
    """Every sweep of the study, built and checked as `hvdbench sweep` builds them; notes say what
    was left out and why. Nothing is launched; each sweep's config is written in `config_dir`."""
    notes: list[str] = []
    unknown = [m for m in opts.only if m not in study.models]
    if unknown:
        raise ConfigError(f"--only {unknown[0]}: not a model of study {study.name} "
                          f"({', '.join(study.models)})")
    known = {s.name for s in specs()}
    missing = [m for m in study.models if m not in known and (not opts.only or m in opts.only)]
    if missing and not opts.skip_missing:
        raise ConfigError(f"{study.path}: models.{missing[0]}: this hvdbench has no model {missing[0]!r} "
                          f"(missing: {', '.join(missing)}; it has {', '.join(sorted(known))}); "
                          "run the others with --skip-missing or --only")
    notes += [f"{m}: skipped (no such model in this hvdbench)" for m in missing]
    sweeps = []
    for name, model in study.models.items():
        if name in missing or (opts.only and name not in opts.only):
            continue
        for mode in study.modes:
            made = _model_sweep(study, model, mode, opts, config_dir, notes)
            if made:
                sweeps.append(made)
    if not sweeps:
        raise ConfigError(f"{study.path}: nothing to run" + (f" ({'; '.join(notes)})" if notes else ""))
    return sweeps, notes


def _model_sweep(study: Study, model: ModelPlan, mode: str, opts: StudyOptions, config_dir: Path,
                 notes: list[str]) -> StudySweep | None:
    spec = get_spec(model.name)
    file_flavor = model.flavor or study.flavor
    flavor = opts.flavor or file_flavor or spec.default_flavor
    own = opts.flavor is None or opts.flavor == file_flavor  # per-layout settings are for the file's flavor
    use_debug = flavor == "debug" and model.debug
    data = model.debug["data"] if use_debug else model.data
    train = dict(model.debug["train"] if use_debug else model.train)
    where = f"{study.path}: models.{model.name}"
    if not data.synthetic and not data.path:
        raise ConfigError(f"{where}: give 'data' (a prepared dataset folder) or 'synthetic: true'"
                          + (" in its 'debug' section" if use_debug else ""))
    if mode == "time_to_accuracy" and data.synthetic:
        notes.append(f"{model.name}: no time-to-accuracy sweep (synthetic data has no accuracy to reach)")
        return None
    settings = {"flavor": flavor, **({"synthetic": True} if data.synthetic else {"data": data.path}), **train}
    if mode == "throughput":
        settings.update(study.throughput or ({} if data.synthetic else DEFAULT_THROUGHPUT))
    else:
        timed = [k for k in ("steps", "warmup_steps") if k in settings]
        if timed:
            raise ConfigError(f"{where}.train.{timed[0]}: a throughput setting; put it in the study's "
                              "'throughput' section so the time-to-accuracy runs train to the target")

    config = config_dir / f"{model.name}-{mode}.yaml"
    try:
        layouts = _layout_settings(study, model, own, opts, settings, where)
        if not layouts:
            notes.append(f"{model.name}: none of its layouts is selected")
            return None
        atomic_write_text(config, yaml.safe_dump({"model": model.name, "train": settings, "layouts": layouts},
                                                 sort_keys=False))
        chosen = ",".join(dict.fromkeys(name.rsplit("x", 2)[0] for name in layouts))
        given = opts.sweep
        sweep = build_spec(dataclasses.replace(
            given, model=model.name, out=sweep_dir(opts.out, model.name, mode), hostfile=_hostfile(study, opts),
            layouts=chosen, repeats=given.repeats or study.repeats, launcher=given.launcher or study.launcher,
            controller=study.controller, config_name=config, timeout=given.timeout or study.timeout,
            name=f"{study.name}-{model.name}-{mode}", engines=model.engines or study.engines))
    except ConfigError as e:  # named by the study file, not by the sweep config it generated (a temp file)
        said = str(e)
        if not said.startswith(str(study.path)):
            said = f"{where} ({mode} sweep): {said.removeprefix(f'{config}: ')}"
        raise ConfigError(said) from None
    prepare = []
    if data.path and not (Path(data.path) / MANIFEST).is_file():
        if not data.prepare:
            raise DatasetError(f"{where}: data {data.path}: no {MANIFEST} there, and no 'prepare' recipe "
                               "to make it")
        prepare = [sys.executable, "-m", "hvdbench", "prepare", *data.prepare, "--out", data.path]
    return StudySweep(model.name, mode, sweep, data.path, prepare)


def _layout_settings(study: Study, model: ModelPlan, own: bool, opts: StudyOptions, settings: dict,
                     where: str) -> dict:
    """NODESxGPUSxBATCHxACCUM -> settings for this model: its own per-layout settings in the
    file's flavor (filtered by the selection), else the flavor's default batch on every selected layout."""
    selected = opts.sweep.layouts.split(",") if opts.sweep.layouts else list(study.layouts)
    gpus = opts.sweep.gpus or list(study.gpus)
    if own and model.layouts:
        out = {}
        for name, values in model.layouts.items():
            n, g, _, _ = parse_run_name(name)
            if (not selected or str(topology.Layout(n, g)) in selected) and (not gpus or n * g in gpus):
                out[name] = values
        return out
    from hvdbench.study.schema import BATCH_KEYS
    from hvdbench.train.config import resolve

    cfg = resolve({"model": model.name, "out": "-", **settings}, env=launch_env(opts.sweep.env))
    for key in BATCH_KEYS:  # in the layouts' names, not in the config's train settings
        settings.pop(key, None)
    if not selected:  # `gpus:` (or the model's own layouts, in another flavor): the hosts decide
        if model.layouts and not gpus:
            selected = list(dict.fromkeys(str(topology.Layout(*parse_run_name(name)[:2])) for name in model.layouts))
        else:
            hosts = _host_list(study, opts)
            selected = [lay.name for lay in topology.select_layouts(hosts, gpus, "packed")]
    return {run_name(*topology.parse_layout(lay, "--layouts"), cfg.batch_per_gpu, cfg.accum_steps): {}
            for lay in selected}


def _hostfile(study: Study, opts: StudyOptions):
    given = (opts.sweep.hostfile, opts.sweep.hosts, opts.sweep.cluster_name)
    return opts.sweep.hostfile if any(v is not None for v in given) else study.hostfile


def _host_list(study: Study, opts: StudyOptions):
    hostfile = _hostfile(study, opts)
    if opts.sweep.cluster_name is not None:
        from hvdbench.cluster.launch import launch_settings
        hostfile = launch_settings(opts.sweep.cluster_name).hostfile
    return hosts_of(hostfile, opts.sweep.hosts, opts.sweep.gpus_per_node)


# --- the record --------------------------------------------------------------------------------

def identity(study: Study, opts: StudyOptions) -> str:
    """What makes two runs of a study comparable: its models' settings, the throughput settings and
    the flavor (layouts, repeats, hosts and modes may change: that extends a study)."""
    models = {name: [m.flavor, m.data.__dict__, m.train, m.layouts, {k: getattr(v, "__dict__", v)
                                                                      for k, v in m.debug.items()}]
              for name, m in study.models.items()}
    text = json.dumps([models, study.throughput, study.flavor, opts.flavor], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def check_study_record(study: Study, opts: StudyOptions) -> None:
    """Write OUT/study.json the first time; refuse a resume with other model settings or flavor."""
    path = Path(opts.out) / STUDY_RECORD
    ident = identity(study, opts)
    old = read_study_record(path.parent)
    if old is not None:
        if old.get("study") != study.name or old["identity"] != ident:
            raise ConfigError(f"{path}: this folder holds study {old.get('study')!r} run with other model "
                              f"settings or flavor ({old.get('flavor') or 'the file'}'s); use another --out")
    atomic_write_text(path, json.dumps({
        "study": study.name, "file": str(study.path.absolute()), "reproduces": study.reproduces,
        "identity": ident, "flavor": opts.flavor or study.flavor,
        "published": {kind: {m: {str(g): v for g, v in figures.items()} for m, figures in by_model.items()}
                      for kind, by_model in study.published.items()}}, indent=2) + "\n")


# --- running -----------------------------------------------------------------------------------

class Pace:
    """How long a study has run and, at the pace of the runs it has run so far, how long the rest
    will take (runs a resumed study found done took no time now, and count for neither)."""

    def __init__(self, done: int, now: float | None = None):
        self.t0, self.done_before = time.monotonic() if now is None else now, done

    def words(self, done: int, total: int, now: float | None = None) -> str:
        """' in 6:12, about 2:30 left at this pace' (' in 6:12' once all are done); '' before a run of
        this study has finished."""
        elapsed = (time.monotonic() if now is None else now) - self.t0
        ran = done - self.done_before
        if ran <= 0:
            return ""
        said = f" in {clock(elapsed)}"
        return said + (f", about {clock(elapsed / ran * (total - done))} left at this pace" if done < total else "")


def clock(seconds: float) -> str:
    """'6:12', '1:02:03': a duration as a person reads a clock."""
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def prepare_data(sweep: StudySweep, console) -> None:
    """Run the model's prepare recipe when its dataset is missing (once for all its sweeps)."""
    if not sweep.prepare or (Path(sweep.data) / MANIFEST).is_file():
        return
    console.print(f"study: preparing {sweep.data}: {sweep.prepare_command}", markup=False, highlight=False)
    done = subprocess.run(sweep.prepare, stdin=subprocess.DEVNULL)
    if done.returncode != 0 or not (Path(sweep.data) / MANIFEST).is_file():
        raise DatasetError(f"{sweep.data}: `{sweep.prepare_command}` failed (exit status {done.returncode})")


def run_study(study: Study, sweeps: list[StudySweep], opts: StudyOptions, console) -> Counter:
    """Run every sweep in order; a sweep whose data cannot be prepared is counted failed and the
    study goes on. SweepInterrupted (SIGINT/SIGTERM) ends the study: run it again to resume."""
    from hvdbench.results.records.store import read_runs
    from hvdbench.sweep import run as sweep_run
    from hvdbench.sweep.plan import pending

    check_study_record(study, opts)
    total = sum(len(s.spec.runs) for s in sweeps)
    counts: Counter = Counter()
    finished = 0
    pace = None
    for k, sweep in enumerate(sweeps, 1):
        rows = read_runs(sweep.spec.store) if sweep.spec.store.is_file() else []
        todo = len(pending(sweep.spec.runs, rows, sweep.spec.retry_failed))
        done = finished + len(sweep.spec.runs) - todo
        pace = pace or Pace(done)
        console.print(f"== study {study.name} [{k}/{len(sweeps)}] {sweep.label}: {len(sweep.spec.runs)} runs, "
                      f"{todo} to do · study: {done} of {total} runs done{pace.words(done, total)}")
        try:
            prepare_data(sweep, console)
        except HvdbenchError as e:
            console.print(f"study: {sweep.label}: {e}; its runs are not started")
            counts["not started"] += len(sweep.spec.runs)
            finished += len(sweep.spec.runs)
            continue
        counts += sweep_run.run_sweep(sweep.spec, console)
        finished += len(sweep.spec.runs)
    return counts
