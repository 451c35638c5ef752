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
import os
import shlex
import sys
from pathlib import Path

from hvdbench.errors import DatasetError

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
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


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
    from hvdbench.errors import ConfigError
    from hvdbench.models import get_kind

    try:
        get_kind(manifest["kind"])
    except ConfigError as e:
        raise DatasetError(f"{path}: {e}") from None
    for split, info in manifest["splits"].items():
        if not isinstance(info, dict) or "shards" not in info or "samples" not in info:
            raise DatasetError(f"{path}: split {split!r} lacks 'samples' or 'shards'")
        if sum(s["samples"] for s in info["shards"]) != info["samples"]:
            raise DatasetError(f"{path}: split {split!r}: shard sample counts do not add up to {info['samples']}")
    return manifest


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
