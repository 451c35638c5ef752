"""`prepare_c4`: C4's JSON lines -> `lm_tokens` shards, as MLPerf's llama31_8b and gpt_oss_20b
preprocess them (Megatron: every document's tokens, an end-of-document token after each, the
stream cut into sequences of seq_len + 1 tokens).

    hvdbench prepare c4 --src builtin:pydoc --out data/c4-debug
    hvdbench prepare c4 --src c4/en --val-src c4-validation-91205-samples.en.json.gz \\
        --tokenizer llama-3.1-8b/tokenizer.json --out data/c4
    mpirun -np 8 hvdbench prepare c4 --src c4/en ... --out data/c4     # ranks split the files

Sources: C4's files (`{"text": ..., "timestamp": ..., "url": ...}` per line, gzip or plain: the
first bytes decide), folders of them (their `*.json*` files, sorted; only the `c4-train.*` ones when
there are any, since C4's en/ folder holds its validation files too), or `builtin:pydoc`, the
English text CPython ships (`pydoc_data.topics`, what `help()` shows: 79 topics, ~465k characters),
one document per topic, which stands in for C4 where nothing may be downloaded (the manifest says
so). A line that is not a JSON object with a string `text` (or not UTF-8) is counted and skipped,
and the first few are named (file:line) in the manifest and in the command's summary; `strict`
makes the first one an error naming it. An empty document (no text but whitespace) is skipped and
counted: it would add a lone end-of-document token. A UTF-8 byte order mark before the first line
is not text. Before the output folder is made: a source with no document at all (broken JSON, a
binary file, invalid UTF-8, empty texts) is an error saying which and naming its first bad line,
and a file given twice, or to both --src and --val-src (validation text trained on), is refused.

Tokens: a Hugging Face `tokenizers` file given with `tokenizer` (Llama 3.1's tokenizer.json, the
references'; gated, so never fetched), or a byte-level BPE of `vocab_size` tokens trained on the
training documents (tokenizer.py; the first `tokenizer_docs` of them). It is copied or written beside
the shards as tokenizer.json.

Splits: with `val_src`, the validation sequences are the first `val_sequences` full sequences of
those files' documents in order (MLPerf: the first 1,024 of c4-validation-91205-samples, not
shuffled). Without it, a seeded `val_fraction` of the first source's documents is held out
(hvdbench.data.text.hold_out: whole documents, so no validation text is trained on) and its
sequences, up to `val_sequences`, are the validation split. Every other document trains: each
source file is one job (its own shard: C4's train files are ~356k documents, ~21k sequences of
8,192 tokens, ~700 MB), its stream cut on its own (the tail that does not fill a sequence, under
one sequence per file, is dropped and counted) and its sequences written in seeded random order.

Work and resume: rank 0 makes the tokenizer; then ranks, and worker processes on each, make the
shards (hvdbench/data/parallel.py), each named by a hash of the options, the tokenizer and its
input file's path, size and modification time, so a rerun keeps every finished shard. A trained
tokenizer is trained again on a rerun: `tokenizers`' trainer is reproducible, so it is the same file.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import multiprocessing
import os
import shutil
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from hvdbench.data import manifest as mf
from hvdbench.data import text as text_sources
from hvdbench.data.parallel import PrepareOptions, ShardJob, World, finish, run_jobs, start
from hvdbench.data.shards import shard_name, write_shard
from hvdbench.data.text import BUILTIN_PYDOC, hold_out
from hvdbench.errors import DatasetError
from hvdbench.families.lm import tokenizer as tk
from hvdbench.families.lm.data import LM_TOKENS
from hvdbench.files import file_sha256

BUILTIN_NOTE = ("builtin:pydoc: CPython's own documentation (pydoc_data.topics, the text help() shows) stands in "
                "for C4 here: real English, shipped with Python, no download. It is not C4, and targets "
                "measured on it are not MLPerf's")
# Sizes where the user gives none: C4's (the references': 8,192-token sequences, 1,024 of them to
# evaluate on) and the built-in text's (~116k tokens: 256-token sequences leave ~450 to train on).
DEFAULTS = {"files": {"seq_len": 8192, "vocab_size": 32000},
            "builtin": {"seq_len": 256, "vocab_size": 2048}}
VAL_SEQUENCES = 1024
TOKENIZER_DOCS = 100_000


@dataclass(frozen=True)
class C4Options:
    """The knobs of `prepare_c4` beyond its inputs (`src`, a given `tokenizer`, `val_src`): tokens per
    sequence and the trained BPE's size (None: DEFAULTS, by builtin:pydoc or files), the documents it
    is trained on, the end-of-document token (None: the tokenizer's own), the validation sequences
    kept, the share held out without `val_src`, `strict` on bad lines, and the seed.
    `hvdbench prepare c4 --src builtin:pydoc --seq-len 256 --val-fraction 0.1 --out data/c4-debug`."""

    seq_len: int | None = None
    vocab_size: int | None = None
    tokenizer_docs: int = TOKENIZER_DOCS
    eos_token: str | None = None
    val_sequences: int = VAL_SEQUENCES
    val_fraction: float = 0.1
    strict: bool = False
    seed: int = 0
BAD_NAMED = 5  # bad lines named in the manifest
ENCODE_CHUNK = 2048  # documents tokenized per call
GZIP_MAGIC = b"\x1f\x8b"
C4_TRAIN_PREFIX = "c4-train."


# --- reading documents -----------------------------------------------------------------------------

def json_files(files: list[Path]) -> list[Path]:
    """A folder's C4 files: its *.json* files; of C4's en/ folder, which holds both splits
    (c4-train.*-of-01024 and c4-validation.*-of-00008), the training ones (the validation ones: --val-src)."""
    files = [p for p in files if ".json" in p.name]
    return [p for p in files if p.name.startswith(C4_TRAIN_PREFIX)] or files


def expand_sources(sources: list[str], what: str = "--src") -> list[str]:
    """`builtin:pydoc` (alone), files, and folders (their C4 files, sorted); DatasetError for a
    missing path, an unknown built-in or a folder without C4 files."""
    out = text_sources.expand_sources(sources, what, json_files, "*.json, *.jsonl or *.json.gz files")
    if BUILTIN_PYDOC in out and len(out) > 1:
        raise DatasetError(f"{BUILTIN_PYDOC} stands alone: give it or files, not both ({what})")
    return out


def identity(source: str) -> list:
    """What decides a source's content for resume: the built-in text's Python version, a file's
    path, size and modification time."""
    if source == BUILTIN_PYDOC:
        return [source, sys.version.split()[0]]
    st = os.stat(source)
    return [str(Path(source).resolve()), st.st_size, st.st_mtime_ns]


class Counts:
    """What reading a source met: documents, empty ones, bad lines (the first few named)."""

    def __init__(self):
        self.documents = self.empty = self.bad = 0
        self.bad_first: list[str] = []

    def bad_line(self, where: str, why: str, strict: bool) -> None:
        if strict:
            raise DatasetError(f"{where}: {why} (without --strict such lines are counted and skipped)")
        self.bad += 1
        if len(self.bad_first) < BAD_NAMED:
            self.bad_first.append(f"{where}: {why}")

    def as_dict(self) -> dict:
        return {"documents": self.documents, "empty_documents": self.empty, "bad_lines": self.bad,
                "bad_first": self.bad_first}


def pydoc_texts() -> list[str]:
    from pydoc_data.topics import topics

    return [topics[name] for name in sorted(topics)]


def _lines(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as probe:
        gz = probe.read(2) == GZIP_MAGIC
    opener = gzip.open if gz else open
    try:
        with opener(path, "rb") as f:
            yield from f
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise DatasetError(f"{path}: damaged gzip file ({e}); download it again") from None


def documents(source: str, counts: Counts, strict: bool = False) -> Iterator[str]:
    """The texts of a source's documents in order; empty ones and bad lines counted in `counts`."""
    if source == BUILTIN_PYDOC:
        for text in pydoc_texts():
            if text.strip():
                counts.documents += 1
                yield text
            else:
                counts.empty += 1
        return
    for number, raw in enumerate(_lines(Path(source)), 1):
        if not raw.strip():
            continue  # a blank line is no document (a trailing newline, say)
        where = f"{source}:{number}"
        try:  # a byte order mark before the first line (editors on Windows write one) is no text
            row = json.loads(raw.decode("utf-8-sig" if number == 1 else "utf-8"))
        except UnicodeDecodeError as e:
            counts.bad_line(where, f"not UTF-8 (byte {e.start})", strict)
            continue
        except ValueError:
            counts.bad_line(where, "not a JSON object", strict)
            continue
        if not isinstance(row, dict) or not isinstance(row.get("text"), str):
            counts.bad_line(where, "no string 'text' (C4's layout: {\"text\": ..., \"url\": ...})", strict)
            continue
        if not row["text"].strip():
            counts.empty += 1
            continue
        counts.documents += 1
        yield row["text"]


def no_documents(source: str, counts: Counts) -> str:
    """Why a source gave no document at all, in one line naming the file and its first bad line."""
    said = []
    if counts.bad:
        first = counts.bad_first[0].removeprefix(f"{source}:")
        said.append(f"{counts.bad:,} line(s) not read, the first line {first}")
    if counts.empty:
        said.append(f"{counts.empty:,} empty document(s) (only whitespace in 'text')")
    return f"{source}: no documents in it" + (": " + "; ".join(said) if said else " (no lines but blank ones)")


def check_sources(sources: list[str], strict: bool, hold: float | None = None) -> None:
    """Before the output folder is made: each source yields a document (reading stops at its first),
    so a file of broken JSON, binary bytes, invalid UTF-8 or empty texts is named with what is wrong;
    with `hold` (the validation fraction held out of the first source), that source has enough
    documents to hold it out (reading stops at as many as that needs)."""
    for k, source in enumerate(sources):
        counts = Counts()
        docs = documents(source, counts, strict)
        if source != BUILTIN_PYDOC and next(docs, None) is None:
            raise DatasetError(no_documents(source, counts))
        if k == 0 and hold is not None:
            need = next(n for n in itertools.count(2) if n - max(1, round(hold * n)) >= 1)
            hold_out(list(itertools.islice(documents(source, Counts(), strict), need)), hold, 0, source,
                     what="documents")  # the error it gives when there are too few


def held_out(source: str, val_fraction: float, seed: int, strict: bool) -> tuple[list[str], list[str], Counts]:
    """(train, val) documents of the first source: a seeded `val_fraction` of whole documents held out."""
    counts = Counts()
    docs = list(documents(source, counts, strict))
    train, val = hold_out(docs, val_fraction, seed, source, what="documents")
    return train, val, counts


# --- tokens ------------------------------------------------------------------------------------------

def token_stream(tok, texts, eos: int, stop_at: int | None = None) -> np.ndarray:
    """Every text's tokens followed by `eos`, end to end (int32); with `stop_at`, reading stops once
    that many tokens are there (a validation split needs only its first sequences)."""
    parts, have, chunk = [], 0, []
    eos_arr = np.asarray([eos], np.int32)

    def flush():
        nonlocal have
        for ids in tk.encode(tok, chunk):
            parts.extend((ids, eos_arr))
            have += len(ids) + 1
        chunk.clear()

    for text in texts:
        chunk.append(text)
        if len(chunk) >= ENCODE_CHUNK:
            flush()
            if stop_at is not None and have >= stop_at:
                break
    if chunk and (stop_at is None or have < stop_at):
        flush()
    return np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)


