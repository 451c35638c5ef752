"""`hvdbench train`: one Horovod worker (parse options, resolve the config, hand over to the worker)."""

from __future__ import annotations

import sys
import time

import click

from hvdbench.errors import HvdbenchError
from hvdbench.train.options import train_parameters

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
        from hvdbench.launchers.launch_info import SINGLE, detect_launcher

        if detect_launcher() != SINGLE:
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

    from hvdbench.launchers.launch_info import launcher_rank

    if launcher_rank() != 0:
        time.sleep(float(os.environ.get("HVDBENCH_QUIET_EXIT_DELAY_S", QUIET_EXIT_DELAY_S)))
        sys.exit(code)


@click.command(cls=WorkerCommand)
@train_parameters
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
      mpirun -np 2 hvdbench train resnet50 --framework tensorflow --flavor debug --synthetic --out runs/tf
      torchrun --standalone --nproc-per-node 2 --no-python \\
          hvdbench train bert --flavor debug --synthetic --steps 20 --engine fsdp --out runs/fsdp
      # on GPUs, the full flavors (MLPerf's sizes; on a CPU refused in one line naming what fits):
      horovodrun -np 16 -H node1:8,node2:8 \\
          hvdbench train resnet50 --synthetic --steps 100 --precision bf16 --out runs/r50
      mpirun -np 8 hvdbench train llama2_lora --flavor 70b --synthetic --precision bf16 --engine fsdp --out runs/70b
    """
    from hvdbench.train.config import resolve
    from hvdbench.train.options import overrides_from_options

    try:
        cfg = resolve(overrides_from_options(model, set_values, options), config_file)
        from hvdbench.files import check_writable_dir
        from hvdbench.launchers.launch_info import launcher_rank

        if launcher_rank() == 0:  # the rank that writes: checked before a framework starts
            check_writable_dir(cfg.out, "--out")
    except HvdbenchError:
        _quiet_unless_rank0(1)
        raise
    from hvdbench.train import worker

    worker.main(cfg)  # exits the process
