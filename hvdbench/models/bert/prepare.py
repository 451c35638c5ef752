"""BERT pre-training data: text -> WordPiece ids -> next-sentence pairs with masked-LM -> HDF5.

    hvdbench prepare bert --src builtin:pydoc --out data/pydoc --vocab-size 4000
    hvdbench prepare bert --src wiki/part-00000 --src wiki/part-00001 --out data/wiki --vocab vocab.txt \\
        --max-seq-len 512 --max-predictions 76 --dupe-factor 10

Instances follow the published BERT recipe (Devlin et al. 2019; Google's create_pretraining_data is
the reference behaviour): each document is cut into chunks of whole sentences up to a target length
(the full length, or with probability `short_seq_prob` a random shorter one); a chunk splits at a
random sentence into A and B, and half the time B is replaced by text from another document (the
unused sentences go back to the pool; next_sentence_labels = 1 marks such a random B). The pair is
truncated to fit `[CLS] A [SEP] B [SEP]`, then 15 % of the tokens (never [CLS]/[SEP], at most
`max_predictions`) are chosen for prediction: 80 % become [MASK], 10 % a random token, 10 % stay.
The number chosen is 15 % of the length rounded at random up or down (the reference rounds to
nearest), so the masked fraction is 15 % in expectation for every length.

One input file -> one train and one val shard (made in parallel over files and MPI ranks); a seeded
`val_fraction` of each file's documents is held out for masked-LM accuracy. Fields and names are
MLPerf's: input_ids, input_mask, segment_ids, masked_lm_positions, masked_lm_ids, next_sentence_labels.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from hvdbench.data import manifest as mf
from hvdbench.data import text, vocab as vocab_mod
from hvdbench.data.parallel import PrepareOptions, ShardJob, World, finish, run_jobs, start
from hvdbench.data.shards import shard_name, write_shard
from hvdbench.errors import DatasetError


@dataclass(frozen=True)
class BertOptions:
    max_seq_len: int = 128
    max_predictions: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 5
    seed: int = 12345

    def check(self) -> None:
        if self.max_seq_len < 8:
            raise DatasetError(f"--max-seq-len {self.max_seq_len} is too short (at least 8)")
        if not 1 <= self.max_predictions <= self.max_seq_len - 3:
            raise DatasetError("--max-predictions must be between 1 and max-seq-len - 3")
        if not 0 < self.masked_lm_prob < 1 or not 0 <= self.short_seq_prob <= 1 or self.dupe_factor < 1:
            raise DatasetError("--masked-lm-prob must be in (0, 1), --short-seq-prob in [0, 1], --dupe-factor >= 1")


def bert_fields(max_seq_len: int, max_predictions: int) -> dict:
    seq, pred = (max_seq_len,), (max_predictions,)
    return {"input_ids": mf.field_spec(seq, "int32"), "input_mask": mf.field_spec(seq, "int32"),
            "segment_ids": mf.field_spec(seq, "int32"), "masked_lm_positions": mf.field_spec(pred, "int32"),
            "masked_lm_ids": mf.field_spec(pred, "int32"), "next_sentence_labels": mf.field_spec((), "int32")}


# A document is (tokens: int32 array, bounds: sentence k is tokens[bounds[k]:bounds[k+1]]).
Document = tuple[np.ndarray, np.ndarray]


def tokenize_documents(docs: list[list[str]], tok) -> list[Document]:
    out = []
    for doc in docs:
        ids = [np.asarray(e.ids, np.int32) for e in tok.encode_batch(doc, add_special_tokens=False)]
        ids = [s for s in ids if len(s)]
        if ids:
            out.append((np.concatenate(ids), np.cumsum([0] + [len(s) for s in ids])))
    return out


def document_pairs(docs: list[Document], index: int, opts: BertOptions, rng: random.Random):
    """Yield (A tokens, B tokens, is_random_next) for one document (the reference algorithm)."""
    tokens, bounds = docs[index]
    n_sent = len(bounds) - 1
    max_tokens = opts.max_seq_len - 3  # [CLS] A [SEP] B [SEP]
    target = rng.randint(2, max_tokens) if rng.random() < opts.short_seq_prob else max_tokens
    first, i = 0, 0  # the current chunk is sentences first..i
    while i < n_sent:
        if i == n_sent - 1 or bounds[i + 1] - bounds[first] >= target:
            chunk = i + 1 - first
            a_end = first + (rng.randint(1, chunk - 1) if chunk >= 2 else 1)
            a = tokens[bounds[first]:bounds[a_end]]
            if chunk == 1 or rng.random() < 0.5:
                random_next = True
                other = index
                for _ in range(10):  # another document, if there is one
                    other = rng.randint(0, len(docs) - 1)
                    if other != index:
                        break
                o_tokens, o_bounds = docs[other]
                start = rng.randint(0, len(o_bounds) - 2)
                want = o_bounds[start] + max(1, target - len(a))
                stop = min(len(o_bounds) - 1, int(np.searchsorted(o_bounds, want)))
                b = o_tokens[o_bounds[start]:o_bounds[max(stop, start + 1)]]
                i = a_end - 1  # the chunk's unused sentences start the next chunk
            else:
                random_next = False
                b = tokens[bounds[a_end]:bounds[i + 1]]
            a, b = truncate_pair(a, b, max_tokens, rng)
            if len(a) and len(b):
                yield a, b, random_next
            first = i + 1
        i += 1


def truncate_pair(a: np.ndarray, b: np.ndarray, max_tokens: int, rng: random.Random):
    """Trim the longer of A and B one token at a time, from the front or the back at random."""
    a_lo, a_hi, b_lo, b_hi = 0, len(a), 0, len(b)
    while (a_hi - a_lo) + (b_hi - b_lo) > max_tokens:
        if a_hi - a_lo > b_hi - b_lo:
            if rng.random() < 0.5:
                a_lo += 1
            else:
                a_hi -= 1
        elif rng.random() < 0.5:
            b_lo += 1
        else:
            b_hi -= 1
    return a[a_lo:a_hi], b[b_lo:b_hi]


def pairs_to_arrays(pairs: list, max_seq_len: int, cls: int, sep: int) -> dict[str, np.ndarray]:
    """[CLS] A [SEP] B [SEP], zero-padded; the masked-LM fields are filled by `mask_tokens`."""
    n = len(pairs)
    ids = np.zeros((n, max_seq_len), np.int32)
    seg = np.zeros((n, max_seq_len), np.int32)
    mask = np.zeros((n, max_seq_len), np.int32)
    nsp = np.zeros(n, np.int32)
    for k, (a, b, random_next) in enumerate(pairs):
        la, lb = len(a), len(b)
        ids[k, 0] = cls
        ids[k, 1:1 + la] = a
        ids[k, 1 + la] = sep
        ids[k, 2 + la:2 + la + lb] = b
        ids[k, 2 + la + lb] = sep
        seg[k, 2 + la:3 + la + lb] = 1
        mask[k, :3 + la + lb] = 1
        nsp[k] = random_next
    return {"input_ids": ids, "input_mask": mask, "segment_ids": seg, "next_sentence_labels": nsp}


def mask_tokens(arrays: dict[str, np.ndarray], opts: BertOptions, special: dict[str, int],
                replacements: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Choose and corrupt the masked-LM positions of every instance at once (vectorised)."""
    ids = arrays["input_ids"]
    n, length = ids.shape
    lengths = arrays["input_mask"].sum(1)
    candidate = (arrays["input_mask"] == 1) & (ids != special["cls"]) & (ids != special["sep"])
    expected = lengths * opts.masked_lm_prob
    count = np.floor(expected).astype(np.int64) + (rng.random(n) < expected - np.floor(expected))
    count = np.minimum(np.clip(count, 1, opts.max_predictions), candidate.sum(1))
    # A random order of each row's candidates: sort random keys, non-candidates last.
    keys = np.where(candidate, rng.random((n, length)), 2.0)
    order = np.argsort(keys, axis=1, kind="stable")[:, :opts.max_predictions]
    used = np.arange(opts.max_predictions)[None, :] < count[:, None]
    positions = np.sort(np.where(used, order, length), axis=1)  # ascending, padding (= length) last
    used = positions < length
    positions = np.where(used, positions, 0).astype(np.int32)
    rows = np.arange(n)[:, None]
    labels = np.where(used, ids[rows, positions], 0).astype(np.int32)
    roll = rng.random((n, opts.max_predictions))
    random_ids = replacements[rng.integers(0, len(replacements), (n, opts.max_predictions))]
    new = np.where(roll < 0.8, special["mask"], np.where(roll < 0.9, labels, random_ids))
    corrupted = ids.copy()
    corrupted[rows, positions] = np.where(used, new, ids[rows, positions])
    return {**arrays, "input_ids": corrupted, "masked_lm_positions": positions, "masked_lm_ids": labels}


