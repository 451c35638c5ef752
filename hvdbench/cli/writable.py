"""Output folders checked before the work: a command whose --out cannot be written says so at once,
in one line, instead of failing after it has measured or prepared something.

    @click.option("--out", callback=writable_out, ...)      # prepare's OUT, report, bench
    check_writable_dir(Path("results/demo"), "--out")        # sweep, or any other caller

Nothing is left behind: the folder is not created here (the command does that when it writes);
the check creates and removes one empty file in the nearest folder that exists.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from hvdbench.errors import OutputError


def check_writable_dir(path: str | os.PathLike, what: str = "--out") -> Path:
    """`path` is a folder this process can write in, or can create; OutputError naming it if not."""
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


def writable_out(ctx, param, value):
    """click callback of an --out folder option: check_writable_dir before the command runs."""
    if value is not None:
        check_writable_dir(value, "/".join(param.opts) if param is not None else "--out")
    return value
