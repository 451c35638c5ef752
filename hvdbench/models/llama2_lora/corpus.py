"""Summarisation pairs (document -> summary): built from CPython's standard library, or read from
GovReport-style JSON lines.

    hvdbench prepare summaries --src builtin:stdlib-docstrings --base data/lm-base --out data/summaries
    hvdbench prepare summaries --src gov_report/train.jsonl --val-src gov_report/validation.jsonl \\
        --base data/lm-base --max-len 8192 --out data/gov-report

`builtin:stdlib-docstrings`: the docstrings of the standard library's own sources (this
interpreter's `sysconfig` stdlib folder), parsed with `ast` (nothing is imported or run). PEP 257
writes a docstring as a one-line summary, a blank line, then a body that says more; the body is
the document and its summary line the summary, a summarisation task shaped like GovReport (a report
and the summary written for it), in real English written by people. Docstrings of modules,
classes and functions are taken when the summary is one line and the body has 20-300 words;
test suites (`test/`, `tests/`, `idle_test/`) and site-packages are left out, repeats dropped. On
CPython 3.11 that is about 1,900 pairs (117k body words); another Python version gives another
corpus, so the version and a hash of the pairs go into the manifest.

GovReport-style JSON lines: one JSON object per line holding the document under "input"
(SCROLLS' gov_report, which MLPerf's dataset is made from), "report" or "document", and its
summary under "output" or "summary".
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import re
import sys
import sysconfig
from pathlib import Path

from hvdbench.data.text import read_utf8
from hvdbench.errors import DatasetError

BUILTIN_STDLIB = "builtin:stdlib-docstrings"
MIN_BODY_WORDS, MAX_BODY_WORDS = 20, 300
# Folders of the stdlib that hold test suites (their docstrings describe tests, not the library)
# or third-party packages.
SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "__pycache__"}
DOCUMENT_KEYS = ("input", "report", "document")
SUMMARY_KEYS = ("output", "summary")

_PARAGRAPH = re.compile(r"\n[ \t]*\n")


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def docstring_pair(doc: str) -> tuple[str, str] | None:
    """(body, summary) of a PEP 257 docstring (summary line, blank line, body), or None when it
    has no one-line summary followed by a body of 20-300 words."""
    parts = _PARAGRAPH.split(doc.strip(), maxsplit=1)
    if len(parts) != 2:
        return None
    summary, body = parts[0].strip(), parts[1].strip()
    if not summary or "\n" in summary:
        return None
    if not MIN_BODY_WORDS <= len(body.split()) <= MAX_BODY_WORDS:
        return None
    return body, summary


def source_pairs(source: bytes, where: str = "<source>") -> list[tuple[str, str]]:
    """The (body, summary) pairs of one Python source's module, class and function docstrings, in
    the order `ast.walk` meets them; a source that does not parse gives none."""
    try:
        tree = ast.parse(source, filename=where)
    except (SyntaxError, ValueError):  # a few stdlib files are deliberately broken or not UTF-8
        return []
    pairs = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            pair = docstring_pair(doc) if doc else None
            if pair:
                pairs.append(pair)
    return pairs


def stdlib_pairs(root: Path | None = None) -> dict:
    """{"pairs": [(body, summary)], "files": how many sources were read, "sha256": of the pairs}
    from every .py file under the stdlib folder (sorted paths, repeats dropped)."""
    found = _parsed_pairs(Path(root) if root else stdlib_dir())
    return {**found, "pairs": list(found["pairs"])}  # the caller's own list: the cached one stays as read


# Parsing every source is the slow part (26 s measured on the shared 2-core machine under load); a
# process that reads the corpus twice (the unit tests: the corpus, then a dataset made from it)
# parses it once.
@functools.lru_cache(maxsize=1)
def _parsed_pairs(root: Path) -> dict:
    if not root.is_dir():
        raise DatasetError(f"{root}: the standard library's folder is missing (sysconfig's 'stdlib' path)")
    files = [p for p in sorted(root.rglob("*.py")) if not SKIP_DIRS & set(p.relative_to(root).parts[:-1])]
    pairs, seen = [], set()
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        for body, summary in source_pairs(data, str(path)):
            key = (" ".join(body.split()), summary)
            if key not in seen:
                seen.add(key)
                pairs.append((body, summary))
    if not pairs:
        raise DatasetError(f"{root}: no docstring with a one-line summary and a 20-300-word body")
    return {"pairs": pairs, "files": len(files), "sha256": hash_pairs(pairs)}


def read_jsonl(path: str | Path) -> list[tuple[str, str]]:
    """(document, summary) pairs of a GovReport-style JSON lines file; DatasetError naming the
    file and line for anything else."""
    path = Path(path)
    text = read_utf8(path)
    pairs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise DatasetError(f"{path}:{number}: not a JSON object") from None
        if not isinstance(row, dict):
            raise DatasetError(f"{path}:{number}: not a JSON object")
        document = next((row[k] for k in DOCUMENT_KEYS if k in row), None)
        summary = next((row[k] for k in SUMMARY_KEYS if k in row), None)
        if not isinstance(document, str) or not isinstance(summary, str):
            raise DatasetError(f"{path}:{number}: needs a document ({', '.join(map(repr, DOCUMENT_KEYS))}) "
                               f"and a summary ({', '.join(map(repr, SUMMARY_KEYS))}) as strings")
        if document.strip() and summary.strip():
            pairs.append((document.strip(), summary.strip()))
    if not pairs:
        raise DatasetError(f"{path}: no (document, summary) pair")
    return pairs


def hash_pairs(pairs) -> str:
    h = hashlib.sha256()
    for body, summary in pairs:
        h.update(json.dumps([body, summary]).encode())
        h.update(b"\n")
    return h.hexdigest()


def load(src: str) -> dict:
    """{"pairs", "sha256", "source": what to record about where they came from}."""
    if src == BUILTIN_STDLIB:
        found = stdlib_pairs()
        return {"pairs": found["pairs"], "sha256": found["sha256"],
                "source": {"corpus": src, "python": sys.version.split()[0], "stdlib_dir": str(stdlib_dir()),
                           "source_files": found["files"]}}
    if src.startswith("builtin:"):
        raise DatasetError(f"unknown built-in corpus {src!r}; the one built in is {BUILTIN_STDLIB}")
    pairs = read_jsonl(src)
    return {"pairs": pairs, "sha256": hash_pairs(pairs),
            "source": {"corpus": "jsonl", "src_file": str(Path(src).resolve())}}