def create_instances(docs: list[Document], opts: BertOptions, tokens: list[str], seed_key: str) -> dict:
    """All instances of a document set (dupe_factor passes, shuffled), as MLPerf-named arrays."""
    special = vocab_mod.special_ids(tokens)
    replacements = np.asarray(vocab_mod.ordinary_ids(tokens), np.int32)
    rng = random.Random(f"{opts.seed}/{seed_key}")
    nprng = np.random.default_rng(list(hashlib.sha256(f"{opts.seed}/{seed_key}".encode()).digest()[:16]))
    parts = []
    for _ in range(opts.dupe_factor):
        pairs = [p for index in range(len(docs)) for p in document_pairs(docs, index, opts, rng)]
        if pairs:
            parts.append(mask_tokens(pairs_to_arrays(pairs, opts.max_seq_len, special["cls"], special["sep"]),
                                     opts, special, replacements, nprng))
    fields = bert_fields(opts.max_seq_len, opts.max_predictions)
    if not parts:
        return {k: np.zeros((0, *f["shape"]), f["dtype"]) for k, f in fields.items()}
    order = nprng.permutation(sum(len(p["input_ids"]) for p in parts))
    return {k: np.concatenate([p[k] for p in parts])[order] for k in fields}


def split_documents(docs: list, val_fraction: float, seed_key: str) -> tuple[list, list]:
    """Seeded hold-out of whole documents (at least two when there is a val split, for random B's)."""
    if val_fraction <= 0 or len(docs) < 4:
        return docs, []
    k = min(len(docs) - 2, max(2, round(val_fraction * len(docs))))
    held = set(random.Random(f"val/{seed_key}").sample(range(len(docs)), k))
    return [d for i, d in enumerate(docs) if i not in held], [d for i, d in enumerate(docs) if i in held]


