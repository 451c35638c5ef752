"""`hvdbench prepare verify DIR`: check every shard against the manifest, reading every byte.

For each shard: the file exists and opens (not truncated), holds the manifest's sample count, every
field has the manifest's per-sample shape and dtype, all data reads back to the end and hashes to the
sha256 recorded when it was written (so flipped bytes are found), and values are in the ranges the
dataset kind declares (`DatasetKind.limits`: labels below num_classes, token ids below vocab_size,
...) and, in every float field of any kind, finite (no NaN or infinity: a range check alone lets
NaN through). A problem names the shard, the field and the sample. A vocabulary file named by the
manifest must match its sha256.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hvdbench.data.manifest import MANIFEST, data_info, read_manifest
from hvdbench.data.shards import ATTR_SAMPLES, ATTR_SHA256, open_shard
from hvdbench.data.vocab import vocab_sha256
from hvdbench.errors import DatasetError

READ_BYTES = 16 << 20


@dataclass
class Report:
    path: Path
    kind: str
    rows: list[dict] = field(default_factory=list)  # split, file, samples, status
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def value_limits(manifest: dict, where: str = "manifest") -> dict[str, tuple[int, int]]:
    """Inclusive (low, high) per field that has a known range: the dataset kind's rules, from the
    kind's info keys, checked as `Dataset.data_info` checks them (DatasetError naming `where`)."""
    from hvdbench.contracts import get_kind

    kind = get_kind(manifest["kind"])
    info = data_info(manifest, where)  # a missing key or a non-number: DatasetError naming file and key
    try:
        return kind.limits(manifest)
    except KeyError as e:
        raise DatasetError(f"{where}: key {e.args[0]!r} missing (the {kind.name!r} value limits need it)") from None
    except (TypeError, ValueError, ArithmeticError):
        bad = {k: v for k, v in info.items() if not (isinstance(v, int) and not isinstance(v, bool))}
        shown = ", ".join(f"{k}={v!r}" for k, v in bad.items()) or ", ".join(f"{k}={v!r}" for k, v in info.items())
        raise DatasetError(f"{where}: {shown}: not usable as the {kind.name!r} value limits "
                           "(whole numbers expected)") from None


def verify(path: str | Path) -> Report:
    path = Path(path)
    manifest = read_manifest(path)
    report = Report(path, manifest["kind"])
    if "vocab_sha256" in manifest:
        vocab = path / manifest.get("vocab_file", "vocab.txt")
        if not vocab.is_file():
            report.problems.append(f"{vocab}: vocabulary file missing")
        elif vocab_sha256(vocab) != manifest["vocab_sha256"]:
            report.problems.append(f"{vocab}: sha256 differs from the manifest's vocab_sha256")
        elif len(vocab.read_bytes().decode("utf-8", errors="replace").splitlines()) != manifest["vocab_size"]:
            report.problems.append(f"{vocab}: line count differs from vocab_size {manifest['vocab_size']}")
    limits = value_limits(manifest, str(path / MANIFEST))
    for split, info in manifest["splits"].items():
        for shard in info["shards"]:
            problem = check_shard(path / shard["file"], shard, manifest["fields"], limits)
            report.rows.append({"split": split, "file": shard["file"], "samples": shard["samples"],
                                "status": problem or "ok"})
            if problem:
                report.problems.append(f"{path / shard['file']}: {problem}")
    return report


def check_shard(path: Path, shard: dict, fields: dict, limits: dict) -> str | None:
    """None when the shard is sound, else the first problem in words."""
    try:
        f = open_shard(path)
    except DatasetError as e:
        return str(e).replace(f"shard {path} ", "")
    with f:
        samples = int(f.attrs[ATTR_SAMPLES])
        if samples != shard["samples"]:
            return f"holds {samples} samples, the manifest says {shard['samples']}"
        digest = hashlib.sha256()
        for name in sorted(fields):
            spec = fields[name]
            if name not in f:
                return f"field {name!r} missing"
            d = f[name]
            want = (shard["samples"], *spec["shape"])
            if d.shape != want or str(d.dtype) != spec["dtype"]:
                return f"field {name!r} is {d.dtype}{list(d.shape)}, the manifest says {spec['dtype']}{list(want)}"
            digest.update(name.encode())
            rows = max(1, READ_BYTES // max(1, d.dtype.itemsize * int(np.prod(spec["shape"], dtype=np.int64))))
            for lo in range(0, len(d), rows):
                try:
                    block = d[lo:lo + rows]
                except OSError as e:
                    return f"field {name!r} unreadable at samples {lo}:{lo + rows} ({str(e).splitlines()[0]})"
                digest.update(np.ascontiguousarray(block).data)
                problem = check_values(name, block, lo, limits.get(name))
                if problem:
                    return problem
        if digest.hexdigest() != f.attrs.get(ATTR_SHA256) or digest.hexdigest() != shard.get("sha256", digest.hexdigest()):
            return "data does not match its sha256 checksum (corrupt)"
    return None


def check_values(name: str, block: np.ndarray, first: int, limits: tuple | None) -> str | None:
    """None when every value of `block` (samples first, first + 1, ...) is finite (float fields of
    any kind: NaN passes every range check, since each comparison with it is false) and within the
    field's inclusive limits, else the first bad value, its field and its sample in words."""
    if not block.size:
        return None
    if block.dtype.kind in "fc":
        finite = np.isfinite(block).reshape(len(block), -1)
        rows = finite.all(axis=1)
        if not rows.all():
            i = int(np.argmin(rows))
            bad = block.reshape(len(block), -1)[i][~finite[i]][0]
            return f"field {name!r} holds {bad.item()} at sample {first + i}, not a finite number"
    if limits is None:
        return None
    low, high = limits
    outside = ((block < low) | (block > high)).reshape(len(block), -1)
    rows = outside.any(axis=1)
    if rows.any():
        i = int(np.argmax(rows))
        bad = block[i].reshape(-1)[outside[i]][0]
        return f"field {name!r} holds {bad.item()}, outside [{low}, {high}], at sample {first + i}"
    return None
