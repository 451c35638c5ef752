"""`hvdbench train`: one Horovod worker (parse options, resolve the config, hand over to the worker)."""

from __future__ import annotations

import sys
import time

import click

from hvdbench.errors import HvdbenchError

# How long a quiet rank waits before exiting: launchers kill the whole job when the first rank
# exits, and rank 0 (which parses the same argv) must get to print the error before that.
# HVDBENCH_QUIET_EXIT_DELAY_S overrides it (tests of the quiet exit set 0).
QUIET_EXIT_DELAY_S = 5.0


class WorkerCommand(click.Command):
    """A command every rank of a launch runs (train, bench allreduce, bench io).

    Every rank parses the same argv, so a bad option fails on all of them: only rank 0 prints it;
    the others exit with the same status, quietly and a moment later. And a rank started over ssh
    (horovodrun's Gloo controller on other nodes) is not signalled when its launcher is ended: it
    asks the kernel to end it with its parent (measured: a killed sweep's `bench allreduce` ranks
    otherwise ran on, waiting on their lost peers). Not for a lone process: nohup works."""

    def invoke(self, ctx):
        from hvdbench.train.launch_info import detect_launcher

        if detect_launcher() != "single":
            from hvdbench.launchers.guard import die_with_parent

            die_with_parent()
        return super().invoke(ctx)

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.UsageError:
            _quiet_unless_rank0(2)
            raise


def _quiet_unless_rank0(code: int) -> None:
    import os

    from hvdbench.train.launch_info import launcher_rank

    if launcher_rank() != 0:
        time.sleep(float(os.environ.get("HVDBENCH_QUIET_EXIT_DELAY_S", QUIET_EXIT_DELAY_S)))
        sys.exit(code)


def _parse_set(values) -> dict:
    """--set key=value (YAML value; dotted keys reach nested sections, e.g. submission.org=acme)."""
    import yaml

    from hvdbench.errors import ConfigError

    out: dict = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        node = out
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def overrides_from_options(model: str, set_values, options: dict) -> dict:
    """The `resolve` overrides of a train command line: --set pairs, then the options given (None:
    not given), then MODEL. `hvdbench sweep` resolves each layout's run through this too."""
    given = {k: v for k, v in options.items() if v is not None}
    return {**_parse_set(set_values), **given, "model": model}


def parse_train_args(model: str, args) -> tuple[dict, str | None]:
    """(overrides, --config file) of `hvdbench train MODEL ARGS...`, parsed by the train command
    itself; click.UsageError for a misspelt option or a wrong type."""
    ctx = train.make_context("hvdbench train", [model, *args])
    params = dict(ctx.params)
    model, config_file, set_values = params.pop("model"), params.pop("config_file"), params.pop("set_values")
    return overrides_from_options(model, set_values, params), config_file


def _config_options(command):
    """One `--name` option per TrainConfig field marked `cli` (its type, choices and help come from
    the field), so every option is defined once, in hvdbench/train/config.py."""
    import dataclasses
    import typing

    from hvdbench.train.config import TrainConfig

    hints = typing.get_type_hints(TrainConfig)
    for f in reversed(dataclasses.fields(TrainConfig)):
        if not f.metadata.get("cli"):
            continue
        flag, hint = "--" + f.name.replace("_", "-"), hints[f.name]
        kwargs = {"help": f.metadata["help"], "default": None}
        if hint is bool:
            kwargs["is_flag"] = True
            if f.default is True:  # on unless turned off: --name/--no-name
                flag = f"{flag}/--no-{flag[2:]}"
        elif f.metadata.get("choices"):
            kwargs["type"] = click.Choice(f.metadata["choices"])
        elif f.name in ("data", "out"):
            kwargs["type"] = click.Path()
        else:
            kwargs["type"] = hint
        command = click.option(flag, f.name, **kwargs)(command)
    return command


@click.command(cls=WorkerCommand)
@click.argument("model")
@_config_options
@click.option("--config", "config_file", type=click.Path(), help="YAML file of config keys (options win).")
@click.option("--set", "set_values", multiple=True, metavar="KEY=VALUE",
              help="Any other config key, e.g. --set momentum=0.95 --set submission.org=acme.")
def train(model, config_file, set_values, **options):
    """Train MODEL as one Horovod worker; run it under horovodrun, mpirun or srun (or alone).

    Throughput mode (--steps, or --synthetic) times --steps steps after --warmup-steps untimed ones;
    time-to-accuracy mode (--data without --steps) trains until --target or --max-epochs. Rank 0
    writes OUT/result.json, OUT/mllog.txt (MLPerf :::MLLOG events) and OUT/config.yaml.
    Exit status: 0 for success and for aborted (target not reached), 1 for a failure.

    \b
    Example:
      hvdbench prepare digits --out data/digits
      horovodrun -np 2 -H localhost:2 --gloo \\
          hvdbench train resnet50 --flavor debug --data data/digits --out runs/digits
      horovodrun -np 16 -H node1:8,node2:8 \\
          hvdbench train resnet50 --synthetic --steps 100 --precision bf16 --out runs/r50
      mpirun -np 2 hvdbench train resnet50 --framework tensorflow --flavor debug --synthetic --out runs/tf
    """
    from hvdbench.train import config as config_mod

    try:
        cfg = config_mod.resolve(overrides_from_options(model, set_values, options), config_file)
        from hvdbench.cli.writable import check_writable_dir
        from hvdbench.train.launch_info import launcher_rank

        if launcher_rank() == 0:  # the rank that writes: checked before a framework starts
            check_writable_dir(cfg.out, "--out")
    except HvdbenchError:
        _quiet_unless_rank0(1)
        raise
    from hvdbench.train import worker

    worker.main(cfg)  # exits the process
