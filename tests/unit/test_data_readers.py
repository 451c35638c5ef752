"""Readers: disjoint seeded shares per rank, every sample once per epoch, equal steps, clear errors."""

import json
import time

import numpy as np
import pytest

from hvdbench.data import manifest as mf
from hvdbench.data.readers import open_dataset
from hvdbench.data.shards import shard_name, write_shard
from hvdbench.errors import DatasetError


def id_dataset(root, shard_sizes=(100, 37, 64), val=(23,)):
    """An images dataset whose label is the sample's global id, and whose pixels repeat it."""
    root.mkdir(parents=True, exist_ok=True)
    manifest = mf.new_manifest("images", {"images": mf.field_spec((2, 2, 3), "uint8"),
                                          "labels": mf.field_spec((), "int64")}, 0, {}, command="test",
                               num_classes=sum(shard_sizes) + sum(val), class_names=[], image_size=2)
    start = 0
    for split, sizes in (("train", shard_sizes), ("val", val)):
        info = manifest["splits"][split] = {"samples": sum(sizes), "shards": []}
        for k, n in enumerate(sizes):
            ids = np.arange(start, start + n)
            start += n
            images = np.broadcast_to((ids % 251).astype(np.uint8)[:, None, None, None], (n, 2, 2, 3)).copy()
            rec = write_shard(root / shard_name(split, k, len(sizes)), {"images": images, "labels": ids}, "t")
            info["shards"].append({"file": rec["file"], "samples": n, "sha256": rec["sha256"]})
    mf.write_manifest(root, manifest)
    return root


def epoch_ids(ds, split, batch, size, epoch=0, **kw):
    per_rank, lengths = [], []
    for rank in range(size):
        loader = ds.loader(split, batch, rank=rank, size=size, **kw)
        loader.set_epoch(epoch)
        batches = list(loader)
        assert len(batches) == len(loader)
        for b in batches:
            assert b["images"].dtype == np.uint8 and b["labels"].dtype == np.int64
            np.testing.assert_array_equal(b["images"][:, 0, 0, 0], b["labels"] % 251)  # rows stay whole
        lengths.append(len(batches))
        per_rank.append(np.concatenate([b["labels"] for b in batches]) if batches else np.array([], np.int64))
    return per_rank, lengths


@pytest.mark.parametrize("size", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("batch", [1, 8, 50])
def test_without_drop_last_every_sample_exactly_once_and_equal_steps(tmp_path, size, batch):
    ds = open_dataset(id_dataset(tmp_path / "d"))
    per_rank, lengths = epoch_ids(ds, "train", batch, size, drop_last=False)
    assert len(set(lengths)) == 1
    everything = np.concatenate(per_rank)
    assert sorted(everything.tolist()) == list(range(201))


@pytest.mark.parametrize("run", [2, 10, 40])
def test_runs_copied_as_slices_keep_rows_whole_and_cover_every_sample_once(tmp_path, run):
    # Runs of consecutive samples (BERT's shuffle unit) are copied as slices when a batch is made
    # of long runs, and gathered row by row when the runs are short: both must give the same rows.
    ds = open_dataset(id_dataset(tmp_path / "d"))
    for epoch in (0, 1):
        per_rank, lengths = epoch_ids(ds, "train", 16, 2, epoch=epoch, drop_last=False, run_samples=run)
        assert len(set(lengths)) == 1
        assert sorted(np.concatenate(per_rank).tolist()) == list(range(201))


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_with_drop_last_full_equal_batches_disjoint_and_few_dropped(tmp_path, size):
    ds = open_dataset(id_dataset(tmp_path / "d"))
    batch = 16
    per_rank, lengths = epoch_ids(ds, "train", batch, size, drop_last=True, block_samples=4)
    assert len(set(lengths)) == 1 and lengths[0] == 201 // (size * batch)
    seen = np.concatenate(per_rank)
    assert len(seen) == len(set(seen.tolist())) == lengths[0] * batch * size
    assert 201 - len(seen) < size * batch
    # A different subset is dropped in another epoch (the block order changes).
    other = np.concatenate(epoch_ids(ds, "train", batch, size, epoch=1, drop_last=True, block_samples=4)[0])
    assert set(range(201)) - set(seen.tolist()) != set(range(201)) - set(other.tolist())


def test_order_is_seeded_per_epoch_and_shuffled(tmp_path):
    ds = open_dataset(id_dataset(tmp_path / "d"))
    first = epoch_ids(ds, "train", 10, 2, epoch=0)[0]
    again = epoch_ids(ds, "train", 10, 2, epoch=0)[0]
    later = epoch_ids(ds, "train", 10, 2, epoch=1)[0]
    other_seed = epoch_ids(ds, "train", 10, 2, epoch=0, seed=7)[0]
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not np.array_equal(first[0], later[0])
    assert not np.array_equal(first[0], other_seed[0])
    assert not np.array_equal(np.sort(first[0]), first[0])  # not in storage order


def test_small_blocks_and_windows_still_cover_everything(tmp_path):
    ds = open_dataset(id_dataset(tmp_path / "d"))
    for rank_size in (1, 3):
        seen = []
        for rank in range(rank_size):
            loader = ds.loader("train", 7, rank=rank, size=rank_size, drop_last=False, block_samples=5,
                               window_blocks=2)
            seen += [i for b in loader for i in b["labels"].tolist()]
        assert sorted(seen) == list(range(201))


def test_shuffle_false_reads_in_storage_order(tmp_path):
    ds = open_dataset(id_dataset(tmp_path / "d"))
    ids = np.concatenate([b["labels"] for b in ds.loader("train", 32, shuffle=False, drop_last=False)])
    assert ids.tolist() == list(range(201))


def test_more_ranks_than_samples_gives_equal_steps_with_empty_batches(tmp_path):
    ds = open_dataset(id_dataset(tmp_path / "d"))
    per_rank, lengths = epoch_ids(ds, "val", 4, 30, drop_last=False)  # 23 samples, 30 ranks
    assert len(set(lengths)) == 1
    assert sorted(np.concatenate(per_rank).tolist()) == list(range(201, 224))


def test_breaking_out_of_an_epoch_does_not_hang(tmp_path):
    ds = open_dataset(id_dataset(tmp_path / "d"))
    loader = ds.loader("train", 2, prefetch=1)
    for _ in range(3):
        for i, _batch in enumerate(loader):
            if i == 1:
                break
    assert len(list(loader)) == len(loader)


def test_manifest_and_info(tmp_path):
    ds = open_dataset(id_dataset(tmp_path / "d"))
    assert ds.kind == "images" and ds.num_samples("train") == 201 and ds.num_samples("val") == 23
    assert ds.data_info == {"num_classes": 224, "image_size": 2}
    with pytest.raises(DatasetError, match="no split 'test'"):
        ds.loader("test", 4)


def test_missing_directory_manifest_and_shard(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        open_dataset(tmp_path / "nope")
    root = id_dataset(tmp_path / "d")
    (root / "train-00001-of-00003.h5").unlink()
    with pytest.raises(DatasetError, match=r"train-00001-of-00003\.h5 is missing"):
        open_dataset(root)


def test_truncated_and_corrupt_shards(tmp_path):
    root = id_dataset(tmp_path / "d", shard_sizes=(3000,), val=(10,))
    shard = root / "train-00000-of-00001.h5"
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) - 5000])
    with pytest.raises(DatasetError, match=r"train-00000-of-00001\.h5 is (unreadable or )?truncated"):
        open_dataset(root)
    shard.write_bytes(b"\0" * 4096 + data[4096:])  # the HDF5 superblock overwritten
    with pytest.raises(DatasetError, match=r"train-00000-of-00001\.h5 is unreadable"):
        open_dataset(root)


