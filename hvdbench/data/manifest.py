"""The dataset manifest: `<dir>/manifest.json`, the one file that says what a dataset directory holds.

Every prepare command writes it last (atomically, rank 0 only), so a directory with a manifest is a
complete dataset and one without is an interrupted prepare that a rerun of the same command finishes.

    {"format": "hvdbench-dataset", "format_version": 1, "kind": a registered DatasetKind's name,
     "splits": {"train": {"samples": N, "shards": [{"file": ..., "samples": n, "sha256": ...}]}, "val": ...},
     "fields": {name: {"shape": [per-sample shape], "dtype": "uint8"}}, "seed": ..., "params": {...},
     "command": "hvdbench prepare ...", "created_at": "...", plus kind-specific keys}
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import re
import shlex
import sys
from pathlib import Path

from hvdbench.errors import DatasetError
from hvdbench.files import atomic_write_text

FORMAT = "hvdbench-dataset"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"


def command_line(argv: list[str] | None = None) -> str:
    """The command that made a dataset, as a user would retype it (the program is named by its basename)."""
    argv = list(sys.argv if argv is None else argv)
    if argv:
        argv[0] = os.path.basename(argv[0])
    return shlex.join(argv)


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def params_hash(params: dict) -> str:
    """A stable hash of the options that decide a dataset's content (resume compares these)."""
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()


def atomic_write_json(path: Path, obj: dict) -> None:
    """Write beside `path`, fsync, rename: a reader sees the old file or the new one, never half."""
    atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=False) + "\n")


def write_manifest(directory: Path, manifest: dict) -> Path:
    path = Path(directory) / MANIFEST
    atomic_write_json(path, manifest)
    return path


def read_manifest(directory: Path) -> dict:
    """Load and check `<directory>/manifest.json`; DatasetError naming the file for anything amiss."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DatasetError(f"dataset directory {directory} does not exist (make it with `hvdbench prepare ...`)")
    path = directory / MANIFEST
    if not path.is_file():
        raise DatasetError(f"{path} missing: {directory} is not a prepared dataset, or its prepare "
                           f"was interrupted (rerun the same `hvdbench prepare` command)")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise DatasetError(f"{path}: unreadable manifest ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise DatasetError(f"{path}: not an hvdbench dataset manifest (format != {FORMAT!r})")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise DatasetError(f"{path}: format_version {version!r}, this hvdbench reads version "
                           f"{FORMAT_VERSION}; prepare the dataset again")
    for key in ("kind", "splits", "fields"):
        if key not in manifest:
            raise DatasetError(f"{path}: key {key!r} missing")
    from hvdbench.contracts import get_kind
    from hvdbench.errors import ConfigError

    if not isinstance(manifest["kind"], str):
        raise DatasetError(f"{path}: key 'kind' must be a dataset kind's name, got {manifest['kind']!r}")
    try:
        get_kind(manifest["kind"])
    except ConfigError as e:
        raise DatasetError(f"{path}: {e}") from None
    check_schema(manifest, path)
    return manifest


def data_info(manifest: dict, where: str) -> dict:
    """The kind's info keys of a manifest (`DatasetKind.data_info`: the data's sizes, such as
    num_classes or vocab_size), each a whole number; DatasetError naming `where` and the key. What
    a model is built with (Dataset.data_info) and what `prepare verify`'s value limits come from."""
    from hvdbench.contracts import get_kind

    info = get_kind(manifest["kind"]).data_info(manifest, where)
    for key, value in info.items():
        _count(value, f"{where}: {key}")
    return info


# --- the schema: every key the readers, verify and bench io use, checked on open ---------------

_FIELD_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")  # an HDF5 dataset at the root
MAX_SAMPLE_BYTES = 1 << 40  # one sample of one field; above this a shape is a typo


