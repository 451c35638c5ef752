"""`hvdbench sweep`: every nodes x GPUs layout x repeats, through horovodrun, mpirun, srun or sbatch."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import click

from hvdbench.launchers import CONTROLLERS, LAUNCHERS
from hvdbench.topology import MAX_SLOTS


def _int_list(ctx, param, value):
    if value is None:
        return None
    try:
        numbers = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected whole numbers like 1,2,4") from None
    if not numbers or min(numbers) < 1:
        raise click.BadParameter(f"{value!r}: expected positive whole numbers like 1,2,4")
    return numbers


def _env_pairs(ctx, param, values):
    env = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE with KEY a variable name")
        env[key] = value
    return env


def _one_line(ctx, param, value):
    if value is not None and (not value.strip() or len(value) > 200 or not value.isprintable()):
        raise click.BadParameter(f"{value!r}: one printable line of at most 200 characters")
    return value


def _check_train_args(model: str, train_args) -> None:
    """Parse the arguments after `--` with `hvdbench train`'s own options (built from TrainConfig's
    fields), so a misspelt option or a wrong type fails here, not once per launched run."""
    from hvdbench.cli.train import train as train_command

    try:
        train_command.make_context("hvdbench train", [model, *train_args, "--out", "-"])
    except click.UsageError as e:
        raise click.UsageError(f"train argument after --: {e.format_message()}") from None


def _check_runs(spec) -> None:
    """Resolve every layout's train configuration the way its worker will (`hvdbench train MODEL
    [--config RUN_DIR/layout.yaml] TRAIN-ARGS --out RUN_DIR ...` -> hvdbench.train.config.resolve,
    the validation `train` itself does), so a run `train` would refuse fails here, in one line,
    before anything is launched or written (and in --dry-run)."""
    import tempfile

    import yaml

    from hvdbench.cli.train import parse_train_args
    from hvdbench.errors import ConfigError, HvdbenchError
    from hvdbench.sweep.plan import PlannedRun
    from hvdbench.sweep.spec import run_dir
    from hvdbench.train.config import resolve

    overrides, config_file = parse_train_args(spec.model, spec.train_args)
    with tempfile.TemporaryDirectory(prefix="hvdbench-sweep-check-") as tmp:
        for entry in spec.entries:
            run = PlannedRun(entry, 1)
            given = {**overrides, "out": str(run_dir(spec, run)), "run_id": run.run_id,
                     "sweep_name": spec.name, "repeat": run.repeat}
            layout_file = config_file
            if entry.config:  # the worker's layout.yaml, written as launch_run writes it
                layout_file = Path(tmp) / "layout.yaml"
                layout_file.write_text(yaml.safe_dump(entry.config.settings, sort_keys=False))
            try:
                resolve(given, layout_file)
            except HvdbenchError as e:
                message = str(e)
                if entry.config:
                    message = message.replace(f"{layout_file}: ", "").replace(str(layout_file), "the layout")
                    where = f"{spec.config_path}: layouts.{entry.name}" + (
                        " with the train arguments after --" if spec.train_args else "")
                else:
                    where = "train arguments after --" if spec.train_args else f"sweep of {spec.model}"
                raise ConfigError(f"{where}: {message}") from None


def _cluster_settings(name, launcher, launcher_args, env):
    """The emulated cluster's hostfile, launcher options and PATH (its ssh wrapper) for this sweep."""
    from hvdbench.cluster.launch import launch_settings

    settings = launch_settings(name)
    if launcher not in ("horovodrun", "mpirun"):
        raise click.UsageError(f"--cluster runs with --launcher horovodrun or mpirun, not {launcher}")
    extra = settings.horovodrun_args if launcher == "horovodrun" else settings.mpirun_args
    return settings.hostfile, (*extra, *launcher_args), {**settings.env, **env}, settings.link


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("model")
@click.argument("train_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- TRAIN-ARGS...]")
@click.option("--hostfile", type=click.Path(dir_okay=False, path_type=Path),
              help="horovodrun hostfile: 'HOST slots=N' per line.")
@click.option("--hosts", help="Hosts and slots, e.g. node1:8,node2:8.")
@click.option("--cluster", "cluster_name", metavar="NAME",
              help="Run on the emulated cluster NAME (`hvdbench cluster up --name NAME`): its hostfile, "
                   "ssh and network interface.")
@click.option("--gpus-per-node", type=click.IntRange(min=1, max=MAX_SLOTS),
              help="Slots per host of the Slurm allocation [default: SLURM_NTASKS_PER_NODE].")
@click.option("--gpus", callback=_int_list, help="Total GPU counts, e.g. 1,2,4 [default: powers of two "
              "up to the capacity].")
@click.option("--layouts", default="all", show_default=True,
              help="all | packed (fewest nodes) | spread (most nodes) | a list like 1x4,2x2.")
@click.option("--repeats", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--launcher", type=click.Choice(LAUNCHERS), default="horovodrun", show_default=True)
@click.option("--controller", type=click.Choice(CONTROLLERS), default="gloo", show_default=True,
              help="Horovod controller under horovodrun (mpirun and srun use MPI).")
@click.option("--config", "config_name", metavar="NAME|FILE",
              help="Per-layout settings: launch/configs/NAME.yaml (NODESxGPUSxBATCHxACCUM names).")
@click.option("--timeout", type=click.FloatRange(min=1), help="Seconds per run before its processes "
              "are ended and it is recorded as timeout [default: none].")
@click.option("--kill-grace", type=click.FloatRange(min=0), default=10.0, show_default=True,
              help="Seconds between SIGTERM and SIGKILL when a run is ended.")
@click.option("--env", "env", multiple=True, callback=_env_pairs, metavar="KEY=VALUE",
              help="Set in every run's environment (forwarded to remote ranks). Repeatable.")
@click.option("--launcher-arg", "launcher_args", multiple=True, metavar="ARG",
              help="Extra launcher argument before the worker, e.g. --launcher-arg=--verbose. Repeatable.")
@click.option("--allreduce-bench", metavar="MAX_BYTES",
              help="Also run `hvdbench bench allreduce --max-bytes MAX_BYTES` once per layout (e.g. 64M), "
                   "so the report shows each layout's bus bandwidth beside its throughput.")
@click.option("--link", metavar="TEXT", callback=_one_line, help="The inter-node link, in words, for the report and its plots, e.g. "
              "'HDR InfiniBand 200 Gb/s' [default: with --cluster, the emulated link and its shaping; "
              "on a resume, the one recorded in OUT/sweep.json].")
@click.option("--retry-failed", is_flag=True, help="Rerun runs recorded as failed or timeout.")
@click.option("--name", help="Sweep name in the records [default: the name of --out].")
@click.option("--dry-run", is_flag=True, help="Print the plan and the exact commands; run nothing.")
@click.option("--submit", is_flag=True, help="With --launcher slurm: sbatch the rendered scripts.")
@click.option("--sbatch-arg", "sbatch_args", multiple=True, metavar="ARG",
              help="With --launcher slurm: extra sbatch argument, e.g. --sbatch-arg=--partition=gpu.")
@click.option("--time-limit", default="02:00:00", show_default=True, help="With --launcher slurm: per job.")
@click.option("--template", type=click.Path(dir_okay=False, path_type=Path),
              help="With --launcher slurm: sbatch template [default: launch/slurm/run.sub].")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Sweep directory: runs.csv and one directory per run.")
def sweep(model, train_args, hostfile, hosts, cluster_name, gpus_per_node, gpus, layouts, repeats, launcher,
          controller, config_name, timeout, kill_grace, env, launcher_args, allreduce_bench, link, retry_failed, name,
          dry_run, submit, sbatch_args, time_limit, template, out):
    """Run MODEL over every nodes x GPUs layout and repeat; one row per run in OUT/runs.csv.

    Arguments after -- go to `hvdbench train` unchanged. Runs are interleaved across layouts;
    running the same command again resumes (done runs are skipped). Hosts come from --hostfile,
    --hosts, or the current Slurm allocation.

    \b
    Example:
      hvdbench prepare digits --out data/digits
      hvdbench sweep resnet50 --hosts localhost:2 --repeats 2 --out results/demo \\
          -- --flavor debug --data data/digits --steps 6 --warmup-steps 2
      hvdbench cluster up --name hvd --nodes 2 --slots 2 --bandwidth 1gbit
      hvdbench sweep resnet50 --cluster hvd --gpus 1,2 --out results/rehearsal \\
          -- --flavor debug --synthetic --steps 20 --warmup-steps 5
      hvdbench sweep resnet50 --hostfile hostfiles/example-2node --gpus 8 --dry-run \\
          --out results/r50 -- --synthetic --steps 100
      hvdbench sweep bert --hostfile hosts --launcher mpirun --timeout 1800 \\
          --config bert-example --out results/bert -- --data data/bert
      hvdbench sweep resnet50 --hostfile hostfiles/example-2node --launcher slurm --submit \\
          --sbatch-arg=--partition=gpu --out results/r50 -- --synthetic
    """
    from hvdbench.output import console as output_console

    from hvdbench import topology
    from hvdbench.models import get_spec
    from hvdbench.sweep import batch, layout_config as sweep_config, plan, run as sweep_run
    from hvdbench.cli.writable import check_writable_dir
    from hvdbench.results.schema import RunResult
    from hvdbench.results.store import check_appendable

    get_spec(model)  # an unknown model is an error before anything is written
    _check_train_args(model, train_args)
    # Given, even empty (`--hosts ''`), is given: it is named in the error, not taken for "use Slurm".
    if sum(x is not None for x in (hostfile, hosts, cluster_name)) > 1:
        raise click.UsageError("give one of --hostfile, --hosts or --cluster")
    if cluster_name is not None:
        hostfile, launcher_args, env, cluster_link = _cluster_settings(cluster_name, launcher, launcher_args, env)
        if link and link != cluster_link:
            raise click.UsageError(f"--link {link!r}: cluster {cluster_name!r} has its own ({cluster_link!r})")
        link = cluster_link
    if submit and launcher != "slurm":
        raise click.UsageError("--submit goes with --launcher slurm")
    # The sweep folder can be written and its runs.csv read back whole, before any run is launched.
    check_writable_dir(out, "--out")
    check_appendable(out / "runs.csv", RunResult)
    host_list = (topology.parse_hostfile(hostfile) if hostfile is not None else topology.parse_hosts_arg(hosts)
                 if hosts is not None else topology.hosts_from_slurm(os.environ, gpus_per_node))

    cfg = None
    if config_name:
        cfg = sweep_config.load_sweep_config(sweep_config.find_config(config_name), model)
        for entry in cfg.layouts:
            sweep_config.check_no_conflict(entry.settings, train_args, str(cfg.path))
    if cfg and layouts == "all" and gpus is None:
        layouts = ",".join(dict.fromkeys(entry.layout for entry in cfg.layouts))  # the config's own
    chosen = topology.select_layouts(host_list, gpus, layouts)
    explicit = layouts not in ("all", "packed", "spread")
    entries = plan.plan_entries(chosen, cfg, strict=explicit)

    spec = sweep_run.SweepSpec(
        model=model, out=out, entries=entries, repeats=repeats, name=name or "",
        launcher="srun" if launcher == "slurm" else launcher, controller=controller, timeout=timeout,
        train_args=tuple(train_args), user_env=env, launcher_args=tuple(launcher_args),
        retry_failed=retry_failed, config_path=cfg.path if cfg else None, grace_s=kill_grace,
        allreduce_bench=allreduce_bench, link=(link or "").strip())
    _check_runs(spec)  # every layout's run resolved as `train` will: refused here, not once per run
    console = output_console()

    if launcher == "slurm":
        jobs = batch.slurm_jobs(spec, template, time_limit, tuple(sbatch_args))
        if dry_run:
            for layout, script, body, argv in jobs:
                click.echo(f"# {script}\n{body}\n# submit: {' '.join(argv)}\n")
            return
        batch.write_slurm_jobs(spec, jobs, submit, echo=click.echo)
        return
    if dry_run:
        sweep_run.dry_run(spec, console)
        return
    try:
        counts = sweep_run.run_sweep(spec, console)
    except sweep_run.SweepInterrupted as e:
        click.echo(f"sweep {spec.name}: {e}; finished runs are in {spec.store}; "
                   "run the same command again to resume", err=True)
        sys.exit(128 + e.signum)
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    click.echo(f"sweep {spec.name}: {sum(counts.values())} runs: {summary} ({spec.store})")
    if set(counts) - set(plan.DONE):
        sys.exit(1)
