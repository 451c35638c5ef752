"""MovieLens ratings -> the `movielens` kind (NCF's leave-latest-out protocol) in HDF5 shards.

    hvdbench prepare movielens --src builtin:ml-100k --out data/ml-100k
    hvdbench prepare movielens --src ml-20m/ratings.csv --out data/ml-20m
    mpirun -np 4 hvdbench prepare movielens --src ml-25m/ratings.csv --out data/ml-25m

Reads the real files: ml-20m / ml-25m `ratings.csv` (header userId,movieId,rating,timestamp),
ml-1m `ratings.dat` (`::` separated), ml-100k `u.data` (tab separated), and `builtin:ml-100k`, the
MovieLens-100K ratings inside the installed recbole 1.2.1 wheel (`ml-100k.inter`, tab separated
with a typed header). Every rating is an interaction (implicit feedback), as in MLPerf.

The protocol is MLPerf v0.5's (its `convert.py`): users with fewer than `min_ratings` ratings are
dropped (none in MovieLens, which keeps users with 20 or more), user and item ids are remapped to
dense 0..n-1 (here in sorted order of the original ids), each user's latest rating by timestamp
(ties: the later line of the file) is held out as the test item, and the user's other distinct
items are the training positives. Each user gets `eval_negatives` items the user never rated,
drawn uniformly without replacement with the seed. (MLPerf's reference draws its 999 with
replacement from the items outside the user's training positives, so a rare draw repeats an item
or is the test item itself; with 999 of ~26,700 the two agree closely.)

A row that is not four fields (user, item, rating, timestamp) of numbers, or whose user or item id
is not a whole number from 0 to what the shards' int32 holds (2,147,483,647), fails with one line
naming the file and line; so does a file without a rating row (numpy's own warning is not shown).
Shards are made in parallel (workers, MPI ranks) and resumably: a rerun keeps every finished shard
made from the same source bytes and options.
"""

from __future__ import annotations

import hashlib
import io
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hvdbench.data import manifest as mf
from hvdbench.data.parallel import PrepareOptions, ShardJob, World, finish, run_jobs, start
from hvdbench.data.shards import shard_name, write_shard
from hvdbench.errors import DatasetError
from hvdbench.files import file_sha256
from hvdbench.models.ncf.data import ID_DTYPE, MOVIELENS

BUILTIN = {"ml-100k": "dataset_example/ml-100k/ml-100k.inter"}  # inside the recbole wheel
NEGATIVE_CHUNK_USERS = 4096  # users whose negatives are drawn at once (bounds the memory)
ID_MAX = int(np.iinfo(ID_DTYPE).max)  # the largest source id the shards' dtype holds


@dataclass
class Ratings:
    """The rating rows of a source, in file order."""

    users: np.ndarray  # int64, original ids
    items: np.ndarray  # int64, original ids
    timestamps: np.ndarray  # float64
    layout: str  # which of the formats it was


# --- reading --------------------------------------------------------------------------------

def resolve_source(src: str) -> tuple[Path, str]:
    """(the ratings file, how the manifest names it). A folder is searched for the known names."""
    if src.startswith("builtin:"):
        name = src.split(":", 1)[1]
        if name not in BUILTIN:
            raise DatasetError(f"--src {src}: unknown built-in data; valid: "
                               + ", ".join(f"builtin:{n}" for n in BUILTIN))
        try:
            import importlib.resources
            from importlib.metadata import version

            # Only the data file is read; recbole's __init__ just sets its version.
            path = Path(str(importlib.resources.files("recbole") / BUILTIN[name]))
            label = f"recbole {version('recbole')}: {BUILTIN[name]}"
        except ImportError:
            path, label = None, ""
        if path is None or not path.is_file():
            raise DatasetError(f"--src {src} needs the recbole 1.2.1 wheel, which ships MovieLens-100K "
                               f"(`make setup` installs it: pip install --no-deps recbole==1.2.1)")
        return path, label
    path = Path(src)
    if path.is_dir():
        found = [path / n for n in ("ratings.csv", "ratings.dat", "u.data") if (path / n).is_file()]
        found += sorted(path.glob("*.inter"))
        if not found:
            raise DatasetError(f"{path}: no ratings.csv, ratings.dat, u.data or *.inter in this folder")
        path = found[0]
    if not path.is_file():
        raise DatasetError(f"{path}: no such ratings file")
    return path.resolve(), str(path.resolve())


