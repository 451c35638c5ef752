"""A sweep's spec from what a user asked for (SweepOptions): hosts, layouts, per-layout config and
train arguments, each checked the way the run itself will check it, before anything is launched or
written.

    spec = build_spec(SweepOptions(out=Path("results/demo"), model="resnet50", hosts="localhost:2",
                                   repeats=2, train_args=("--flavor", "debug", "--synthetic")))
    # the same as: hvdbench sweep resnet50 --hosts localhost:2 --repeats 2 --out results/demo \\
    #                  -- --flavor debug --synthetic

`hvdbench sweep` and `hvdbench study run` (one sweep per model and mode) both build their sweeps here.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from hvdbench import launchers, topology
from hvdbench.contracts import get_spec
from hvdbench.contracts.engines import engine_names, get_engine
from hvdbench.errors import ConfigError, HvdbenchError, UsageError
from hvdbench.frameworks import horovod_installed, require_horovod
from hvdbench.launchers.guard import capture
from hvdbench.launchers.registry import get_launcher, refusal
from hvdbench.results.records.schema import RunResult
from hvdbench.results.records.store import EXPLAIN_DIR, RUNS_CSV, check_appendable
from hvdbench.sweep import layout_config as sweep_config
from hvdbench.sweep import plan
from hvdbench.sweep.options import SweepOptions
from hvdbench.sweep.spec import SweepSpec, resolve_entry
from hvdbench.train.options import parse_train_args


def build_spec(options: SweepOptions) -> SweepSpec:
    """The SweepSpec `hvdbench sweep` runs; HvdbenchError (UsageError for options that do not go
    together) naming what is wrong."""
    o = options
    o.check()
    env, launcher_args, hostfile, link = dict(o.env), tuple(o.launcher_args), o.hostfile, o.link
    launcher = get_launcher(o.launcher or default_launcher())
    get_spec(o.model)  # an unknown model is an error before anything is written
    check_train_args(o.model, o.train_args)
    # Given, even empty (`--hosts ''`), is given: it is named in the error, not taken for "use Slurm".
    if sum(x is not None for x in (o.hostfile, o.hosts, o.cluster_name)) > 1:
        raise UsageError("give one of --hostfile, --hosts or --cluster")
    if o.cluster_name is not None:
        hostfile, launcher_args, env, cluster_link = cluster_settings(o.cluster_name, launcher.name, launcher_args,
                                                                      env)
        if link and link != cluster_link:
            raise UsageError(f"--link {link!r}: cluster {o.cluster_name!r} has its own ({cluster_link!r})")
        link = cluster_link
    from hvdbench.files import check_writable_dir

    # The sweep folder can be written and its runs.csv read back whole, before any run is launched.
    check_writable_dir(o.out, "--out")
    check_appendable(Path(o.out) / RUNS_CSV, RunResult)
    host_list = hosts_of(hostfile, o.hosts, o.gpus_per_node)

    cfg, layouts = None, o.layouts or "all"
    if o.config_name:
        cfg = sweep_config.load_sweep_config(sweep_config.find_config(str(o.config_name)), o.model)
        for entry in cfg.layouts:
            sweep_config.check_no_conflict(entry.settings, o.train_args, str(cfg.path))
            if o.engines and "engine" in entry.settings:  # --engines would win, unshown
                raise ConfigError(f"{cfg.path}: layouts.{entry.name}: engine {entry.settings['engine']!r} and "
                                  f"--engines {','.join(o.engines)} both choose the engine: give it in one place")
    if cfg and layouts == "all" and o.gpus is None:
        layouts = ",".join(dict.fromkeys(entry.layout for entry in cfg.layouts))  # the config's own
    chosen = topology.select_layouts(host_list, o.gpus, layouts)
    explicit = layouts not in ("all", "packed", "spread")
    entries = plan.with_engines(plan.plan_entries(chosen, cfg, strict=explicit),
                                check_engines(o.engines, o.train_args))

    spec = SweepSpec(
        model=o.model, out=o.out, entries=entries, repeats=o.repeats or 1, name=o.name or "",
        launcher=launcher.runs_with or launcher.name, controller=o.controller, timeout=o.timeout,
        train_args=tuple(o.train_args), user_env=env, launcher_args=launcher_args,
        retry_failed=o.retry_failed, config_path=cfg.path if cfg else None, grace_s=o.kill_grace,
        allreduce_bench=o.allreduce_bench, compute_bench=o.compute_bench,
        links_layout=links_layout(host_list, entries) if o.links_bench else None, link=(link or "").strip(),
        require_idle=o.require_idle)
    check_runs(spec)  # every layout's run resolved as `train` will: refused here, not once per run
    if spec.links_layout and spec.links_layout.world_size < 2:
        raise ConfigError(f"--links-bench measures pairs of ranks, over every host of the sweep with the most ranks "
                          f"per host its layouts use: {spec.links_layout.name} is one rank (give more hosts, or "
                          "layouts of 2 ranks per host)")
    # Each layout's launch command built once before any run: what the launcher refuses (what
    # horovodrun's shell line cannot take) is refused here, not once per run.
    for layout in dict.fromkeys(entry.layout for entry in spec.entries):
        launchers.build(spec.launcher, launchers.Job(layout, ("hvdbench",), spec.out, spec.controller,
                                                     spec.launcher_args), {})
    return spec


def links_layout(hosts: list[topology.Host], entries) -> topology.Layout:
    """What `sweep --links-bench` measures: every host given (the sweep's layouts may use fewer: 1x1 and
    2x1 of three hosts), each with the most ranks per host a layout of the sweep runs (at most the
    fewest slots of a host), so every pair of hosts and of a host's ranks the sweep uses is timed."""
    per_host = max(entry.layout.gpus_per_node for entry in entries)
    if not hosts:  # hosts a scheduler picks: the sweep's widest layout
        return max((entry.layout for entry in entries), key=lambda x: (x.nodes, x.gpus_per_node))
    return topology.Layout(len(hosts), min(per_host, *(h.slots for h in hosts)), tuple(h.name for h in hosts))


