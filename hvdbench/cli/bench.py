"""`hvdbench bench allreduce|links|io|compute|flops`: the interconnect (collectives, and each pair's link),
the storage and the compute, measured beside the training numbers."""

from __future__ import annotations

import re
import sys

import click

from hvdbench.bench import defaults as D
from hvdbench.bench.formulas import DTYPE_BYTES
from hvdbench.cli.lists import FiniteRange
from hvdbench.cli.train import WorkerCommand
from hvdbench.errors import HvdbenchError
from hvdbench.train.config import TrainConfig

TRAIN_FIELDS = TrainConfig.__dataclass_fields__  # `bench compute --threads/--thread-share` mean what train's do

_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]i?B?|B)?\s*$", re.IGNORECASE)
_UNITS = {"B": 0, "K": 10, "M": 20, "G": 30}


class ByteSize(click.ParamType):
    """4, 1024, 64K, 16M, 256MiB, 1G (binary multiples)."""

    name = "BYTES"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        m = _SIZE.match(str(value))
        if not m:
            self.fail(f"{value!r} is not a size (e.g. 4, 64K, 16M, 256M)", param, ctx)
        unit = (m[2] or "B")[0].upper()
        return int(m[1]) << _UNITS[unit]

    @staticmethod
    def text(n: int) -> str:
        """A size as one would type it, in the largest unit that divides it: 4, 64K, 256M, 1G."""
        for unit in ("G", "M", "K"):
            if n and n % (1 << _UNITS[unit]) == 0:
                return f"{n >> _UNITS[unit]}{unit}"
        return str(n)


def _dtypes(ctx, param, value: str) -> list[str]:
    chosen = [d.strip() for d in value.split(",") if d.strip()]
    bad = [d for d in chosen if d not in DTYPE_BYTES]
    if bad or not chosen:
        raise click.BadParameter(f"{','.join(bad) or repr(value)}: choose from {','.join(DTYPE_BYTES)}")
    return list(dict.fromkeys(chosen))


def _compute_dtypes(ctx, param, value: str) -> list[str]:
    chosen = [d.strip() for d in value.split(",") if d.strip()]
    bad = [d for d in chosen if d not in D.COMPUTE_DTYPES]
    if bad or not chosen:
        raise click.BadParameter(f"{','.join(bad) or repr(value)}: choose from {','.join(D.COMPUTE_DTYPES)}")
    return list(dict.fromkeys(chosen))


def _size_option(name: str, default: int, help_text: str):
    """A byte-size option whose --help shows its default as one would type it (256M, not 268435456):
    the default is given as that text, which ByteSize converts like any value."""
    return click.option(name, type=ByteSize(), default=ByteSize.text(default), show_default=True, help=help_text)


def _rank0_or_quiet(fn):
    """Under a launcher every rank runs the command: rank 0 reports a user error, the others exit quietly."""
    try:
        return fn()
    except HvdbenchError:
        from hvdbench.launchers.launch_info import launcher_rank

        if launcher_rank() != 0:
            sys.exit(1)
        raise


def _check_output(out: str, csv_name: str, row_class) -> None:
    """--out can be written and its CSV (if any) appended to: checked before a bench measures."""
    from pathlib import Path

    from hvdbench.files import check_writable_dir
    from hvdbench.results.records.store import check_appendable

    check_writable_dir(out, "--out")
    check_appendable(Path(out) / csv_name, row_class)


@click.group()
def bench():
    """Allreduce, point-to-point link, storage and compute micro-benchmarks, run with the same launchers and
    layouts as training; each appends rows with layout columns to a CSV in --out (a sweep folder, beside
    runs.csv); and a model's training FLOPs per sample, counted from its network (flops).

    \b
    Example:
      horovodrun -np 2 -H localhost:2 --mpi hvdbench bench allreduce --out results/demo
      horovodrun -np 3 -H localhost:3 --gloo hvdbench bench links --out results/demo
      hvdbench bench io --data data/digits --out results/demo
      hvdbench bench compute --out results/demo
      hvdbench bench flops --model resnet50
    """


@bench.command(cls=WorkerCommand)
@_size_option("--min-bytes", D.MIN_BYTES, help_text="Smallest message (power of two).")
@_size_option("--max-bytes", D.MAX_BYTES, help_text="Largest message (power of two).")
@click.option("--dtype", "dtypes", default=",".join(D.DTYPES), show_default=True, callback=_dtypes,
              help="Comma-separated element types.")
@click.option("--iters", type=int, default=D.ITERS, show_default=True, help="Timed operations per size (at most).")
@click.option("--warmup-iters", type=int, default=D.WARMUP_ITERS, show_default=True,
              help="Untimed operations first (at most).")