def _layout(first_line: str, path: Path) -> tuple[str, str, bool]:
    """(separator, format name, whether line 1 is a header), from the file's first line."""
    if "::" in first_line:
        sep, name = "::", "ml-1m ratings.dat"
    elif "\t" in first_line:
        sep, name = "\t", "tab-separated (ml-100k u.data)"
    elif "," in first_line:
        sep, name = ",", "ml-20m/ml-25m ratings.csv"
    else:
        raise DatasetError(f"{path}:1: not a ratings file (no ',', tab or '::' separator): {first_line[:60]!r}")
    head = first_line.split(sep)[0].strip()
    header = not _is_number(head)
    if header and path.suffix == ".inter":
        name = "recbole .inter (ml-100k)"
    return sep, name, header


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_ratings(path: Path) -> Ratings:
    """Every row of a ratings file: user, item, rating, timestamp (the rating is checked, not kept)."""
    with open(path, "rb") as f:
        first = f.readline().decode("utf-8", errors="replace").rstrip("\r\n")
    if not first:
        raise DatasetError(f"{path}: empty file (no rating rows)")
    if not first.strip():
        raise DatasetError(f"{path}:1: empty first line (expected a header or a rating row)")
    sep, name, header = _layout(first, path)
    try:
        rows = _fast_parse(path, sep, header)
    except ValueError:  # a malformed row (or bytes that are not UTF-8)
        rows = None
    if rows is None:
        rows = _strict_parse(path, sep, header)  # names the first bad line, or parses it all
    if not len(rows):
        raise DatasetError(f"{path}: no rating rows")
    return Ratings(rows[:, 0].astype(np.int64), rows[:, 1].astype(np.int64), rows[:, 3], name)


def _fast_parse(path: Path, sep: str, header: bool) -> np.ndarray | None:
    """numpy's C reader, straight from the file (ml-20m's 20M rows in seconds); None when anything
    is off, for the strict reader to name the line."""
    source = path
    if sep == "::":  # numpy reads single-character separators only (ml-1m is 24 MB)
        source = io.StringIO(path.read_text(encoding="utf-8").replace("::", "\t"))
        sep = "\t"
    with warnings.catch_warnings():  # a header-only file: "input contained no data" (we say it once)
        warnings.simplefilter("ignore", UserWarning)
        rows = np.loadtxt(source, delimiter=sep, skiprows=1 if header else 0, dtype=np.float64, ndmin=2,
                          comments=None, encoding="utf-8")
    if not len(rows):
        return rows.reshape(0, 4)
    if rows.shape[1] != 4 or not np.isfinite(rows).all():
        return None
    ids = rows[:, :2]
    if (ids != np.floor(ids)).any() or (ids < 0).any() or (ids > ID_MAX).any():
        return None
    return rows


def _whole(text: str) -> int:
    """A whole-number id as the fast reader takes it ("42", "42.0", "1e5"); ValueError otherwise."""
    try:
        return int(text)
    except ValueError:
        value = float(text)  # ValueError for words
        if not value.is_integer():  # also NaN and infinities
            raise ValueError(text) from None
        return int(value)


def _strict_parse(path: Path, sep: str, header: bool) -> np.ndarray:
    rows = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise DatasetError(f"{path}:{number}: not UTF-8 text") from None
            if (number == 1 and header) or not line.strip():
                continue
            parts = line.split(sep)
            if len(parts) != 4:
                raise DatasetError(f"{path}:{number}: expected 4 fields (user, item, rating, timestamp) "
                                   f"separated by {sep!r}, got {len(parts)}: {line[:60]!r}")
            try:
                user, item = _whole(parts[0]), _whole(parts[1])
                rating, stamp = float(parts[2]), float(parts[3])
            except ValueError:
                raise DatasetError(f"{path}:{number}: user and item must be integers, rating and timestamp "
                                   f"numbers: {line[:60]!r}") from None
            if user < 0 or item < 0 or not (math.isfinite(rating) and math.isfinite(stamp)):
                raise DatasetError(f"{path}:{number}: negative id or non-finite value: {line[:60]!r}")
            for what, value, text in (("user", user, parts[0]), ("item", item, parts[1])):
                if value > ID_MAX:
                    raise DatasetError(f"{path}:{number}: {what} id {text.strip()} is beyond {ID_MAX}, "
                                       f"the largest id the shards' {ID_DTYPE} holds")
            rows.append((user, item, rating, stamp))
    return np.asarray(rows, dtype=np.float64).reshape(-1, 4)