def check_schema(manifest: dict, path: Path) -> None:
    """Types and limits of `splits` (samples, shards: file, samples, sha256) and `fields` (shape,
    dtype), shard and vocabulary files inside the dataset folder, and shard counts that add up;
    DatasetError naming the file and the key."""
    splits, fields = manifest["splits"], manifest["fields"]
    if not isinstance(splits, dict):
        raise DatasetError(f"{path}: key 'splits' must map split names to their shards")
    seen: set[str] = set()
    for split, info in splits.items():
        where = f"{path}: splits.{split}"
        if not isinstance(info, dict) or "shards" not in info or "samples" not in info:
            raise DatasetError(f"{where} lacks 'samples' or 'shards'")
        total = _count(info["samples"], f"{where}.samples")
        if not isinstance(info["shards"], list):
            raise DatasetError(f"{where}.shards must be a list of shards")
        for i, shard in enumerate(info["shards"]):
            at = f"{where}.shards[{i}]"
            if not isinstance(shard, dict):
                raise DatasetError(f"{at} must be a mapping with file, samples and sha256")
            for key in ("file", "samples"):
                if key not in shard:
                    raise DatasetError(f"{at}: key {key!r} missing")
            _count(shard["samples"], f"{at}.samples")
            if "sha256" in shard and not (isinstance(shard["sha256"], str)
                                         and re.fullmatch(r"[0-9a-f]{64}", shard["sha256"])):
                raise DatasetError(f"{at}.sha256 must be 64 hex digits, got {shard['sha256']!r}")
            file = inside(shard["file"], f"{at}.file")
            if file in seen:
                raise DatasetError(f"{at}.file {file!r} is listed twice")
            seen.add(file)
        if sum(s["samples"] for s in info["shards"]) != total:
            raise DatasetError(f"{path}: split {split!r}: shard sample counts do not add up to {total}")
    if not isinstance(fields, dict) or not fields:
        raise DatasetError(f"{path}: key 'fields' must map field names to their shape and dtype")
    for name, spec in fields.items():
        at = f"{path}: fields.{name}"
        if not _FIELD_NAME.match(name):
            raise DatasetError(f"{at}: not a field name (letters, digits, '_', '.', '-')")
        if not isinstance(spec, dict) or "shape" not in spec or "dtype" not in spec:
            raise DatasetError(f"{at} lacks 'shape' or 'dtype'")
        shape = spec["shape"]
        if not isinstance(shape, list):
            raise DatasetError(f"{at}.shape must be a list of sizes, got {shape!r}")
        for size in shape:
            _count(size, f"{at}.shape")
        try:
            import numpy as np

            dtype = np.dtype(spec["dtype"]) if isinstance(spec["dtype"], str) else None
        except Exception:  # noqa: BLE001 - numpy's parser raises TypeError, ValueError, SyntaxError...
            dtype = None
        if dtype is None or dtype.kind not in "biuf":
            raise DatasetError(f"{at}.dtype {spec['dtype']!r} is not a numeric type (e.g. uint8, int32, float32)")
        if math.prod(shape) * dtype.itemsize > MAX_SAMPLE_BYTES:
            raise DatasetError(f"{at}.shape {shape}: one sample would take over {MAX_SAMPLE_BYTES >> 40} TiB")
    if "vocab_sha256" in manifest:  # the vocabulary verify checks (bert kinds)
        if not isinstance(manifest["vocab_sha256"], str):
            raise DatasetError(f"{path}: key 'vocab_sha256' must be a string")
        inside(manifest.get("vocab_file", "vocab.txt"), f"{path}: vocab_file")
        if "vocab_size" not in manifest:
            raise DatasetError(f"{path}: key 'vocab_size' missing (the manifest names a vocabulary)")
        _count(manifest["vocab_size"], f"{path}: vocab_size")


def inside(file, where: str) -> str:
    """A file name of the manifest, relative and inside the dataset folder (no '..', no absolute
    path), or DatasetError naming the key."""
    if not isinstance(file, str) or not file or any(ord(c) < 32 for c in file):
        raise DatasetError(f"{where} must be a file name inside the dataset folder, got {file!r}")
    parts = Path(file).parts
    if Path(file).is_absolute() or ".." in parts or not parts or file.endswith("/"):
        raise DatasetError(f"{where} {file!r} points outside the dataset folder (shards must be inside it)")
    return file


def _count(value, where: str) -> int:
    """A whole number >= 0 (not a bool, not a float)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value >= 1 << 62:
        raise DatasetError(f"{where} must be a whole number >= 0, got {value!r}")
    return value


def check_reusable(directory: Path, kind: str, params: dict, overwrite: bool) -> None:
    """Refuse to mix a new prepare into a directory that holds a different dataset (nothing is lost).

    Rerunning the same command is fine (it resumes or re-checks); different options need --overwrite.
    """
    path = Path(directory) / MANIFEST
    if not path.is_file():
        return
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        old = {}
    same = old.get("kind") == kind and old.get("params") == params
    if same or overwrite:
        return
    raise DatasetError(f"{directory} already holds a different dataset (made by `{old.get('command', '?')}`); "
                       f"choose another --out or pass --overwrite")


def new_manifest(kind: str, fields: dict, seed: int, params: dict, command: str | None = None, **extra) -> dict:
    """The common keys, in the order a reader expects to see them; `splits` is filled in last."""
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "kind": kind, "splits": {},
            "fields": fields, "seed": seed, "params": params,
            "command": command if command is not None else command_line(),
            "created_at": now_iso(), **extra}


def field_spec(shape: tuple | list, dtype: str) -> dict:
    return {"shape": list(shape), "dtype": str(dtype)}