def cut(stream: np.ndarray, seq_len: int) -> tuple[np.ndarray, int]:
    """(n, seq_len + 1) sequences of the stream, consecutive ones sharing one token (Megatron's GPT
    dataset: sequence i is tokens i*seq_len .. (i+1)*seq_len); and the tokens left over at the end."""
    n = max(0, (len(stream) - 1) // seq_len)
    index = np.arange(n)[:, None] * seq_len + np.arange(seq_len + 1)[None, :]
    return stream[index] if n else np.zeros((0, seq_len + 1), np.int32), len(stream) - n * seq_len - (1 if n else 0)


# --- the shards -----------------------------------------------------------------------------------

def make_shard(job: ShardJob, out: Path) -> dict:
    """One job (the maker `run_jobs` calls): a source file's training sequences, or the validation
    split."""
    if multiprocessing.parent_process() is not None:  # a worker process: its siblings have the other cores
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    w = job.work
    tok = tk.load(out / tk.TOKENIZER_FILE)
    seq_len, eos, strict = w["seq_len"], w["eos_id"], w["strict"]
    if w["split"] == "val":
        return _val_shard(job, out, tok, w)
    if w["hold_out"]:
        texts, _, counts = held_out(w["source"], w["val_fraction"], w["seed"], strict)
        counts.documents = len(texts)  # the held-out ones are the validation split's
    else:
        counts = Counts()
        texts = documents(w["source"], counts, strict)
    stream = token_stream(tok, texts, eos)
    sequences, tail = cut(stream, seq_len)
    if len(sequences) == 0:
        raise DatasetError(f"{w['source']}: {len(stream):,} tokens of training documents, fewer than one sequence "
                           f"of {seq_len} + 1 (--seq-len)")
    order = np.random.default_rng([w["seed"], 2, w["index"]]).permutation(len(sequences))
    info = {"source": w["source"], **counts.as_dict(), "tokens": int(len(stream)), "sequences": len(sequences),
            "tail_tokens": int(tail)}
    return write_shard(out / job.file, {"tokens": sequences[order]}, job.source, info=info)


def _val_shard(job: ShardJob, out: Path, tok, w: dict) -> dict:
    seq_len, want = w["seq_len"], w["val_sequences"]
    counts = Counts()
    if w["val_src"]:
        texts = (t for src in w["val_src"] for t in documents(src, counts, w["strict"]))
        stream = token_stream(tok, texts, w["eos_id"], stop_at=want * seq_len + 1)
        where = ", ".join(w["val_src"])
    else:
        _, texts, _ = held_out(w["source"], w["val_fraction"], w["seed"], w["strict"])
        counts.documents = len(texts)
        stream = token_stream(tok, texts, w["eos_id"])
        where = f"the held-out documents of {w['source']}"
    sequences, _ = cut(stream, seq_len)
    if len(sequences) == 0:
        raise DatasetError(f"{where}: {len(stream):,} tokens, fewer than one validation sequence of {seq_len} + 1 "
                           f"(raise --val-fraction, or give --val-src)")
    info = {"documents": counts.documents, "sequences": min(want, len(sequences)), "tokens": int(len(stream)),
            "available_sequences": len(sequences)}
    if w["val_src"]:
        info.update(empty_documents=counts.empty, bad_lines=counts.bad, bad_first=counts.bad_first)
    return write_shard(out / job.file, {"tokens": np.ascontiguousarray(sequences[:want])}, job.source, info=info)


def _tokenizer(out: Path, sources: list[str], tokenizer: str | None, val_src: list[str] | None,
               opts: C4Options) -> dict:
    """Rank 0: out/tokenizer.json, given (copied) or trained on training documents; what the
    manifest says about it."""
    target = out / tk.TOKENIZER_FILE
    if tokenizer:
        given = Path(tokenizer)
        tk.load(given)  # a one-line error for a file that is not one, before anything is copied
        if not (target.exists() and os.path.samefile(given, target)):
            tmp = out / f".{tk.TOKENIZER_FILE}.tmp"
            shutil.copyfile(given, tmp)
            tmp.replace(target)
        return {"tokenizer": f"given: {given.resolve()}"}

    def training_texts():
        taken = 0
        for k, src in enumerate(sources):
            if k == 0 and not val_src:
                texts = held_out(src, opts.val_fraction, opts.seed, opts.strict)[0]
            else:
                texts = documents(src, Counts(), opts.strict)
            for text in texts:
                if taken >= opts.tokenizer_docs:
                    return
                taken += 1
                yield text

    size = tk.train(training_texts(), opts.vocab_size, target)
    return {"tokenizer": f"trained here: byte-level BPE of {size:,} tokens (Llama 3's pre-tokenizer split) on "
                         f"the training documents (at most the first {opts.tokenizer_docs:,}); "
                         f"not Llama 3.1's tokenizer"}


def prepare_c4(src: list[str] | str, out: Path, *, tokenizer: str | None = None, val_src: list[str] | None = None,
               opts: C4Options = C4Options(), options: PrepareOptions = PrepareOptions()) -> dict:
    """Write the lm_tokens dataset of `src` into `out` (see the module docstring); the manifest."""
    out = Path(out)
    sources = expand_sources([src] if isinstance(src, str) else list(src))
    val_files = expand_sources(list(val_src), "--val-src") if val_src else None
    if val_files and BUILTIN_PYDOC in val_files:
        raise DatasetError(f"--val-src takes files; {BUILTIN_PYDOC} holds out its own validation documents")
    shared = text_sources.shared_file(sources, val_files or [])
    if shared:
        also = "" if shared[0] == shared[1] else f" (as {shared[1]})"
        raise DatasetError(f"{shared[0]}: given to --val-src and to --src{also}: its validation documents "
                           "would be trained on")
    builtin = sources == [BUILTIN_PYDOC]
    sizes = DEFAULTS["builtin" if builtin else "files"]
    opts = replace(opts, seq_len=opts.seq_len or sizes["seq_len"],
                   vocab_size=opts.vocab_size or sizes["vocab_size"])
    if opts.seq_len < 1 or opts.val_sequences < 1 or opts.tokenizer_docs < 1:
        raise DatasetError("--seq-len, --val-sequences and --tokenizer-docs must be at least 1")
    if not val_files and not 0 < opts.val_fraction < 1:
        raise DatasetError(f"--val-fraction must be between 0 and 1, got {opts.val_fraction}")
    if tokenizer and not Path(tokenizer).is_file():
        raise DatasetError(f"{tokenizer}: no such tokenizer file (--tokenizer)")
    check_sources(sources + (val_files or []), opts.strict, None if val_files else opts.val_fraction)
    world = World.detect()

    params = {"src": [s if s == BUILTIN_PYDOC else str(Path(s).resolve()) for s in sources],
              "val_src": [str(Path(s).resolve()) for s in val_files] if val_files else None,
              "tokenizer_sha256": file_sha256(Path(tokenizer)) if tokenizer else None,
              "vocab_size": None if tokenizer else opts.vocab_size,
              "tokenizer_docs": None if tokenizer else opts.tokenizer_docs,
              "eos_token": opts.eos_token, "seq_len": opts.seq_len, "val_sequences": opts.val_sequences,
              "val_fraction": None if val_files else opts.val_fraction, "strict": opts.strict, "seed": opts.seed}
    start(out, LM_TOKENS.name, params, options.overwrite, world)

    def plan():
        said = _tokenizer(out, sources, tokenizer, val_files, opts)
        tok = tk.load(out / tk.TOKENIZER_FILE)
        eos = tk.eos_id(tok, opts.eos_token, str(tokenizer or out / tk.TOKENIZER_FILE))
        return {**said, "vocab_size": tk.vocab_size(tok), "eos_id": eos, "eos_token": tok.id_to_token(eos),
                "tokenizer_sha256": file_sha256(out / tk.TOKENIZER_FILE),
                "identities": [identity(s) for s in sources + (val_files or [])]}

    facts = world.on_root(plan)
    key = [mf.params_hash(params), facts["tokenizer_sha256"], facts["eos_id"]]
    common = {"seq_len": opts.seq_len, "eos_id": facts["eos_id"], "strict": opts.strict, "seed": opts.seed,
              "val_fraction": opts.val_fraction}
    val_key = facts["identities"][len(sources):] if val_files else facts["identities"][:1]
    jobs = [ShardJob.single("val", shard_name("val", 0, 1), _hash(key, "val", val_key),
                            {**common, "split": "val", "val_src": val_files, "source": sources[0],
                             "val_sequences": opts.val_sequences})]
    for k, source in enumerate(sources):
        jobs.append(ShardJob.single("train", shard_name("train", k, len(sources)),
                                    _hash(key, "train", facts["identities"][k]),
                                    {**common, "split": "train", "source": source, "index": k,
                                     "hold_out": k == 0 and not val_files}))
    records = run_jobs(out, jobs, make_shard, world=world, workers=options.workers, label="c4")

    train = [records[j.file]["info"] for j in jobs[1:]]
    val = records[jobs[0].file]["info"]
    bad_first = [b for r in [*train, val] for b in r.get("bad_first", [])][:BAD_NAMED]
    source_note = {"corpus": BUILTIN_PYDOC, "note": BUILTIN_NOTE, "python": sys.version.split()[0]} if builtin \
        else {"corpus": "C4-style JSON lines", "files": len(sources)}
    manifest = mf.new_manifest(
        LM_TOKENS.name, LM_TOKENS.fields({"seq_len": opts.seq_len}), opts.seed, params, options.command,
        vocab_size=facts["vocab_size"], seq_len=opts.seq_len, eos_id=facts["eos_id"],
        eos_token=facts["eos_token"],
        tokenizer_file=tk.TOKENIZER_FILE, tokenizer_sha256=facts["tokenizer_sha256"], tokenizer=facts["tokenizer"],
        **source_note,
        validation=(f"the first {val['sequences']:,} sequences of --val-src's documents, in order" if val_files else
                    f"{val['documents']:,} documents of {sources[0]} held out (seeded {opts.val_fraction:g}), "
                    f"their first "
                    f"{val['sequences']:,} sequences"),
        documents={"train": sum(r["documents"] for r in train), "val": val["documents"]},
        tokens={"train": sum(r["tokens"] for r in train), "val": val["tokens"]},
        tail_tokens_dropped=sum(r["tail_tokens"] for r in train),
        empty_documents=sum(r.get("empty_documents", 0) for r in [*train, val]),
        bad_lines={"count": sum(r.get("bad_lines", 0) for r in [*train, val]), "first": bad_first})
    return finish(out, jobs, records, manifest, world)


def _hash(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