@_size_option("--budget-bytes", D.BUDGET_BYTES,
              help_text="Large sizes get fewer iterations: timed = max(2, min(iters, budget/size)), "
                        "warm-up = max(1, min(warmup-iters, budget/size/4)).")
@click.option("--mpi-reference/--no-mpi-reference", default=True, show_default=True,
              help="Also time raw MPI (mpi4py Allreduce) at every size; needs an MPI launch "
                   "(mpirun, horovodrun --mpi): under --gloo it is reported unavailable.")
@click.option("--tune", is_flag=True,
              help="Search Horovod's settings (cycle time, CPU operations, response cache) for the "
                   "bandwidth closest to raw MPI at these sizes, one setting at a time in this launch; "
                   "prints the best and the --env flags to run sweeps with; writes the best's rows.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder for bench_allreduce.csv and the plot.")
def allreduce(min_bytes, max_bytes, dtypes, iters, warmup_iters, budget_bytes, mpi_reference, tune, out):
    """Horovod allreduce over message sizes from --min-bytes to --max-bytes (x2 steps), fp32 and
    fp16 (--dtype), against raw MPI (mpi4py) at the same sizes. Run it under
    horovodrun/mpirun/srun like `hvdbench train`: every rank runs it, rank 0 prints the table and
    appends to OUT/bench_allreduce.csv, and draws OUT/bench_allreduce_<layout>_<controller>.png
    (busbw vs size).

    time = mean over ranks of each rank's average time per op; algbw = bytes/time;
    busbw = algbw x 2(n-1)/n (nccl-tests' definitions).

    \b
    Example:
      horovodrun -np 2 -H localhost:2 --mpi hvdbench bench allreduce --out results/demo
      mpirun -np 2 hvdbench bench allreduce --dtype fp32 --max-bytes 16M --out results/demo
      horovodrun -np 4 -H node1:2,node2:2 --gloo hvdbench bench allreduce --out results/demo
      horovodrun -np 2 -H node1:1,node2:1 --mpi hvdbench bench allreduce --tune --dtype fp32 \
          --min-bytes 1M --max-bytes 256M --out results/tune
    """
    from hvdbench.bench.allreduce_report import CSV_NAME, plan
    from hvdbench.results.records.schema import AllreduceRow

    _rank0_or_quiet(lambda: plan(dtypes, min_bytes, max_bytes))  # bad sizes: one error, before Horovod starts
    _rank0_or_quiet(lambda: _check_output(out, CSV_NAME, AllreduceRow))  # and an unwritable --out
    from hvdbench.frameworks.torch.bench_allreduce import AllreduceOptions, main

    main(AllreduceOptions(out=out, dtypes=dtypes, min_bytes=min_bytes, max_bytes=max_bytes, iters=iters,
                          warmup_iters=warmup_iters, budget_bytes=budget_bytes, mpi_reference=mpi_reference,
                          tune=tune))


def _sizes(ctx, param, value: str) -> list[int]:
    """--sizes 8,64K,1M,16M: byte sizes (ByteSize's spellings), each once, smallest first."""
    parts = [p.strip() for p in value.split(",")]
    if not all(parts):
        raise click.BadParameter(f"{value!r}: a comma list of sizes with no empty entry, e.g. 8,1M,16M")
    from hvdbench.bench.links_report import check_sizes

    try:
        return check_sizes([ByteSize().convert(p, param, ctx) for p in parts])
    except HvdbenchError as e:
        raise click.BadParameter(str(e).removeprefix("--sizes ")) from None


@bench.command(cls=WorkerCommand)
@click.option("--sizes", default=",".join(ByteSize.text(n) for n in D.LINK_SIZES), show_default=True,
              callback=_sizes, help="Message sizes, comma-separated: the smallest gives each pair's latency, the "
                                    "largest its bandwidth.")
@click.option("--iters", type=click.IntRange(min=1), default=D.LINK_ITERS, show_default=True,
              help="Timed round trips per repeat (at most: a slow one gets fewer, see --budget-s).")
@click.option("--warmup-iters", type=click.IntRange(min=0), default=D.LINK_WARMUP_ITERS, show_default=True,
              help="Untimed round trips first (at most).")
@click.option("--repeats", type=click.IntRange(min=1), default=D.LINK_REPEATS, show_default=True,
              help="Timed runs per pair and size; the median is reported.")
@click.option("--budget-s", type=FiniteRange(min=0), default=D.LINK_BUDGET_S, show_default=True,
              help="Seconds the repeats of one pair and size take together: a slow link gets fewer round trips "
                   "(at least one a repeat).")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder for bench_links.csv and the plot.")
