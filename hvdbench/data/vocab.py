"""WordPiece vocabularies with the `tokenizers` library: train one on the corpus or load vocab.txt.

The vocabulary travels with the dataset as `<dir>/vocab.txt` (one token per line, id = line number)
and its sha256 is in the manifest, so a model always embeds the ids it was given.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Iterable

from hvdbench.errors import DatasetError
from hvdbench.files import atomic_write_text

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_SPECIAL = re.compile(r"^\[[^\]]+\]$")  # [PAD], [CLS], [unused17], ...


# tokenizers' WordPiece trainer is not reproducible: it numbers the "##" pieces in hash-map order and
# breaks ties between equally frequent merges by those numbers (huggingface/tokenizers#1794). Its BPE
# trainer numbers the alphabet in sorted order, so it is. We therefore train BPE on words whose
# non-initial characters are moved into a private-use plane (so "##e" is a letter of its own), and
# map the learned tokens back to WordPiece form: same algorithm, same vocabulary, every run.
_SHIFT = 0xF0000


def _mark(word: str) -> str:
    return word[0] + "".join(chr(_SHIFT + ord(c)) if ord(c) < 0xFFFE else c for c in word[1:])


def _unmark(token: str) -> str:
    if _SPECIAL.match(token):
        return token
    plain = "".join(chr(ord(c) - _SHIFT) if ord(c) >= _SHIFT else c for c in token)
    return "##" + plain if ord(token[0]) >= _SHIFT else plain


def train_vocab(sentences: Iterable[str], vocab_size: int, lowercase: bool, path: Path) -> None:
    """Train a WordPiece vocabulary of at most `vocab_size` tokens (special tokens first) and write it."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    if vocab_size <= len(SPECIAL_TOKENS) + 10:
        raise DatasetError(f"--vocab-size {vocab_size} is too small")
    normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    splitter = pre_tokenizers.BertPreTokenizer()  # what BertWordPieceTokenizer applies when encoding

    def marked_lines():
        for sentence in sentences:
            words = splitter.pre_tokenize_str(normalizer.normalize_str(sentence))
            yield " ".join(_mark(w) for w, _ in words)

    bpe = Tokenizer(models.BPE(unk_token="[UNK]"))
    bpe.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    bpe.train_from_iterator(marked_lines(), trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIAL_TOKENS, show_progress=False))
    vocab = bpe.get_vocab()
    write_vocab(path, [_unmark(t) for t in sorted(vocab, key=vocab.get)])


def write_vocab(path: Path, tokens: list[str]) -> None:
    atomic_write_text(Path(path), "".join(t + "\n" for t in tokens))


def read_vocab(path: Path) -> list[str]:
    try:
        tokens = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetError(f"{path}: cannot read vocabulary ({e})") from None
    missing = [t for t in ("[CLS]", "[SEP]", "[MASK]", "[UNK]") if t not in tokens]
    if missing:
        raise DatasetError(f"{path}: not a BERT vocabulary (no {', '.join(missing)})")
    return tokens


def vocab_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def special_ids(tokens: list[str]) -> dict[str, int]:
    index = {t: i for i, t in enumerate(tokens)}
    return {t.strip("[]").lower(): index[t] for t in SPECIAL_TOKENS if t in index}


def ordinary_ids(tokens: list[str]) -> list[int]:
    """Ids a masked token may be replaced with at random (not [PAD], [CLS], [unused3], ...)."""
    return [i for i, t in enumerate(tokens) if not _SPECIAL.match(t)]


def tokenizer(path: Path, lowercase: bool):
    from tokenizers import BertWordPieceTokenizer

    return BertWordPieceTokenizer(str(path), lowercase=lowercase)
