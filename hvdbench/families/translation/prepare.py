"""Parallel text -> shared byte-level BPE -> length-bucketed HDF5 shards of the `translation` kind.

    hvdbench prepare translation --src builtin:gettext-de --vocab-size 4000 --out data/gettext-de
    hvdbench prepare translation --src-lang en --tgt-lang de --src train.en --tgt train.de \\
        --val-src newstest2014.en --val-tgt newstest2014.de --vocab-size 33708 --out data/wmt14

Sources: two aligned files in the WMT layout (line k of --src translates line k of --tgt; their
line counts must agree), or `builtin:gettext-de` (catalogs.py: the German message catalogs of a
fixed list of Debian packages). Pairs with an empty side are dropped. The validation split is
--val-src/--val-tgt when given, else a seeded `val_fraction` of the pairs.

The vocabulary is trained on the training pairs (both languages) and written beside the shards as
tokenizer.json (what encodes and decodes) and vocab.txt (its tokens, one per line, id = line
number: what `prepare verify` counts), both sha256s in the manifest. Every sentence becomes its subwords plus EOS; pairs
longer than `max_len` on either side are dropped (counted in the manifest), never cut, so the
decoded target is exactly the reference text BLEU scores against.

Training pairs are sorted by length, cut into buckets of `bucket_samples` and the buckets written
in seeded random order (the readers then draw batches of similar length; the model trims their
common padding). Validation pairs are sorted by source length (evaluation decodes batches of
similar length). Rank 0 reads, trains the vocabulary and encodes; the arrays go to a hidden
folder in --out that every rank maps to write its share of the shards, and is removed at the end.
"""

from __future__ import annotations

import functools
import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hvdbench.data import manifest as mf
from hvdbench.data.parallel import PrepareOptions, World, finish, run_jobs, start
from hvdbench.data.staged import staged_jobs, write_staged
from hvdbench.data.text import hold_out, read_utf8
from hvdbench.errors import DatasetError
from hvdbench.families.translation import catalogs, tokens
from hvdbench.families.translation.data import TRANSLATION
from hvdbench.families.translation.tokens import EOS, TOKENIZER_FILE, VOCAB_FILE
from hvdbench.files import file_sha256

STAGING = ".translation-arrays"
FIELDS = ("src", "tgt", "src_len", "tgt_len")


@dataclass(frozen=True)
class TranslationOptions:
    """The knobs of `prepare_translation` beyond its input files: the languages, the shared BPE's
    size, subwords per sentence with EOS (longer pairs are dropped), the share held out without
    --val-src, training pairs of similar length written together, shard size and seed.
    `hvdbench prepare translation --src builtin:gettext-de --vocab-size 4000 --max-len 64 --out data/g`."""

    src_lang: str = "en"
    tgt_lang: str = "de"
    vocab_size: int = 33708
    max_len: int = 128
    val_fraction: float = 0.05
    bucket_samples: int = 128
    samples_per_shard: int = 65536
    seed: int = 0


def read_parallel(src: Path, tgt: Path) -> list[tuple[str, str]]:
    """Aligned (source, target) lines; one-line DatasetError naming both files when they differ
    in length or cannot be read as UTF-8."""
    sides = [read_utf8(path).splitlines() for path in (src, tgt)]
    if len(sides[0]) != len(sides[1]):
        raise DatasetError(f"parallel files are not aligned: {src} has {len(sides[0])} lines, {tgt} has "
                           f"{len(sides[1])} (line k of one must translate line k of the other)")
    return [(a.strip(), b.strip()) for a, b in zip(*sides)]


def load_corpus(src: str, tgt: str | None, src_lang: str, tgt_lang: str) -> dict:
    """{"pairs", "source": what to record about where they came from, "sha256"}."""
    if src == catalogs.BUILTIN_GETTEXT_DE:
        if tgt is not None:
            raise DatasetError(f"--tgt does not go with --src {src} (it holds both sides)")
        if (src_lang, tgt_lang) != ("en", "de"):
            raise DatasetError(f"{src} is English->German; got --src-lang {src_lang} --tgt-lang {tgt_lang}")
        found = catalogs.catalog_pairs()
        return {"pairs": found["pairs"], "sha256": found["sha256"],
                "source": {"corpus": src, "packages": found["versions"], "catalogs": found["catalogs"],
                           "skipped_catalogs": found["skipped"], "locale_dir": str(catalogs.LOCALE_DIR)}}
    if src.startswith("builtin:"):
        raise DatasetError(f"unknown built-in corpus {src!r}; the one built in is {catalogs.BUILTIN_GETTEXT_DE}")
    if tgt is None:
        raise DatasetError(f"--src {src} needs --tgt (the aligned translation file)")
    pairs = read_parallel(Path(src), Path(tgt))
    h = hashlib.sha256()
    for path in (src, tgt):
        h.update(Path(path).read_bytes())
    return {"pairs": pairs, "sha256": h.hexdigest(),
            "source": {"corpus": "files", "src_file": str(Path(src).resolve()),
                       "tgt_file": str(Path(tgt).resolve())}}


def _hash_pairs(pairs) -> str:
    h = hashlib.sha256()
    for a, b in pairs:
        h.update(f"{a}\t{b}\n".encode())
    return h.hexdigest()


def _encode(tok, pairs, max_len: int) -> tuple[dict[str, np.ndarray], int]:
    """Padded id arrays of the pairs that fit (EOS appended); and how many did not."""
    src = tokens.encode(tok, [a for a, _ in pairs])
    tgt = tokens.encode(tok, [b for _, b in pairs])
    keep = [k for k in range(len(pairs)) if 0 < len(src[k]) < max_len and 0 < len(tgt[k]) < max_len]
    out = {f: np.zeros((len(keep), max_len), np.int32) for f in ("src", "tgt")}
    for side, ids in (("src", src), ("tgt", tgt)):
        lengths = np.zeros(len(keep), np.int32)
        for row, k in enumerate(keep):
            n = len(ids[k])
            out[side][row, :n] = ids[k]
            out[side][row, n] = EOS
            lengths[row] = n + 1
        out[f"{side}_len"] = lengths
    return out, len(pairs) - len(keep)


