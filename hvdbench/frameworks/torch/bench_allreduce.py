"""The Horovod, torch.distributed and mpi4py side of `hvdbench bench allreduce` (and the Horovod comm
`bench io` uses).

    horovodrun -np 2 -H localhost:2 --mpi hvdbench bench allreduce --out results/demo
    mpirun -np 2 hvdbench bench allreduce --dtype fp32 --max-bytes 16777216 --out results/demo
    horovodrun -np 2 -H localhost:2 --gloo hvdbench bench allreduce --out results/demo   # no MPI reference

The CLI command is the worker: every rank runs it, rank 0 writes the CSV and the plot.

Horovod: `hvd.allreduce_` (in place, sum) of torch CPU tensors, one op at a time as a training step
issues a tensor it needs back, under the same name each time (Horovod's response cache works as it
does in training). Beside it, torch.distributed's `all_reduce` over Gloo on the same CPU tensors (what
the ddp engine's reducer issues), started after Horovod is shut down at a rendezvous agreed through
Horovod. The reference: mpi4py `Allreduce(IN_PLACE)` on numpy buffers over COMM_WORLD.
For fp16, MPI has no half-precision type, so the reference sums with a user-defined op (numpy
addition on float16 views of the buffers) over a 2-byte type — how Horovod's own MPI backend
reduces fp16 too (a custom MPI op), though Horovod's is C and ours calls back into Python.

The MPI reference needs an MPI world: it runs when Open MPI / PMI launched the ranks (mpirun,
horovodrun --mpi, srun with PMI). Under `horovodrun --gloo` the ranks are not an MPI job, so the
reference is reported unavailable in the rows' `note` and the table shows Horovod alone.

Order: mpi4py initialises MPI first (MPI_THREAD_MULTIPLE) so that Horovod's MPI controller joins
that world; Horovod is timed, then shut down (its background thread stops polling), then
torch.distributed, then MPI, each on a quiet machine.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import NoReturn

import numpy as np

from hvdbench.bench import defaults
from hvdbench.bench import formulas as F
from hvdbench.bench.formulas import DTYPE_BYTES
from hvdbench.errors import ConfigError
from hvdbench.frameworks import horovod_installed, require_horovod
from hvdbench.launchers.launch_info import detect_launcher, launcher_rank, place
from hvdbench.output import human_bytes, line
from hvdbench.topology import Layout

# Set by Open MPI's mpirun (hence horovodrun --mpi), MPICH/Slurm PMI, and PMIx launchers.
MPI_LAUNCH_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")
NO_MPI_WORLD = ("MPI reference unavailable: the ranks were not launched as an MPI job (horovodrun --gloo, "
                "or no launcher); launch with horovodrun --mpi or mpirun for it")


NO_MPI4PY = ("MPI reference unavailable: mpi4py is not installed in this Python (pip install 'hvdbench[mpi]', "
             "built against the MPI that launches the ranks)")


def launched_by_mpi(env=os.environ) -> bool:
    return any(name in env for name in MPI_LAUNCH_VARIABLES)


def mpi_reference() -> tuple[object | None, str]:
    """MPI's COMM_WORLD for the reference, or None and the note that says why not."""
    if not launched_by_mpi():
        return None, NO_MPI_WORLD
    if importlib.util.find_spec("mpi4py") is None:  # an optional extra (hvdbench[mpi])
        return None, NO_MPI4PY
    from mpi4py import MPI  # initialises MPI before Horovod, which then joins this world

    return MPI.COMM_WORLD, ""


def layout_columns(size: int, nodes: int, per_node: int, hosts: list[str], controller: str) -> dict:
    """The layout columns of a bench row (same meaning as in runs.csv), under any launcher."""
    return {"world_size": size, "nodes": nodes, "gpus_per_node": per_node, "layout": str(Layout(nodes, per_node)),
            "scale": "up" if nodes == 1 else "out", "hosts": ";".join(hosts), "controller": controller,
            "launcher": detect_launcher()}


