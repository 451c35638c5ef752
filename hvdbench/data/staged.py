"""Shards cut from arrays rank 0 has staged: the common tail of the text prepares (translation,
summaries), which tokenise the whole corpus once, save each split's fields as
STAGING/<split>-<field>.npy in their final order, and then write them out in shard-sized slices.

    facts = world.on_root(build)                       # build() saves the staged arrays
    jobs = staged_jobs(staging, facts["counts"], samples_per_shard, key=[params_hash, corpus_sha256])
    records = run_jobs(out, jobs, functools.partial(write_staged, FIELDS), world=world, workers=1)
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np

from hvdbench.data.parallel import ShardJob
from hvdbench.data.shards import shard_name, write_shard


def staged_jobs(staging: Path, counts: dict[str, int], samples_per_shard: int, key: list) -> list[ShardJob]:
    """One job per slice of `samples_per_shard` rows of each split; a slice's source hash is over
    `key` (what decides the rows: parameters, corpus, tokenizer) and the slice itself, so a rerun
    keeps the shards whose rows are unchanged."""
    jobs = []
    for split, n in counts.items():
        count = math.ceil(n / samples_per_shard)
        for k in range(count):
            lo, hi = k * samples_per_shard, min(n, (k + 1) * samples_per_shard)
            source = hashlib.sha256(json.dumps([*key, split, lo, hi]).encode()).hexdigest()
            jobs.append(ShardJob.single(split, shard_name(split, k, count), source,
                                        {"staging": str(staging), "split": split, "lo": lo, "hi": hi}))
    return jobs


def write_staged(fields: tuple[str, ...], job: ShardJob, out: Path) -> dict:
    """Write one staged slice as a shard (the maker `run_jobs` calls, with `fields` bound)."""
    w = job.work
    staging = Path(w["staging"])
    arrays = {f: np.load(staging / f"{w['split']}-{f}.npy", mmap_mode="r")[w["lo"]:w["hi"]] for f in fields}
    return write_shard(out / job.file, {f: np.ascontiguousarray(a) for f, a in arrays.items()}, job.source)
