"""The two preparation steps of llama2_lora's real-text debug data: a pre-trained base, then the
summarisation pairs tokenized with its vocabulary.

    hvdbench prepare lm-base --out data/lm-base
    hvdbench prepare summaries --src builtin:stdlib-docstrings --base data/lm-base --out data/summaries
    hvdbench prepare summaries --src gov_report/train.jsonl --val-src gov_report/validation.jsonl \\
        --base data/lm-base --max-len 8192 --out data/gov-report

`prepare_lm_base` stands in for "download Llama-2's weights" (gated, and 13-138 GB): it trains a
byte-level BPE vocabulary on CPython's own documentation (`builtin:pydoc`, the text `help()` shows,
BERT's debug corpus) and pre-trains the debug flavor's base network on that text as a plain
language model, so that LoRA starts from a model that knows the language, as MLPerf's starts from
Llama-2. It writes base.safetensors (the weights), tokenizer.json and vocab.txt, and base.json (the
network's sizes, the recipe, the losses, sha256s) into --out. The weights are hvdbench's own,
trained here; they are not Meta's.

`prepare_summaries` turns (document, summary) pairs (corpus.py: built-in stdlib docstrings, or
GovReport-style JSON lines) into the `summaries` kind: each pair is one sequence,
`<s>Summarize the following text.\\n\\n{document}\\n\\nSummary: {summary}</s>`, with labels on the
summary and its EOS only. A document too long for --max-len is cut at the end (the summary never
is; a pair whose summary alone does not fit is dropped); both are counted in the manifest. The
base's checkpoint and tokenizer are copied into the dataset folder and named with their sha256s
in the manifest, so a training run needs nothing but --data.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hvdbench.data import manifest as mf
from hvdbench.data.parallel import PrepareOptions, World, finish, run_jobs, start
from hvdbench.data.staged import staged_jobs, write_staged
from hvdbench.data.text import hold_out
from hvdbench.errors import DatasetError
from hvdbench.families.translation import tokens
from hvdbench.families.translation.tokens import TOKENIZER_FILE, VOCAB_FILE
from hvdbench.files import file_sha256
from hvdbench.models.llama2_lora import Pretraining, corpus
from hvdbench.models.llama2_lora.data import (
    BASE_FILE,
    BASE_INFO,
    BOS,
    EOS,
    IGNORE,
    PAD,
    SUMMARIES,
    read_base_info,
)

STAGING = ".summaries-arrays"
FIELDS = ("input_ids", "labels", "length")
PROMPT_HEAD = "Summarize the following text.\n\n"
PROMPT_TAIL = "\n\nSummary:"
MIN_DOCUMENT_TOKENS = 8  # a pair whose summary leaves less room than this for its document is dropped
BASE_NOTE = ("pre-trained by `hvdbench prepare lm-base` on CPython's pydoc_data text; not Meta's Llama-2 "
             "weights (gated), which the full-size MLPerf task fine-tunes")


# --- the base ------------------------------------------------------------------------------------

def lm_windows(token_docs: list[np.ndarray], length: int) -> np.ndarray:
    """Documents as BOS + tokens + EOS, end to end, cut into (N, length) windows (the tail that does
    not fill one is left out)."""
    stream = np.concatenate([np.concatenate([[BOS], d, [EOS]]) for d in token_docs]).astype(np.int32)
    n = len(stream) // length
    return stream[:n * length].reshape(n, length)


def prepare_lm_base(out: Path, *, vocab_size: int = 4000, seq_len: int = 128, val_fraction: float = 0.05,
                    training: Pretraining = Pretraining(), overwrite: bool = False, log=None) -> dict:
    """Train the vocabulary and pre-train the debug flavor's base on builtin:pydoc; returns base.json.
    A rerun with the same options finds the base done; other options need `overwrite`."""
    from hvdbench.data.text import BUILTIN_PYDOC, pydoc_documents
    from hvdbench.models.llama2_lora import FLAVORS

    out = Path(out)
    steps, batch, lr, warmup, seed = training.steps, training.batch, training.lr, training.warmup, training.seed
    if steps < 1 or batch < 1 or seq_len < 8 or lr <= 0 or warmup < 0 or not 0 < val_fraction < 1:
        raise DatasetError("lm-base: --steps and --batch must be >= 1, --seq-len >= 8, --lr > 0, "
                           "--warmup >= 0, --val-fraction in (0, 1)")
    params = {"corpus": BUILTIN_PYDOC, "vocab_size": vocab_size, "steps": steps, "batch": batch,
              "seq_len": seq_len, "lr": lr, "warmup": warmup, "val_fraction": val_fraction, "seed": seed}
    info_path = out / BASE_INFO
    if info_path.is_file():
        try:
            old = json.loads(info_path.read_text())
        except (OSError, ValueError):
            old = {}
        if old.get("params") == params and (out / BASE_FILE).is_file() and not overwrite:
            if file_sha256(out / BASE_FILE) == old.get("weights_sha256"):
                return old  # done before with the same options
        elif not overwrite and old.get("params") is not None:
            raise DatasetError(f"{out} already holds a base made with other options (`{old.get('command', '?')}`); "
                               f"choose another --out or pass --overwrite")
    out.mkdir(parents=True, exist_ok=True)
    info_path.unlink(missing_ok=True)  # until the end, the folder reads as an unfinished base

    t0 = time.perf_counter()
    texts = [" ".join(doc) for doc in pydoc_documents()]
    size = tokens.train_tokenizer(texts, vocab_size, out / TOKENIZER_FILE)
    tok = tokens.load_tokenizer(out / TOKENIZER_FILE)
    tokens.write_vocab_list(tok, out / VOCAB_FILE)
    windows = lm_windows(tokens.encode(tok, texts), seq_len)
    rng = np.random.default_rng([seed, 1])
    order = rng.permutation(len(windows))
    n_val = max(1, round(val_fraction * len(windows)))
    val, train = windows[order[:n_val]], windows[order[n_val:]]
    if len(train) < batch:
        raise DatasetError(f"{BUILTIN_PYDOC}: {len(train)} training windows of {seq_len} tokens, fewer than "
                           f"one batch of {batch}")
    from dataclasses import replace

    from hvdbench.models.llama2_lora import torch as llama

    cfg = replace(FLAVORS["debug"], vocab_size=size, max_len=seq_len)
    base, facts = llama.pretrain(cfg, train, val, training, log=log)
    llama.save_base(base, out / BASE_FILE)
    info = {
        "format": "hvdbench-lm-base", "note": BASE_NOTE, "params": params, "command": mf.command_line(),
        "created_at": mf.now_iso(), "flavor": "debug", "config": llama.architecture(cfg),
        "weights_file": BASE_FILE, "weights_sha256": file_sha256(out / BASE_FILE),
        "tokenizer_file": TOKENIZER_FILE, "tokenizer_sha256": file_sha256(out / TOKENIZER_FILE),
        "vocab_file": VOCAB_FILE, "vocab_sha256": file_sha256(out / VOCAB_FILE),
        "tokenizer": "byte-level BPE (tokenizers), specials <pad> <s> </s> <unk>",
        "parameters": sum(p.numel() for p in base.parameters()),
        "corpus_tokens": int(windows.size), "train_windows": len(train), "val_windows": len(val),
        **facts, "seconds": round(time.perf_counter() - t0, 1),
    }
    mf.atomic_write_json(info_path, info)
    return info


# --- the summaries ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class SummaryOptions:
    """The knobs of `prepare_summaries` beyond its inputs: tokens per sequence (documents cut to fit,
    summaries never), the share held out without --val-src, pairs per shard, and the seed.
    `hvdbench prepare summaries --src builtin:stdlib-docstrings --base data/lm-base --max-len 256 --out d`."""

    max_len: int = 256
    val_fraction: float = 0.1
    samples_per_shard: int = 16384
    seed: int = 0


def encode_pairs(tok, pairs: list[tuple[str, str]], max_len: int) -> tuple[dict[str, np.ndarray], dict]:
    """Padded arrays of the pairs that fit (documents cut when needed); counts of what was cut and
    dropped."""
    head = tokens.encode(tok, [PROMPT_HEAD])[0]
    tail = tokens.encode(tok, [PROMPT_TAIL])[0]
    documents = tokens.encode(tok, [d for d, _ in pairs])
    summaries = tokens.encode(tok, [" " + s for _, s in pairs])
    rows, truncated, dropped = [], 0, 0
    for doc, summary in zip(documents, summaries):
        room = max_len - (2 + len(head) + len(tail) + len(summary))  # BOS and EOS
        if room < min(MIN_DOCUMENT_TOKENS, len(doc)) or len(summary) == 0:
            dropped += 1
            continue
        if len(doc) > room:
            doc, truncated = doc[:room], truncated + 1
        prompt = np.concatenate([[BOS], head, doc, tail])
        rows.append((prompt, np.concatenate([summary, [EOS]])))
    n = len(rows)
    out = {"input_ids": np.full((n, max_len), PAD, np.int32), "labels": np.full((n, max_len), IGNORE, np.int32),
           "length": np.zeros(n, np.int32)}
    for k, (prompt, answer) in enumerate(rows):
        p, a = len(prompt), len(answer)
        out["input_ids"][k, :p] = prompt
        out["input_ids"][k, p:p + a] = answer
        out["labels"][k, p:p + a] = answer
        out["length"][k] = p + a
    return out, {"truncated_documents": truncated, "dropped_too_long": dropped}


def prepare_summaries(src: str, out: Path, *, base: str | Path, val_src: str | None = None,
                      opts: SummaryOptions = SummaryOptions(), options: PrepareOptions = PrepareOptions()) -> dict:
    """(document, summary) pairs of `src` (`val_src`, else a held-out share), encoded with the
    tokenizer of the lm-base folder `base`, into `out`; returns the manifest (on every rank)."""
    out, base = Path(out), Path(base)
    if opts.max_len < MIN_DOCUMENT_TOKENS + 8:
        raise DatasetError(f"--max-len must be at least {MIN_DOCUMENT_TOKENS + 8}, got {opts.max_len}")
    if val_src is None and not 0 < opts.val_fraction < 1:
        raise DatasetError(f"--val-fraction must be between 0 and 1, got {opts.val_fraction}")
    if base.resolve() == out.resolve():
        raise DatasetError("--base and --out must be different folders")
    info = read_base_info(base)
    for key in ("weights", "tokenizer", "vocab"):
        path = base / info[f"{key}_file"]
        if not path.is_file() or file_sha256(path) != info[f"{key}_sha256"]:
            raise DatasetError(f"{path}: missing or changed since `hvdbench prepare lm-base` wrote {base / BASE_INFO}")
    world = World.detect()

    def resolved(path):
        return None if path is None or path.startswith("builtin:") else str(Path(path).resolve())

    params = {"src": src if src.startswith("builtin:") else resolved(src), "val_src": resolved(val_src),
              "base_weights_sha256": info["weights_sha256"], "max_len": opts.max_len,
              "val_fraction": None if val_src else opts.val_fraction, "samples_per_shard": opts.samples_per_shard,
              "seed": opts.seed}
    start(out, SUMMARIES.name, params, options.overwrite, world)
    staging = out / STAGING

    def build():
        found = corpus.load(src)
        pairs = found["pairs"]
        if val_src is not None:
            val = corpus.read_jsonl(val_src)
            train = pairs
            found["sha256"] = hashlib.sha256((found["sha256"] + corpus.hash_pairs(val)).encode()).hexdigest()
        else:
            train, val = hold_out(pairs, opts.val_fraction, opts.seed, str(src))
        for name in (info["weights_file"], info["tokenizer_file"], info["vocab_file"]):
            tmp = out / f".{name}.tmp"
            shutil.copyfile(base / name, tmp)
            tmp.replace(out / name)
        tok = tokens.load_tokenizer(out / info["tokenizer_file"])
        staging.mkdir(exist_ok=True)
        counts, cut = {}, {}
        for split, split_pairs in (("train", train), ("val", val)):
            arrays, cut[split] = encode_pairs(tok, split_pairs, opts.max_len)
            if split == "train":
                order = np.random.default_rng([opts.seed, 2]).permutation(len(arrays["length"]))
            else:  # evaluation batches of similar length (the model trims their common padding)
                order = np.argsort(arrays["length"], kind="stable")
            counts[split] = len(order)
            for f in FIELDS:
                np.save(staging / f"{split}-{f}.npy", arrays[f][order])
        if counts["train"] == 0 or counts["val"] == 0:
            raise DatasetError(f"{src}: no {'training' if counts['train'] == 0 else 'validation'} pair fits "
                               f"--max-len {opts.max_len}")
        summary_tokens = {s: int((np.load(staging / f"{s}-labels.npy") != IGNORE).sum()) for s in counts}
        return {"counts": counts, "cut": cut, "sha256": found["sha256"], "source": found["source"],
                "pairs": len(train) + len(val), "summary_tokens": summary_tokens}

    facts = world.on_root(build)
    jobs = staged_jobs(staging, facts["counts"], opts.samples_per_shard, key=[mf.params_hash(params), facts["sha256"]])
    records = run_jobs(out, jobs, functools.partial(write_staged, FIELDS), world=world, workers=1,
                       label="summaries")
    base_record = {"file": info["weights_file"], "sha256": info["weights_sha256"], "config": info["config"],
                   "note": BASE_NOTE, "made_by": info.get("command"), "val_loss": info.get("val_loss"),
                   "params": info["params"]}
    manifest = mf.new_manifest(
        SUMMARIES.name, SUMMARIES.fields({"max_len": opts.max_len}), opts.seed, params, options.command,
        vocab_size=info["config"]["vocab_size"], max_len=opts.max_len, tokenizer_file=info["tokenizer_file"],
        tokenizer_sha256=info["tokenizer_sha256"], tokenizer="byte-level BPE (tokenizers)",
        vocab_file=info["vocab_file"], vocab_sha256=info["vocab_sha256"], base=base_record,
        prompt=PROMPT_HEAD + "{document}" + PROMPT_TAIL + " {summary}", ignore_label=IGNORE,
        corpus_sha256=facts["sha256"], corpus_pairs=facts["pairs"], summary_tokens=facts["summary_tokens"],
        **{f"{k}": {s: facts["cut"][s][k] for s in facts["cut"]} for k in ("truncated_documents", "dropped_too_long")},
        **facts["source"])
    manifest = finish(out, jobs, records, manifest, world)
    if world.rank == 0:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest

