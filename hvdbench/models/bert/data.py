"""BERT's dataset kinds: `bert` (one [CLS] A [SEP] B [SEP] instance per row) and `bert_packed`
(several instances per row, MLPerf's packed format).

    hvdbench prepare bert --src builtin:pydoc --vocab-size 4000 --out data/pydoc    # -> bert
    hvdbench prepare pack --src data/pydoc --out data/pydoc-packed                 # -> bert_packed
    hvdbench prepare synthetic --like bert --samples 100000 --out data/synth-bert  # -> bert

The writers are `hvdbench/data/bert.py` and `hvdbench/data/packing.py`; the field layouts, value
ranges and random instances are defined here.
"""

from __future__ import annotations

import numpy as np

from hvdbench.contracts import DatasetKind
from hvdbench.data.vocab import SPECIAL_TOKENS, special_ids, vocab_sha256, write_vocab
from hvdbench.errors import DatasetError
from hvdbench.models.bert.packing import packed_fields
from hvdbench.models.bert.prepare import BertOptions, bert_fields, mask_tokens


def synthetic_vocab(vocab_size: int) -> list[str]:
    return SPECIAL_TOKENS + [f"tok{i}" for i in range(len(SPECIAL_TOKENS), vocab_size)]


class Bert(DatasetKind):
    name = "bert"
    info_keys = ("vocab_size", "max_seq_len", "max_predictions")
    # prepare puts a shard's instances in random order and a pre-training run sees each instance
    # about once, so readers shuffle runs of ~1 MB of consecutive instances: gathering 1-2 KB rows
    # one at a time runs at half the speed of a contiguous read.
    shuffled_when_written = True
    samples_per_shard = 32768
    synthetic_defaults = {"vocab_size": 30522, "max_seq_len": 128, "max_predictions": 20}  # MLPerf's phase 1
    synthetic_flags = {"vocab-size": "vocab_size", "max-seq-len": "max_seq_len", "max-predictions": "max_predictions"}

    def fields(self, info: dict) -> dict[str, dict]:
        return bert_fields(info["max_seq_len"], info["max_predictions"])

    def limits(self, manifest: dict) -> dict[str, tuple[int, int]]:
        vocab, length = manifest["vocab_size"] - 1, manifest["max_seq_len"] - 1
        return {"input_ids": (0, vocab), "masked_lm_ids": (0, vocab), "masked_lm_positions": (0, length),
                "segment_ids": (0, 1), "next_sentence_labels": (0, 1), "input_mask": (0, 1)}

    def synthetic(self, n: int, info: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Random ids with the real structure: [CLS] A [SEP] B [SEP], 10 % of instances shorter than
        the maximum, masked-LM and next-sentence fields made exactly as `prepare bert` makes them."""
        vocab_size = int(info["vocab_size"])
        if vocab_size <= len(SPECIAL_TOKENS):
            raise DatasetError(f"vocab_size must exceed {len(SPECIAL_TOKENS)}, got {vocab_size}")
        opts = BertOptions(max_seq_len=int(info["max_seq_len"]), max_predictions=int(info["max_predictions"]))
        opts.check()
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

    def synthetic_files(self, out, info: dict) -> dict:
        write_vocab(out / "vocab.txt", synthetic_vocab(int(info["vocab_size"])))
        return {"vocab_sha256": vocab_sha256(out / "vocab.txt"), "vocab_file": "vocab.txt"}


class BertPacked(Bert):
    name = "bert_packed"
    info_keys = ("vocab_size", "max_seq_len", "max_predictions", "max_seqs_per_pack")

    def fields(self, info: dict) -> dict[str, dict]:
        return packed_fields(info["max_seq_len"], info["max_predictions"], info["max_seqs_per_pack"])

    def limits(self, manifest: dict) -> dict[str, tuple[int, int]]:
        length, slots = manifest["max_seq_len"] - 1, manifest["max_seqs_per_pack"]
        # input_mask and masked_lm_weights hold the 1-based sequence index of each token/prediction.
        return {**super().limits(manifest), "input_mask": (0, slots), "masked_lm_weights": (0, slots),
                "positions": (0, length), "packed_input_len": (0, length + 1),
                "packed_masked_lm_len": (0, manifest["max_predictions"])}

    def synthetic(self, n: int, info: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
        raise DatasetError("no synthetic packed data: make a synthetic 'bert' dataset "
                           "(`hvdbench prepare synthetic --like bert`) and `hvdbench prepare pack` it")


BERT = Bert()
BERT_PACKED = BertPacked()