def default_launcher() -> str:
    """A sweep's launcher when none is named: horovodrun, which comes with Horovod, where Horovod is
    installed; else torchrun, which starts the ddp and fsdp engines' ranks without it."""
    return "horovodrun" if horovod_installed() else "torchrun"


def check_engines(engines, train_args) -> tuple[str, ...]:
    """`--engines a,b`: known names, each once, and not also an --engine after --."""
    engines = tuple(engines or ())
    for name in engines:
        if name not in engine_names():
            raise UsageError(f"--engines: {name!r} is not one of {', '.join(engine_names())}")
    if len(set(engines)) != len(engines):
        raise UsageError(f"--engines names an engine twice: {','.join(engines)}")
    if engines and any(a.split("=", 1)[0] == "--engine" for a in train_args):
        raise UsageError("give the engines with --engines or --engine after --, not both")
    return engines


def hosts_of(hostfile=None, hosts=None, gpus_per_node=None):
    """The hosts and slots of --hostfile, else --hosts, else the current Slurm allocation."""
    if hostfile is not None:
        return topology.parse_hostfile(hostfile)
    if hosts is not None:
        return topology.parse_hosts_arg(hosts)
    return topology.hosts_from_slurm(os.environ, gpus_per_node, expand=capture)


def check_train_args(model: str, train_args) -> None:
    """Parse the arguments after `--` with `hvdbench train`'s own options (built from TrainConfig's
    fields), so a misspelt option or a wrong type fails here, not once per launched run. The
    placeholder --out goes first: a last option left without its value is then named as such, not
    given '--out' as its value."""
    try:
        parse_train_args(model, ["--out", "-", *train_args])
    except UsageError as e:
        raise UsageError(f"train argument after --: {e}") from None


def check_runs(spec: SweepSpec) -> None:
    """Resolve every layout's train configuration the way its worker will (`hvdbench train MODEL
    [--config RUN_DIR/layout.yaml] TRAIN-ARGS --out RUN_DIR ...`, hvdbench.train.options), so a
    run `train` would refuse fails here, in one line, before anything is launched or written (and
    in --dry-run). Each entry keeps its resolved TrainConfig: a run that fails is recorded with the
    mode, flavor, framework, precision and batch it really had (hvdbench.sweep.record)."""
    entries = []
    for entry in spec.entries:
        try:
            cfg = resolve_entry(spec, entry)
        except HvdbenchError as e:
            message = str(e)
            if entry.config:
                message = message.removeprefix("the layout: ")
                where = f"{spec.config_path}: layouts.{entry.name}" + (
                    " with the train arguments after --" if spec.train_args else "")
            else:
                where = "train arguments after --" if spec.train_args else f"sweep of {spec.model}"
            raise ConfigError(f"{where}: {message}") from None
        # Refused here, not once per run by every worker.
        engine, launcher = get_engine(cfg.engine), get_launcher(spec.launcher)
        if engine.needs_horovod:
            require_horovod(f"sweep of {spec.model}: --engine {engine.name}")
        elif launcher.needs_horovod:
            require_horovod(f"sweep of {spec.model}: --launcher {launcher.name}")
        refused = refusal(engine, launcher)
        if refused:
            raise ConfigError(f"sweep of {spec.model}: --launcher {refused}")
        entries.append(dataclasses.replace(entry, train=cfg))
    spec.entries = entries


def cluster_settings(name, launcher, launcher_args, env, state_root=None):
    """The emulated cluster's hostfile, launcher options, environment (PATH with its ssh wrapper;
    SLURM_CONF of its own Slurm) and link for this sweep. `--launcher slurm` takes the cluster's
    hostfile and SLURM_CONF when it was brought up with `--slurm` (the jobs' srun needs no option of
    ours), and is refused in one line when it was not."""
    from hvdbench.cluster.launch import launch_settings

    settings = launch_settings(name) if state_root is None else launch_settings(name, state_root)
    extra = settings.launcher_args(launcher)  # the cluster's own options for it; UsageError where it has none
    return settings.hostfile, (*extra, *launcher_args), {**settings.env, **env}, settings.link


def explain_spec(spec: SweepSpec) -> SweepSpec:
    """`sweep --explain`: the same layouts and repeats on --synthetic data instead of --data, in
    SWEEP/explain/ (its own runs.csv and sweep.json, out of the scaling tables). The report sets
    each layout's real-data throughput against its twin's: the data stall, measured apart from the
    compute and communication the two share (the 1x1 twin is the compute-only baseline)."""
    args, skip, data = [], False, None
    for arg in spec.train_args:
        if skip:
            data, skip = arg, False
            continue
        if arg == "--data":
            skip = True
            continue
        if arg.startswith("--data="):
            data = arg.split("=", 1)[1]
            continue
        args.append(arg)
    if data is None or "--synthetic" in args:
        raise UsageError("--explain sets each run on real data against its twin on --synthetic data: "
                         "give --data DIR after --")
    if not any(a == "--steps" or a.startswith("--steps=") for a in args):
        raise UsageError("--explain compares throughput runs: give --steps N after --")
    twin = dataclasses.replace(spec, out=spec.out / EXPLAIN_DIR, name=f"{spec.name}-explain",
                               train_args=(*args, "--synthetic"), allreduce_bench=None,
                               compute_bench=False, links_layout=None)
    check_runs(twin)  # the twins' own configurations (synthetic data), for their rows
    return twin
