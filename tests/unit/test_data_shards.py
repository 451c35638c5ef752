"""Shard files and manifests: atomic shard writes, resume detection, manifest checks."""

import json

import h5py
import numpy as np
import pytest

from hvdbench.data import manifest as mf
from hvdbench.data.shards import ATTR_SAMPLES, completed_shard, open_shard, shard_name, stale_files, write_shard
from hvdbench.errors import DatasetError


def _arrays(n=10):
    return {"x": np.arange(n * 3, dtype=np.int32).reshape(n, 3), "y": np.arange(n, dtype=np.int64)}


def test_write_shard_round_trip_and_record(tmp_path):
    path = tmp_path / shard_name("train", 0, 2)
    record = write_shard(path, _arrays(), source="abc", info={"skipped": ["a.png"]})
    assert path.name == "train-00000-of-00002.h5"
    assert not path.with_name(path.name + ".partial").exists()
    assert record["samples"] == 10 and record["info"] == {"skipped": ["a.png"]}
    with h5py.File(path) as f:
        np.testing.assert_array_equal(f["x"][:], _arrays()["x"])
        assert f["x"].chunks is None and f["x"].compression is None  # contiguous: random access by offset
        assert int(f.attrs[ATTR_SAMPLES]) == 10
    assert completed_shard(path, "abc") == record


def test_completed_shard_rejects_other_source_truncation_and_absence(tmp_path):
    path = tmp_path / "train-00000-of-00001.h5"
    assert completed_shard(path, "abc") is None
    write_shard(path, _arrays(1000), source="abc")
    assert completed_shard(path, "other inputs") is None
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert completed_shard(path, "abc") is None


def test_write_shard_never_writes_through_a_link_planted_at_its_partial_name(tmp_path):
    """Issue 50 item 9: whoever can create files in a data folder plants `<shard>.partial` -> a file of
    theirs choosing; the shard is written beside it, the link's target is left as it was."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    path = tmp_path / shard_name("train", 0, 1)
    path.with_name(path.name + ".partial").symlink_to(victim)
    record = write_shard(path, _arrays(), source="abc")
    assert victim.read_text() == "keep me"
    assert record["samples"] == 10 and completed_shard(path, "abc") == record and not path.is_symlink()


def test_write_shard_refuses_ragged_fields(tmp_path):
    with pytest.raises(ValueError, match="different sample counts"):
        write_shard(tmp_path / "a.h5", {"x": np.zeros(3), "y": np.zeros(4)}, source="s")


def test_open_shard_errors_name_the_file(tmp_path):
    with pytest.raises(DatasetError, match="missing"):
        open_shard(tmp_path / "nope.h5")
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"not hdf5 at all" * 100)
    with pytest.raises(DatasetError, match=r"bad\.h5 is unreadable or truncated"):
        open_shard(bad)
    with h5py.File(tmp_path / "unfinished.h5", "w") as f:
        f["x"] = np.zeros(3)
    with pytest.raises(DatasetError, match="incomplete"):
        open_shard(tmp_path / "unfinished.h5")


def test_stale_files_lists_only_our_shard_names(tmp_path):
    for name in ("train-00000-of-00002.h5", "train-00001-of-00002.h5.partial", "val-00000-of-00001.h5",
                 "notes.txt", "manifest.json"):
        (tmp_path / name).write_text("")
    stale = [p.name for p in stale_files(tmp_path, keep={"val-00000-of-00001.h5"})]
    assert stale == ["train-00000-of-00002.h5", "train-00001-of-00002.h5.partial"]


def _manifest(**over):
    m = mf.new_manifest("images", {"x": mf.field_spec((3,), "int32")}, 0, {"a": 1}, command="hvdbench prepare x")
    m["splits"] = {"train": {"samples": 10, "shards": [{"file": "train-00000-of-00001.h5", "samples": 10}]}}
    m.update(over)
    return m


def test_read_manifest_accepts_a_good_one(tmp_path):
    mf.write_manifest(tmp_path, _manifest())
    assert mf.read_manifest(tmp_path)["kind"] == "images"
    assert not list(tmp_path.glob(".*tmp*"))  # the atomic write left no temporary file


@pytest.mark.parametrize("change, message", [
    ({"format_version": 99}, "format_version 99"),
    ({"format": "other"}, "not an hvdbench dataset manifest"),
    ({"kind": "audio"}, "unknown dataset kind 'audio'; valid: bert, bert_packed, detection, flux_latents, images"),
    ({"splits": {"train": {"samples": 11, "shards": [{"file": "a.h5", "samples": 10}]}}}, "do not add up"),
])
def test_read_manifest_rejects_bad_ones_naming_the_file(tmp_path, change, message):
    mf.write_manifest(tmp_path, _manifest(**change))
    with pytest.raises(DatasetError, match=message) as e:
        mf.read_manifest(tmp_path)
    assert "manifest.json" in str(e.value)


def test_read_manifest_missing_dir_and_file(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        mf.read_manifest(tmp_path / "nope")
    with pytest.raises(DatasetError, match="manifest.json missing"):
        mf.read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text("{broken")
    with pytest.raises(DatasetError, match="unreadable manifest"):
        mf.read_manifest(tmp_path)


def test_check_reusable_refuses_a_different_dataset_unless_overwrite(tmp_path):
    mf.write_manifest(tmp_path, _manifest())
    mf.check_reusable(tmp_path, "images", {"a": 1}, overwrite=False)  # the same command: fine
    with pytest.raises(DatasetError, match="already holds a different dataset"):
        mf.check_reusable(tmp_path, "images", {"a": 2}, overwrite=False)
    mf.check_reusable(tmp_path, "images", {"a": 2}, overwrite=True)


def test_command_line_is_the_argv_as_typed():
    assert mf.command_line(["/venv/bin/hvdbench", "prepare", "digits", "--out", "a b"]) == \
        "hvdbench prepare digits --out 'a b'"
    assert json.loads(json.dumps(_manifest()))["command"] == "hvdbench prepare x"
