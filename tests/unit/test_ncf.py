"""NCF (NeuMF): the full flavor's exact size, HR@10 counted and reduced exactly, training on the
device-drawn negatives, and `prepare movielens` on the three real file formats, the built-in
MovieLens-100K and malformed rows."""

import json
import re

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from hvdbench.cli.main import cli  # noqa: E402
from hvdbench.contracts import get_spec  # noqa: E402
from hvdbench.data.parallel import PrepareOptions  # noqa: E402
from hvdbench.data.readers import open_dataset  # noqa: E402
from hvdbench.data.verify import verify  # noqa: E402
from hvdbench.errors import DatasetError  # noqa: E402
from hvdbench.models.ncf import torch as ncf  # noqa: E402
from hvdbench.models.ncf.data import MOVIELENS  # noqa: E402
from hvdbench.models.ncf.prepare import prepare_movielens  # noqa: E402

SPEC = get_spec("ncf")


def n_params(model):
    return sum(p.numel() for p in model.parameters())


# --- the network ---------------------------------------------------------------------------

def test_full_flavor_is_mlperf_neumf_with_31_8m_parameters():
    with torch.device("meta"):
        model = ncf.build(SPEC.flavor("full"), num_users=138_493, num_items=26_744)
    # GMF 64 + MLP 128+128 embeddings for 165,237 ids, then 256-256-128-64 and the 128 -> 1 output.
    embeddings = (138_493 + 26_744) * (64 + 128)
    dense = (256 * 256 + 256) + (256 * 128 + 128) + (128 * 64 + 64) + (64 + 64 + 1)
    assert n_params(model) == embeddings + dense == 31_832_577 == SPEC.parameters["full"]
    assert [layer.out_features for layer in model.mlp] == [256, 128, 64]


def test_debug_flavor_on_ml_100k_sizes():
    model = ncf.build(SPEC.flavor("debug"), num_users=943, num_items=1682)
    assert n_params(model) == 128_769 == SPEC.parameters["debug"]
    # Sizes from the data override the flavor's (synthetic) ones.
    assert ncf.build(SPEC.flavor("debug"), num_users=10, num_items=20).mf_item.num_embeddings == 20


class Scores(torch.nn.Module):
    """A stand-in network whose score of (user, item) is a given table's entry."""

    def __init__(self, table):
        super().__init__()
        self.table, self.top_k, self.training = torch.as_tensor(table, dtype=torch.float32), 10, False

    def forward(self, users, items):
        return self.table[users, items]


def test_hr_at_10_counts_a_hit_when_fewer_than_10_negatives_score_as_high():
    # User 0's positive (item 0) is beaten by 9 negatives: a hit. User 1's by 10: a miss. User 2
    # ties 9 negatives and is beaten by 1: the tie counts against it (10 at least as high): a miss.
    k, items = 21, np.arange(21)
    table = np.zeros((3, 21))
    table[0, 0], table[0, 1:10] = 0.5, 0.9  # 9 above
    table[1, 0], table[1, 1:11] = 0.5, 0.9  # 10 above
    table[2, 0], table[2, 1:10], table[2, 10] = 0.5, 0.5, 0.9  # 9 ties + 1 above
    batch = {"users": torch.as_tensor(np.repeat(np.arange(3)[:, None], k, 1)),
             "items": torch.as_tensor(np.tile(items, (3, 1)))}
    _, stats = ncf.loss_and_stats(Scores(table), batch)
    assert (int(stats["hits"]), stats["users"]) == (1, 3)


class Sum:
    """Two ranks' allreduce: the states of both, summed."""

    def __init__(self, other):
        self.other = other

    def allreduce_sum(self, local):
        return local + self.other


def test_hr_at_10_reduces_exactly_over_ranks():
    metric = SPEC.metric
    assert (metric.name, metric.higher_is_better, metric.keys) == ("hr_at_10", True, ("hits", "users"))
    # Rank 0: batches of 3 and 2 users with 2 and 1 hits; rank 1: one batch of 4 users, 0 hits.
    ranks = [[(2, 3), (1, 2)], [(0, 4)]]
    local = []
    for batches in ranks:
        state = metric.start()
        for hits, users in batches:
            state = metric.update(state, {"hits": torch.tensor(hits), "users": users})
        local.append(metric.local(state))
    reduced = metric.reduce(local[0], Sum(local[1]))
    assert metric.value(reduced) == pytest.approx(3 / 9) and metric.samples(reduced) == 9


