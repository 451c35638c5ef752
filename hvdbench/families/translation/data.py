"""The `translation` dataset kind: aligned source/target sentences as padded subword ids.

    hvdbench prepare translation --src builtin:gettext-de --vocab-size 4000 --out data/gettext-de
    hvdbench prepare translation --src-lang en --tgt-lang de --src train.en --tgt train.de \\
        --val-src newstest2014.en --val-tgt newstest2014.de --out data/wmt14-en-de
    hvdbench prepare synthetic --like translation --samples 100000 --out data/synth-translation

Shared by `transformer` and `gnmt` (the writer is prepare.py beside this file). Per sample:
`src` and `tgt` (max_len int32 ids: the sentence's subwords, then EOS, then PAD = 0), `src_len`
and `tgt_len` (the counts with EOS). The vocabulary (tokenizer.json, byte-level BPE shared by
both languages) lies beside the shards; the model turns decoded ids back into text with it for
BLEU (`tokenizer_path`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hvdbench.contracts import DatasetKind
from hvdbench.data.manifest import field_spec
from hvdbench.errors import DatasetError
from hvdbench.families.translation.tokens import EOS, PAD, SPECIAL_TOKENS
from hvdbench.files import file_sha256


class Translation(DatasetKind):
    name = "translation"
    info_keys = ("vocab_size", "max_len")
    # prepare sorts the training pairs by length, cuts them into buckets (128 pairs by default)
    # and writes the buckets in random order: readers then shuffle runs of consecutive samples
    # (~1 MB), which keep the buckets, so a batch holds sentences of one or two lengths (the model
    # trims their common padding) and consecutive batches differ in length. (Buckets of ~2000, a
    # whole reader run, made training lurch between long and short sentences: BLEU fell mid-epoch.)
    shuffled_when_written = True
    samples_per_shard = 65536
    # The reference's shared vocabulary; synthetic sentences of 16-64 subwords (WMT's are ~30).
    synthetic_defaults = {"vocab_size": 33708, "max_len": 64}
    synthetic_flags = {"vocab-size": "vocab_size"}

    def fields(self, info: dict) -> dict[str, dict]:
        length = int(info["max_len"])
        return {"src": field_spec((length,), "int32"), "tgt": field_spec((length,), "int32"),
                "src_len": field_spec((), "int32"), "tgt_len": field_spec((), "int32")}

    def limits(self, manifest: dict) -> dict[str, tuple[int, int]]:
        vocab, length = manifest["vocab_size"] - 1, manifest["max_len"]
        return {"src": (0, vocab), "tgt": (0, vocab), "src_len": (1, length), "tgt_len": (1, length)}

    def synthetic(self, n: int, info: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Random ids shaped as real pairs: lengths from max_len/4 to max_len (EOS included), the
        target about as long as the source, padding after EOS."""
        vocab, length = int(info["vocab_size"]), int(info["max_len"])
        if vocab <= len(SPECIAL_TOKENS):
            raise DatasetError(f"vocab_size must exceed {len(SPECIAL_TOKENS)}, got {vocab}")
        if length < 2:
            raise DatasetError(f"max_len must be at least 2, got {length}")
        out = {}
        src_len = rng.integers(max(2, length // 4), length + 1, n)
        tgt_len = np.clip(src_len + rng.integers(-2, 3, n), 2, length)
        pos = np.arange(length)[None, :]
        for side, lengths in (("src", src_len), ("tgt", tgt_len)):
            ids = rng.integers(len(SPECIAL_TOKENS), vocab, (n, length))
            ids = np.where(pos < (lengths - 1)[:, None], ids, PAD)
            ids[pos == (lengths - 1)[:, None]] = EOS
            out[side] = ids.astype(np.int32)
            out[f"{side}_len"] = lengths.astype(np.int32)
        return out


def tokenizer_path(data_dir: str | Path | None) -> str | None:
    """The tokenizer beside a prepared dataset's manifest, checked against its sha256; None for
    no dataset or a synthetic one (the model then scores ids as words)."""
    from hvdbench.data.manifest import MANIFEST, read_manifest

    if not data_dir:
        return None
    manifest = read_manifest(Path(data_dir))
    name = manifest.get("tokenizer_file")
    if not name:
        return None
    path = Path(data_dir) / name
    if not path.is_file():
        raise DatasetError(f"{Path(data_dir) / MANIFEST}: its tokenizer {path} is missing (prepare the dataset again)")
    if file_sha256(path) != manifest.get("tokenizer_sha256"):
        raise DatasetError(f"{path}: sha256 differs from the manifest's tokenizer_sha256")
    return str(path)


TRANSLATION = Translation()
