"""Output folders checked before the work: a command whose --out cannot be written says so at once,
in one line, instead of failing after it has measured or prepared something.

    @click.option("--out", callback=writable_out, ...)      # prepare's OUT, report, bench
    check_writable_dir(Path("results/demo"), "--out")        # sweep, or any other caller

Nothing is left behind: the folder is not created here (the command does that when it writes);
the check creates and removes one empty file in the nearest folder that exists.
"""

from __future__ import annotations

from hvdbench.files import check_writable_dir

__all__ = ["check_writable_dir", "writable_out"]


def writable_out(ctx, param, value):
    """click callback of an --out folder option: check_writable_dir before the command runs."""
    if value is not None:
        check_writable_dir(value, "/".join(param.opts) if param is not None else "--out")
    return value
