"""Files every layer writes or checks the same way (the ground floor: imports nothing of hvdbench
but errors): atomic text and PNG writes, a file's sha256, an output folder checked before the work.

    atomic_write_text(Path("results/demo/scaling.csv"), text)   # readers see the old file or the new
    atomic_write_png(fig, Path("results/demo/scaling.png"))     # a matplotlib figure, the same way
    file_sha256(Path("data/wmt/tokenizer.json"))                 # hex digest, read in 1 MiB blocks
    check_writable_dir(Path("results/demo"), "--out")            # OutputError naming it if not
"""

from __future__ import annotations

import errno
import hashlib
import os
import tempfile
from pathlib import Path

from hvdbench.errors import OutputError


def _tmp_beside(path: Path) -> Path:
    # Beside the target (same file system: os.replace is atomic), named per process so two writers
    # of one file never share a temporary file.
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


def atomic_write_text(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, fsync, rename: readers see the old or new file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_beside(path)
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def atomic_write_png(fig, path: Path, dpi: int = 100) -> Path:
    """Save a matplotlib figure as PNG the same way (a half-written plot is never seen)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_beside(path)
    try:
        fig.savefig(tmp, format="png", dpi=dpi)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def file_sha256(path: Path) -> str:
    """The file's sha256 in hex, read in 1 MiB blocks (a base model's weights need not fit twice)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_writable_dir(path: str | os.PathLike, what: str = "--out") -> Path:
    """`path` is a folder this process can write in, or can create; OutputError naming it if not.

    Nothing is left behind: the folder is not created here (the command does that when it writes);
    the check creates and removes one empty file in the nearest folder that exists."""
    path = Path(path)
    probe = path
    while not probe.exists() and probe != probe.parent:
        if probe.is_symlink():  # a dangling link: writing through it would create its target
            raise OutputError(f"{what} {path}: {probe} is a symbolic link to a missing "
                              f"{os.readlink(probe)}")
        probe = probe.parent
    if not probe.is_dir():
        raise OutputError(f"{what} {path}: {probe} is not a folder")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".hvdbench-write-check-", dir=probe)
    except OSError as e:
        where = "" if probe == path else f" (in {probe}, where it would be created)"
        # ENOENT for a folder that exists: a pseudo file system (/proc, /sys) where nothing is created.
        reason = "no files can be created there" if e.errno == errno.ENOENT else e.strerror or str(e)
        raise OutputError(f"{what} {path}: cannot write{where}: {reason}") from None
    os.close(fd)
    os.unlink(tmp)
    return path