# --- the protocol ---------------------------------------------------------------------------

@dataclass
class Split:
    num_users: int
    num_items: int
    train_users: np.ndarray  # int32, one per training positive (distinct pairs)
    train_items: np.ndarray
    test_items: np.ndarray  # int32, one per user (user u's is test_items[u])
    negatives: np.ndarray  # int32 (num_users, eval_negatives)
    ratings: int  # rows kept after the min_ratings filter
    dropped_users: int


def leave_latest_out(r: Ratings, eval_negatives: int, min_ratings: int, seed: int, where: str) -> Split:
    counts_by_user = np.unique(r.users, return_counts=True)
    keep_users = counts_by_user[0][counts_by_user[1] >= min_ratings]
    keep = np.isin(r.users, keep_users)
    if not keep.any():
        raise DatasetError(f"{where}: no user has {min_ratings} or more ratings (--min-ratings)")
    original_users, users = np.unique(r.users[keep], return_inverse=True)
    original_items, items = np.unique(r.items[keep], return_inverse=True)
    stamps, line = r.timestamps[keep], np.arange(int(keep.sum()))
    num_users, num_items = len(original_users), len(original_items)
    order = np.lexsort((line, stamps, users))  # by user, then time, then file order
    users, items = users[order], items[order]
    last = np.r_[users[1:] != users[:-1], True]  # each user's latest rating
    test_items = items[last]
    # Training positives: the user's other distinct items, without the test item (MLPerf removes
    # the (user, test item) pair from its set of ratings).
    pairs = np.unique(users[~last].astype(np.int64) * num_items + items[~last])
    pairs = pairs[pairs != (pairs // num_items) * num_items + test_items[pairs // num_items]]
    rated = np.unique(users.astype(np.int64) * num_items + items)
    rated_count = np.bincount((rated // num_items).astype(np.int64), minlength=num_users)
    short = np.flatnonzero(num_items - rated_count < eval_negatives)
    if len(short):
        u = int(short[np.argmax(rated_count[short])])
        raise DatasetError(f"{where}: user {int(original_users[u])} rated {int(rated_count[u])} of the "
                           f"{num_items} items, leaving {num_items - int(rated_count[u])} unrated for "
                           f"{eval_negatives} evaluation negatives; choose a smaller --eval-negatives "
                           f"(99 for ML-100K)")
    if not len(pairs):
        raise DatasetError(f"{where}: no training ratings are left beside each user's held-out latest one")
    negatives = sample_negatives(rated, num_users, num_items, eval_negatives, seed)
    return Split(num_users, num_items, (pairs // num_items).astype(np.int32), (pairs % num_items).astype(np.int32),
                 test_items.astype(np.int32), negatives, int(keep.sum()), len(counts_by_user[0]) - num_users)


def sample_negatives(rated: np.ndarray, num_users: int, num_items: int, n: int, seed: int) -> np.ndarray:
    """(num_users, n) items per user, drawn uniformly without replacement from the items the user
    never rated (`rated`: sorted user * num_items + item keys). Rejection sampling over chunks of
    users; a user whose draws fall short (a heavy rater) is drawn exactly from the complement."""
    rng = np.random.default_rng([seed, 1])
    out = np.empty((num_users, n), np.int32)
    draws = 2 * n + 16
    for lo in range(0, num_users, NEGATIVE_CHUNK_USERS):
        users = np.arange(lo, min(num_users, lo + NEGATIVE_CHUNK_USERS), dtype=np.int64)
        cand = rng.integers(0, num_items, (len(users), draws), dtype=np.int64)
        keys = users[:, None] * num_items + cand
        at = np.minimum(np.searchsorted(rated, keys), len(rated) - 1)
        ok = rated[at] != keys
        # Keep the first draw of each item in a row: sort stably, mark repeats, map back.
        by = np.argsort(cand, axis=1, kind="stable")
        sorted_cand = np.take_along_axis(cand, by, axis=1)
        repeat = np.zeros_like(ok)
        np.put_along_axis(repeat, by, np.c_[np.zeros((len(users), 1), bool),
                                            sorted_cand[:, 1:] == sorted_cand[:, :-1]], axis=1)
        ok &= ~repeat
        rank = np.cumsum(ok, axis=1)
        full = rank[:, -1] >= n
        take = ok & (rank <= n) & full[:, None]
        out[users[full]] = cand[take].reshape(-1, n)
        for u in users[~full]:
            mine = rated[(rated >= u * num_items) & (rated < (u + 1) * num_items)] - u * num_items
            out[u] = rng.choice(np.setdiff1d(np.arange(num_items), mine), n, replace=False)
    return out


# --- shards ---------------------------------------------------------------------------------

def rows(split: Split, eval_negatives: int, seed: int) -> dict[str, dict[str, np.ndarray]]:
    """{split: {"users", "items"}}, K = 1 + eval_negatives pairs per row (see data.py)."""
    k = 1 + eval_negatives
    order = np.random.default_rng([seed, 0]).permutation(len(split.train_users))
    # The last row is filled up with the first pairs of the shuffled order (again, for a dataset
    # smaller than a row): every positive is seen once per epoch, fewer than K twice.
    order = np.resize(order, len(order) + (-len(order)) % k)
    train = {"users": split.train_users[order].reshape(-1, k), "items": split.train_items[order].reshape(-1, k)}
    users = np.arange(split.num_users, dtype=np.int32)
    val = {"users": np.repeat(users[:, None], k, axis=1),
           "items": np.c_[split.test_items[:, None], split.negatives].astype(np.int32)}
    return {"train": train, "val": val}


def prepare_movielens(src: str, out: Path, *, eval_negatives: int | None = None, min_ratings: int = 20,
                      samples_per_shard: int = 1024, seed: int = 0,
                      options: PrepareOptions = PrepareOptions()) -> dict:
    """Prepare a MovieLens ratings file; returns the manifest (on every rank).

    `eval_negatives`: MLPerf's 999 by default, 99 for builtin:ml-100k (a heavy ML-100K user has
    fewer than 999 unrated items)."""
    out, src = Path(out), str(src)
    if eval_negatives is None:
        eval_negatives = 99 if src == "builtin:ml-100k" else 999
    if eval_negatives < 1 or min_ratings < 2 or samples_per_shard < 1:
        raise DatasetError("--eval-negatives and --samples-per-shard must be positive, --min-ratings at "
                           "least 2 (a user needs a training rating besides the held-out one)")
    world = World.detect()
    path, label = resolve_source(src)
    params = {"src": label if src.startswith("builtin:") else str(path), "eval_negatives": eval_negatives,
              "min_ratings": min_ratings, "samples_per_shard": samples_per_shard, "seed": seed}
    # Every rank reads and splits the file (deterministic with the seed): no large broadcast.
    source_sha = file_sha256(path)
    ratings = read_ratings(path)
    split = leave_latest_out(ratings, eval_negatives, min_ratings, seed, str(path))
    data = rows(split, eval_negatives, seed)
    start(out, MOVIELENS.name, params, options.overwrite, world)
    ph = mf.params_hash(params)
    jobs = []
    for name, arrays in data.items():
        n = len(arrays["users"])
        count = math.ceil(n / samples_per_shard)
        for k in range(count):
            part = slice(k * samples_per_shard, (k + 1) * samples_per_shard)
            source = hashlib.sha256(f"{ph}/{source_sha}/{name}/{k}".encode()).hexdigest()
            jobs.append(ShardJob.single(name, shard_name(name, k, count), source,
                                        {f: a[part] for f, a in arrays.items()}))
    records = run_jobs(out, jobs, _write, world=world, workers=options.workers, label="movielens")
    info = {"num_users": split.num_users, "num_items": split.num_items, "eval_negatives": eval_negatives}
    manifest = mf.new_manifest(
        MOVIELENS.name, MOVIELENS.fields(info), seed, params, options.command, **info,
        pairs_per_row=1 + eval_negatives, source=label, source_format=ratings.layout, source_sha256=source_sha,
        ratings=split.ratings, dropped_users=split.dropped_users, train_positives=len(split.train_users),
        padding_pairs=int(data["train"]["users"].size - len(split.train_users)),
        protocol="leave-latest-out: each user's latest rating is the val positive, ranked against "
                 f"{eval_negatives} never-rated items (HR@10); every other distinct rating is a training positive")
    return finish(out, jobs, records, manifest, world)


def _write(job: ShardJob, out: Path) -> dict:
    return write_shard(out / job.file, job.work, job.source)
