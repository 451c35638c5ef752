"""The console every command prints through: rich on a terminal; whole lines in a pipe or a file.

    console().print(table)

A rich Console that is not attached to a terminal assumes 80 columns, wraps paths mid-word and
shortens table cells with "…"; what goes to a pipe or a file must be pasteable and greppable, so
there it gets a width no table reaches and soft wrapping (lines are never broken).
"""

from __future__ import annotations

import sys

PIPE_WIDTH = 1000


def line(text: str, stream=None) -> None:
    """Print one whole line in one write, flushed. print() writes the text and its newline
    separately, and an unbuffered stream (PYTHONUNBUFFERED, as launchers set it) sends them as two
    writes: mpirun's --tag-output then tags the lone newline too ("...iters[1,0]<stdout>:")."""
    stream = sys.stdout if stream is None else stream
    stream.write(text + "\n")
    stream.flush()


def console(stderr: bool = False):
    from rich.console import Console

    # markup off: what is printed is written as it is, never read as rich's [style] tags. A worker's
    # error quotes a path in brackets ("[/tmp/.../http_store.cc:54]"), which rich took for a closing
    # tag and raised MarkupError, ending the sweep whose run it reported.
    c = Console(stderr=stderr, markup=False)
    if c.is_terminal:
        return c
    return Console(stderr=stderr, width=PIPE_WIDTH, soft_wrap=True, markup=False)


def human_bytes(n: int) -> str:
    """A size in the largest binary unit that divides it: 4 B, 64 KiB, 16 MiB, 1 GiB (the benches' tables)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"
