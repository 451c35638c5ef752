"""BERT's dataset kinds: `bert` (one [CLS] A [SEP] B [SEP] instance per row) and `bert_packed`
(several instances per row, MLPerf's packed format).

    hvdbench prepare bert --src builtin:pydoc --vocab-size 4000 --out data/pydoc    # -> bert
    hvdbench prepare pack --src data/pydoc --out data/pydoc-packed                 # -> bert_packed
    hvdbench prepare synthetic --like bert --samples 100000 --out data/synth-bert  # -> bert
    hvdbench prepare synthetic --like bert_packed --samples 50000 --out data/synth-packed

The writers are `prepare.py` and `packing.py` beside this file; the field layouts, value ranges and
random instances are defined here. Random instances have the lengths of MLPerf's Wikipedia data
(`wikipedia_lengths`), and random packed rows are those sequences packed as `prepare pack --strategy
nnlshp` packs a dataset (~2.0 sequences a row at 512 tokens, as MLPerf's packed data), so a
synthetic run's rows/s and sequences/s are those of the real data.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from hvdbench.contracts import DatasetKind
from hvdbench.data.vocab import SPECIAL_TOKENS, special_ids, vocab_sha256, write_vocab
from hvdbench.errors import DatasetError
from hvdbench.models.bert.packing import assign, histogram, make_strategy, pack_arrays, packed_fields
from hvdbench.models.bert.prepare import BertOptions, bert_fields, mask_tokens


def synthetic_vocab(vocab_size: int) -> list[str]:
    return SPECIAL_TOKENS + [f"tok{i}" for i in range(len(SPECIAL_TOKENS), vocab_size)]


# MLPerf BERT's training data (Wikipedia, 512 tokens): the share of its 16,279,552 sequences in each
# length bin (shortest exclusive, longest inclusive), summed from the sequence-length histogram
# Graphcore published with its packing paper (Krell et al. 2021, arXiv:2107.02027; the histogram:
# github.com/graphcore/examples, tutorials/blogs_code/packedBERT/histograms.py). None is shorter
# than 5 tokens, 23.4 % fill all 512, the mean is 255.8 tokens (50.0 % padding unpacked); packed at
# most 3 to a row (NNLSHP) they make 1.996 sequences a row, and MLPerf's submissions count ~2
# (NVIDIA's PACKING_FACTOR=2, Graphcore's and Habana's avg_seq_per_pack 2: ../shared/COMPUTE.md).
WIKIPEDIA_MAX_LEN = 512
WIKIPEDIA_LENGTHS = ((4, 32, 0.0359), (32, 64, 0.1399), (64, 96, 0.1138), (96, 128, 0.0797), (128, 160, 0.0623),
                     (160, 192, 0.0517), (192, 224, 0.0443), (224, 256, 0.0386), (256, 288, 0.0340),
                     (288, 320, 0.0305), (320, 352, 0.0276), (352, 384, 0.0252), (384, 416, 0.0231),
                     (416, 448, 0.0213), (448, 480, 0.0197), (480, 511, 0.0179), (511, 512, 0.2343))
SHORTEST = 5  # [CLS] A [SEP] B [SEP] with a token in A and room for B
# Sequences packed at once for random packed rows: enough that the packing nears the depth it reaches
# on the whole dataset (1.98 sequences a row at 512 tokens and at 128; the whole histogram: 1.996).
PACK_POOL = 16384
PACK_STRATEGY = "nnlshp"  # MLPerf's ~2 a row; prepare pack's default spfhp gives ~1.8 at 3 a row


def wikipedia_lengths(n: int, max_len: int, rng: np.random.Generator) -> np.ndarray:
    """`n` sequence lengths drawn as MLPerf's Wikipedia data has them (WIKIPEDIA_LENGTHS: a bin by
    its share, a length uniform inside it), scaled to `max_len` tokens (the same shares at the same
    fractions of the row: a full-length sequence stays full), at least SHORTEST."""
    lo, hi, share = (np.array(column) for column in zip(*WIKIPEDIA_LENGTHS))
    k = rng.choice(len(share), size=n, p=share / share.sum())
    lengths = rng.integers(lo[k] + 1, hi[k] + 1)
    if max_len != WIKIPEDIA_MAX_LEN:
        lengths = np.ceil(lengths * max_len / WIKIPEDIA_MAX_LEN).astype(np.int64)
    return np.clip(lengths, min(SHORTEST, max_len), max_len)


@lru_cache(maxsize=4)
def packed_lengths(max_len: int, slots: int) -> np.ndarray:
    """(packs, slots) sequence lengths, 0 = empty slot: PACK_POOL sequences with Wikipedia's lengths
    (one fixed draw: the same packed "dataset" in every run) packed as `prepare pack --strategy
    nnlshp --max-seqs-per-pack SLOTS` packs a shard. The strategy is found on the lengths rounded up
    to max_len/128 tokens (4 at 512: a second's work instead of a minute's, 0.2 % fewer sequences a
    row) and every pack holds the real lengths, which fit where their rounded ones did."""
    lengths = wikipedia_lengths(PACK_POOL, max_len, np.random.default_rng(0))
    quantum = max(1, max_len // 128)
    rounded = np.minimum(-(-lengths // quantum) * quantum, max_len)
    strategy = make_strategy(PACK_STRATEGY, histogram(rounded, max_len), max_len, slots)
    packs = assign(rounded, strategy, slots, np.random.default_rng(0))
    rows = np.where(packs >= 0, lengths[np.maximum(packs, 0)], 0)
    # In order of sequences a row, then tokens: evenly spaced rows are a stratified sample of them.
    return rows[np.lexsort((rows.sum(1), (rows > 0).sum(1)))]


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
        """Random instances with the lengths of MLPerf's Wikipedia data (wikipedia_lengths)."""
        return self.instances(wikipedia_lengths(n, int(info["max_seq_len"]), rng), info, rng)

    def mlperf_samples(self, batch: dict[str, np.ndarray]) -> int:
        return len(batch["input_ids"])  # one sequence a row, as MLPerf counts them

    def instances(self, lengths: np.ndarray, info: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Random ids with the real structure, one instance of each length: [CLS] A [SEP] B [SEP],
        masked-LM and next-sentence fields made exactly as `prepare bert` makes them."""
        vocab_size = int(info["vocab_size"])
        if vocab_size <= len(SPECIAL_TOKENS):
            raise DatasetError(f"vocab_size must exceed {len(SPECIAL_TOKENS)}, got {vocab_size}")
        opts = BertOptions(max_seq_len=int(info["max_seq_len"]), max_predictions=int(info["max_predictions"]))
        opts.check()
        length, special = opts.max_seq_len, special_ids(synthetic_vocab(len(SPECIAL_TOKENS)))
        n = len(lengths)
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
    # MLPerf's packed rows: 512 tokens, 76 predictions a sequence, at most 3 sequences a row.
    synthetic_defaults = {"vocab_size": 30522, "max_seq_len": 512, "max_predictions": 76, "max_seqs_per_pack": 3}
    synthetic_flags = {**Bert.synthetic_flags, "max-seqs-per-pack": "max_seqs_per_pack"}

    def fields(self, info: dict) -> dict[str, dict]:
        return packed_fields(info["max_seq_len"], info["max_predictions"], info["max_seqs_per_pack"])

    def limits(self, manifest: dict) -> dict[str, tuple[int, int]]:
        length, slots = manifest["max_seq_len"] - 1, manifest["max_seqs_per_pack"]
        # input_mask and masked_lm_weights hold the 1-based sequence index of each token/prediction.
        return {**super().limits(manifest), "input_mask": (0, slots), "masked_lm_weights": (0, slots),
                "positions": (0, length), "packed_input_len": (0, length + 1),
                "packed_masked_lm_len": (0, manifest["max_predictions"])}

    def synthetic(self, n: int, info: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """`n` packed rows drawn from Wikipedia's lengths packed as `prepare pack` packs them
        (packed_lengths), each filled with random instances of its lengths. The rows are evenly
        spaced through the packed ones in order of their sequences, from a random start: even one
        fixed batch of 48 holds the sequences a row of the whole (1.96-2.00 at 512 tokens over five
        seeds, where 48 drawn at random would be off by ~0.14, one standard deviation)."""
        max_len, slots = int(info["max_seq_len"]), int(info["max_seqs_per_pack"])
        if slots < 1:
            raise DatasetError(f"max_seqs_per_pack must be at least 1, got {slots}")
        table = packed_lengths(max_len, slots)
        rows = table[rng.permutation(((rng.random() + np.arange(n)) * len(table) / n).astype(np.int64))]
        held = rows > 0
        packs = np.where(held, np.cumsum(held.ravel()).reshape(rows.shape) - 1, -1)  # row-major sequence index
        return pack_arrays(self.instances(rows[held], info, rng), packs, max_len, int(info["max_predictions"]))

    def mlperf_samples(self, batch: dict[str, np.ndarray]) -> int:
        return int((batch["packed_input_len"] > 0).sum())  # the sequences, as MLPerf counts packed rows


BERT = Bert()
BERT_PACKED = BertPacked()
