"""`hvdbench bench io`: can the storage feed the accelerators? Framework-neutral (the readers are numpy).

    hvdbench bench io --data data/digits --out results/demo
    horovodrun -np 2 -H localhost:2 --mpi hvdbench bench io --data data/imagenet --drop-caches --out results/demo
    hvdbench bench io --data data/imagenet --demand-from runs/r50/result.json --out results/demo

Each pass reads the whole split once across the ranks, three ways, one after the other:
- `reader`: exactly as training does — `open_dataset(DIR).loader(split, batch, rank, size, seed,
  shuffle=True, drop_last=False)` (per-rank share, block shuffle, prefetch thread): the batches as
  the training loop receives them, before they go to the device.
- `reader+decode`: the same, each batch then decoded on the CPU to the training tensor by its
  dataset kind's `host_decode` (the model's on-device preprocessing, in numpy: for images uint8
  NHWC -> normalised float32 NCHW; nothing for BERT's fields, already the int tensors training
  consumes). On a GPU node the worker does this on the device, so `reader` is what storage must
  feed there and `reader+decode` what a CPU-only run pays.
- `h5py`: the reference — an equal share of the same shard files (rank r reads the r-th contiguous
  n-th of the split, shards in manifest order) read sequentially with plain h5py slices of at most
  64 MiB per field, no shuffle, no decoding.
Figures: samples/s and MB/s (stored bytes, 1e6) per rank and in total (total = all ranks' samples /
the slowest rank's time, the ranks starting together after a barrier).

The page cache: a dataset smaller than the memory available is probably served from memory after
its first read. With `--drop-caches` (root: sync, then 3 > /proc/sys/vm/drop_caches on each node)
every pass starts cold; otherwise the run warns when the dataset fits in memory.

`--demand N` (samples/s the accelerators consume, or `--demand-from result.json` of a training
run: its throughput) turns the figure into the fraction of that demand the storage can feed,
min(1, io samples/s / demand) — MLPerf Storage's "accelerator utilization" idea. Run it with the
same layout as the training run it is compared with.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np

from hvdbench.bench import defaults
from hvdbench.bench.rows import run_identity
from hvdbench.data.readers import open_dataset
from hvdbench.errors import ConfigError, DatasetError, HvdbenchError
from hvdbench.results.records.schema import IoRow
from hvdbench.results.records.store import IO_CSV, append_or_rescue

CSV_NAME = IO_CSV
IMPLS = ("reader", "reader+decode", "h5py")
DROP_CACHES = Path("/proc/sys/vm/drop_caches")
MEMINFO = Path("/proc/meminfo")
RAW_SLICE_BYTES = 64 << 20
MB = 1e6


class LocalComm:
    """The comm of a process run alone (no launcher): one rank."""

    rank, size, local_rank, local_size, cross_size, controller = 0, 1, 0, 1, 1, ""

    def allgather(self, obj) -> list:
        return [obj]

    def barrier(self) -> None:
        pass

    def layout(self) -> dict:
        return {"world_size": 1, "nodes": 1, "gpus_per_node": 1, "layout": "1x1", "scale": "up",
                "hosts": socket.gethostname(), "controller": "", "launcher": "single"}

    def shutdown(self) -> None:
        pass


@dataclass
class PassStats:
    samples: int = 0
    bytes: int = 0
    elapsed_s: float = 0.0


# --- one pass on one rank ----------------------------------------------------------------------

def decoder(kind: str) -> Callable[[dict], dict]:
    """The host-side decoding of a dataset kind's batches to the training tensors: its model's
    on-device preprocessing, done with numpy (`DatasetKind.host_decode`)."""
    from hvdbench.contracts import get_kind  # lazily: the model registry

    return get_kind(kind).host_decode


def reader_pass(ds, split: str, batch_size: int, rank: int, size: int, seed: int, epoch: int,
                decode_batches: bool = False, on_batch: Callable[[dict], None] = lambda batch: None) -> PassStats:
    """This rank's share of one epoch through the training reader (decoded to the training tensor
    when asked); `on_batch` sees each batch as the reader delivers it."""
    decode = decoder(ds.kind) if decode_batches else None
    loader = ds.loader(split, batch_size, rank=rank, size=size, seed=seed, shuffle=True, drop_last=False)
    loader.set_epoch(epoch)
    stats = PassStats()
    start = time.perf_counter()
    for batch in loader:
        if decode:
            decode(batch)
        on_batch(batch)
        stats.samples += len(next(iter(batch.values())))
        stats.bytes += sum(v.nbytes for v in batch.values())
    stats.elapsed_s = time.perf_counter() - start
    return stats


def raw_ranges(ds, split: str, rank: int, size: int) -> list[tuple[Path, int, int]]:
    """This rank's share for the reference read: the r-th contiguous n-th of the split's samples, the
    shards taken in manifest order, as (shard file, first sample, end sample) per shard touched."""
    shards = ds.manifest["splits"][split]["shards"]
    total = sum(s["samples"] for s in shards)
    lo, hi = rank * total // size, (rank + 1) * total // size
    ranges, offset = [], 0
    for s in shards:
        a, b = max(lo, offset), min(hi, offset + s["samples"])
        if a < b:
            ranges.append((ds.path / s["file"], a - offset, b - offset))
        offset += s["samples"]
    return ranges


def raw_pass(ds, split: str, rank: int, size: int) -> PassStats:
    """The reference: this rank's share read with plain sequential h5py slices."""
    from hvdbench.data.shards import open_shard

    stats = PassStats()
    start = time.perf_counter()
    for path, lo, hi in raw_ranges(ds, split, rank, size):
        with open_shard(path) as f:
            for name in ds.fields:
                d = f[name]
                row = max(1, int(np.prod(d.shape[1:], dtype=np.int64)) * d.dtype.itemsize)
                step = max(1, RAW_SLICE_BYTES // row)
                for a in range(lo, hi, step):
                    stats.bytes += d[a:min(hi, a + step)].nbytes
        stats.samples += hi - lo
    stats.elapsed_s = time.perf_counter() - start
    return stats


# --- the page cache ------------------------------------------------------------------------------

def dataset_bytes(ds, split: str) -> int:
    return sum((ds.path / s["file"]).stat().st_size for s in ds.manifest["splits"][split]["shards"])


def mem_available(meminfo: Path = MEMINFO) -> int:
    """MemAvailable in bytes (0 when /proc/meminfo does not say)."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def drop_caches(path: Path = DROP_CACHES) -> None:
    """Write dirty pages out, then drop the page cache, dentries and inodes (needs root)."""
    if os.geteuid() != 0:
        raise ConfigError(f"--drop-caches needs root (it writes {path}); run without it, or as root")
    subprocess.run(["sync"], check=True)
    try:
        path.write_text("3\n")
    except OSError as e:
        raise ConfigError(f"--drop-caches: cannot write {path} ({e.strerror or e})") from None


def demand_from(path: str | os.PathLike) -> float:
    """The throughput (samples/s) of a training run's result.json."""
    from hvdbench.results.records.schema import read_result

    record, _ = read_result(path)
    if record.throughput is None or record.throughput <= 0:
        raise ConfigError(f"{path}: the run recorded no throughput (status {record.status}, mode "
                          f"{record.mode}); use a throughput-mode result or --demand N")
    return float(record.throughput)


# --- the command ---------------------------------------------------------------------------------

@dataclass
class IoOptions:
    data: str
    out: str
    split: str = defaults.IO_SPLIT
    batch_size: int = defaults.IO_BATCH_SIZE
    passes: int = defaults.IO_PASSES
    seed: int = defaults.IO_SEED
    drop_caches: bool = False
    demand: float | None = None
    demand_from: str | None = None


def open_everywhere(comm, path: str):
    """Open the dataset on every rank and agree: a dataset missing on one node fails every rank
    with one message naming the rank and host."""
    ds, error = None, None
    try:
        ds = open_dataset(path)
    except HvdbenchError as e:
        error = f"rank {comm.rank} on {socket.gethostname()}: {e}" if comm.size > 1 else str(e)
    errors = [e for e in comm.allgather(error) if e]
    if errors:
        more = f" (and {len(errors) - 1} more rank(s))" if len(errors) > 1 else ""
        raise DatasetError(errors[0] + more)
    return ds


def run(opts: IoOptions, comm, say: Callable[[str], None] = print) -> list[IoRow]:
    """All passes on every rank; returns the rows (on every rank; rank 0 writes them)."""
    if opts.passes < 1 or opts.batch_size < 1:
        raise ConfigError(f"--passes {opts.passes} and --batch-size {opts.batch_size} must be >= 1")
    if opts.drop_caches and os.geteuid() != 0:
        raise ConfigError(f"--drop-caches needs root (it writes {DROP_CACHES}); run without it, or as root")
    if opts.demand is not None and opts.demand <= 0:
        raise ConfigError(f"--demand {opts.demand}: samples/s must be positive")
    demand, source = opts.demand, "--demand" if opts.demand is not None else ""
    if opts.demand_from:
        demand, source = demand_from(opts.demand_from), str(opts.demand_from)
    ds = open_everywhere(comm, opts.data)
    total = ds.num_samples(opts.split)  # a missing split: DatasetError naming the dataset
    size_bytes, available = dataset_bytes(ds, opts.split), mem_available()
    run_id, started_at = comm.allgather(run_identity())[0]  # rank 0's, on every rank
    base = IoRow(run_id=run_id, started_at=started_at, dataset=str(opts.data),
                 kind=ds.kind, split=opts.split, batch_size=opts.batch_size, dataset_samples=total,
                 dataset_bytes=size_bytes, mem_available_bytes=available,
                 fits_in_cache=bool(available) and size_bytes < available, caches_dropped=opts.drop_caches,
                 demand_samples_s=demand, demand_source=source, **comm.layout())
    if not opts.drop_caches and base.fits_in_cache:
        say(f"warning: the {opts.split} split ({size_bytes / 1e9:.2f} GB) fits in the page cache "
            f"({available / 1e9:.1f} GB available) and caches are not dropped: after the first read "
            f"these figures may measure memory, not storage (as root, add --drop-caches)")

    rows = []
    for k in range(opts.passes):
        for impl in IMPLS:
            if opts.drop_caches and comm.local_rank == 0:
                drop_caches()  # once per node
            comm.barrier()  # every rank starts the pass together, after its node's drop
            if impl != "h5py":
                # A fresh Dataset per pass: the reader maps shard files, and the kernel does not drop
                # pages a live mapping holds, so the last pass's maps must be gone before this one.
                fresh = open_dataset(opts.data)
                stats = reader_pass(fresh, opts.split, opts.batch_size, comm.rank, comm.size, opts.seed, k,
                                    decode_batches=impl == "reader+decode")
                del fresh
            else:
                stats = raw_pass(ds, opts.split, comm.rank, comm.size)
            rows.append(_row(base, impl, k, comm.allgather((stats.samples, stats.bytes, stats.elapsed_s))))
            say(_line(rows[-1]))
    return compare(rows)


def _row(base: IoRow, impl: str, k: int, per_rank: list[tuple[int, int, float]]) -> IoRow:
    samples = sum(s for s, _, _ in per_rank)
    nbytes = sum(b for _, b, _ in per_rank)
    elapsed = max(t for _, _, t in per_rank)
    rates = [(s / t, b / t / MB) for s, b, t in per_rank if t > 0]
    row = replace(base, impl=impl, pass_index=k, samples=samples, bytes=nbytes, elapsed_s=elapsed,
                  samples_s=samples / elapsed if elapsed > 0 else None,
                  mb_s=nbytes / elapsed / MB if elapsed > 0 else None,
                  rank_samples_s_min=min(r[0] for r in rates) if rates else None,
                  rank_samples_s_max=max(r[0] for r in rates) if rates else None,
                  rank_mb_s_min=min(r[1] for r in rates) if rates else None,
                  rank_mb_s_max=max(r[1] for r in rates) if rates else None)
    if row.demand_samples_s and row.samples_s is not None:
        row.feed_fraction = min(1.0, row.samples_s / row.demand_samples_s)
    return row


def compare(rows: list[IoRow]) -> list[IoRow]:
    """vs_h5py on each reader row: its samples/s over the h5py pass's of the same pass index."""
    raw = {r.pass_index: r for r in rows if r.impl == "h5py"}
    return [replace(r, vs_h5py=r.samples_s / raw[r.pass_index].samples_s)
            if r.impl != "h5py" and r.pass_index in raw and r.samples_s and raw[r.pass_index].samples_s else r
            for r in rows]


def _line(r: IoRow) -> str:
    lo, hi = r.rank_samples_s_min, r.rank_samples_s_max
    per_rank = f", per rank {lo:,.0f}-{hi:,.0f}" if r.world_size > 1 and lo is not None else ""
    missed = "" if r.samples == r.dataset_samples else " -- NOT every sample read once"
    return (f"pass {r.pass_index} {r.impl:>13}: {r.samples:,} samples ({r.dataset_samples:,} in {r.split}) in "
            f"{r.elapsed_s:.3f} s: {r.samples_s:,.0f} samples/s, {r.mb_s:,.1f} MB/s{per_rank}{missed}")


def table(rows: list[IoRow]):
    from rich.box import ASCII2  # ASCII: mpirun's output forwarding may split a line mid-character
    from rich.table import Table

    r0 = rows[0]
    t = Table(title=f"io: {r0.dataset} ({r0.kind}, {r0.split}), {r0.world_size} ranks ({r0.layout}), "
                    f"caches {'dropped before each pass' if r0.caches_dropped else 'not dropped'}",
              caption="total = all ranks' samples / the slowest rank's time; MB = 1e6 stored bytes; "
                      "reader/h5py = samples/s ratio in the same pass"
                      + ("; feed = min(1, samples/s / demand)" if r0.demand_samples_s else ""),
              caption_justify="left", box=ASCII2)
    for name in ("pass", "impl", "samples", "s", "samples/s", "MB/s", "per rank samples/s", "reader/h5py",
                 *(("feed",) if r0.demand_samples_s else ())):
        t.add_column(name, justify="left" if name == "impl" else "right")
    for r in rows:
        t.add_row(str(r.pass_index), r.impl, f"{r.samples:,}", f"{r.elapsed_s:.3f}", f"{r.samples_s:,.0f}",
                  f"{r.mb_s:,.1f}", f"{r.rank_samples_s_min:,.0f}-{r.rank_samples_s_max:,.0f}",
                  f"{r.vs_h5py:.2f}" if r.vs_h5py is not None else "",
                  *((f"{100 * r.feed_fraction:.0f} %" if r.feed_fraction is not None else "",)
                    if r0.demand_samples_s else ()))
    return t


def write_outputs(rows: list[IoRow], out: str | os.PathLike) -> list[Path]:
    """Append to OUT/bench_io.csv; if it cannot be written, the rows are saved elsewhere and an
    OutputError says where (a finished measurement is never lost to an output error)."""
    return [append_or_rescue(Path(out) / CSV_NAME, rows)]
