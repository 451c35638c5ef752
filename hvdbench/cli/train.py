"""`hvdbench train`: one Horovod worker (parse options, resolve the config, hand over to the worker)."""

from __future__ import annotations

import sys
import time

import click

from hvdbench.errors import HvdbenchError

# How long a quiet rank waits before exiting: launchers kill the whole job when the first rank
# exits, and rank 0 (which parses the same argv) must get to print the error before that.
QUIET_EXIT_DELAY_S = 5


class WorkerCommand(click.Command):
    """Under a launcher every rank parses the same argv, so a bad option fails on all of them:
    only rank 0 prints it; the others exit with the same status, quietly and a moment later."""

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.UsageError:
            _quiet_unless_rank0(2)
            raise


def _quiet_unless_rank0(code: int) -> None:
    from hvdbench.worker import launcher_rank

    if launcher_rank() != 0:
        time.sleep(QUIET_EXIT_DELAY_S)
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


@click.command(cls=WorkerCommand)
@click.argument("model")
@click.option("--framework", type=click.Choice(["torch", "tensorflow"]), help="Default: torch.")
@click.option("--flavor", help="Network size, e.g. full/debug (resnet50), large/base/debug (bert).")
@click.option("--data", type=click.Path(), help="A dataset prepared by `hvdbench prepare`.")
@click.option("--synthetic", is_flag=True, default=None,
              help="One fixed random batch kept on the device (takes the data pipeline out).")
@click.option("--batch-per-gpu", type=int, help="Samples per rank per micro-batch.")
@click.option("--accum-steps", type=int, help="Micro-batches per optimizer step (gradient accumulation).")
@click.option("--lr", type=float, help="Peak learning rate for a global batch of lr_base_batch (scaled).")
@click.option("--precision", type=click.Choice(["fp32", "bf16", "fp16"]),
              help="bf16/fp16: autocast (Keras mixed policy); fp16 on CUDA adds loss scaling.")
@click.option("--fp16-allreduce", is_flag=True, default=None, help="Compress gradients to fp16 on the wire.")
@click.option("--steps", type=int, help="Throughput mode: timed steps.")
@click.option("--warmup-steps", type=int, help="Throughput mode: untimed steps first (default 10).")
@click.option("--target", type=float, help="Time-to-accuracy target (default: the model's MLPerf target).")
@click.option("--max-epochs", type=float, help="Stop (status aborted) after this many epochs.")
@click.option("--eval-every", type=float, help="Evaluate every N epochs (BERT: samples).")
@click.option("--seed", type=int)
@click.option("--threads", type=int, help="CPU math threads per rank (default: cores / local ranks).")
@click.option("--out", type=click.Path(), help="Directory for result.json, mllog.txt, config.yaml.")
@click.option("--config", "config_file", type=click.Path(), help="YAML file of config keys (options win).")
@click.option("--set", "set_values", multiple=True, metavar="KEY=VALUE",
              help="Any other config key, e.g. --set momentum=0.95 --set submission.org=acme.")
@click.option("--run-id", help="Label for the result record (default: time + random).")
@click.option("--sweep-name", help="Sweep this run belongs to (recorded).")
@click.option("--repeat", type=int, help="Repeat index within the sweep (recorded).")
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
    from hvdbench import config as config_mod

    try:
        given = {k: v for k, v in options.items() if v is not None}
        overrides = {**_parse_set(set_values), **given, "model": model}
        cfg = config_mod.resolve(overrides, config_file)
    except HvdbenchError:
        _quiet_unless_rank0(1)
        raise
    from hvdbench import worker

    worker.main(cfg)  # exits the process