def links(sizes, iters, warmup_iters, repeats, budget_s, out):
    """Point-to-point bandwidth and latency between every two hosts (their first ranks) and every two
    ranks of one host, one pair at a time (the other ranks idle): a ping-pong over torch.distributed's
    send/recv (Gloo on CPUs, NCCL on GPUs), under any launcher (horovodrun, mpirun, srun, torchrun).
    Rank 0 prints one line per pair (latency: the smallest message's one-way time; bandwidth: the
    largest's bytes / one-way time, GB/s = 1e9 B/s), flags a pair slower than half the fastest pair
    of its kind, names the host every slow pair shares, and the NICs used (from the hardware
    record); appends OUT/bench_links.csv and draws OUT/bench_links_<layout>.png (the bandwidth
    matrix). A hostfile of the emulated cluster (`cluster up`) works as for `bench allreduce`.

    \b
    Example:
      horovodrun -np 3 -H localhost:3 --gloo hvdbench bench links --out results/local
      horovodrun -np 3 -H node1:1,node2:1,node3:1 hvdbench bench links --out results/links
      mpirun -np 4 -H node1:2,node2:2 hvdbench bench links --sizes 8,1M,64M --out results/links
      torchrun --standalone --nproc-per-node 8 -m hvdbench bench links --sizes 8,1M,256M --out results/h100
    """
    from hvdbench.bench.links_report import CSV_NAME
    from hvdbench.errors import ConfigError
    from hvdbench.launchers.launch_info import place
    from hvdbench.results.records.schema import LinkRow

    def alone() -> None:
        if place().size < 2:
            raise ConfigError("bench links measures pairs of ranks and this is 1 rank: launch it over 2 or more, "
                              "e.g. horovodrun -np 2 -H node1:1,node2:1 hvdbench bench links --out results/links")

    _rank0_or_quiet(alone)
    _rank0_or_quiet(lambda: _check_output(out, CSV_NAME, LinkRow))  # before measuring, not after
    from hvdbench.frameworks.torch.bench_links import LinksOptions, main

    main(LinksOptions(out=out, sizes=sizes, iters=iters, warmup_iters=warmup_iters, repeats=repeats,
                      budget_s=budget_s), say=click.echo)


@bench.command(cls=WorkerCommand)
@click.option("--data", required=True, type=click.Path(), help="A dataset prepared by `hvdbench prepare`.")
@click.option("--split", default=D.IO_SPLIT, show_default=True)
@click.option("--batch-size", type=int, default=D.IO_BATCH_SIZE, show_default=True, help="Samples per rank per batch.")
@click.option("--passes", type=int, default=D.IO_PASSES, show_default=True, help="Full reads of the split, each way.")
@click.option("--seed", type=int, default=D.IO_SEED, show_default=True)
@click.option("--drop-caches", is_flag=True, help="Drop the page cache before each pass (root).")
@click.option("--demand", type=float, metavar="SAMPLES_PER_S", help="Samples/s the accelerators consume.")
@click.option("--demand-from", type=click.Path(dir_okay=False), metavar="RESULT_JSON",
              help="Take the demand from a training run's result.json (its throughput).")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder for bench_io.csv.")
def io(data, split, batch_size, passes, seed, drop_caches, demand, demand_from, out):
    """Read a prepared dataset the way training does (per-rank shards, shuffling), once as the
    reader delivers batches and once decoded to the training tensor on the CPU, and, as the
    reference, with plain sequential h5py reads of the same shards: samples/s and MB/s per rank and
    in total, per pass. Alone or under horovodrun/mpirun (same layout as training); rank 0 prints
    and appends to OUT/bench_io.csv.

    Without --drop-caches a dataset that fits in memory may be read from the page cache (a
    warning says so). --demand/--demand-from give the fraction of the accelerators' demand the
    storage can feed (MLPerf Storage's accelerator utilization idea).

    \b
    Example:
      hvdbench bench io --data data/digits --out results/demo
      horovodrun -np 2 -H localhost:2 --mpi hvdbench bench io --data data/digits --out results/demo
      hvdbench bench io --data data/imagenet --drop-caches --demand-from runs/r50/result.json --out results/r50
    """
    if demand is not None and demand_from:
        raise click.UsageError("give --demand or --demand-from, not both")
    from hvdbench.bench import io as bio
    from hvdbench.results.records.schema import IoRow

    opts = bio.IoOptions(data=data, out=out, split=split, batch_size=batch_size, passes=passes, seed=seed,
                         drop_caches=drop_caches, demand=demand, demand_from=demand_from)
    _rank0_or_quiet(lambda: _check_output(out, bio.CSV_NAME, IoRow))  # before measuring, not after
    from hvdbench.frameworks.torch.bench_io import main

    main(opts, say=click.echo, guard=_rank0_or_quiet)


