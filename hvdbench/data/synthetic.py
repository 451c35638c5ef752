"""Seeded random datasets in the real formats, of any size, for storage and throughput tests.

    hvdbench prepare synthetic --like images --samples 100000 --size 224 --out /scratch/synth-images
    hvdbench prepare synthetic --like bert --samples 1000000 --max-seq-len 512 --out /scratch/synth-bert
    hvdbench prepare synthetic --like bert_packed --samples 500000 --out /scratch/synth-bert-packed
    hvdbench prepare synthetic --like toy_regression --samples 4096 --out data/toy

Any registered dataset kind can be made: its `DatasetKind.synthetic()` draws the samples (images:
uniform random pixels and labels; BERT: random ids with the real [CLS] A [SEP] B [SEP] structure and
the lengths of MLPerf's Wikipedia data, masked as `prepare bert` masks; packed BERT: those packed as
`prepare pack --strategy nnlshp` packs them), `synthetic_files()` writes side files such as a vocabulary, and the
kind's `synthetic_defaults` fill the sizes not given. Sizes are given as `--info KEY=VALUE`, or by
the shorthand options a kind declares (`synthetic_flags`: images' `--size` is `--info image_size=N`).
Shards are made in parallel (workers, MPI ranks) and resumably. The manifest says `"synthetic": true`.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np

from hvdbench.data import manifest as mf
from hvdbench.data.parallel import PrepareOptions, ShardJob, World, finish, run_jobs, start
from hvdbench.data.shards import shard_name, write_shard
from hvdbench.errors import ConfigError, DatasetError


def _kind(like: str):
    from hvdbench.contracts import get_kind

    try:
        return get_kind(like)
    except ConfigError as e:
        raise DatasetError(f"--like: {e}") from None


def shorthand_flags() -> dict[str, dict[str, str]]:
    """Every registered kind's shorthand options: {option name: {kind name: the info key it sets}},
    e.g. {"size": {"detection": "image_size", "images": "image_size"}, ...}."""
    from hvdbench.contracts import get_kind, kind_names

    flags: dict[str, dict[str, str]] = {}
    for name in kind_names():
        for flag, key in get_kind(name).synthetic_flags.items():
            flags.setdefault(flag, {})[name] = key
    return flags


def shorthand_info(like: str, given: dict) -> dict:
    """The info values that shorthand options ({option name: value}; None: not given) stand for
    in a `like` dataset; DatasetError for an option that kind does not declare."""
    given = {flag: value for flag, value in given.items() if value is not None}
    if not given:
        return {}
    kind = _kind(like)
    info = {}
    for flag, value in given.items():
        if flag not in kind.synthetic_flags:
            own = ", ".join(f"--{f}" for f in kind.synthetic_flags) or "none"
            raise DatasetError(f"--{flag} does not apply to {like!r} data (its options: {own}; its keys, for "
                               f"--info KEY=VALUE: {', '.join(kind.info_keys)})")
        info[kind.synthetic_flags[flag]] = value
    return info


def synthetic_info(like: str, given: dict) -> dict:
    """The kind's data sizes: its defaults, overridden by `given`; DatasetError for a key the
    kind does not have."""
    kind = _kind(like)
    unknown = sorted(set(given) - set(kind.info_keys))
    if unknown:
        raise DatasetError(f"{', '.join(unknown)} do not apply to {like!r} data (its keys: "
                           f"{', '.join(kind.info_keys)})")
    info = {**kind.synthetic_defaults, **given}
    missing = [k for k in kind.info_keys if k not in info]
    if missing:
        raise DatasetError(f"{like!r} data needs {', '.join(missing)} (--info KEY=VALUE)")
    return {k: info[k] for k in kind.info_keys}


def prepare_synthetic(like: str, samples: int, out: Path, *, info: dict | None = None,
                      samples_per_shard: int | None = None, val_fraction: float = 0.05, seed: int = 0,
                      options: PrepareOptions = PrepareOptions()) -> dict:
    out = Path(out)
    kind = _kind(like)
    info = synthetic_info(like, info or {})
    if samples < 1 or not 0 <= val_fraction < 1:
        raise DatasetError("--samples must be positive and --val-fraction in [0, 1)")
    kind.synthetic(1, info, np.random.default_rng(0))  # impossible sizes fail here, before any work
    per_shard = samples_per_shard or kind.samples_per_shard
    world = World.detect()
    params = {"like": like, "samples": samples, "samples_per_shard": per_shard, "val_fraction": val_fraction,
              "seed": seed, **info}
    start(out, kind.name, params, options.overwrite, world)
    n_val = round(samples * val_fraction)
    ph = mf.params_hash(params)
    jobs = []
    for s, (split, n) in enumerate((("train", samples - n_val), ("val", n_val))):
        count = math.ceil(n / per_shard)
        for k in range(count):
            work = {"like": like, "n": min(per_shard, n - k * per_shard), "seed": [seed, s, k], "info": info}
            source = hashlib.sha256(f"{ph}/{split}/{k}".encode()).hexdigest()
            jobs.append(ShardJob.single(split, shard_name(split, k, count), source, work))
    records = run_jobs(out, jobs, _make_shard, world=world, workers=options.workers, label=f"synthetic {like}")
    extra = kind.synthetic_files(out, info) if world.rank == 0 else {}
    manifest = mf.new_manifest(kind.name, kind.fields(info), seed, params, options.command, synthetic=True,
                               **info, **extra)
    return finish(out, jobs, records, manifest, world)


def _make_shard(job: ShardJob, out: Path) -> dict:
    w = job.work
    arrays = _kind(w["like"]).synthetic(w["n"], w["info"], np.random.default_rng(w["seed"]))
    return write_shard(out / job.file, arrays, job.source)