def test_training_draws_negatives_on_the_device_and_learns():
    cfg = SPEC.flavor("debug")
    torch.manual_seed(0)
    model = ncf.build(cfg, num_users=30, num_items=50)
    rng = np.random.default_rng(0)
    # Every user likes the items with its own parity: learnable from the pairs alone.
    users = rng.integers(0, 30, (4, 100))
    items = (rng.integers(0, 25, (4, 100)) * 2 + users % 2) % 50
    batch = {"users": torch.as_tensor(users, dtype=torch.int32), "items": torch.as_tensor(items, dtype=torch.int32)}
    negatives = model.negative_items(10_000, torch.device("cpu"))
    assert int(negatives.min()) >= 0 and int(negatives.max()) == 49  # uniform over all 50 items
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    losses = []
    for _ in range(80):
        loss, stats = ncf.loss_and_stats(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert stats["count"] == 400 * 5  # 400 positives, 4 negatives each
    # One positive in five: a constant prediction scores at best 0.500; below it the model has
    # learnt which items go with which user.
    assert losses[0] > 0.6 and max(losses[-10:]) < 0.45


def test_each_rank_draws_its_own_negatives():
    cfg = SPEC.flavor("debug")
    draws = []
    for rank in (0, 1, 0):
        torch.manual_seed(7)  # what the trainer does on every rank
        draws.append(ncf.build(cfg, rank=rank).negative_items(64, torch.device("cpu")))  # the trainer's rank
    assert not torch.equal(draws[0], draws[1]) and torch.equal(draws[0], draws[2])


def test_synthetic_rows_are_in_range():
    info = SPEC.synthetic_info(SPEC.flavor("debug"))
    assert info == {"num_users": 943, "num_items": 1682, "eval_negatives": 99}
    rows = MOVIELENS.synthetic(5, info, np.random.default_rng(0))
    assert {k: (v.shape, v.dtype) for k, v in rows.items()} == {"users": ((5, 100), np.int32),
                                                                 "items": ((5, 100), np.int32)}
    limits = MOVIELENS.limits(info)
    assert all(lo <= rows[k].min() and rows[k].max() <= hi for k, (lo, hi) in limits.items())


# --- prepare movielens ---------------------------------------------------------------------

# (user, item, rating, timestamp) in the original ids; user 7's latest is item 30, user 3's item 12
# (rated last of its equal timestamps: the later line wins), user 5's item 40.
RATINGS = [(7, 10, 4.0, 100), (7, 20, 3.5, 300), (7, 30, 5.0, 900), (7, 11, 2.0, 200),
           (3, 11, 1.0, 50), (3, 30, 4.0, 70), (3, 40, 2.0, 70), (3, 12, 3.0, 70), (3, 10, 5.0, 10),
           (5, 20, 4.0, 5), (5, 40, 4.0, 8), (5, 13, 1.0, 1), (5, 14, 3.0, 2), (5, 15, 5.0, 3)]
ITEMS = sorted({r[1] for r in RATINGS})  # 10 11 12 13 14 15 20 30 40 -> 0..8


def write(path, layout, rows=RATINGS):
    if layout == "csv":
        lines = ["userId,movieId,rating,timestamp"] + [f"{u},{i},{r},{t}" for u, i, r, t in rows]
    elif layout == "dat":
        lines = [f"{u}::{i}::{int(r)}::{t}" for u, i, r, t in rows]
    else:
        lines = [f"{u}\t{i}\t{int(r)}\t{t}" for u, i, r, t in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def prepare(src, out, **kw):
    return prepare_movielens(str(src), out, **{"eval_negatives": 3, "min_ratings": 2,
                                               "options": PrepareOptions(workers=1, command="test"), **kw})


def arrays(path, split):
    ds = open_dataset(path)
    return {k: np.concatenate([b[k] for b in ds.loader(split, 100, drop_last=False)]) for k in ("users", "items")}


@pytest.mark.parametrize("layout,name", [("csv", "ratings.csv"), ("dat", "ratings.dat"), ("tab", "u.data")])
def test_prepare_reads_each_format_into_the_leave_latest_out_split(tmp_path, layout, name):
    m = prepare(write(tmp_path / name, layout), tmp_path / "d")
    assert (m["kind"], m["num_users"], m["num_items"], m["eval_negatives"]) == ("movielens", 3, 9, 3)
    assert m["fields"] == {"users": {"shape": [4], "dtype": "int32"}, "items": {"shape": [4], "dtype": "int32"}}
    assert (m["ratings"], m["train_positives"], m["pairs_per_row"]) == (14, 11, 4)
    assert m["splits"]["train"]["samples"] == 3 and m["padding_pairs"] == 1  # 11 pairs in rows of 4
    assert m["splits"]["val"]["samples"] == 3
    val = arrays(tmp_path / "d", "val")
    # Users 3, 5, 7 -> 0, 1, 2; held out: item 12 -> 2, item 40 -> 8, item 30 -> 7.
    assert val["users"].tolist() == [[0] * 4, [1] * 4, [2] * 4]
    assert val["items"][:, 0].tolist() == [2, 8, 7]
    rated = {u: {ITEMS.index(i) for uu, i, _, _ in RATINGS if uu == orig} for u, orig in enumerate((3, 5, 7))}
    for u in range(3):
        negatives = val["items"][u, 1:].tolist()
        assert len(set(negatives)) == 3 and not set(negatives) & rated[u]
    train = arrays(tmp_path / "d", "train")
    pairs = set(zip(train["users"].ravel().tolist(), train["items"].ravel().tolist()))
    assert pairs == {(u, i) for u in range(3) for i in rated[u]} - {(0, 2), (1, 8), (2, 7)}
    assert verify(tmp_path / "d").ok


def test_the_three_formats_give_identical_shards(tmp_path):
    made = []
    for layout, name in (("csv", "ratings.csv"), ("dat", "ratings.dat"), ("tab", "u.data")):
        (tmp_path / layout).mkdir()
        m = prepare(write(tmp_path / layout / name, layout), tmp_path / f"out-{layout}")
        made.append([s["sha256"] for split in m["splits"].values() for s in split["shards"]])
    assert made[0] == made[1] == made[2]


def test_min_ratings_drops_users_and_the_folder_is_searched(tmp_path):
    write(tmp_path / "ratings.csv", "csv")
    m = prepare(tmp_path, tmp_path / "d", min_ratings=5)  # user 7 has 4 ratings
    assert (m["num_users"], m["dropped_users"], m["ratings"]) == (2, 1, 10)


@pytest.mark.parametrize("layout,name,line,bad", [
    ("csv", "ratings.csv", 5, "3,11,one,50"),          # a rating that is no number
    ("dat", "ratings.dat", 4, "3::11::1"),             # a missing field
    ("tab", "u.data", 2, "7\t10.5\t4\t100"),           # an item id that is no integer
])
def test_a_malformed_row_is_one_line_naming_file_and_line(tmp_path, layout, name, line, bad):
    path = write(tmp_path / name, layout)
    lines = path.read_text().splitlines()
    lines[line - 1] = bad
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError) as e:
        prepare(path, tmp_path / "d")
    message = str(e.value)
    assert message.startswith(f"{path.resolve()}:{line}: ") and "\n" not in message
    assert not (tmp_path / "d" / "manifest.json").exists()


def test_too_many_eval_negatives_names_the_user(tmp_path):
    with pytest.raises(DatasetError, match=r"user 3 rated 5 of the 9 items, leaving 4 unrated for 5 evaluation"):
        prepare(write(tmp_path / "u.data", "tab"), tmp_path / "d", eval_negatives=5)


def test_prepare_is_seeded_and_resumes(tmp_path):
    src = write(tmp_path / "u.data", "tab")
    a = prepare(src, tmp_path / "a")
    shard = tmp_path / "a" / a["splits"]["val"]["shards"][0]["file"]
    stamp = shard.stat().st_mtime_ns
    again = prepare(src, tmp_path / "a")  # the same command: finished shards are kept
    assert shard.stat().st_mtime_ns == stamp and again["splits"] == a["splits"]
    other = prepare(src, tmp_path / "b", seed=1)
    assert other["splits"]["val"]["shards"][0]["sha256"] != a["splits"]["val"]["shards"][0]["sha256"]


def test_builtin_ml_100k_through_the_command_line(tmp_path):
    out = tmp_path / "ml100k"
    result = CliRunner().invoke(cli, ["prepare", "movielens", "--src", "builtin:ml-100k", "--out", str(out),
                                      "--workers", "1"])
    assert result.exit_code == 0, result.output
    m = json.loads((out / "manifest.json").read_text())
    assert (m["num_users"], m["num_items"], m["eval_negatives"], m["ratings"]) == (943, 1682, 99, 100_000)
    assert m["train_positives"] == 100_000 - 943  # no repeated ratings in ML-100K
    assert (m["splits"]["train"]["samples"], m["splits"]["val"]["samples"]) == (991, 943)
    assert m["source"].startswith("recbole 1.2.1: ") and re.fullmatch(r"[0-9a-f]{64}", m["source_sha256"])
    result = CliRunner().invoke(cli, ["prepare", "verify", str(out)])
    assert result.exit_code == 0 and "ok: 1934 samples in 2 shards" in result.output
    result = CliRunner().invoke(cli, ["prepare", "movielens", "--src", "builtin:ml-1m", "--out", str(tmp_path / "x")])
    assert result.exit_code == 1 and "valid: builtin:ml-100k" in result.output