@bench.command(cls=WorkerCommand)
@click.option("--dtype", "dtypes", default=",".join(D.COMPUTE_DTYPES), show_default=True, callback=_compute_dtypes,
              help="Comma-separated precisions of the matrix products (a device without one gets a row saying so).")
@click.option("--size", type=click.IntRange(min=16), help="n of the n x n x n products [default: 8192 on a GPU, "
              "2048 on a CPU].")
@_size_option("--copy-bytes", 0, help_text="Bytes of the copy that measures memory bandwidth [default 0: 1G on a "
                                            f"GPU, 256M on a CPU; at least {ByteSize.text(D.MIN_COPY_BYTES)}].")
@click.option("--budget-s", type=FiniteRange(min=0), default=D.COMPUTE_BUDGET_S, show_default=True,
              help="Seconds each (op, precision) is repeated for, after one call that sizes it.")
@click.option("--threads", type=click.IntRange(min=0), default=0, show_default=True,
              help=TRAIN_FIELDS["threads"].metadata["help"] + " As `train`'s (a sweep passes its runs').")
@click.option("--thread-share", type=click.IntRange(min=0), default=0, show_default=True,
              help=TRAIN_FIELDS["thread_share"].metadata["help"])
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder for bench_compute.csv and the plot.")
def compute(dtypes, size, copy_bytes, budget_s, threads, thread_share, out):
    """What each rank's device can do: dense matrix products in fp32 (TF32 off), tf32, bf16, fp16 and
    fp8 (TFLOP/s), and a large copy (memory bandwidth, bytes read + written), beside the datasheet's
    dense peak where the device is known (`hvdbench.peaks`). Alone or under any launcher
    (horovodrun, mpirun, srun, torchrun: the ranks meet over torch.distributed); every rank measures
    at once, rank 0 prints the table, appends OUT/bench_compute.csv and draws
    OUT/bench_compute_<layout>.png. `report` reads it for each run's MFU against the measured peak.

    \b
    Example:
      hvdbench bench compute --out results/demo
      horovodrun -np 2 -H localhost:2 --gloo hvdbench bench compute --dtype fp32,bf16 --out results/demo
      torchrun --standalone --nproc-per-node 8 -m hvdbench bench compute --out results/h100
    """
    from hvdbench.bench.compute_report import CSV_NAME
    from hvdbench.results.records.schema import ComputeRow

    if 0 < copy_bytes < D.MIN_COPY_BYTES:
        raise click.BadParameter(f"{copy_bytes} bytes: at least {ByteSize.text(D.MIN_COPY_BYTES)} (a smaller copy "
                                 "times the call's overhead, not the memory's bandwidth)", param_hint="'--copy-bytes'")

    _rank0_or_quiet(lambda: _check_output(out, CSV_NAME, ComputeRow))
    from hvdbench.frameworks.torch.bench_compute import ComputeOptions, main

    main(ComputeOptions(out=out, dtypes=dtypes, size=size or 0, copy_bytes=copy_bytes, budget_s=budget_s,
                        threads=threads, thread_share=thread_share), say=click.echo)


@bench.command()
@click.option("--model", "models", multiple=True, help="A model to count (repeatable) [default: every model "
              "with a PyTorch network].")
@click.option("--flavor", "flavors", multiple=True, help="Flavors to count (repeatable) [default: all of them].")
@click.option("--out", type=click.Path(dir_okay=False), help="Also write the table as CSV to this file.")
def flops(models, flavors, out):
    """Training FLOPs per sample of each model and flavor, counted from the network itself on the
    meta device (no weights allocated: the full flavors count on a laptop), with the transformers'
    6N + 12 L d T formula beside (attention not halved for a causal mask) and counted / formula.
    Forward + backward as counted (torch's FlopCounterMode: 2 FLOPs per multiply-add).

    \b
    Example:
      hvdbench bench flops --model resnet50 --flavor full
      hvdbench bench flops --out flops.csv
    """
    from hvdbench.bench.flops_report import markdown, write_csv
    from hvdbench.frameworks.torch.flops import flops_rows

    if out is not None and not out.strip():
        raise click.BadParameter("an empty name: give a file, e.g. --out flops.csv", param_hint="'--out'")
    rows = flops_rows(models, flavors)
    click.echo(markdown(rows))
    if out:
        click.echo(f"wrote {write_csv(rows, out)}")