def prepare_bert(sources: list[str], out: Path, *, vocab: Path | None = None, vocab_size: int | None = None,
                 lowercase: bool = True, opts: BertOptions = BertOptions(), val_fraction: float = 0.05,
                 options: PrepareOptions = PrepareOptions()) -> dict:
    out = Path(out)
    opts.check()
    if (vocab is None) == (vocab_size is None):
        raise DatasetError("give exactly one of --vocab FILE and --vocab-size N")
    world = World.detect()
    sources = world.on_root(lambda: text.expand_sources(list(sources)))
    params = {"src": [s if s.startswith("builtin:") else str(Path(s).resolve()) for s in sources],
              "vocab": str(Path(vocab).resolve()) if vocab else None, "vocab_size": vocab_size,
              "lowercase": lowercase, "val_fraction": val_fraction, **asdict(opts)}
    start(out, "bert", params, options.overwrite, world)
    vocab_path = out / "vocab.txt"

    def make_vocab() -> str:
        if vocab is not None:
            vocab_mod.read_vocab(vocab)  # a clear error for a file that is not a BERT vocabulary
            if Path(vocab).resolve() != vocab_path.resolve():
                shutil.copyfile(vocab, vocab_path)
        else:
            vocab_mod.train_vocab(text.iter_sentences(sources), vocab_size, lowercase, vocab_path)
        return vocab_mod.vocab_sha256(vocab_path)

    sha = world.on_root(make_vocab)
    tokens = vocab_mod.read_vocab(vocab_path)
    ph = mf.params_hash(params)
    jobs = []
    for k, src in enumerate(sources):
        stamp = [] if src.startswith("builtin:") else [os.stat(src).st_size, os.stat(src).st_mtime_ns]
        source = hashlib.sha256(json.dumps([ph, sha, k, src, stamp]).encode()).hexdigest()
        work = {"src": src, "key": str(k), "vocab": str(vocab_path), "lowercase": lowercase,
                "opts": asdict(opts), "val_fraction": val_fraction}
        jobs.append(ShardJob([(split, shard_name(split, k, len(sources))) for split in ("train", "val")],
                             source, work))
    records = run_jobs(out, jobs, _make_shards, world=world, workers=options.workers, label="bert")
    manifest = mf.new_manifest("bert", bert_fields(opts.max_seq_len, opts.max_predictions), opts.seed, params,
                               options.command, vocab_size=len(tokens), vocab_sha256=sha, vocab_file="vocab.txt",
                               max_seq_len=opts.max_seq_len, max_predictions=opts.max_predictions,
                               lowercase=lowercase,
                               documents=sum(r["info"].get("documents", 0) for r in records.values()))
    return finish(out, jobs, records, manifest, world)


def _make_shards(job: ShardJob, out: Path) -> list[dict]:
    w = job.work
    opts = BertOptions(**w["opts"])
    tokens = vocab_mod.read_vocab(Path(w["vocab"]))
    docs = tokenize_documents(text.read_documents(w["src"]), vocab_mod.tokenizer(Path(w["vocab"]), w["lowercase"]))
    train, val = split_documents(docs, w["val_fraction"], w["key"])
    records = []
    for (split, file), split_docs in zip(job.outputs, (train, val)):
        arrays = create_instances(split_docs, opts, tokens, f"{w['key']}/{split}")
        records.append(write_shard(out / file, arrays, job.source, info={"documents": len(split_docs)}))
    return records
