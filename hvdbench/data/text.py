"""Text corpora as documents of sentences, in the MLPerf BERT reference's convention.

A corpus file holds one sentence per line and a blank line between documents. `builtin:pydoc` is the
English documentation that ships inside CPython (`pydoc_data.topics`, the text `help()` shows): one
document per topic, its paragraphs split into sentences here, so tests and the quick start train on
real prose without a download.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from hvdbench.errors import DatasetError

BUILTIN_PYDOC = "builtin:pydoc"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_RULE = re.compile(r"^[\s*=\-~^]+$")  # the reST underlines of section titles


def read_utf8(path: str | Path) -> str:
    """A text file's content; a one-line DatasetError naming the file when it is missing, not
    UTF-8 or unreadable."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except UnicodeDecodeError as e:
        raise DatasetError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise DatasetError(f"{path}: cannot read ({e.strerror})") from None


def expand_sources(sources: list[str], what: str = "--src", pick=None, described: str = "text files") -> list[str]:
    """`builtin:pydoc`, files, or folders (their files, sorted, or those `pick(files)` keeps, named
    `described` when none are left); a missing path is a DatasetError naming `what`."""
    out = []
    for src in sources:
        if src == BUILTIN_PYDOC:
            out.append(src)
            continue
        if src.startswith("builtin:"):
            raise DatasetError(f"unknown built-in corpus {src!r}; the one built in is {BUILTIN_PYDOC}")
        path = Path(src)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
            files = pick(files) if pick else files
            if not files:
                raise DatasetError(f"{path}: no {described} in this folder")
            out += [str(p) for p in files]
        elif path.is_file():
            out.append(str(path))
        else:
            raise DatasetError(f"{path}: no such file or folder ({what})")
    if not out:
        raise DatasetError(f"no text given ({what} FILE|DIR|{BUILTIN_PYDOC})")
    seen: dict[object, str] = {}
    for src in out:  # a file named twice (or in a folder also given) would be read, and trained on, twice
        key = src if src == BUILTIN_PYDOC else Path(src).resolve()
        if key in seen:
            again = "" if seen[key] == src else f" (also as {seen[key]})"
            raise DatasetError(f"{src}: given twice to {what}{again}: its documents would be read twice")
        seen[key] = src
    return out


def shared_file(train: list[str], val: list[str]) -> tuple[str, str] | None:
    """The first (val, train) pair of sources that are one file (validation text trained on), or None."""
    files = {Path(t).resolve(): t for t in train if t != BUILTIN_PYDOC}
    return next(((v, files[Path(v).resolve()]) for v in val if Path(v).resolve() in files), None)


def read_documents(source: str) -> list[list[str]]:
    """[[sentence, ...], ...]: the source's documents, empty ones dropped."""
    if source == BUILTIN_PYDOC:
        return pydoc_documents()
    try:
        text = Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetError(f"{source}: cannot read as UTF-8 text ({e})") from None
    docs, current = [], []
    for line in text.splitlines():
        line = line.strip()
        if line:
            current.append(line)
        elif current:
            docs.append(current)
            current = []
    if current:
        docs.append(current)
    if not docs:
        raise DatasetError(f"{source}: no text")
    return docs


def pydoc_documents() -> list[list[str]]:
    from pydoc_data.topics import topics

    docs = []
    for name in sorted(topics):
        sentences = []
        for paragraph in re.split(r"\n\s*\n", topics[name]):
            lines = [ln.strip() for ln in paragraph.splitlines() if ln.strip() and not _RULE.match(ln)]
            if lines:
                sentences += [s for s in _SENTENCE_END.split(" ".join(lines)) if s]
        if sentences:
            docs.append(sentences)
    return docs


def iter_sentences(sources: list[str]) -> Iterator[str]:
    for source in sources:
        for doc in read_documents(source):
            yield from doc


def hold_out(pairs: list, fraction: float, seed: int, where: str, what: str = "pairs") -> tuple[list, list]:
    """(train, val): a seeded `fraction` of `pairs` held out for validation (at least one), in their
    order; a DatasetError naming `where` when too few are left to train on. The prepares of paired
    text (translation, summaries) split the same way, so a seed gives the same split."""
    import numpy as np

    n_val = max(1, round(fraction * len(pairs)))
    if len(pairs) - n_val < 1:
        raise DatasetError(f"{where}: {len(pairs)} {what} are too few to hold out a validation split")
    held = set(np.random.default_rng([seed, 1]).choice(len(pairs), n_val, replace=False).tolist())
    return [p for k, p in enumerate(pairs) if k not in held], [p for k, p in enumerate(pairs) if k in held]
