"""`hvdbench sweep`: every nodes x GPUs layout x repeats, through horovodrun, mpirun, srun or sbatch."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from hvdbench.cli.lists import FiniteRange, comma_list
from hvdbench.cli.main import Command
from hvdbench.cli.sweep_options import sweep_options
from hvdbench.launchers import CONTROLLERS


@click.command(cls=Command, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("model")
@click.argument("train_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- TRAIN-ARGS...]")
@sweep_options
@click.option("--engines", callback=comma_list,
              metavar="E1,E2", help="Run each layout and repeat under each engine (horovod, ddp, fsdp: train's "
                                    "--engine); the report then compares them, e.g. --engines horovod,ddp.")
@click.option("--controller", type=click.Choice(CONTROLLERS), default="gloo", show_default=True,
              help="Horovod controller under horovodrun (mpirun and srun use MPI).")
@click.option("--config", "config_name", metavar="NAME|FILE",
              help="Per-layout settings: launch/configs/NAME.yaml (NODESxGPUSxBATCHxACCUM names).")
@click.option("--kill-grace", type=FiniteRange(min=0), default=10.0, show_default=True,
              help="Seconds between SIGTERM and SIGKILL when a run is ended.")
@click.option("--launcher-arg", "launcher_args", multiple=True, metavar="ARG",
              help="Extra launcher argument before the worker, e.g. --launcher-arg=--verbose. Repeatable.")
@click.option("--allreduce-bench", metavar="MAX_BYTES",
              help="Also run `hvdbench bench allreduce --max-bytes MAX_BYTES` once per layout (e.g. 64M), "
                   "so the report shows each layout's bus bandwidth beside its throughput.")
@click.option("--compute-bench", is_flag=True,
              help="Also run `hvdbench bench compute` once per layout, so the report gives each run's MFU against "
                   "the devices' measured matrix-product peak as well as the datasheet's.")
@click.option("--links-bench", is_flag=True,
              help="Also run `hvdbench bench links` once per sweep, over every host given with the most ranks per "
                   "host its layouts use: each pair's bandwidth and latency in OUT/bench_links.csv, a slow pair "
                   "and the host it shares named in the report.")
@click.option("--require-idle", type=FiniteRange(min=0), metavar="WAIT_S",
              help="Before each run, wait up to WAIT_S seconds for this machine (the one the sweep runs "
                   "on: localhost layouts, an emulated cluster) to be idle: other processes using less than "
                   "half a core; a run that finds it busy is not started and is recorded as failed, saying "
                   "so (rerun it with --retry-failed). Remote nodes are not checked.")
@click.option("--explain", is_flag=True,
              help="Also run every layout and repeat on --synthetic data (in OUT/explain/): the report sets "
                   "each layout's real-data throughput against its twin's, which separates the data stall "
                   "from compute and communication in the waterfall. Needs --data and --steps after --.")
@click.option("--name", help="Sweep name in the records [default: the name of --out].")
@click.option("--template", type=click.Path(dir_okay=False, path_type=Path),
              help="With --launcher slurm: sbatch template [default: launch/slurm/run.sub].")
def sweep(**given):
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
      hvdbench sweep resnet50 --hosts localhost:2 --engines horovod,ddp,fsdp --out results/engines \\
          -- --flavor debug --synthetic --steps 30
      hvdbench sweep resnet50 --hosts localhost:2 --explain --out results/why \\
          -- --flavor debug --data data/digits --steps 30
      hvdbench sweep resnet50 --cluster slm --launcher slurm --submit --layouts 1x2,2x1 \\
          --out results/slurm -- --flavor debug --synthetic --steps 20
      # on GPU nodes, the full flavors (MLPerf's sizes: BERT-large and its Wikipedia shards):
      hvdbench sweep bert --hostfile hosts --launcher mpirun --timeout 1800 \\
          --config bert-example --out results/bert -- --data data/bert
      hvdbench sweep resnet50 --hostfile hostfiles/example-2node --launcher slurm --submit \\
          --sbatch-arg=--partition=gpu --out results/r50 -- --synthetic
    """
    from hvdbench.output import console as output_console
    from hvdbench.sweep import batch
    from hvdbench.sweep import run as sweep_run
    from hvdbench.sweep.build import build_spec, explain_spec
    from hvdbench.sweep.options import SweepOptions

    options = SweepOptions(**given)
    spec = build_spec(options)
    console = output_console()
    specs = [spec, explain_spec(spec)] if options.explain else [spec]
    if options.submits_jobs:
        if options.explain:
            raise click.UsageError("--explain runs on a sweep's own launches; with --launcher slurm, submit "
                                   "a second sweep with --synthetic after -- instead")
        by_hand = options.dry_run or not options.submit  # sbatch by hand needs the cluster's SLURM_CONF said
        with batch.cluster_slurm(spec if options.cluster_name is not None else None,
                                 echo=click.echo if by_hand else None):
            jobs = batch.slurm_jobs(spec, options.template, options.time_limit, tuple(options.sbatch_args))
            if options.dry_run:
                for layout, script, body, argv in jobs:
                    click.echo(f"# {script}\n{body}\n# submit: {shlex.join(argv)}\n")
                return
            batch.write_slurm_jobs(spec, jobs, options.submit, echo=click.echo)
        return
    if options.dry_run:
        for one in specs:
            sweep_run.dry_run(one, console)
        return
    done = [run_to_the_end(f"sweep {one.name}", one.store, lambda one=one: sweep_run.run_sweep(one, console),
                           f"({one.store})", exit_on_failure=False) for one in specs]
    if not all(done):
        sys.exit(1)


def run_to_the_end(label: str, where, start, after: str = "", exit_on_failure: bool = True) -> bool:
    """Run `start()` (a sweep or a study; it returns the runs' status counts) and print the counts;
    exit 128+N when signal N stopped it (finished runs are kept: the same command resumes), and 1
    when a run did not succeed (or, not `exit_on_failure`, return False: a second sweep still runs)."""
    from hvdbench.sweep import plan
    from hvdbench.sweep import run as sweep_run

    try:
        counts = start()
    except sweep_run.SweepInterrupted as e:
        click.echo(f"{label}: {e}; finished runs are in {where}; run the same command again to resume", err=True)
        sys.exit(128 + e.signum)
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    click.echo(f"{label}: {sum(counts.values())} runs: {summary} {after}".rstrip())
    if set(counts) - set(plan.DONE):
        if exit_on_failure:
            sys.exit(1)
        return False
    return True
