"""Seeded random datasets in the real formats, of any size, for storage and throughput tests.

    hvdbench prepare synthetic --like images --samples 100000 --size 224 --out /scratch/synth-images
    hvdbench prepare synthetic --like bert --samples 1000000 --max-seq-len 512 --out /scratch/synth-bert

Images: uniform random pixels and labels. BERT: random ids from a synthetic vocabulary with the real
structure ([CLS] A [SEP] B [SEP], 10 % of instances shorter than the maximum, masked-LM and
next-sentence fields made exactly as `prepare bert` makes them), so `prepare pack`, `verify` and the
readers treat it like real text. Shards are made in parallel (workers, MPI ranks) and resumably.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np

from hvdbench.data import manifest as mf
from hvdbench.data.bert import BertOptions, bert_fields, mask_tokens
from hvdbench.data.parallel import ShardJob, World, finish, run_jobs, start
from hvdbench.data.shards import shard_name, write_shard
from hvdbench.data.vocab import SPECIAL_TOKENS, special_ids, vocab_sha256, write_vocab
from hvdbench.errors import DatasetError

LIKES = ("images", "bert")


def synthetic_vocab(vocab_size: int) -> list[str]:
    return SPECIAL_TOKENS + [f"tok{i}" for i in range(len(SPECIAL_TOKENS), vocab_size)]


def image_arrays(n: int, size: int, num_classes: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"images": rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8),
            "labels": rng.integers(0, num_classes, n, dtype=np.int64)}


def bert_arrays(n: int, vocab_size: int, opts: BertOptions, rng: np.random.Generator) -> dict[str, np.ndarray]:
    length, special = opts.max_seq_len, special_ids(synthetic_vocab(len(SPECIAL_TOKENS)))
    lengths = np.where(rng.random(n) < opts.short_seq_prob, rng.integers(8, length + 1, n), length)
    a_len = rng.integers(1, lengths - 2)  # A and B both get at least one token
    pos = np.arange(length)[None, :]
    inside = pos < lengths[:, None]
    ids = np.where(inside, rng.integers(len(SPECIAL_TOKENS), vocab_size, (n, length)), 0)
    ids[:, 0] = special["cls"]
    ids[pos == (1 + a_len)[:, None]] = special["sep"]
    ids[pos == (lengths - 1)[:, None]] = special["sep"]
    arrays = {"input_ids": ids.astype(np.int32), "input_mask": inside.astype(np.int32),
              "segment_ids": (inside & (pos >= (2 + a_len)[:, None])).astype(np.int32),
              "next_sentence_labels": rng.integers(0, 2, n).astype(np.int32)}
    replacements = np.arange(len(SPECIAL_TOKENS), vocab_size, dtype=np.int32)
    return mask_tokens(arrays, opts, special, replacements, rng)


def prepare_synthetic(like: str, samples: int, out: Path, *, size: int = 224, num_classes: int = 1000,
                      vocab_size: int = 30522, max_seq_len: int = 128, max_predictions: int = 20,
                      samples_per_shard: int | None = None, val_fraction: float = 0.05, seed: int = 0,
                      workers: int | None = None, overwrite: bool = False, command: str | None = None) -> dict:
    out = Path(out)
    if like not in LIKES:
        raise DatasetError(f"--like must be one of {', '.join(LIKES)}, not {like!r}")
    if samples < 1 or not 0 <= val_fraction < 1:
        raise DatasetError("--samples must be positive and --val-fraction in [0, 1)")
    per_shard = samples_per_shard or (1024 if like == "images" else 32768)
    opts = BertOptions(max_seq_len=max_seq_len, max_predictions=max_predictions, seed=seed)
    if like == "bert":
        opts.check()
        if vocab_size <= len(SPECIAL_TOKENS):
            raise DatasetError(f"--vocab-size must exceed {len(SPECIAL_TOKENS)}")
    world = World.detect()
    params = {"like": like, "samples": samples, "samples_per_shard": per_shard, "val_fraction": val_fraction,
              "seed": seed, **({"size": size, "num_classes": num_classes} if like == "images" else
                               {"vocab_size": vocab_size, "max_seq_len": max_seq_len,
                                "max_predictions": max_predictions})}
    start(out, "images" if like == "images" else "bert", params, overwrite, world)
    n_val = round(samples * val_fraction)
    ph = mf.params_hash(params)
    jobs = []
    for s, (split, n) in enumerate((("train", samples - n_val), ("val", n_val))):
        count = math.ceil(n / per_shard)
        for k in range(count):
            work = {"like": like, "n": min(per_shard, n - k * per_shard), "seed": [seed, s, k], "params": params}
            source = hashlib.sha256(f"{ph}/{split}/{k}".encode()).hexdigest()
            jobs.append(ShardJob.single(split, shard_name(split, k, count), source, work))
    records = run_jobs(out, jobs, _make_shard, world=world, workers=workers, label=f"synthetic {like}")
    if like == "images":
        fields = {"images": mf.field_spec((size, size, 3), "uint8"), "labels": mf.field_spec((), "int64")}
        extra = {"num_classes": num_classes, "class_names": [str(c) for c in range(num_classes)], "image_size": size}
    else:
        if world.rank == 0:
            write_vocab(out / "vocab.txt", synthetic_vocab(vocab_size))
        fields = bert_fields(max_seq_len, max_predictions)
        extra = {"vocab_size": vocab_size, "vocab_sha256": vocab_sha256(out / "vocab.txt") if world.rank == 0 else "",
                 "vocab_file": "vocab.txt", "max_seq_len": max_seq_len, "max_predictions": max_predictions}
    manifest = mf.new_manifest("images" if like == "images" else "bert", fields, seed, params, command,
                               synthetic=True, **extra)
    return finish(out, jobs, records, manifest, world)


def _make_shard(job: ShardJob, out: Path) -> dict:
    w, p = job.work, job.work["params"]
    rng = np.random.default_rng(w["seed"])
    if w["like"] == "images":
        arrays = image_arrays(w["n"], p["size"], p["num_classes"], rng)
    else:
        opts = BertOptions(max_seq_len=p["max_seq_len"], max_predictions=p["max_predictions"], seed=p["seed"])
        arrays = bert_arrays(w["n"], p["vocab_size"], opts, rng)
    return write_shard(out / job.file, arrays, job.source)
