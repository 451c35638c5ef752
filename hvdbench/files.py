"""Files every layer writes or checks the same way (the ground floor: imports nothing of hvdbench
but errors): atomic text, bytes and PNG writes through temporary files created exclusively,
appends that never follow a link, lock files opened without following a link or truncating, a
file's sha256, an output folder checked before the work.

    atomic_write_text(Path("results/demo/scaling.csv"), text)   # readers see the old file or the new
    atomic_write_png(fig, Path("results/demo/scaling.png"))     # a matplotlib figure, the same way
    with open_no_link(Path("results/demo/run.log"), "ab") as f:  # append, never through a link
    with LockFile(Path("results/demo/.locks/runs.csv.lock")):    # flock(2), waits its turn
    file_sha256(Path("data/wmt/tokenizer.json"))                 # hex digest, read in 1 MiB blocks
    check_writable_dir(Path("results/demo"), "--out")            # OutputError naming it if not
    cached_json("flops", {"model": "bert", ...}, make)            # make() once per key, then read back
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
import tempfile
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Callable, Iterator

from hvdbench.errors import OutputError


# A new file only: O_EXCL refuses any name that exists, a symbolic link included (with O_CREAT the
# kernel never follows one), so a link planted in a shared output folder never chooses what we write.
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
# Appending to, or starting, a file of a fixed name: never through a link (ELOOP instead).
_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_TRUNCATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
# A lock file: created when missing, never truncated and never opened through a symbolic link, so a
# link (or a hard link) planted at its name is refused or left as it is, never emptied. filelock
# before 3.20.1 opened it with O_TRUNC through links (CVE-2025-68146; 3.20.3 closed the race after
# it, CVE-2026-22701, and still truncates): whatever release a cluster's Python has, a lock is this.
# O_NONBLOCK: opening a FIFO planted there never waits.
_LOCK = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _new_tmp_beside(path: Path) -> tuple[int, Path]:
    # Beside the target (same file system: os.replace is atomic), with a random part in its name so
    # nobody can guess it in advance; mode 0o666 less the umask, as a plain open() would make it.
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}-{secrets.token_hex(4)}")
        try:
            return os.open(tmp, _NEW_FILE, 0o666), tmp
        except FileExistsError:
            continue
    raise OutputError(f"{path}: cannot create a temporary file beside it (100 names taken)")


@contextmanager
def atomic_open(path: Path, mode: str = "wb", **kwargs) -> Iterator[IO]:
    """`with atomic_open(path, "w") as f:` writes a new temporary file beside `path` (created
    exclusively, never through a link), fsyncs and renames it over `path` when the block ends;
    readers see the old file or the new one. An error in the block leaves `path` as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _new_tmp_beside(path)
    try:
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` through atomic_open: readers see the old or new file."""
    with atomic_open(path, "wb") as f:
        f.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` through atomic_open: readers see the old or new file."""
    with atomic_open(path, "w", encoding="utf-8") as f:
        f.write(text)


# zlib's level for PNGs: on the published v4.1 report's 12 pages, 3 wrote them in 1.65 CPU-s and 3.6 MB
# where the default 6 took 2.07 CPU-s for 3.9 MB (RGB; RGBA at 6, matplotlib's: 2.53 CPU-s, 4.4 MB).
PNG_COMPRESS_LEVEL = 3


def atomic_write_png(fig, path: Path, dpi: int = 100) -> Path:
    """Save a matplotlib figure as PNG the same way (a half-written plot is never seen). The texts a
    figure was given (titles, labels, legends, annotations, tick labels from a list or a function)
    are drawn as written, never as mathtext or TeX: they carry what users and files gave (a --link,
    host and model names), and a `$` in them must not end the report midway. Numbers that
    matplotlib's own formatters write stay mathtext: a log axis's `2^4` reads as a power, not as
    `$\\mathdefault{2^{4}}$`.

    The figure is drawn once, into Agg's buffer, and that buffer written as the PNG: `savefig` draws a
    figure with a layout engine (constrained layout, every paged plot's) twice, once without rendering
    to place its axes, then again to render. The layout engine places the axes inside the one draw,
    before any artist is rendered, so the pixels are those `savefig` writes (tests/unit/test_files.py
    compares them; so were the published v4.1 report's 12 pages), for 10 % less CPU on that report's
    PNGs (28.0 -> 25.0 CPU-s, 2 alternating runs, 2026-11-29) and a third less on a page of 12
    log-axis panels with legends (4.4 -> 3.0 CPU-s). An opaque figure is stored without its alpha
    channel: the same colours, a smaller file for report.html to carry."""
    import matplotlib  # here: the ground floor's other writers need no matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text
    from PIL import Image

    with matplotlib.rc_context({"text.usetex": False}):
        for text in fig.findobj(Text):  # texts made before drawing: every one was given
            text.set_usetex(False)
            text.set_text(_as_written(text.get_text()))
        for ax in fig.axes:  # tick labels, made while drawing: those a list or a function gives
            for axis in (ax.xaxis, ax.yaxis):
                for which in ("major", "minor"):
                    _plain_ticks(axis, which)
        fig.set_dpi(dpi)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        image = Image.frombuffer("RGBA", canvas.get_width_height(physical=True), canvas.buffer_rgba(), "raw", "RGBA",
                                 0, 1)
        if image.getextrema()[3] == (255, 255):  # opaque (every figure of ours): no alpha channel to store
            image = image.convert("RGB")
        with atomic_open(path, "wb") as f:
            image.save(f, format="png", dpi=(dpi, dpi), pnginfo=_png_info(), compress_level=PNG_COMPRESS_LEVEL)
    return Path(path)


def _png_info():
    """The text chunk matplotlib's own PNGs carry, naming the software that drew them."""
    import matplotlib
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text("Software", f"Matplotlib version{matplotlib.__version__}, https://matplotlib.org/")
    return info


_DOLLAR = re.compile(r"(?<!\\)\$")


def _as_written(text: str) -> str:
    """`text` with every `$` escaped, so matplotlib draws it as written; escaping twice is once."""
    return _DOLLAR.sub(r"\\$", text) if "$" in text else text


def _plain_ticks(axis, which: str) -> None:
    """Wrap `axis`'s `which` tick formatter in one that escapes its labels unless it is one of matplotlib's numeric
    ones (their mathtext is wanted: powers, offsets)."""
    from matplotlib import ticker

    get, put = ((axis.get_major_formatter, axis.set_major_formatter) if which == "major" else
                (axis.get_minor_formatter, axis.set_minor_formatter))
    formatter = get()
    numeric = (ticker.ScalarFormatter, ticker.LogFormatter, ticker.LogitFormatter, ticker.EngFormatter,
               ticker.PercentFormatter, ticker.NullFormatter)
    if not isinstance(formatter, numeric) and not getattr(formatter, "as_written", False):
        put(_as_written_formatter(formatter))


def _as_written_formatter(inner):
    """A formatter that gives `inner`'s labels with their `$` escaped (_as_written)."""
    from matplotlib.ticker import Formatter

    class AsWritten(Formatter):
        as_written = True

        def __call__(self, x, pos=None):
            return _as_written(inner(x, pos))

        def format_ticks(self, values):
            return [_as_written(s) for s in inner.format_ticks(values)]

        def get_offset(self):
            return _as_written(inner.get_offset())

        def set_axis(self, axis):
            super().set_axis(axis)
            inner.set_axis(axis)

    return AsWritten()


def open_no_link(path: Path, mode: str = "a", **kwargs) -> IO:
    """open(path, mode) for "a"/"ab" (append) or "w"/"wb" (start anew) that refuses a symbolic
    link at `path` (OutputError naming it) instead of writing wherever it points."""
    flags = _APPEND if mode.startswith("a") else _TRUNCATE
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OutputError(f"{path} is a symbolic link: not written through") from None
        raise
    return os.fdopen(fd, mode, **kwargs)


class LockFile:
    """An flock(2) on a lock file: `with LockFile(path):` waits its turn; `acquire(wait=False)` is
    False at once (holding nothing) where another process holds it. The kernel releases it when the
    holder exits in any way, SIGKILL included. The file stays in place after (removing it would let
    two processes lock two different files of one name), and is opened without following a link or
    truncating it (_LOCK): a link at `path` is an OutputError naming it, in one line."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.fd: int | None = None

    def acquire(self, wait: bool = True) -> bool:
        try:
            fd = os.open(self.path, _LOCK, 0o644)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise OutputError(f"{self.path} is a symbolic link: a lock file is never opened through one "
                                  "(it would be written where the link points); remove the link") from None
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OutputError(f"{self.path} is not a regular file: it cannot be a lock file; remove it")
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except OSError as e:  # ENOLCK, ENOSYS: a file system without flock(2) (some NFS and Lustre mounts)
            os.close(fd)
            raise OutputError(f"{self.path}: cannot be locked ({e.strerror}): put the folder on a file system "
                              "with flock(2) locks") from None
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)  # closing the only descriptor of the open file releases its flock

    def __enter__(self) -> "LockFile":
        self.acquire(wait=True)
        return self

    def __exit__(self, *exc) -> None:
        self.release()


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


def cache_dir() -> Path:
    """Where hvdbench keeps what it can make again: $HVDBENCH_CACHE, else $XDG_CACHE_HOME/hvdbench,
    else ~/.cache/hvdbench (where `make setup` keeps its Horovod wheel: scripts/setup.sh)."""
    if os.environ.get("HVDBENCH_CACHE"):
        return Path(os.environ["HVDBENCH_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hvdbench"


def cached_json(name: str, key: dict, make: Callable[[], dict]) -> dict:
    """make()'s answer for `key` (JSON values), stored once in cache_dir()/name/ under the key's
    sha256 and read back by every later call with an equal key (the stored key is compared whole, so
    a damaged or colliding file is a miss, made again). A cache that cannot be read or written costs
    the making, never an error: the answer must not depend on it. Written atomically, never through
    a link (atomic_write_text), so ranks and runs asking at once each see a whole file or none."""
    text = json.dumps(key, sort_keys=True, default=str)
    path = cache_dir() / name / f"{hashlib.sha256(text.encode()).hexdigest()}.json"
    with suppress(OSError, ValueError, TypeError, KeyError):
        if path.is_file() and not path.is_symlink():
            stored = json.loads(path.read_text(encoding="utf-8"))
            if json.dumps(stored["key"], sort_keys=True, default=str) == text:
                return stored["value"]
    value = make()
    with suppress(OSError, OutputError):
        atomic_write_text(path, json.dumps({"key": json.loads(text), "value": value}, sort_keys=True))
    return value
