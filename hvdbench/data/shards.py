"""HDF5 shard files: one dataset per field at the root, first axis = sample.

A shard is written to `<name>.partial` and renamed to `<name>` only after it is closed and synced, with
the attributes `hvdbench_samples` (its sample count), `hvdbench_sha256` (a checksum over every field's
bytes, checked by `verify`) and `hvdbench_source` (a hash of the inputs and options that made it). A
rerun of an interrupted prepare keeps every shard whose name exists and whose source hash matches, and
rewrites the rest: a killed process leaves at most `.partial` files, never a half-written `<name>`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import h5py
import numpy as np

from hvdbench.errors import DatasetError

ATTR_SAMPLES = "hvdbench_samples"
ATTR_SHA256 = "hvdbench_sha256"
ATTR_SOURCE = "hvdbench_source"
ATTR_INFO = "hvdbench_info"

# Fields are stored contiguous and uncompressed: HDF5's layout for random access by index to
# fixed-size rows. Sample i of a field is the byte range offset + i * row_bytes, where offset is
# H5Dget_offset of the dataset, so the readers map the file and build a shuffled batch with one numpy
# gather per field, with no HDF5 call per sample. (Measured here: 224x224 images in 1-image chunks
# read at about half the speed of contiguous ones through h5py, as every chunk below the 1 MiB
# chunk cache is copied twice; chunking only pays for compression, and image bytes do not compress.)

SHARD_RE = re.compile(r"^(train|val)-\d{5}-of-\d{5}\.h5(\.partial)?$")


def shard_name(split: str, index: int, count: int) -> str:
    """`train-00003-of-00012.h5`: deterministic from the input list, so a rerun finds its shards."""
    return f"{split}-{index:05d}-of-{count:05d}.h5"


def checksum(arrays: dict[str, np.ndarray]) -> str:
    """sha256 over the fields in name order: the value `verify` recomputes from the file."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        h.update(name.encode())
        h.update(np.ascontiguousarray(arrays[name]).data)
    return h.hexdigest()


def write_shard(path: Path, arrays: dict[str, np.ndarray], source: str, info: dict | None = None) -> dict:
    """Write one shard atomically; return its record {file, samples, sha256, info}.

    `info` (JSON) travels with the shard, so a resumed prepare still knows, e.g., which inputs it skipped.
    """
    path = Path(path)
    counts = {len(a) for a in arrays.values()}
    if len(counts) != 1:
        raise ValueError(f"{path.name}: fields have different sample counts {sorted(counts)}")
    n = counts.pop()
    digest = checksum(arrays)
    partial = path.with_name(path.name + ".partial")
    # Never written through a link hvdbench did not make (a shared data folder): a stale .partial (a
    # killed prepare's, or anything planted at the name) is removed, not opened (unlink takes a link
    # itself away), and "w-" creates the file exclusively (O_CREAT|O_EXCL, which never follows a link).
    partial.unlink(missing_ok=True)
    with h5py.File(partial, "w-") as f:
        for name, a in arrays.items():
            f.create_dataset(name, data=a, chunks=None, track_times=False)
        f.attrs[ATTR_INFO] = json.dumps(info or {})
        f.attrs[ATTR_SOURCE] = source
        f.attrs[ATTR_SHA256] = digest
        f.attrs[ATTR_SAMPLES] = n  # written last: its presence marks a finished file
    fd = os.open(partial, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(partial, path)
    return {"file": path.name, "samples": n, "sha256": digest, "info": info or {}}


def completed_shard(path: Path, source: str) -> dict | None:
    """The record of a finished shard made from `source`, or None when it must be (re)written."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        with h5py.File(path, "r") as f:
            if f.attrs.get(ATTR_SOURCE) != source or ATTR_SAMPLES not in f.attrs:
                return None
            return {"file": path.name, "samples": int(f.attrs[ATTR_SAMPLES]),
                    "sha256": str(f.attrs[ATTR_SHA256]), "info": json.loads(f.attrs.get(ATTR_INFO, "{}"))}
    except (OSError, ValueError):  # truncated, not HDF5, or damaged attributes: rewrite it
        return None


def open_shard(path: Path) -> h5py.File:
    """Open a shard for reading; a missing or truncated file is a DatasetError naming it."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"shard {path} is missing")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise DatasetError(f"shard {path} is unreadable or truncated ({_first_line(e)})") from None
    if ATTR_SAMPLES not in f.attrs:
        f.close()
        raise DatasetError(f"shard {path} is incomplete (no {ATTR_SAMPLES} attribute)")
    return f


def stale_files(directory: Path, keep: set[str]) -> list[Path]:
    """Shard files (by our naming) that the current manifest does not list: leftovers of other runs."""
    return sorted(p for p in Path(directory).iterdir() if SHARD_RE.match(p.name) and p.name not in keep)


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
