"""The `lm_tokens` dataset kind: a token stream cut into fixed-length training sequences.

    hvdbench prepare c4 --src builtin:pydoc --out data/c4-debug
    hvdbench prepare c4 --src c4/en --val-src c4-validation-91205-samples.en.json.gz \\
        --tokenizer llama-3.1/tokenizer.json --out data/c4
    hvdbench prepare synthetic --like lm_tokens --samples 256 --seq-len 8192 --out data/synth-c4

Per sample one field, `tokens`: seq_len + 1 int32 ids, the inputs (the first seq_len) and the
next-token targets (the last seq_len) of one sequence, as Megatron's GPT dataset reads them (MLPerf's
llama31_8b and gpt_oss_20b: 8,193 tokens give 8,192 predictions, and consecutive sequences share one
token). Documents were joined with an end-of-document token (`eos_id`) before the cut, so sequences
cross document boundaries, as the references' do. The manifest names the tokenizer file beside the
shards (`tokenizer_file`, its sha256) and whether it was given or trained.
"""

from __future__ import annotations

import numpy as np

from hvdbench.contracts import DatasetKind
from hvdbench.data.manifest import field_spec
from hvdbench.errors import DatasetError


class LmTokens(DatasetKind):
    name = "lm_tokens"
    info_keys = ("vocab_size", "seq_len")
    # False although prepare writes each file's training sequences in seeded random order: readers
    # then shuffle single sequences, not runs of ~1 MB. A C4 sequence is 32 KB, as fast to read alone
    # as in a run; and the built-in text's ~450 sequences would be one run, the same batches every
    # epoch (measured: the debug flavors learnt markedly slower per step so).
    shuffled_when_written = False
    samples_per_shard = 4096  # 8,193 int32 tokens each: 134 MB
    # Llama 3.1's vocabulary (MLPerf's tokenizer for llama31_8b and gpt_oss_20b) and context.
    synthetic_defaults = {"vocab_size": 128256, "seq_len": 8192}
    synthetic_flags = {"vocab-size": "vocab_size", "seq-len": "seq_len"}

    def fields(self, info: dict) -> dict[str, dict]:
        return {"tokens": field_spec((int(info["seq_len"]) + 1,), "int32")}

    def limits(self, manifest: dict) -> dict[str, tuple[int, int]]:
        return {"tokens": (0, manifest["vocab_size"] - 1)}

    def synthetic(self, n: int, info: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
        vocab, length = int(info["vocab_size"]), int(info["seq_len"])
        if vocab < 2:
            raise DatasetError(f"vocab_size must be at least 2, got {vocab}")
        if length < 1:
            raise DatasetError(f"seq_len must be at least 1, got {length}")
        return {"tokens": rng.integers(0, vocab, (n, length + 1)).astype(np.int32)}


LM_TOKENS = LmTokens()
