"""The shared subword vocabulary of a translation dataset: byte-level BPE trained with `tokenizers`.

    train_tokenizer(lines, vocab_size=8000, path=out / "tokenizer.json")
    tok = load_tokenizer(out / "tokenizer.json")
    ids = encode(tok, ["cannot open %s"])          # [array([...], int32)] (no EOS)
    texts = Detokenizer(out / "tokenizer.json")(id_rows)   # exact text back (specials dropped)

One vocabulary for both languages (the references share it, so the embedding can be tied). It is
byte-level (every byte is a symbol: nothing is ever unknown, and decoding gives back the exact
text, which BLEU then scores against the exact reference). Words are split GPT-2 style (a leading
space belongs to the word after it) with one change: a printf placeholder (`%s`, `%d`, `%1$s`,
`%-10lu`) is a piece of its own, never merged with its neighbours, so it is learnt as one token.

`tokenizers`' BPE trainer is reproducible (it numbers the alphabet in sorted order and breaks ties
between equally frequent merges by those numbers; hvdbench/data/vocab.py says more), so the same
corpus gives the same tokenizer.json, whose sha256 goes into the manifest.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from hvdbench.errors import DatasetError

SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<unk>"]
PAD, BOS, EOS, UNK = range(4)  # their ids: the first entries of every vocabulary
TOKENIZER_FILE = "tokenizer.json"
VOCAB_FILE = "vocab.txt"

# printf conversions: %s %d %lu %5.2f %-10s %1$s %*d %zu %PRIu64-style macros are not expanded.
PLACEHOLDER = r"%(?:\d+\$)?[-+#0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|ll|[hlLqjzt])?[diouxXeEfFgGaAcspn]"
# GPT-2's split with the placeholder first and "%" left out of punctuation runs (else "„%s“"
# would split as "„%" + "s“").
SPLIT = (rf" ?{PLACEHOLDER}| ?\p{{L}}+| ?\p{{N}}+| ?[^\s\p{{L}}\p{{N}}%]+| ?%|\s+(?!\S)|\s+")


def new_tokenizer():
    from tokenizers import (
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
    )

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    return tok


def train_tokenizer(lines: Iterable[str], vocab_size: int, path: Path) -> int:
    """Train byte-level BPE of at most `vocab_size` tokens (specials first) on `lines`, write it
    to `path`; return the vocabulary's size (smaller than asked when the corpus has few merges)."""
    from tokenizers import pre_tokenizers, trainers

    if vocab_size < len(SPECIAL_TOKENS) + 256 + 1:
        raise DatasetError(f"--vocab-size {vocab_size} is too small (the 256 byte symbols and "
                           f"{len(SPECIAL_TOKENS)} special tokens come first)")
    tok = new_tokenizer()
    tok.train_from_iterator(lines, trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIAL_TOKENS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tok.save(str(tmp))
    tmp.replace(path)
    return tok.get_vocab_size()


def load_tokenizer(path: Path):
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # noqa: BLE001 - tokenizers raises its own exception types
        raise DatasetError(f"{path}: not a tokenizer file ({str(e).splitlines()[0] if str(e) else e})") from None
    for i, t in enumerate(SPECIAL_TOKENS):
        if tok.token_to_id(t) != i:
            raise DatasetError(f"{path}: token {t!r} is not id {i} (not a translation vocabulary)")
    return tok


def write_vocab_list(tok, path: Path) -> None:
    """The tokens in id order, one per line (byte-level tokens hold no line break: bytes below 33
    are mapped to letters of their own)."""
    vocab = tok.get_vocab()
    Path(path).write_text("".join(t + "\n" for t in sorted(vocab, key=vocab.get)), encoding="utf-8")


def encode(tok, texts: list[str]) -> list[np.ndarray]:
    return [np.asarray(e.ids, np.int32) for e in tok.encode_batch(texts, add_special_tokens=False)]


class Detokenizer:
    """Token id rows -> text: everything from the first EOS on and padding are dropped. Without a
    tokenizer (synthetic data) each id reads as a word `w<id>`, so BLEU still compares ids."""

    def __init__(self, path: Path | None):
        self.tok = load_tokenizer(path) if path else None

    def __call__(self, rows) -> list[str]:
        cut = []
        for row in rows:
            row = [int(i) for i in row]
            if EOS in row:
                row = row[:row.index(EOS)]
            cut.append([i for i in row if i > UNK])
        if self.tok is None:
            return [" ".join(f"w{i}" for i in row) for row in cut]
        return self.tok.decode_batch(cut, skip_special_tokens=True)