class HorovodComm:
    """Rank, size, layout and the two collectives the benches need, over horovod.torch."""

    def __init__(self):
        import horovod.torch as hvd

        self.hvd = hvd
        hvd.init()
        self.rank, self.size = hvd.rank(), hvd.size()
        self.local_rank, self.local_size, self.cross_size = hvd.local_rank(), hvd.local_size(), hvd.cross_size()
        self.controller = "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else ""
        self.hostname = socket.gethostname()

    def allgather(self, obj) -> list:
        return self.hvd.allgather_object(obj)

    def barrier(self) -> None:
        self.hvd.barrier()

    def layout(self) -> dict:
        """The layout columns of a bench row (same meaning as in runs.csv)."""
        hosts = list(dict.fromkeys(self.allgather(self.hostname)))
        return layout_columns(self.size, self.cross_size, self.local_size, hosts, self.controller)

    def shutdown(self) -> None:
        self.hvd.shutdown()


# --- timers: (dtype, nbytes, iters, warmup) -> (seconds per op on this rank, wrong elements) ------

def seconds_per_op(op, iters: int, warmup: int, barrier) -> float:
    """`op()` `warmup` times, a barrier, then the mean of `iters` timed calls: every timer's loop."""
    for _ in range(warmup):
        op()
    barrier()
    start = time.perf_counter()
    for _ in range(iters):
        op()
    return (time.perf_counter() - start) / iters


