"""Writes into an output folder never go through a link hvdbench did not make (issue 50, item 9):
whoever can create files in a shared results folder plants links at the names a writer will use."""

import os
import stat

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from hvdbench.errors import OutputError  # noqa: E402
from hvdbench.events import EventLog  # noqa: E402
from hvdbench.files import LockFile, atomic_open, atomic_write_png, atomic_write_text, open_no_link  # noqa: E402
from hvdbench.results.records.store import append_rows  # noqa: E402
from hvdbench.results.records.schema import AllreduceRow  # noqa: E402


def plant(folder, name, victim):
    """Links at the temporary names a writer of `name` used to take (its pid and the next ones)."""
    for pid in range(os.getpid(), os.getpid() + 4):
        (folder / f".{name}.tmp{pid}").symlink_to(victim)


def test_an_atomic_text_write_never_writes_through_a_planted_link(tmp_path, victim):
    out = tmp_path / "out"
    out.mkdir()
    plant(out, "scaling.csv", victim)
    atomic_write_text(out / "scaling.csv", "a,b\n1,2\n")
    assert victim.read_text() == "mine\n"
    assert (out / "scaling.csv").read_text() == "a,b\n1,2\n" and not (out / "scaling.csv").is_symlink()
    # the file has the mode a plain open() gives (0o666 less the umask), not mkstemp's 0o600
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((out / "scaling.csv").stat().st_mode) == 0o666 & ~umask


def test_an_atomic_png_write_never_writes_through_a_planted_link(tmp_path, victim):
    out = tmp_path / "out"
    out.mkdir()
    plant(out, "scaling.png", victim)
    fig = plt.figure()
    try:
        atomic_write_png(fig, out / "scaling.png")
    finally:
        plt.close(fig)
    assert victim.read_text() == "mine\n"
    assert (out / "scaling.png").read_bytes().startswith(b"\x89PNG")


def test_a_store_append_never_writes_through_a_planted_link(tmp_path, victim):
    out = tmp_path / "sweep"
    out.mkdir()
    plant(out, "allreduce.csv", victim)
    row = AllreduceRow(**{c: "" for c in AllreduceRow.columns()})
    append_rows(out / "allreduce.csv", [row])
    assert victim.read_text() == "mine\n"
    assert (out / "allreduce.csv").read_text().startswith(",".join(AllreduceRow.columns()[:2]))


def test_an_error_while_writing_leaves_the_old_file_and_no_temporary_one(tmp_path):
    path = tmp_path / "summary.md"
    path.write_text("old\n")
    with pytest.raises(RuntimeError):
        with atomic_open(path, "w") as f:
            f.write("half")
            raise RuntimeError("killed midway")
    assert path.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["summary.md"]


def test_appends_refuse_a_link_at_the_name_in_one_line(tmp_path, victim):
    log = tmp_path / "run.log"
    log.symlink_to(victim)
    for mode in ("a", "ab", "wb"):
        with pytest.raises(OutputError, match=r"run\.log is a symbolic link: not written through"):
            open_no_link(log, mode)
    assert victim.read_text() == "mine\n"
    with open_no_link(tmp_path / "new.log", "ab") as f:  # a plain file is appended to
        f.write(b"one\n")
    with open_no_link(tmp_path / "new.log", "ab") as f:
        f.write(b"two\n")
    assert (tmp_path / "new.log").read_bytes() == b"one\ntwo\n"


def test_a_lock_file_is_never_opened_through_a_link_nor_emptied(tmp_path, victim):
    """Issue 57, case 1: filelock before 3.20.1 opened its lock file with O_TRUNC through a link
    planted at its name, emptying what it pointed at. A LockFile refuses a symbolic link (and a FIFO)
    in one line naming it, and opens a hard link to someone's file without truncating it."""
    lock = tmp_path / "runs.csv.lock"
    lock.symlink_to(victim)
    with pytest.raises(OutputError, match=f"^{lock} is a symbolic link: a lock file is never opened through one"):
        LockFile(lock).acquire()
    lock.unlink()
    os.mkfifo(lock)
    with pytest.raises(OutputError, match=f"^{lock} is not a regular file"):
        LockFile(lock).acquire()
    lock.unlink()
    os.link(victim, lock)
    with LockFile(lock):
        assert not LockFile(lock).acquire(wait=False)  # held: another open of it is refused at once
    assert victim.read_text() == "mine\n"
    second = LockFile(lock)
    assert second.acquire(wait=False)
    second.release()


def test_the_event_log_is_never_appended_through_a_link(tmp_path, victim):
    (tmp_path / "mllog.txt").symlink_to(victim)
    with pytest.raises(OutputError, match="mllog.txt is a symbolic link"):
        EventLog(tmp_path / "mllog.txt")
    assert victim.read_text() == "mine\n"


def test_text_from_users_is_drawn_as_written_never_as_mathtext(tmp_path):
    # a --link, a host or a model name holding `$`: mathtext would refuse "$\frac{$" while drawing
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.add_subplot()
    ax.bar([0, 1], [1, 2])
    ax.set_xticks([0, 1], ["node$1", r"$\frac{$"])
    ax.set_title(r"link: 100G $\frac{ Ethernet$")
    ax.legend([r"$\undefined$"])
    fig.suptitle("cost $5 $")
    atomic_write_png(fig, tmp_path / "scaling.png")
    assert (tmp_path / "scaling.png").read_bytes().startswith(b"\x89PNG")


def test_a_cached_answer_is_made_once_per_key_and_read_back(tmp_path, monkeypatch):
    from hvdbench.files import cache_dir, cached_json

    monkeypatch.setenv("HVDBENCH_CACHE", str(tmp_path / "cache"))
    assert cache_dir() == tmp_path / "cache"
    made = []

    def make(answer):
        def _make():
            made.append(answer)
            return {"answer": answer}
        return _make

    assert cached_json("t", {"a": 1, "b": [2]}, make(1)) == {"answer": 1}
    assert cached_json("t", {"b": [2], "a": 1}, make(2)) == {"answer": 1}  # the same key, in any order
    assert cached_json("t", {"a": 2, "b": [2]}, make(3)) == {"answer": 3}  # another key
    assert made == [1, 3]
    # A damaged file is a miss, made again and stored whole.
    (stored,) = [p for p in (tmp_path / "cache/t").iterdir() if '"a": 1' in p.read_text()]
    stored.write_text('{"key": ')
    assert cached_json("t", {"a": 1, "b": [2]}, make(4)) == {"answer": 4} and made[-1] == 4
    assert cached_json("t", {"a": 1, "b": [2]}, make(5)) == {"answer": 4}


def test_a_cache_that_cannot_be_written_costs_the_making_never_an_error(tmp_path, monkeypatch, victim):
    from hvdbench.files import cached_json

    monkeypatch.setenv("HVDBENCH_CACHE", str(tmp_path / "file"))
    (tmp_path / "file").write_text("not a folder")
    assert cached_json("t", {"a": 1}, lambda: {"answer": 1}) == {"answer": 1}
    # A link planted at the answer's name is neither read nor written through.
    monkeypatch.setenv("HVDBENCH_CACHE", str(tmp_path / "cache"))
    cached_json("t", {"a": 1}, lambda: {"answer": 1})
    (path,) = (tmp_path / "cache/t").iterdir()
    path.unlink()
    path.symlink_to(victim)
    assert cached_json("t", {"a": 1}, lambda: {"answer": 2}) == {"answer": 2}
    assert victim.read_text() == "mine\n"


def _drawn_width(fig, text) -> float:
    return text.get_window_extent(fig.canvas.get_renderer()).width


def _plain_width(fig, string: str, size: float) -> float:
    """The width of `string` drawn as written (no mathtext) at `size` points on `fig`'s canvas."""
    probe = fig.text(0, 0, string, fontsize=size, parse_math=False)
    width = _drawn_width(fig, probe)
    probe.remove()
    return width


def test_log_axis_ticks_are_drawn_as_powers_while_given_texts_stay_as_written(tmp_path):
    # issue 58: turning mathtext off for every text printed a log axis's ticks as
    # `$\mathdefault{2^{4}}$` (convergence.png, bench allreduce's plot)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot([2, 16, 256], [1, 2, 3])
    ax.set_xscale("log", base=2)
    ax.set_title(r"link: 100G $\frac{ Ethernet$")
    ax.set_yticks([1, 2], ["node$1", "$x$"])
    atomic_write_png(fig, tmp_path / "log.png")
    powers = [t for t in ax.get_xticklabels() if t.get_text() and t.get_visible()]
    assert powers and all(r"\mathdefault" in t.get_text() for t in powers)
    for t in powers:  # drawn as 2 with a superscript, far narrower than the raw text would be
        assert _drawn_width(fig, t) < 0.5 * _plain_width(fig, t.get_text(), t.get_fontsize())
    title = ax.title
    assert _drawn_width(fig, title) == pytest.approx(_plain_width(fig, r"link: 100G $\frac{ Ethernet$",
                                                                  title.get_fontsize()), rel=0.01)
    given = ax.get_yticklabels()
    assert [_drawn_width(fig, t) for t in given] == pytest.approx(
        [_plain_width(fig, s, given[0].get_fontsize()) for s in ("node$1", "$x$")], rel=0.01)


def test_a_png_drawn_once_has_the_pixels_savefig_draws_twice(tmp_path):
    # atomic_write_png draws a constrained-layout figure once (savefig: a layout draw, then the
    # rendering one); the layout, the texts and every pixel are the same.
    import io

    import numpy as np
    from matplotlib.figure import Figure
    from PIL import Image

    def figure():
        fig = Figure(figsize=(9, 6), layout="constrained")
        for i, ax in enumerate(fig.subplots(2, 2).flat):
            for k in range(3):
                ax.plot([8, 16, 64, 256], [k + 1, 2 * k + 1.5, 3 * k + 2, 4 * k + 2], marker="o", label=f"system {k}")
            ax.set_xscale("log", base=2)
            ax.set_title(f"panel {i}: a title long enough\nto take two lines")
            ax.set_xlabel("GPUs")
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3, fontsize=7)
        fig.suptitle("hardware named once")
        return fig

    atomic_write_png(figure(), tmp_path / "once.png", dpi=80)
    saved = io.BytesIO()
    figure().savefig(saved, format="png", dpi=80)
    once, twice = Image.open(tmp_path / "once.png"), Image.open(saved)
    assert once.size == twice.size == (720, 480)
    # An opaque figure is stored without its alpha channel: the same colours.
    assert (once.mode, twice.mode, twice.getextrema()[3]) == ("RGB", "RGBA", (255, 255))
    assert np.array_equal(np.asarray(once), np.asarray(twice)[..., :3])
    assert once.info["Software"] == twice.info["Software"] and once.info["dpi"] == pytest.approx(twice.info["dpi"])
    # A see-through figure keeps its alpha.
    clear = figure()
    clear.patch.set_alpha(0)
    atomic_write_png(clear, tmp_path / "clear.png", dpi=80)
    assert Image.open(tmp_path / "clear.png").mode == "RGBA"
