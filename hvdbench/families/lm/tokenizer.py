"""The tokenizer of a language-model dataset: a Hugging Face `tokenizers` file the user gives
(Llama 3.1's tokenizer.json, which MLPerf's llama31_8b and gpt_oss_20b use; it is gated and never
fetched here), or a byte-level BPE trained on the training documents.

    tok = load(Path("tokenizer.json"))                   # a given file
    size = train(texts, vocab_size=4096, path=out / "tokenizer.json")   # or a trained one
    eos = eos_id(tok)                                    # <|end_of_text|>, </s>, <|endoftext|>...
    ids = encode(tok, ["some text", ...])                # [int32 arrays], no special tokens added

A trained tokenizer splits words as Llama 3's does (its regex: contractions, letters with one
leading non-letter, digits in runs of at most three, punctuation runs, whitespace) and then works
on bytes (nothing is ever unknown). Its one special token, `<|end_of_text|>` (Llama 3's name), is
id 0. `tokenizers`' BPE trainer is reproducible (hvdbench/data/vocab.py says why), so a rerun of a
prepare trains the same file, whose sha256 the manifest names.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from hvdbench.errors import DatasetError

TOKENIZER_FILE = "tokenizer.json"
EOS_TOKEN = "<|end_of_text|>"  # a trained tokenizer's only special token, id 0
# The end-of-document token of common tokenizer files, tried in this order when none is named:
# Llama 3 (MLPerf's C4 files), Llama 2 / Mistral / Mixtral (MLPerf's llama31_405b), GPT-2 / gpt-oss.
EOS_CANDIDATES = (EOS_TOKEN, "</s>", "<|endoftext|>", "<eos>")
# Llama 3's pre-tokenizer regex (tiktoken's cl100k pattern).
SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")
MIN_VOCAB = 256 + 1 + 1  # the byte symbols, the special token, one merge


def train(texts: Iterable[str], vocab_size: int, path: Path) -> int:
    """Train a byte-level BPE of at most `vocab_size` tokens on `texts`, write it to `path`; return
    its size (smaller than asked when the text has fewer merges to make)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < MIN_VOCAB:
        raise DatasetError(f"--vocab-size {vocab_size} is too small (the 256 byte symbols and {EOS_TOKEN} "
                           f"come first: at least {MIN_VOCAB})")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=[EOS_TOKEN], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tok.save(str(tmp))
    tmp.replace(path)
    return tok.get_vocab_size(with_added_tokens=True)


def load(path: Path):
    """A `tokenizers` file; DatasetError naming it when it is missing or not one."""
    from tokenizers import Tokenizer

    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: no such tokenizer file (a Hugging Face tokenizer.json)")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as e:  # noqa: BLE001 - tokenizers raises its own exception types
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DatasetError(f"{path}: not a Hugging Face tokenizers file ({first})") from None


def vocab_size(tok) -> int:
    """Every id the tokenizer can produce (added special tokens included: Llama 3.1's 128,256)."""
    return tok.get_vocab_size(with_added_tokens=True)


def eos_id(tok, name: str | None = None, where: str = "the tokenizer") -> int:
    """The id of the end-of-document token: `name`, else the first of EOS_CANDIDATES it has."""
    for token in ([name] if name else EOS_CANDIDATES):
        found = tok.token_to_id(token)
        if found is not None:
            return int(found)
    if name:
        raise DatasetError(f"{where} has no token {name!r} (--eos-token)")
    raise DatasetError(f"{where} has none of the usual end-of-document tokens ({', '.join(EOS_CANDIDATES)}); "
                       f"name its own with --eos-token")


def encode(tok, texts: list[str]) -> list[np.ndarray]:
    """Token ids of each text, with no special token added (not a given file's BOS either): the
    documents are joined by EOS alone, which the reference's preprocessing appends to each."""
    return [np.asarray(e.ids, np.int32) for e in tok.encode_batch(texts, add_special_tokens=False)]