def horovod_timer(comm: HorovodComm):
    import torch

    hvd = comm.hvd
    dtypes = {"fp32": torch.float32, "fp16": torch.float16}
    expected = comm.size * (comm.size + 1) / 2  # sum of rank + 1: exact in fp16 up to 2047 ranks

    def timer(dtype: str, nbytes: int, iters: int, warmup: int) -> tuple[float, int]:
        t = torch.empty(nbytes // DTYPE_BYTES[dtype], dtype=dtypes[dtype])
        name = f"hvdbench.bench.{dtype}.{nbytes}"
        t.fill_(comm.rank + 1)
        hvd.allreduce_(t, op=hvd.Sum, name=name)
        wrong = int((t != expected).sum())
        t.zero_()  # zeros stay zeros: no overflow to inf over many in-place sums
        return seconds_per_op(lambda: hvd.allreduce_(t, op=hvd.Sum, name=name), iters, warmup, hvd.barrier), wrong

    return timer


def _fp16_sum(inbuf, outbuf, datatype) -> None:
    out = np.frombuffer(outbuf, dtype=np.float16)
    out += np.frombuffer(inbuf, dtype=np.float16)


@contextmanager
def torch_timer(address: str, port: int, rank: int, size: int):
    """A timer over a torch.distributed process group (Gloo, on the same CPU tensors as Horovod's):
    `dist.all_reduce` in place, the collective DDP's reducer issues per gradient bucket."""
    import datetime

    import torch
    import torch.distributed as tdist

    tdist.init_process_group("gloo", init_method=f"tcp://{address}:{port}", rank=rank, world_size=size,
                             timeout=datetime.timedelta(minutes=10))
    dtypes = {"fp32": torch.float32, "fp16": torch.float16}
    expected = size * (size + 1) / 2

    def timer(dtype: str, nbytes: int, iters: int, warmup: int) -> tuple[float, int]:
        t = torch.empty(nbytes // DTYPE_BYTES[dtype], dtype=dtypes[dtype])
        t.fill_(rank + 1)
        tdist.all_reduce(t)
        wrong = int((t != expected).sum())
        t.zero_()
        return seconds_per_op(lambda: tdist.all_reduce(t), iters, warmup, tdist.barrier), wrong

    def gather(obj) -> list:
        out = [None] * size
        tdist.all_gather_object(out, obj)
        return out

    try:
        yield timer, gather
    finally:
        tdist.destroy_process_group()


@contextmanager
def mpi_timer(comm):
    """A timer over an mpi4py communicator; the fp16 user op lives as long as the context."""
    from mpi4py import MPI

    fp16_sum = MPI.Op.Create(_fp16_sum, commute=True)
    rank, size = comm.Get_rank(), comm.Get_size()
    expected = size * (size + 1) / 2

    def timer(dtype: str, nbytes: int, iters: int, warmup: int) -> tuple[float, int]:
        if dtype == "fp32":
            buf = np.empty(nbytes // 4, np.float32)
            spec, op = [buf, MPI.FLOAT], MPI.SUM
        else:
            buf = np.empty(nbytes // 2, np.float16)
            spec, op = [buf.view(np.uint16), MPI.UINT16_T], fp16_sum
        buf.fill(rank + 1)
        comm.Allreduce(MPI.IN_PLACE, spec, op)
        wrong = int((buf != expected).sum())
        buf.fill(0)
        return seconds_per_op(lambda: comm.Allreduce(MPI.IN_PLACE, spec, op), iters, warmup, comm.Barrier), wrong

    try:
        yield timer
    finally:
        fp16_sum.Free()


# --- the command -----------------------------------------------------------------------------

@dataclass
class AllreduceOptions:
    out: str
    dtypes: list[str] = field(default_factory=lambda: list(defaults.DTYPES))
    min_bytes: int = defaults.MIN_BYTES
    max_bytes: int = defaults.MAX_BYTES
    iters: int = defaults.ITERS
    warmup_iters: int = defaults.WARMUP_ITERS
    budget_bytes: int = defaults.BUDGET_BYTES
    mpi_reference: bool = True
    tune: bool = False  # search Horovod's settings (hvdbench.bench.tune) instead of one pass


def main(opts: AllreduceOptions) -> None:
    """Run the bench on this rank; rank 0 prints and writes. A failure prints one line and ends this
    rank at once (as the training worker does), so the launcher tears the job down."""
    rank = launcher_rank()
    try:
        if opts.tune:
            require_horovod("hvdbench bench allreduce --tune (a search over Horovod's settings)")
            _tune(opts)
        elif horovod_installed():
            _run(opts)
        else:
            _run_without_horovod(opts)
    except BaseException as e:  # noqa: BLE001 - any failure ends this rank loudly
        end_rank(e, rank)


def end_rank(e: BaseException, rank: int) -> NoReturn:
    """One line naming the rank and host, then this rank ends at once: its peers, blocked in a
    collective or a receive, are then torn down by the launcher instead of waiting for it."""
    if isinstance(e, KeyboardInterrupt):
        os._exit(130)
    if os.environ.get("HVDBENCH_DEBUG"):
        traceback.print_exc()
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    line(f"Error: rank {rank} on {socket.gethostname()}: {text}", sys.stderr)
    sys.stdout.flush()
    os._exit(1)


def _run(opts: AllreduceOptions) -> None:
    from hvdbench.bench import allreduce_report as AR

    points = AR.plan(opts.dtypes, opts.min_bytes, opts.max_bytes)  # bad sizes fail before any launch work
    mpi_world, note = mpi_reference() if opts.mpi_reference else (None, "")
    comm = HorovodComm()
    if mpi_world is not None and mpi_world.Get_size() != comm.size:
        note, mpi_world = (f"MPI reference unavailable: the MPI world has {mpi_world.Get_size()} ranks, "
                           f"Horovod {comm.size}"), None
    base = replace(AR.new_run(comm.layout()), note=note)
    run_id, started_at = comm.allgather((base.run_id, base.started_at))[0]  # rank 0's, on every rank
    base = replace(base, run_id=run_id, started_at=started_at)
    say = (lambda text: line(f"[hvdbench] {text}")) if comm.rank == 0 else (lambda text: None)
    say(f"allreduce over {comm.size} rank(s) ({base.layout}, {comm.controller} controller, hosts {base.hosts}): "
        f"{len(points)} sizes x {'horovod + torch + mpi' if mpi_world is not None else 'horovod + torch'}")
    if note:
        say(note)
    kwargs = dict(iters=opts.iters, warmup_iters=opts.warmup_iters, budget_bytes=opts.budget_bytes,
                  on_row=lambda row: say(AR.line(row)))
    rows = AR.sweep(base, "horovod", horovod_timer(comm), comm.allgather, points, **kwargs)
    from hvdbench.frameworks.torch.process_group import offer_rendezvous
    from hvdbench.launchers.launch_info import place

    rendezvous = offer_rendezvous(comm.hvd, place())  # for torch.distributed, before Horovod stops
    comm.barrier()
    comm.shutdown()
    # torch.distributed's all_reduce (what --engine ddp reduces gradients with), Horovod stopped.
    with torch_timer(*rendezvous, comm.rank, comm.size) as (timer, gather):
        rows += AR.sweep(base, "torch", timer, gather, points, **kwargs)
    _mpi_then_write(rows, base, note, opts, mpi_world, points, kwargs, comm.rank)


def _run_without_horovod(opts: AllreduceOptions) -> None:
    """Where Horovod is not installed: torch.distributed's all_reduce (the collective --engine ddp
    reduces with) and MPI's reference where the ranks are an MPI job, the same sizes and rows. The
    ranks meet at MASTER_ADDR/MASTER_PORT, which torchrun and srun set, and a sweep sets for mpirun."""
    from hvdbench.bench import allreduce_report as AR

    points = AR.plan(opts.dtypes, opts.min_bytes, opts.max_bytes)
    where = place()
    if where.master_addr is None or where.master_port is None:
        raise ConfigError("bench allreduce without Horovod: torch.distributed's ranks meet at MASTER_ADDR and "
                          "MASTER_PORT, which are not set; launch with torchrun or srun, or give both to mpirun "
                          "(-x MASTER_ADDR -x MASTER_PORT; a sweep's --allreduce-bench sets them)")
    mpi_world, why = mpi_reference() if opts.mpi_reference else (None, "")
    note = "; ".join(part for part in ("Horovod is not installed here: torch.distributed" +
                                       (" and MPI" if mpi_world is not None else "") + " only", why) if part)
    say = (lambda text: line(f"[hvdbench] {text}")) if where.rank == 0 else (lambda text: None)
    kwargs = dict(iters=opts.iters, warmup_iters=opts.warmup_iters, budget_bytes=opts.budget_bytes,
                  on_row=lambda row: say(AR.line(row)))
    with torch_timer(where.master_addr, where.master_port, where.rank, where.size) as (timer, gather):
        hosts = list(dict.fromkeys(gather(socket.gethostname())))
        nodes = len(hosts)
        base = AR.new_run(layout_columns(where.size, nodes, where.size // nodes, hosts, ""))
        run_id, started_at = gather((base.run_id, base.started_at))[0]  # rank 0's, on every rank
        base = replace(base, run_id=run_id, started_at=started_at, note=note)
        say(f"allreduce over {where.size} rank(s) ({base.layout}, hosts {base.hosts}): {len(points)} sizes x "
            f"{'torch + mpi' if mpi_world is not None else 'torch'}")
        say(note)
        rows = AR.sweep(base, "torch", timer, gather, points, **kwargs)
    _mpi_then_write(rows, base, note, opts, mpi_world, points, kwargs, where.rank)


def _mpi_then_write(rows: list, base, note: str, opts: AllreduceOptions, mpi_world, points, kwargs: dict,
                    rank: int) -> None:
    """MPI's reference on the same sizes (where there is an MPI world), then on rank 0 the table and
    summary printed and the CSV and plot written (a failed write keeps the rows)."""
    from hvdbench.bench import allreduce_report as AR
    from hvdbench.bench.rows import render

    if mpi_world is not None:
        with mpi_timer(mpi_world) as timer:
            rows = rows + AR.sweep(base, "mpi", timer, mpi_world.allgather, points, **kwargs)
    if rank != 0:
        return

    rows = AR.compare(rows)
    text = render(AR.table(rows, title=f"allreduce: {base.world_size} ranks, {base.layout}, "
                                        f"{base.controller or 'no Horovod'} controller"))
    for row in [*text.splitlines(), *([note] if note else []), *AR.summary(rows)]:
        line(row.rstrip())  # shown before anything can fail to write
    try:
        written = AR.write_outputs(rows, opts.out)
    except Exception as e:  # noqa: BLE001 - OSError, a damaged CSV, a plot that cannot be drawn
        # A finished measurement is never lost to an output error: the rows go elsewhere, said where.
        from hvdbench.errors import OutputError, os_error_line
        from hvdbench.results.records.store import rescue_rows

        saved = rescue_rows(AR.CSV_NAME, rows)
        reason = os_error_line(e) if isinstance(e, OSError) else str(e)
        where = f"saved in {saved}" if saved else "printed above only"
        raise OutputError(f"{opts.out}: results not written ({reason}); the measurement is {where}") from None
    for path in written:
        line(f"wrote {path}")


def _tune(opts: AllreduceOptions) -> None:
    """--tune: Horovod under each setting of the search, started and shut down once per setting
    (every rank computes the same scores from the same gathered rows, so all agree on the next
    setting without talking), then MPI's reference once, with Horovod stopped (as `_run` does)."""
    from hvdbench.bench import allreduce_report as AR
    from hvdbench.bench import tune as T

    points = AR.plan(opts.dtypes, opts.min_bytes, opts.max_bytes)
    mpi_world = None
    if opts.mpi_reference and launched_by_mpi():
        from mpi4py import MPI  # initialises MPI before Horovod, which then joins this world

        mpi_world = MPI.COMM_WORLD
    rank = launcher_rank()
    say = (lambda text: line(f"[hvdbench] {text}")) if rank == 0 else (lambda text: None)
    kwargs = dict(iters=opts.iters, warmup_iters=opts.warmup_iters, budget_bytes=opts.budget_bytes)
    measured: dict[str, list] = {}

    def measure(settings: dict[str, str]) -> float:
        os.environ.update(settings)  # read by Horovod's background thread when it starts
        comm = HorovodComm()
        base = AR.new_run(comm.layout())
        run_id, started_at = comm.allgather((base.run_id, base.started_at))[0]
        base = replace(base, run_id=run_id, started_at=started_at, note=f"tune: {T.describe(settings)}")
        rows = AR.sweep(base, "horovod", horovod_timer(comm), comm.allgather, points, **kwargs)
        comm.barrier()
        comm.shutdown()
        measured[T.describe(settings)] = rows
        # MPI's time at a size is the same for every setting, so ranking by Horovod's bandwidth
        # alone ranks by Horovod/MPI too.
        value = T.score(rows, None)
        say(f"{T.describe(settings)}: " + ", ".join(f"{human_bytes(r.bytes)} {_fmt_time(r.time_mean_s)}"
                                                   for r in rows) + f"; busbw geometric mean {value:.3g} GB/s")
        return value

    best, tried = T.coordinate_descent(T.SEARCH, measure)
    rows = measured[T.describe(best)]
    if mpi_world is not None:
        with mpi_timer(mpi_world) as timer:
            rows = rows + AR.sweep(replace(rows[0], note="tune: MPI reference"), "mpi", timer,
                                   mpi_world.allgather, points, **kwargs)
    if rank != 0:
        return
    rows = AR.compare(rows)
    say(f"best of {len(tried)} settings: {T.describe(best)}")
    for text in AR.summary(rows):
        say(text)
    say(f"run sweeps with: {T.env_flags(best, T.SEARCH)}")
    for path in AR.write_outputs(rows, opts.out):  # the best setting's rows and MPI's
        line(f"wrote {path}")


def _fmt_time(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:,.0f} us"
