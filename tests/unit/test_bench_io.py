"""`hvdbench bench io` on a small real HDF5 dataset whose labels are sample ids: every sample is
read exactly once per pass across ranks, the figures add up, errors are one clear line."""

import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from hvdbench.bench import io as bio
from hvdbench.cli.main import cli
from hvdbench.data import manifest as mf
from hvdbench.data.readers import open_dataset
from hvdbench.data.shards import shard_name, write_shard
from hvdbench.errors import ConfigError, DatasetError
from hvdbench.results.records.schema import RunResult, write_result
from hvdbench.results.records.store import read_rows

TRAIN = 1001  # odd, over three uneven shards: shares and batches do not divide evenly


def make_dataset(out: Path, train: int = TRAIN, per_shard: int = 400, hw: int = 8) -> Path:
    """An `images` dataset whose label is each sample's id (0..n-1), written with the prepare library."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    fields = {"images": mf.field_spec((hw, hw, 3), "uint8"), "labels": mf.field_spec((), "int64")}
    manifest = mf.new_manifest("images", fields, 0, {"test": True}, "test", num_classes=train,
                               class_names=[], image_size=hw)
    for split, total in (("train", train), ("val", 30)):
        count = -(-total // per_shard)
        records = []
        for k in range(count):
            ids = np.arange(k * per_shard, min(total, (k + 1) * per_shard), dtype=np.int64)
            images = rng.integers(0, 256, (len(ids), hw, hw, 3), dtype=np.uint8)
            records.append(write_shard(out / shard_name(split, k, count), {"images": images, "labels": ids}, "t"))
        manifest["splits"][split] = {"samples": total, "shards": records}
    mf.write_manifest(out, manifest)
    return out


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("bench-io") / "ids")


@pytest.mark.parametrize("size", [1, 2, 3])
def test_reader_pass_reads_every_sample_exactly_once_across_ranks(dataset, size):
    ds = open_dataset(dataset)
    for epoch in (0, 1):
        seen, orders = [], []
        for rank in range(size):
            ids = []
            stats = bio.reader_pass(ds, "train", 64, rank, size, seed=3, epoch=epoch, decode_batches=epoch == 1,
                                    on_batch=lambda b: ids.extend(b["labels"].tolist()))
            assert stats.samples == len(ids) and stats.elapsed_s > 0
            assert stats.bytes == len(ids) * (8 * 8 * 3 + 8)
            seen += ids
            orders.append(ids)
        assert sorted(seen) == list(range(TRAIN)), f"epoch {epoch}, {size} ranks"
        if size == 1:
            assert orders[0] != sorted(orders[0])  # shuffled, as training reads


def test_raw_pass_reads_each_ranks_share_in_consecutive_runs(dataset):
    ds = open_dataset(dataset)
    covered = []
    for rank in range(2):
        ranges = bio.raw_ranges(ds, "train", rank, 2)
        assert all(lo < hi for _, lo, hi in ranges)
        for path, lo, hi in ranges:
            covered += [(path.name, i) for i in range(lo, hi)]
        stats = bio.raw_pass(ds, "train", rank, 2)
        assert stats.samples == sum(hi - lo for _, lo, hi in ranges)
        assert stats.bytes == stats.samples * (8 * 8 * 3 + 8)
    assert len(covered) == len(set(covered)) == TRAIN


def test_images_are_decoded_as_the_torch_model_does_on_the_device():
    import torch

    from hvdbench.contracts import get_spec

    images = np.random.default_rng(1).integers(0, 256, (4, 5, 6, 3), dtype=np.uint8)
    labels = np.arange(4, dtype=np.int64)
    ours = bio.decoder("images")({"images": images, "labels": labels})
    on_device = get_spec("resnet50").framework_module("torch").on_device
    theirs = on_device({"images": torch.from_numpy(images), "labels": torch.from_numpy(labels)}, torch.device("cpu"))
    assert ours["images"].shape == (4, 3, 5, 6) and ours["images"].dtype == np.float32
    np.testing.assert_allclose(ours["images"], theirs["images"].numpy(), rtol=1e-6, atol=1e-5)
    assert ours["labels"] is labels


def test_run_alone_writes_rows_that_add_up(dataset, tmp_path):
    lines = []
    opts = bio.IoOptions(data=str(dataset), out=str(tmp_path), batch_size=100, passes=2, demand=1e12)
    rows = bio.run(opts, bio.LocalComm(), lines.append)
    bio.write_outputs(rows, tmp_path)
    back = read_rows(tmp_path / bio.CSV_NAME, bio.IoRow)
    assert back == rows
    assert [(r.pass_index, r.impl) for r in rows] == [(k, impl) for k in (0, 1) for impl in bio.IMPLS]
    for r in rows:
        assert r.samples == r.dataset_samples == TRAIN
        assert r.samples_s == pytest.approx(r.samples / r.elapsed_s)
        assert r.mb_s == pytest.approx(r.bytes / r.elapsed_s / 1e6)
        assert r.rank_samples_s_min == r.rank_samples_s_max == pytest.approx(r.samples_s)
        assert r.feed_fraction == pytest.approx(r.samples_s / 1e12) and r.demand_source == "--demand"
        assert (r.layout, r.world_size, r.launcher) == ("1x1", 1, "single")
        assert r.dataset_bytes == sum(p.stat().st_size for p in dataset.glob("train-*.h5"))
    for r in rows:
        raw = next(x for x in rows if x.impl == "h5py" and x.pass_index == r.pass_index)
        assert r.vs_h5py == (None if r.impl == "h5py" else pytest.approx(r.samples_s / raw.samples_s))
    # 23 GiB free vs a 300 kB dataset: it fits in the page cache, and the run says so
    assert rows[0].fits_in_cache and any("page cache" in line for line in lines)


def test_demand_from_a_training_result(dataset, tmp_path):
    write_result(tmp_path / "result.json", RunResult(model="resnet50", throughput=2.0, world_size=1))
    opts = bio.IoOptions(data=str(dataset), out=str(tmp_path), passes=1, demand_from=str(tmp_path / "result.json"))
    rows = bio.run(opts, bio.LocalComm(), lambda line: None)
    assert all(r.demand_samples_s == 2.0 and r.feed_fraction == 1.0 for r in rows)
    write_result(tmp_path / "aborted.json", RunResult(model="resnet50", mode="time_to_accuracy", status="aborted"))
    with pytest.raises(ConfigError, match="aborted.json: the run recorded no throughput"):
        bio.demand_from(tmp_path / "aborted.json")


def test_drop_caches_as_root_or_a_clear_error(dataset, tmp_path):
    opts = bio.IoOptions(data=str(dataset), out=str(tmp_path), passes=1, drop_caches=True)
    if os.geteuid() != 0:
        with pytest.raises(ConfigError, match="--drop-caches needs root"):
            bio.run(opts, bio.LocalComm(), lambda line: None)
        return
    lines = []
    rows = bio.run(opts, bio.LocalComm(), lines.append)
    assert all(r.caches_dropped for r in rows) and not any("page cache" in line for line in lines)


def test_missing_dataset_is_a_dataset_error_naming_it(tmp_path):
    with pytest.raises(DatasetError, match=f"{tmp_path / 'nope'} does not exist"):
        bio.run(bio.IoOptions(data=str(tmp_path / "nope"), out=str(tmp_path)), bio.LocalComm(), print)


def test_cli_missing_dataset_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["bench", "io", "--data", str(tmp_path / "nope"), "--out", str(out)])
    assert result.exit_code == 1
    assert result.output.startswith("Error: dataset directory ") and result.output.count("\n") == 1
    assert not out.exists()


def test_cli_unknown_split_and_bad_options(dataset, tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["bench", "io", "--data", str(dataset), "--split", "test", "--out", str(tmp_path)])
    assert result.exit_code == 1 and "no split 'test'" in result.output
    result = runner.invoke(cli, ["bench", "io", "--data", str(dataset), "--demand", "5",
                                 "--demand-from", "r.json", "--out", str(tmp_path)])
    assert result.exit_code != 0 and "not both" in result.output
    result = runner.invoke(cli, ["bench", "io", "--data", str(dataset), "--passes", "0", "--out", str(tmp_path)])
    assert result.exit_code == 1 and "--passes 0" in result.output
    assert not (tmp_path / bio.CSV_NAME).exists()


def test_cli_alone_prints_the_table_and_appends(dataset, tmp_path):
    runner = CliRunner()
    for _ in range(2):
        result = runner.invoke(cli, ["bench", "io", "--data", str(dataset), "--passes", "1", "--batch-size", "50",
                                     "--demand", "100", "--out", str(tmp_path)])
        assert result.exit_code == 0, result.output
    assert "reader/h5py" in result.output and "feed" in result.output
    rows = read_rows(tmp_path / bio.CSV_NAME, bio.IoRow)
    assert len(rows) == 6 and len({r.run_id for r in rows}) == 2
