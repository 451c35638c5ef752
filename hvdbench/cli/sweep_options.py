"""The options `hvdbench sweep` and `hvdbench study run` both take, each defined once, under the names
of hvdbench.sweep.options.SweepOptions' fields (the commands fill one from them).

    @click.command()
    @sweep_options
    def sweep(model, train_args, engines, ..., **shared):
        options = SweepOptions(model=model, ..., **shared)

None is "not given": the sweep's default, or (study run) the study file's own setting.
"""

from __future__ import annotations

from pathlib import Path

import click

from hvdbench.cli.lists import env_pairs, int_list, layout_list, one_line
from hvdbench.topology import MAX_SLOTS


def launcher_name(ctx, param, value):
    """click callback of --launcher: a registered launcher (hvdbench/launchers/registry.py, read when
    given: `--help` reads no entry point)."""
    from hvdbench.errors import ConfigError
    from hvdbench.launchers.registry import get_launcher

    if value is None:
        return None
    try:
        return get_launcher(value).name
    except ConfigError as e:
        raise click.BadParameter(str(e)) from None


OPTIONS = (
    click.option("--hostfile", type=click.Path(dir_okay=False, path_type=Path),
                 help="horovodrun hostfile: 'HOST slots=N' per line [default: a study's 'hostfile', else the "
                      "Slurm allocation]."),
    click.option("--hosts", help="Hosts and slots, e.g. node1:8,node2:8."),
    click.option("--cluster", "cluster_name", metavar="NAME",
                 help="Run on the emulated cluster NAME (`hvdbench cluster up --name NAME`): its hostfile, "
                      "ssh and network interface; with --launcher slurm, its own Slurm (SLURM_CONF), for a "
                      "cluster brought up with --slurm."),
    click.option("--gpus-per-node", type=click.IntRange(min=1, max=MAX_SLOTS),
                 help="Slots per host of the Slurm allocation [default: SLURM_NTASKS_PER_NODE]."),
    click.option("--gpus", callback=int_list, help="Total GPU counts, e.g. 1,2,4 [default: a study's, else powers "
                 "of two up to the capacity]."),
    click.option("--layouts", callback=layout_list,
                 help="all | packed (fewest nodes) | spread (most nodes) | a list like 1x4,2x2 [default: a "
                      "study's, else all]."),
    click.option("--repeats", type=click.IntRange(min=1), help="Runs of each layout [default: a study's, else 1]."),
    click.option("--launcher", metavar="NAME", callback=launcher_name,
                 help="horovodrun, mpirun, srun, slurm (sbatch jobs), torchrun, or one a package registers "
                      "[default: a study's, else horovodrun where Horovod is installed, else torchrun (ddp and "
                      "fsdp need no Horovod)]."),
    click.option("--timeout", type=click.FloatRange(min=1), help="Seconds per run before its processes are "
                 "ended and it is recorded as timeout [default: a study's, else none]."),
    click.option("--env", "env", multiple=True, callback=env_pairs, metavar="KEY=VALUE",
                 help="Set in every run's environment (forwarded to remote ranks). Repeatable."),
    click.option("--link", metavar="TEXT", callback=one_line,
                 help="The inter-node link, in words, for the report and its plots, e.g. 'HDR InfiniBand "
                      "200 Gb/s' [default: with --cluster, the emulated link and its shaping; on a resume, the "
                      "one recorded in OUT/sweep.json]."),
    click.option("--retry-failed", is_flag=True, help="Rerun runs recorded as failed or timeout."),
    click.option("--dry-run", is_flag=True, help="Print the plan and the exact commands (a study: every "
                 "sweep's); run nothing."),
    click.option("--submit", is_flag=True, help="With --launcher slurm: sbatch the rendered scripts."),
    click.option("--sbatch-arg", "sbatch_args", multiple=True, metavar="ARG",
                 help="With --launcher slurm: extra sbatch argument, e.g. --sbatch-arg=--partition=gpu. "
                      "Repeatable."),
    click.option("--time-limit", default="02:00:00", show_default=True, help="With --launcher slurm: per job."),
    click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
                 help="The sweep's folder: runs.csv and one folder per run (a study's: one sweep folder per "
                      "model and mode, study.json, configs/)."),
)


def sweep_options(command):
    """The shared options, as click decorators, in OPTIONS' order."""
    for option in reversed(OPTIONS):
        command = option(command)
    return command
