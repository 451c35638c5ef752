"""A report owns its --out folder, and proves what it owns: the files a report (or `hvdbench
predict`) wrote there are recorded in OUT/.hvdbench-report.json with their sha256 and the command
that wrote them. A file is replaced or deleted only when the record holds it and its bytes still
match; any other file in the way (the user's own summary.md, a file edited since) is kept and the
report refuses in one line before writing anything.

    with owned_folder(out, "report", ("csv",)) as folder:  # under OUT's lock
        ...write the files into `folder.stage` (a private folder inside OUT)...
    # then: refused, or each file moved into OUT, the last report's files of the formats this one
    # was asked for (a file's format is its extension: csv, md, png) that it did not write deleted,
    # and the record rewritten

What is written goes to a private staging folder first (mkdtemp: made by this process, mode 0700),
so nothing is written into OUT through a name another user could plant. The record of the files
about to be moved in is written before they are, so a report killed midway leaves no file its
record does not list (a leftover staging folder is removed by the next report). A record that
cannot be read (damaged, a link, not ours) is a warning: nothing it names is trusted.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path, PurePosixPath

from hvdbench.errors import OutputError
from hvdbench.files import LockFile, atomic_write_text, file_sha256
from hvdbench.output import line
from hvdbench.results.render.tables import write_markdown

REPORT_RECORD = ".hvdbench-report.json"  # OUT's record of the files reports and predictions wrote
REPORT_LOCK = ".hvdbench-report.lock"  # two reports into one folder at once: the second is refused
STAGING = ".hvdbench-report.staging-"  # the private folder a report writes into before moving in
WRITERS = ("report", "predict")  # a report deletes only what a report wrote; a prediction deletes nothing


def _plain(rel: object) -> bool:
    """A name the record may hold: a relative path of plain names inside OUT (a study's tables are
    OUT/<study>/...), no '..', no absolute path, no control character."""
    if not isinstance(rel, str) or not rel or not rel.isprintable() or "\\" in rel:
        return False
    parts = PurePosixPath(rel).parts
    return not PurePosixPath(rel).is_absolute() and all(p not in ("", ".", "..") for p in parts) and len(parts) <= 2


def read_record(out: Path) -> tuple[dict[str, dict], str]:
    """rel path -> {"sha256", "by"} of OUT's record, and a warning naming it ('' when none) where it
    cannot be read: then it proves nothing ({}), and a report into OUT keeps every file there."""
    wrote, why = _record_or_why(out)
    return wrote, _unreadable(out, why) if why else ""


def _unreadable(out: Path, why: str) -> str:
    return f"warning: {out / REPORT_RECORD}: cannot be read ({why}): no file in the folder is taken as a report's"


def _record_or_why(out: Path) -> tuple[dict[str, dict], str]:
    """OUT's record as read_record gives it, and why it cannot be read ('' when it can, or is absent)."""
    path = out / REPORT_RECORD
    try:
        if not os.path.lexists(path):
            return {}, ""
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise ValueError("not a regular file (a link, a folder?)")
        data = json.loads(path.read_text())
        wrote = data["wrote"]
        if not isinstance(wrote, dict):  # an older hvdbench's list of names, without their sha256
            raise ValueError("it names files without their sha256 (an older hvdbench's)")
    except (OSError, ValueError, KeyError, TypeError) as e:
        return {}, str(e).splitlines()[0][:120] if str(e) else type(e).__name__
    return {rel: e for rel, e in wrote.items() if _plain(rel) and isinstance(e, dict) and e.get("by") in WRITERS
            and isinstance(e.get("sha256"), str)}, ""


def _proven(out: Path, rel: str, entry: dict | None) -> bool:
    """Whether OUT/rel is the file `entry` recorded: a regular file (not a link) in a real folder of
    OUT, with the recorded sha256."""
    if entry is None:
        return False
    path = out / rel
    try:
        if any(os.path.islink(out / p) for p in PurePosixPath(rel).parents if str(p) != "."):
            return False
        return stat.S_ISREG(os.lstat(path).st_mode) and file_sha256(path) == entry["sha256"]
    except (OSError, ValueError):
        return False


class owned_folder:  # noqa: N801 (a context manager, used as one: `with owned_folder(out) as folder`)
    """`with owned_folder(out, by, formats) as folder:` write into `folder.stage` and list each file
    in `folder.staged` (see the module's doc); `.written` then holds the paths in OUT in that order,
    and `.warnings` what to print (a record that could not be read). A report's earlier file of a
    format not in `formats` stays, and in the record: fewer formats asked is not a request to delete
    the others (`report --format csv` keeps the last summary.md and plots)."""

    def __init__(self, out: Path, by: str = "report", formats: tuple[str, ...] = ("csv", "md", "png")):
        self.out, self.by, self.formats = Path(out), by, formats
        self.staged: list[Path] = []
        self.written: list[Path] = []
        self.warnings: list[str] = []
        self.lock = LockFile(self.out / REPORT_LOCK)

    def __enter__(self) -> "owned_folder":
        self.out.mkdir(parents=True, exist_ok=True)
        if not self.lock.acquire(wait=False):
            raise OutputError(f"--out {self.out}: another report is writing into this folder now; "
                              "give another --out")
        try:
            for old in self.out.glob(STAGING + "*"):  # a report killed midway left it
                if old.is_dir() and not old.is_symlink():
                    shutil.rmtree(old, ignore_errors=True)
            self.stage = Path(tempfile.mkdtemp(prefix=STAGING, dir=self.out))
        except BaseException:
            self.lock.release()
            raise
        return self

    def __exit__(self, kind, value, tb) -> None:
        try:
            if kind is None:
                self._move_in()
        finally:
            shutil.rmtree(self.stage, ignore_errors=True)
            self.lock.release()

    def _names(self) -> list[str]:
        """The staged files as paths relative to OUT: those listed, in order, then any other."""
        listed = [os.path.relpath(p, self.stage) for p in self.staged]
        outside = [str(p) for p, rel in zip(self.staged, listed) if not _plain(PurePosixPath(rel).as_posix())]
        if outside:  # a writer given the stage wrote elsewhere: a defect, never a file outside --out
            raise OutputError(f"--out {self.out}: {outside[0]} is not a plain name inside the folder")
        found = [p.relative_to(self.stage).as_posix() for p in sorted(self.stage.rglob("*")) if p.is_file()]
        return list(dict.fromkeys([PurePosixPath(rel).as_posix() for rel in listed] + found))

    def _move_in(self) -> None:
        out, stage, staged = self.out, self.stage, self._names()
        before, unread = _record_or_why(out)
        self.warnings += [_unreadable(out, unread)] if unread else []
        in_the_way = [rel for rel in staged if os.path.lexists(out / rel) and not _proven(out, rel, before.get(rel))]
        in_the_way += [rel for rel in staged if rel not in in_the_way and any(
            os.path.islink(out / p) or (out / p).is_file() for p in PurePosixPath(rel).parents if str(p) != ".")]
        if in_the_way:
            raise OutputError(f"--out {out}: {in_the_way[0]}"
                              + (f" (and {len(in_the_way) - 1} more)" if len(in_the_way) > 1 else "")
                              + " is not a file a report wrote here ("
                              + (f"{REPORT_RECORD} cannot be read ({unread}), so it proves no file" if unread
                                 else f"{REPORT_RECORD} does not hold it, or it changed since")
                              + "): it is kept; move it away or give another --out")
        new = {rel: {"sha256": file_sha256(stage / rel), "by": self.by} for rel in staged}
        # What this one replaces: a report's earlier files of the formats it was asked for.
        replaced = {rel for rel, e in before.items() if rel not in new and self.by == "report"
                    and e["by"] == "report" and PurePosixPath(rel).suffix.lstrip(".") in self.formats}
        # Still ours after this one: the rest, where unchanged (a report keeps `hvdbench predict`'s).
        kept = {rel: e for rel, e in before.items() if rel not in new and rel not in replaced and _proven(out, rel, e)}
        # Recorded before the files move in: a kill from here on leaves only files the record lists.
        self._record({**before, **new})
        for rel in staged:
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage / rel, out / rel)
            self.written.append(out / rel)
        for rel in sorted(replaced):  # the last report's files this one did not write, where still its own
            if _proven(out, rel, before[rel]):
                (out / rel).unlink()
        self._record({**kept, **new})

    def _record(self, wrote: dict) -> None:
        # os.replace replaces a link (a damaged record) itself, never what it points at.
        atomic_write_text(self.out / REPORT_RECORD, json.dumps({"wrote": dict(sorted(wrote.items()))}, indent=1) + "\n")


def write(report, out: Path, formats: tuple[str, ...] = ("csv", "md", "png"), by: str = "report") -> list[Path]:
    """Write `report` (hvdbench.results.report.build) into OUT, which it owns (owned_folder): summary.md,
    then each section's files in the order they were built. Returns the paths written; a record that
    could not be read is a warning on stderr."""
    with owned_folder(out, by, formats) as folder:
        if "md" in formats:
            folder.staged.append(write_markdown(report.text, folder.stage))
        for section in report.sections.values():
            folder.staged += section.files(folder.stage, formats)
    for text in folder.warnings:
        line(text, sys.stderr)
    return folder.written
