"""The evidence bundle: one archive of a sweep for the person who signs off (runs.csv, sweep.json with
every host's hardware record, each run's result.json, config.yaml, mllog.txt, ranks.csv and
hardware.json with its torch/CUDA/NCCL versions, the bench CSVs, and the report with report.html),
with a sha256 manifest; `verify` names any file changed or missing since.

    hvdbench bundle write results/demo --out demo-evidence.tar.gz
    hvdbench bundle verify demo-evidence.tar.gz                   # the archive against its manifest
    hvdbench bundle verify demo-evidence.tar.gz --sweep results/demo   # and the sweep folder since

The archive holds SWEEP_NAME/... and MANIFEST.sha256 (`sha256sum -c` reads it once extracted). Files are
read without following a link (a link in the sweep is left out and said); the archive is never
extracted to be verified.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from hvdbench.errors import ConfigError, OutputError
from hvdbench.files import atomic_open
from hvdbench.results import report as library
from hvdbench.results.records.store import RUNS_CSV, sweep_folder

MANIFEST = "MANIFEST.sha256"
# What a sweep folder holds that is no evidence: its locks, a report's lock and staging folders.
LEFT_OUT = (".locks", ".hvdbench-report.lock", ".hvdbench-report.staging-")


@dataclass
class Written:
    archive: Path
    files: int
    left_out: list[str] = field(default_factory=list)  # links and other non-files, one line each
    report_built: bool = False


def _read_no_link(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _evidence(sweep: Path) -> tuple[list[Path], list[str]]:
    """The sweep folder's regular files (sorted), and what was left out (links, devices), one line each."""
    files, left = [], []
    for root, dirs, names in os.walk(sweep):
        dirs[:] = sorted(d for d in dirs if not d.startswith(LEFT_OUT))
        for name in sorted(names):
            path = Path(root) / name
            if name.startswith(LEFT_OUT):
                continue
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                files.append(path)
            else:
                left.append(f"{path}: {'a symbolic link' if stat.S_ISLNK(mode) else 'not a regular file'}, left out")
        for d in list(dirs):
            if os.path.islink(Path(root) / d):
                left.append(f"{Path(root) / d}: a symbolic link to a folder, left out")
    return files, left


def _add(tar: tarfile.TarFile, name: str, data: bytes, mtime: float) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(mtime), 0o644
    tar.addfile(info, io.BytesIO(data))


def write(sweep: Path, out: Path) -> Written:
    """The archive of SWEEP at OUT (refused where OUT exists: nothing is replaced). Without SWEEP/report,
    the report is built for the archive in a private temporary folder (removed after)."""
    sweep = sweep_folder(sweep)
    if not (sweep / RUNS_CSV).is_file():
        raise ConfigError(f"{sweep}: no {RUNS_CSV} (a sweep folder, `hvdbench sweep --out DIR`)")
    if os.path.lexists(out):
        raise OutputError(f"--out {out}: already exists; it is kept: give another name")
    files, left = _evidence(sweep)
    base = sweep.resolve().name
    built = not (sweep / "report" / "report.html").is_file()
    temp = Path(tempfile.mkdtemp(prefix="hvdbench-bundle-")) if built else None
    try:
        extra: list[tuple[str, Path]] = []
        if temp is not None:
            report = library.build(library.load([sweep]))
            for path in library.write(report, temp / "report"):
                extra.append((f"{base}/report/{path.relative_to(temp / 'report').as_posix()}", path))
        lines = []
        with atomic_open(Path(out), "wb") as f, tarfile.open(fileobj=f, mode="w:gz") as tar:
            members = [(f"{base}/{p.relative_to(sweep).as_posix()}", p) for p in files]
            members += [(name, p) for name, p in extra if name not in dict(members)]
            for name, path in members:
                data = _read_no_link(path)
                _add(tar, name, data, os.lstat(path).st_mtime)
                lines.append(f"{hashlib.sha256(data).hexdigest()}  {name}\n")
            _add(tar, MANIFEST, "".join(lines).encode(), os.path.getmtime(sweep / RUNS_CSV))
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    return Written(Path(out), len(lines), left, built)


def _manifest(text: str, where: str) -> dict[str, str]:
    found = {}
    for n, line in enumerate(text.splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest) or not name:
            raise ConfigError(f"{where}: {MANIFEST} line {n}: not 'SHA256  PATH'")
        found[name] = digest
    return found


def verify(archive: Path, sweep: Path | None = None) -> list[str]:
    """One line per file changed, missing or added since the bundle was written: inside the archive
    (against its manifest) and, with `sweep`, in the sweep folder (against the manifest's files of it).
    [] when everything matches."""
    try:
        tar = tarfile.open(archive, mode="r:*")
    except (OSError, tarfile.TarError) as e:
        raise ConfigError(f"{archive}: not an archive hvdbench bundle wrote ({e})") from None
    with tar:
        held: dict[str, str] = {}
        manifest = None
        for member in tar:
            if not member.isfile():
                continue
            data = tar.extractfile(member).read()
            if member.name == MANIFEST:
                manifest = data.decode("utf-8", "replace")
            else:
                held[member.name] = hashlib.sha256(data).hexdigest()
    if manifest is None:
        raise ConfigError(f"{archive}: no {MANIFEST} in it (not an archive hvdbench bundle wrote)")
    listed = _manifest(manifest, str(archive))
    said = [f"{archive}: {name}: changed since the bundle was written" for name in listed
            if name in held and held[name] != listed[name]]
    said += [f"{archive}: {name}: missing" for name in listed if name not in held]
    said += [f"{archive}: {name}: not in the manifest (added since)" for name in held if name not in listed]
    if sweep is not None:
        sweep = sweep_folder(sweep)
        base = sweep.resolve().name
        mine = {name[len(base) + 1:]: digest for name, digest in listed.items()
                if name.startswith(base + "/") and not name.startswith(f"{base}/report/")}
        if not mine:
            raise ConfigError(f"--sweep {sweep}: the archive holds no sweep named {base!r}")
        for rel, digest in mine.items():
            path = sweep / PurePosixPath(rel)
            if not path.is_file() or path.is_symlink():
                said.append(f"{path}: missing since the bundle was written")
            elif hashlib.sha256(_read_no_link(path)).hexdigest() != digest:
                said.append(f"{path}: changed since the bundle was written")
        files, _ = _evidence(sweep)
        said += [f"{p}: added since the bundle was written" for p in files
                 if p.relative_to(sweep).as_posix() not in mine and p.relative_to(sweep).parts[0] != "report"]
    return said
