"""The `summaries` dataset kind: a prompt (a document to summarise) and its summary as one token
sequence, with labels only on the summary.

    hvdbench prepare summaries --src builtin:stdlib-docstrings --base data/lm-base --out data/summaries
    hvdbench prepare synthetic --like summaries --samples 1000 --out data/synth-summaries

Per sample (the writer is prepare.py beside this file): `input_ids` (max_len int32: BOS, the
prompt's tokens, the summary's tokens, EOS, then PAD = 0), `labels` (max_len int32: the token
itself on the summary and its EOS, IGNORE = -100 on BOS, the prompt and padding, as the MLPerf
dataset's labels: the model shifts them by one), `length` (tokens before the padding). A real
dataset carries its tokenizer (tokenizer.json) and the base checkpoint the adapters are trained on
(base.safetensors, pre-trained by `hvdbench prepare lm-base`), both named with their sha256 in the
manifest.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hvdbench.contracts import DatasetKind
from hvdbench.data.manifest import field_spec
from hvdbench.errors import DatasetError
from hvdbench.files import file_sha256

IGNORE = -100  # the label of a token the loss skips (PyTorch's and the MLPerf dataset's value)
# The tokenizer's special tokens (their ids are their positions): hvdbench/families/translation/tokens.py's BPE.
PAD, BOS, EOS = 0, 1, 2
FIRST_ORDINARY = 4  # after <pad> <s> </s> <unk>
BASE_FILE = "base.safetensors"
BASE_INFO = "base.json"


class Summaries(DatasetKind):
    name = "summaries"
    info_keys = ("vocab_size", "max_len")
    shuffled_when_written = True  # prepare writes the pairs in seeded random order
    samples_per_shard = 16384
    # Llama-2's vocabulary and the reference's packed 8,192-token sequences.
    synthetic_defaults = {"vocab_size": 32000, "max_len": 8192}
    synthetic_flags = {"vocab-size": "vocab_size"}

    def fields(self, info: dict) -> dict[str, dict]:
        length = int(info["max_len"])
        return {"input_ids": field_spec((length,), "int32"), "labels": field_spec((length,), "int32"),
                "length": field_spec((), "int32")}

    def limits(self, manifest: dict) -> dict[str, tuple[int, int]]:
        top = manifest["vocab_size"] - 1
        return {"input_ids": (0, top), "labels": (IGNORE, top), "length": (2, manifest["max_len"])}

    def synthetic(self, n: int, info: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Full-length sequences (the reference packs its sequences to 8,192 tokens): BOS, a prompt of
        random length, then a summary of an eighth to a quarter of the sequence ending in EOS."""
        vocab, length = int(info["vocab_size"]), int(info["max_len"])
        if vocab <= FIRST_ORDINARY:
            raise DatasetError(f"vocab_size must exceed {FIRST_ORDINARY}, got {vocab}")
        if length < 4:
            raise DatasetError(f"max_len must be at least 4, got {length}")
        ids = rng.integers(FIRST_ORDINARY, vocab, (n, length)).astype(np.int32)
        ids[:, 0], ids[:, -1] = BOS, EOS
        summary = rng.integers(max(1, length // 8), max(2, length // 4) + 1, n)
        pos = np.arange(length)[None, :]
        labels = np.where(pos >= (length - summary)[:, None], ids, IGNORE).astype(np.int32)
        return {"input_ids": ids, "labels": labels, "length": np.full(n, length, np.int32)}


def checked_file(data_dir: Path, name: str, sha256: str | None, what: str) -> Path:
    """A file beside a dataset's manifest, checked against the sha256 the manifest gives."""
    path = Path(data_dir) / name
    if not path.is_file():
        raise DatasetError(f"{path}: the dataset's {what} is missing (prepare the dataset again)")
    if file_sha256(path) != sha256:
        raise DatasetError(f"{path}: sha256 differs from the manifest's (the {what} was changed)")
    return path


def base_of(data_dir: str | Path | None) -> dict | None:
    """The base checkpoint a prepared dataset carries: {"path", "config"} (config: the network's
    sizes it was trained with), checked against the manifest's sha256; None for no dataset or a
    synthetic one."""
    from hvdbench.data.manifest import read_manifest

    if not data_dir:
        return None
    manifest = read_manifest(Path(data_dir))
    base = manifest.get("base")
    if not base:
        return None
    path = checked_file(Path(data_dir), base["file"], base.get("sha256"), "base checkpoint")
    return {"path": path, "config": base["config"]}


def read_base_info(folder: Path) -> dict:
    """`base.json` of a `hvdbench prepare lm-base` folder; DatasetError naming it when absent."""
    path = Path(folder) / BASE_INFO
    try:
        info = json.loads(path.read_text())
    except FileNotFoundError:
        raise DatasetError(f"{path} missing: {folder} is not a base made by `hvdbench prepare lm-base` "
                           f"(or it was interrupted: run it again)") from None
    except (OSError, ValueError) as e:
        raise DatasetError(f"{path}: unreadable ({e})") from None
    for key in ("config", "weights_file", "weights_sha256", "tokenizer_file", "tokenizer_sha256"):
        if key not in info:
            raise DatasetError(f"{path}: key {key!r} missing")
    return info


SUMMARIES = Summaries()