def _bucket_order(arrays: dict[str, np.ndarray], bucket: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted by (longer side, source length), cut into buckets, buckets in random order."""
    longer = np.maximum(arrays["src_len"], arrays["tgt_len"])
    order = np.lexsort((arrays["src_len"], longer))
    buckets = [order[i:i + bucket] for i in range(0, len(order), bucket)]
    return np.concatenate([buckets[i] for i in rng.permutation(len(buckets))]) if buckets else order


def prepare_translation(src: str, out: Path, *, tgt: str | None = None, val_src: str | None = None,
                        val_tgt: str | None = None, opts: TranslationOptions = TranslationOptions(),
                        options: PrepareOptions = PrepareOptions()) -> dict:
    """Prepare parallel text (`tgt` aligned with `src`; `val_src`/`val_tgt`, else a held-out share)
    into `out`; returns the manifest (on every rank)."""
    out = Path(out)
    if opts.max_len < 2:
        raise DatasetError(f"--max-len must be at least 2, got {opts.max_len}")
    if (val_src is None) != (val_tgt is None):
        raise DatasetError("give both --val-src and --val-tgt, or neither")
    if val_src is None and not 0 < opts.val_fraction < 1:
        raise DatasetError(f"--val-fraction must be between 0 and 1, got {opts.val_fraction}")
    world = World.detect()

    def resolved(path):
        return None if path is None or path.startswith("builtin:") else str(Path(path).resolve())

    params = {"src": src if src.startswith("builtin:") else resolved(src), "tgt": resolved(tgt),
              "src_lang": opts.src_lang, "tgt_lang": opts.tgt_lang, "val_src": resolved(val_src),
              "val_tgt": resolved(val_tgt), "vocab_size": opts.vocab_size, "max_len": opts.max_len,
              "val_fraction": None if val_src else opts.val_fraction, "bucket_samples": opts.bucket_samples,
              "samples_per_shard": opts.samples_per_shard, "seed": opts.seed}
    start(out, TRANSLATION.name, params, options.overwrite, world)
    staging = out / STAGING

    def build():
        corpus = load_corpus(src, tgt, opts.src_lang, opts.tgt_lang)
        pairs = [(a, b) for a, b in corpus["pairs"] if a and b]
        if val_src is not None:
            val = [(a, b) for a, b in read_parallel(Path(val_src), Path(val_tgt)) if a and b]
            train = pairs
            corpus["sha256"] = hashlib.sha256(
                (corpus["sha256"] + _hash_pairs(val)).encode()).hexdigest()
        else:
            train, val = hold_out(pairs, opts.val_fraction, opts.seed, str(src), "sentence pairs")
        size = tokens.train_tokenizer((s for p in train for s in p), opts.vocab_size, out / TOKENIZER_FILE)
        tok = tokens.load_tokenizer(out / TOKENIZER_FILE)
        tokens.write_vocab_list(tok, out / VOCAB_FILE)
        vocab_sha = file_sha256(out / TOKENIZER_FILE)
        staging.mkdir(exist_ok=True)
        counts, dropped = {}, {}
        for split, split_pairs in (("train", train), ("val", val)):
            arrays, dropped[split] = _encode(tok, split_pairs, opts.max_len)
            if split == "train":
                order = _bucket_order(arrays, opts.bucket_samples, np.random.default_rng([opts.seed, 2]))
            else:
                order = np.lexsort((arrays["tgt_len"], arrays["src_len"]))
            counts[split] = len(order)
            for f in FIELDS:
                np.save(staging / f"{split}-{f}.npy", arrays[f][order])
        if counts["train"] == 0 or counts["val"] == 0:
            raise DatasetError(f"{src}: no {'training' if counts['train'] == 0 else 'validation'} pair "
                               f"fits --max-len {opts.max_len}")
        return {"counts": counts, "dropped": dropped, "vocab_size": size, "tokenizer_sha256": vocab_sha,
                "vocab_sha256": file_sha256(out / VOCAB_FILE),
                "corpus_sha256": corpus["sha256"], "source": corpus["source"], "pairs": len(pairs)}

    facts = world.on_root(build)
    jobs = staged_jobs(staging, facts["counts"], opts.samples_per_shard,
                       key=[mf.params_hash(params), facts["corpus_sha256"], facts["tokenizer_sha256"]])
    records = run_jobs(out, jobs, functools.partial(write_staged, FIELDS), world=world, workers=1,
                       label="translation")
    manifest = mf.new_manifest(
        TRANSLATION.name, TRANSLATION.fields({"max_len": opts.max_len}), opts.seed, params, options.command,
        vocab_size=facts["vocab_size"], max_len=opts.max_len, src_lang=opts.src_lang, tgt_lang=opts.tgt_lang,
        tokenizer_file=TOKENIZER_FILE, tokenizer_sha256=facts["tokenizer_sha256"],
        tokenizer="byte-level BPE (tokenizers)", vocab_file=VOCAB_FILE, vocab_sha256=facts["vocab_sha256"],
        special_tokens=tokens.SPECIAL_TOKENS, corpus_sha256=facts["corpus_sha256"],
        corpus_pairs=facts["pairs"], dropped_too_long=facts["dropped"], bucket_samples=opts.bucket_samples,
        **facts["source"])
    manifest = finish(out, jobs, records, manifest, world)
    if world.rank == 0:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest

