"""Framework-neutral dataset readers: numpy batches, a disjoint seeded share per rank, prefetched.

    ds = open_dataset("data/digits")                 # checks the manifest and every shard's header
    loader = ds.loader("train", batch_size=32, rank=hvd.rank(), size=hvd.size(), seed=0)
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for batch in loader:                         # {"images": uint8 (32,H,W,3), "labels": int64 (32,)}
            ...

Which samples. Each shard is cut into blocks of consecutive samples (about 8 MB). Every epoch, all
ranks draw the same seeded permutation of all blocks; rank r of n takes the r-th n-th of that sample
stream, so ranks read disjoint blocks and every sample is read exactly once per epoch (drop_last
trims the stream's tail to equal full batches per rank: fewer than n x batch samples, a different
subset each epoch). A rank goes through its blocks a window of several blocks at a time and
shuffles within each window (seeded per epoch and rank): storage sees sequential reads of
megabytes, which disks and parallel file systems serve fast, while batches mix many blocks.

How the bytes are read. Shard fields are stored contiguous and uncompressed (see shards.py), so the
reader maps each shard file and views every field as an (n, ...) numpy array at the offset HDF5
reports for it. A batch is one numpy take per field and shard (or one slice per run of consecutive
samples), straight from the page cache into the batch arrays: one copy per byte and no HDF5 call per
sample. A background thread builds batches ahead of the caller (numpy copies without holding the
GIL), asks the kernel to start reading those parts of the coming windows that are not in memory yet
(mincore, then madvise WILLNEED), and refills batch arrays the caller has let go of.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import queue
import shlex
import sys
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Iterator

import numpy as np

from hvdbench.contracts import get_kind
from hvdbench.data.manifest import MANIFEST, data_info, read_manifest
from hvdbench.data.shards import ATTR_SAMPLES, open_shard
from hvdbench.data.verify import value_limits
from hvdbench.errors import DatasetError

BLOCK_BYTES = 8 << 20  # consecutive samples read as one sequential range
WINDOW_BLOCKS = 8  # blocks shuffled together (at least 4 batches' worth)
READ_AHEAD_MIN = 256 << 10  # smallest byte range worth an madvise call
READ_AHEAD_WINDOWS = 2  # windows whose reading the kernel is asked to start ahead of use
RUN_BYTES = 1 << 20  # BERT's shuffle unit: runs of consecutive instances of about this size (see Loader)
OPEN_SHARDS = 64  # mapped shard files kept open per dataset (bounded: one file descriptor each)


def open_dataset(path: str | Path) -> "Dataset":
    """Open a prepared dataset; DatasetError naming the file for a missing or damaged one."""
    return Dataset(Path(path))


class Dataset:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.manifest = read_manifest(self.path)
        self.kind: str = self.manifest["kind"]
        self.kind_spec = get_kind(self.kind)  # read_manifest checked it is a registered kind
        self.fields: dict[str, dict] = self.manifest["fields"]
        self._maps: OrderedDict[str, tuple] = OrderedDict()  # file -> (field arrays, mmap, field offsets)
        self._lock = threading.Lock()
        self._check_shards()

    def _check_shards(self) -> None:
        """Open every shard's header: missing, truncated or mismatched shards fail here, not mid-epoch."""
        self._samples = {s["file"]: s["samples"] for info in self.manifest["splits"].values() for s in info["shards"]}
        for file in self._samples:
            self._layout(file)

    def _layout(self, file: str) -> dict[str, int | None]:
        """Check one shard against the manifest; the byte offset of each field in the file."""
        path, n = self.path / file, self._samples[file]
        offsets = {}
        with open_shard(path) as f:
            if int(f.attrs[ATTR_SAMPLES]) != n:
                raise DatasetError(f"shard {path} holds {int(f.attrs[ATTR_SAMPLES])} samples, the manifest says {n}")
            for name, spec in self.fields.items():
                if name not in f:
                    raise DatasetError(f"shard {path} has no field {name!r}")
                d = f[name]
                want = [n, *spec["shape"]]
                if list(d.shape) != want or d.dtype != np.dtype(spec["dtype"]):
                    raise DatasetError(f"shard {path} field {name!r} is {d.dtype}{list(d.shape)}, the "
                                       f"manifest says {spec['dtype']}{want}")
                if d.chunks is not None or d.compression is not None:
                    raise DatasetError(f"shard {path} field {name!r} is chunked or compressed; "
                                       f"hvdbench reads contiguous fields (prepare it again)")
                offsets[name] = d.id.get_offset()  # None for an empty field
        size = path.stat().st_size
        for name, offset in offsets.items():
            end = (offset or 0) + n * _row_bytes(self.fields[name])
            if end > size:
                raise DatasetError(f"shard {path} is truncated (field {name!r} ends at byte {end}, "
                                   f"the file has {size})")
        return offsets

    @property
    def splits(self) -> list[str]:
        return list(self.manifest["splits"])

    @property
    def data_info(self) -> dict:
        """What a model needs to know about the data: its kind's info keys (num_classes,
        vocab_size, max_seq_len, ...); DatasetError naming the manifest for a missing one."""
        return data_info(self.manifest, str(self.path / "manifest.json"))

    def _split(self, split: str) -> dict:
        if split not in self.manifest["splits"]:
            raise DatasetError(f"{self.path}: no split {split!r}; it has {', '.join(self.splits)}")
        return self.manifest["splits"][split]

    def num_samples(self, split: str) -> int:
        return int(self._split(split)["samples"])

    def loader(self, split: str, batch_size: int, rank: int = 0, size: int = 1, seed: int = 0,
               shuffle: bool = True, drop_last: bool = True, prefetch: int = 2,
               block_samples: int | None = None, window_blocks: int | None = None,
               run_samples: int | None = None) -> "Loader":
        """Batches of `split` for rank `rank` of `size` (see the module docstring). The optional
        block_samples, window_blocks and run_samples override the automatic sizes."""
        self._split(split)
        return Loader(self, split, batch_size, rank, size, seed, shuffle, drop_last, prefetch,
                      block_samples, window_blocks, run_samples)

    def arrays(self, file: str) -> dict[str, np.ndarray]:
        """The fields of one shard as read-only arrays over the mapped file (kept in a small LRU)."""
        return self._mapped(file)[0]

    def _mapped(self, file: str) -> tuple[dict[str, np.ndarray], mmap.mmap | None, dict[str, int | None], int]:
        """(field arrays, the map, each field's byte offset, the map's address in memory)."""
        with self._lock:
            if file in self._maps:
                self._maps.move_to_end(file)
                return self._maps[file]
            # The layout is read again now: a rerun of prepare may have replaced the file since.
            offsets, n, path = self._layout(file), self._samples[file], self.path / file
            try:
                with open(path, "rb") as fh:
                    mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if n else None
            except (OSError, ValueError) as e:
                raise DatasetError(f"shard {path}: cannot map ({e})") from None
            views, address = {}, np.frombuffer(mm, np.uint8).ctypes.data if n else 0
            for name, spec in self.fields.items():
                shape, dtype = tuple(spec["shape"]), np.dtype(spec["dtype"])
                count = n * int(np.prod(shape, dtype=np.int64))
                views[name] = (np.frombuffer(mm, dtype, count, offsets[name]).reshape(n, *shape) if n
                               else np.empty((0, *shape), dtype))
            self._maps[file] = (views, mm, offsets, address)
            while len(self._maps) > OPEN_SHARDS:
                self._maps.popitem(last=False)  # the map closes once no view of it is left
            return self._maps[file]


def _row_bytes(spec: dict) -> int:
    return int(np.prod(spec["shape"], dtype=np.int64)) * np.dtype(spec["dtype"]).itemsize


class Loader:
    """Batches of one split for one rank. len() is the same on every rank; iterate once per epoch."""

    def __init__(self, ds: Dataset, split: str, batch_size: int, rank: int, size: int, seed: int,
                 shuffle: bool, drop_last: bool, prefetch: int, block_samples: int | None,
                 window_blocks: int | None, run_samples: int | None):
        if batch_size < 1 or size < 1 or not 0 <= rank < size:
            raise ValueError(f"bad loader arguments: batch_size={batch_size}, rank={rank}, size={size}")
        self.ds, self.split, self.batch_size = ds, split, batch_size
        self.rank, self.size, self.seed = rank, size, seed
        self.shuffle, self.drop_last, self.prefetch = shuffle, drop_last, max(1, prefetch)
        self.epoch = 0
        shards = ds.manifest["splits"][split]["shards"]
        self.files = [s["file"] for s in shards]
        self.total = sum(s["samples"] for s in shards)
        self.names = list(ds.fields)
        row_bytes = sum(_row_bytes(ds.fields[n]) for n in self.names)
        self.row_bytes = {n: _row_bytes(ds.fields[n]) for n in self.names}
        self.block = block_samples or max(1, BLOCK_BYTES // row_bytes)
        # Blocks never cross shards: (shard index, first sample, sample count).
        blocks = [(i, lo, min(self.block, s["samples"] - lo))
                  for i, s in enumerate(shards) for lo in range(0, s["samples"], self.block)]
        self.blocks = np.asarray(blocks, dtype=np.int64).reshape(-1, 3)
        self.window = max(window_blocks or WINDOW_BLOCKS, math.ceil(4 * batch_size / self.block))
        # Samples written in source order (images) are shuffled one by one (many epochs, each should
        # mix them anew). Samples prepare already put in random order (BERT instances) are shuffled
        # in runs of consecutive ones, about RUN_BYTES each, whose boundaries move every epoch:
        # gathering 1-2 KB rows one at a time runs at half the speed of a contiguous read, and a
        # pre-training run sees each instance about once.
        self.run = run_samples or (max(1, RUN_BYTES // row_bytes) if ds.kind_spec.shuffled_when_written else 1)
        # The kind's value limits (token ids below vocab_size, labels below num_classes), checked in
        # every batch: a manifest whose sizes are wrong is one line naming the shard and sample here,
        # not an IndexError deep in the model (`prepare verify` checks the whole dataset ahead).
        self.limits = {n: v for n, v in value_limits(ds.manifest, str(ds.path / MANIFEST)).items() if n in ds.fields}
        self._pool: list[dict[str, np.ndarray]] = []  # batch arrays to recycle (see _alloc)
        self._checked: set[tuple[int, int, int]] = set()  # reads whose residency was checked before

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def _share(self) -> tuple[int, int]:
        """This rank's [lo, hi) of the epoch's sample stream."""
        n, b, size = self.total, self.batch_size, self.size
        if self.drop_last:
            per = (n // (size * b)) * b
            return self.rank * per, (self.rank + 1) * per
        return self.rank * n // size, (self.rank + 1) * n // size

    def batch_sizes(self) -> list[int]:
        """The sizes of this rank's batches this epoch (the same count on every rank)."""
        n, b, size = self.total, self.batch_size, self.size
        if self.drop_last:
            return [b] * (n // (size * b))
        lo, hi = self._share()
        count = math.ceil(math.ceil(n / size) / b)
        # A rank with one sample fewer than another spreads the difference over its batches.
        return [len(part) for part in np.array_split(np.arange(hi - lo), count)] if count else []

    def __len__(self) -> int:
        return len(self.batch_sizes())

    def plan(self) -> list[tuple[int, int, int]]:
        """This rank's reads for the current epoch, in order: (shard index, first sample, count)."""
        lo, hi = self._share()
        order = (np.random.default_rng([self.seed, self.epoch]).permutation(len(self.blocks))
                 if self.shuffle else np.arange(len(self.blocks)))
        blocks = self.blocks[order]
        ends = np.cumsum(blocks[:, 2])
        starts = ends - blocks[:, 2]
        reads = []
        for k in range(int(np.searchsorted(ends, lo, side="right")), len(blocks)):
            if starts[k] >= hi:
                break
            shard, first, _ = (int(v) for v in blocks[k])
            a, z = max(lo, starts[k]) - starts[k], min(hi, ends[k]) - starts[k]
            if z > a:
                reads.append((shard, first + int(a), int(z - a)))
        return reads

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        # Batches go one way, tickets the other: the producer hands over a batch only for a
        # ticket, so at most `prefetch` batches wait, and a caller who stops early wakes it with
        # a False ticket (no polling, no timeouts).
        batches: queue.SimpleQueue = queue.SimpleQueue()
        tickets: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(self.prefetch):
            tickets.put(True)
        stop = threading.Event()
        worker = threading.Thread(target=self._produce, args=(batches, tickets, stop), daemon=True,
                                  name="hvdbench-reader")
        worker.start()
        try:
            while True:
                item = batches.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                tickets.put(True)
                yield item
        finally:
            stop.set()
            tickets.put(False)  # wakes a producer waiting for a ticket
            worker.join()

    def _produce(self, batches: queue.SimpleQueue, tickets: queue.SimpleQueue, stop: threading.Event) -> None:
        try:
            for batch in self._batches():
                if not tickets.get() or stop.is_set():
                    return
                batches.put(batch)
            batches.put(None)
        except BaseException as e:  # noqa: BLE001 - handed to the caller, who raises it
            batches.put(e)

    def _batches(self) -> Iterator[dict[str, np.ndarray]]:
        """Cut the planned batch sizes from the windows' shuffled samples; samples left over at the
        end of a window (fewer than a batch) go first into the next window's batches."""
        sizes = self.batch_sizes()
        reads = self.plan() if sizes else []
        windows = [reads[i:i + self.window] for i in range(0, len(reads), self.window)]
        rng = np.random.default_rng([self.seed, self.epoch, self.rank, 1])
        carry = np.empty((0, 2), np.int64)  # (shard index, sample) pairs
        k = 0
        for window in windows[:READ_AHEAD_WINDOWS]:
            self._read_ahead(window)
        for w, window in enumerate(windows):
            if w + READ_AHEAD_WINDOWS < len(windows):
                self._read_ahead(windows[w + READ_AHEAD_WINDOWS])
            picks = np.concatenate([np.stack([np.full(c, s), np.arange(f, f + c)], 1) for s, f, c in window])
            if self.shuffle:  # a random order of runs, samples in order within a run
                shift = int(rng.integers(self.run))  # run boundaries differ from epoch to epoch
                first_run = np.cumsum([0] + [(c + shift) // self.run + 1 for _, _, c in window])
                run_of = np.concatenate([(np.arange(c) + shift) // self.run + k for k, (_, _, c) in
                                         zip(first_run, window)])
                picks = picks[np.argsort(rng.permutation(first_run[-1])[run_of], kind="stable")]
            picks = np.concatenate([carry, picks])
            pos = 0
            while k < len(sizes) and len(picks) - pos >= sizes[k]:
                yield self._gather(picks[pos:pos + sizes[k]])
                pos += sizes[k]
                k += 1
            carry = picks[pos:]
        while k < len(sizes):  # only batches of zero samples remain (more ranks than samples)
            yield self._gather(carry[:0])
            k += 1

    def _gather(self, picks: np.ndarray) -> dict[str, np.ndarray]:
        """One batch. Runs of consecutive samples (BERT's shuffle unit, or storage order) are copied
        as slices in the order drawn; single samples (images) are grouped by shard and copied with
        one numpy take per field and shard, in storage order (the order inside a batch carries no
        meaning)."""
        out = self._alloc(len(picks))
        if not len(picks):
            return dict(out)
        new_shard = picks[1:, 0] != picks[:-1, 0]
        cuts = (np.flatnonzero(new_shard | (picks[1:, 1] != picks[:-1, 1] + 1)) + 1).tolist()
        if len(cuts) * 8 < len(picks):  # long runs: sorting them would cost more than it merges
            for a, z in zip([0, *cuts], [*cuts, len(picks)]):
                arrays, first = self.ds.arrays(self.files[int(picks[a, 0])]), int(picks[a, 1])
                for n in self.names:
                    out[n][a:z] = arrays[n][first:first + z - a]
            return self._within_limits(out, picks)
        picks = picks[np.lexsort((picks[:, 1], picks[:, 0]))]
        cuts = (np.flatnonzero(picks[1:, 0] != picks[:-1, 0]) + 1).tolist()
        for a, z in zip([0, *cuts], [*cuts, len(picks)]):
            arrays, rows = self.ds.arrays(self.files[int(picks[a, 0])]), picks[a:z, 1]
            for n in self.names:
                # mode="clip": the rows are valid, and "raise" would copy through a buffer
                arrays[n].take(rows, 0, out[n][a:z], "clip")
        return self._within_limits(out, picks)

    def _within_limits(self, out: dict[str, np.ndarray], picks: np.ndarray) -> dict[str, np.ndarray]:
        """The batch, whose sample i is picks[i] (shard index, sample); DatasetError naming the shard,
        field, sample and value of the first value outside its field's limits."""
        for name, (low, high) in self.limits.items():
            rows = ((out[name] < low) | (out[name] > high)).reshape(len(picks), -1)
            if rows.any():
                i = int(np.argmax(rows.any(axis=1)))
                value = out[name][i].reshape(-1)[rows[i]][0].item()
                raise DatasetError(
                    f"{self.ds.path / self.files[int(picks[i, 0])]}: field {name!r} holds {value} at sample "
                    f"{int(picks[i, 1])}, outside [{low}, {high}] (the manifest's {self.ds.kind!r} sizes); "
                    f"`{shlex.join(['hvdbench', 'prepare', 'verify', str(self.ds.path)])}` checks every value")
        return dict(out)

    def _alloc(self, n: int) -> dict[str, np.ndarray]:
        """Arrays for a batch of n. A batch the caller has let go of (no reference is left but the
        pool's own, so nobody can see its contents change) is refilled instead of allocating anew:
        fresh memory costs a page fault per 4 KB, as much as copying the data in."""
        for arrays in self._pool:
            if len(arrays[self.names[0]]) == n and all(sys.getrefcount(arrays[k]) == 2 for k in self.names):
                return arrays
        arrays = {k: np.empty((n, *self.ds.fields[k]["shape"]), self.ds.fields[k]["dtype"]) for k in self.names}
        if len(self._pool) < self.prefetch + 4:
            self._pool.append(arrays)
        return arrays

    def _read_ahead(self, window: list[tuple[int, int, int]]) -> None:
        """Ask the kernel to start reading the next window's byte ranges that are not in memory yet
        (cold storage). Advice on pages already there walked the page cache: a sixth of a warm
        epoch. Asking first is cheap where this process has mapped the pages (a read it checked in
        an earlier epoch, and gathered since: 5 us per 8 MB); elsewhere a whole-range check costs as
        much as the advice, so three pages stand for the range."""
        for read in window:
            shard, first, count = read
            _, mm, offsets, address = self.ds._mapped(self.files[shard])
            if mm is None or not hasattr(mm, "madvise"):
                continue
            mapped = read in self._checked
            self._checked.add(read)
            for n in self.names:
                if count * self.row_bytes[n] < READ_AHEAD_MIN:
                    continue  # small ranges: the kernel's own read-ahead on the first fault covers them
                start = offsets[n] + first * self.row_bytes[n]
                aligned = start - start % mmap.PAGESIZE
                length = start - aligned + count * self.row_bytes[n]
                last = aligned + (length - 1) // mmap.PAGESIZE * mmap.PAGESIZE
                middle = aligned + (last - aligned) // 2 // mmap.PAGESIZE * mmap.PAGESIZE
                if (_resident(address + aligned, length) if mapped else
                        all(_resident(address + page, 1) for page in (aligned, middle, last))):
                    continue
                try:
                    mm.madvise(mmap.MADV_WILLNEED, aligned, length)
                except (OSError, ValueError):
                    return  # advice only


def _libc_mincore():
    """libc's mincore(2), or None where there is none (then every range counts as not resident)."""
    try:
        mincore = ctypes.CDLL(None, use_errno=True).mincore
    except (OSError, AttributeError):
        return None
    mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    mincore.restype = ctypes.c_int
    return mincore


_MINCORE = _libc_mincore()


def _resident(address: int, length: int) -> bool:
    """Whether every page of a page-aligned mapped range is in memory (mincore(2): one byte per page)."""
    if _MINCORE is None:
        return False
    pages = np.empty(-(-length // mmap.PAGESIZE), np.uint8)
    if _MINCORE(address, length, pages.ctypes.data) != 0:
        return False
    return bool((pages & 1).all())