def test_other_format_version_is_refused(tmp_path):
    root = id_dataset(tmp_path / "d")
    m = json.loads((root / "manifest.json").read_text())
    m["format_version"] = 2
    (root / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(DatasetError, match="format_version 2"):
        open_dataset(root)


def test_manifest_disagreeing_with_a_shard_is_refused(tmp_path):
    root = id_dataset(tmp_path / "d")
    m = json.loads((root / "manifest.json").read_text())
    m["fields"]["images"]["shape"] = [4, 4, 3]
    (root / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(DatasetError, match="field 'images'"):
        open_dataset(root)


def test_bert_runs_cover_every_sample_once_and_change_per_epoch(tmp_path):
    from hvdbench.data.synthetic import prepare_synthetic

    prepare_synthetic("bert", 3000, tmp_path / "b", info={"vocab_size": 30000, "max_seq_len": 32, "max_predictions": 4},
                      samples_per_shard=700, val_fraction=0)
    ds = open_dataset(tmp_path / "b")
    orders = []
    for epoch in (0, 1):
        seen = []
        for rank in range(3):
            loader = ds.loader("train", 50, rank=rank, size=3, drop_last=False, run_samples=16, block_samples=100)
            loader.set_epoch(epoch)
            # A row by its ids and its masked originals (two short rows may mask alike into the same ids).
            seen += [ids.tobytes() + masked.tobytes() for b in loader
                     for ids, masked in zip(b["input_ids"], b["masked_lm_ids"])]
        assert len(seen) == 3000 and len(set(seen)) == 3000
        orders.append(seen)
    assert orders[0] != orders[1]
    # Runs: consecutive stored instances mostly stay together in a batch; their grouping shifts per epoch.
    assert ds.loader("train", 50).run > 1


def test_a_shard_replaced_after_open_is_read_with_its_new_layout(tmp_path):
    root = id_dataset(tmp_path / "d", shard_sizes=(50,), val=(5,))
    ds = open_dataset(root)
    path = root / "train-00000-of-00001.h5"
    import h5py

    with h5py.File(path) as f:
        arrays = {k: f[k][:] for k in ("images", "labels")}
        attrs = dict(f.attrs)
        before = f["labels"].id.get_offset()
    path.unlink()  # replaced as a rerun of prepare replaces it: a new file, its data elsewhere
    with h5py.File(path, "w") as f:
        f.create_dataset("extra", data=np.zeros(5000))
        for k, v in arrays.items():
            f.create_dataset(k, data=v)
        f.attrs.update(attrs)
        assert f["labels"].id.get_offset() != before
    ids = np.concatenate([b["labels"] for b in ds.loader("train", 10, drop_last=False)])
    assert sorted(ids.tolist()) == list(range(50))


def test_the_producer_stays_at_most_prefetch_batches_ahead(tmp_path, monkeypatch):
    from hvdbench.data.readers import Loader

    built = []
    gather = Loader._gather
    monkeypatch.setattr(Loader, "_gather", lambda self, picks: built.append(1) or gather(self, picks))
    loader = open_dataset(id_dataset(tmp_path / "d")).loader("train", 2, prefetch=2)
    batches = iter(loader)
    next(batches)
    deadline = time.monotonic() + 10
    while len(built) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # time enough to run away through the other 96 batches, were nothing to stop it
    # two waiting in the queue, one in the producer's hand waiting for a ticket, one taken
    assert len(built) == 2 + 1 + 1
    assert sum(1 for _ in batches) == len(loader) - 1


def test_an_error_while_reading_reaches_the_caller(tmp_path, monkeypatch):
    from hvdbench.data.readers import Loader

    def broken(self, picks):
        raise DatasetError("shard x: cannot read")

    monkeypatch.setattr(Loader, "_gather", broken)
    loader = open_dataset(id_dataset(tmp_path / "d")).loader("train", 2)
    with pytest.raises(DatasetError, match="shard x: cannot read"):
        list(loader)


def test_residency_check_sees_touched_pages_only():
    import mmap

    from hvdbench.data.readers import _resident

    mm = mmap.mmap(-1, 8 << 20)  # larger than any huge page that could back the touched ones
    view = np.frombuffer(mm, np.uint8)
    address = view.ctypes.data
    assert not _resident(address, len(mm))  # anonymous pages exist once written
    view[: 8 * mmap.PAGESIZE] = 1
    assert _resident(address, 8 * mmap.PAGESIZE)
    assert not _resident(address, len(mm))
    del view
    mm.close()


def test_read_ahead_advises_only_ranges_not_in_memory(tmp_path, monkeypatch):
    """First look at a range: three pages stand for it (a whole-range check of pages this process
    has not mapped costs as much as the advice); later looks check the whole range. Advice goes
    only to ranges found missing."""
    from hvdbench.data import readers
    from hvdbench.data.synthetic import prepare_synthetic

    prepare_synthetic("images", 300, tmp_path / "d", info={"image_size": 64}, samples_per_shard=100, val_fraction=0)
    ds = open_dataset(tmp_path / "d")
    loader = ds.loader("train", 10)
    window = loader.plan()
    assert len(window) == 3  # one read per shard, each 1.2 MB of images and 800 bytes of labels

    advised, probes, answer = [], [], {"resident": False}

    class Advice:  # stands in for the map and records the advice given to it
        def madvise(self, option, start, length):
            advised.append((option, start, length))

    mapped = ds._mapped
    monkeypatch.setattr(ds, "_mapped", lambda file: (*mapped(file)[:1], Advice(), *mapped(file)[2:]))
    monkeypatch.setattr(readers, "_resident", lambda address, length: probes.append(length) or answer["resident"])

    loader._read_ahead(window)  # first look, nothing in memory: the first page answers for each range
    assert probes == [1, 1, 1] and len(advised) == 3  # labels (800 bytes) are left to the kernel
    image_bytes = 100 * 64 * 64 * 3
    assert all(option == readers.mmap.MADV_WILLNEED and image_bytes <= length < image_bytes + readers.mmap.PAGESIZE
               for option, _, length in advised)

    probes.clear(), advised.clear()
    answer["resident"] = True
    loader._read_ahead(window)  # later look, all in memory: one whole-range check each, no advice
    assert [length >= image_bytes for length in probes] == [True] * 3 and advised == []

    probes.clear()
    new = [(shard, first + 50, count - 50) for shard, first, count in window]  # not looked at before
    loader._read_ahead(new)  # first look, in memory: first, middle and last page each, no advice
    assert probes == [1] * 9 and advised == []


def test_epochs_with_read_ahead_at_work_cover_every_sample_once(tmp_path):
    """Shards big enough for the reader to advise the kernel (the small test sets above are not)."""
    from hvdbench.data.synthetic import prepare_synthetic

    prepare_synthetic("images", 300, tmp_path / "d", info={"image_size": 64}, samples_per_shard=100, val_fraction=0)
    ds = open_dataset(tmp_path / "d")
    stored = sorted(bytes(row) for f in ds.manifest["splits"]["train"]["shards"]
                    for row in ds.arrays(f["file"])["images"])
    loaders = [ds.loader("train", 7, rank=r, size=2, drop_last=False) for r in range(2)]
    for epoch in range(3):
        seen = []
        for loader in loaders:
            loader.set_epoch(epoch)
            seen += [bytes(row) for batch in loader for row in batch["images"]]
        assert sorted(seen) == stored
    assert all(loader._checked for loader in loaders)  # the read-ahead did look at the ranges
