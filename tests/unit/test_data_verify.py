"""`prepare verify` and the CLI: corrupt, truncated and out-of-range shards are named; good ones pass."""

import json

import h5py
import pytest
from click.testing import CliRunner

from hvdbench.cli.main import cli
from hvdbench.data.shards import write_shard
from hvdbench.data.verify import verify
from hvdbench.families.images.digits import prepare_digits


@pytest.fixture
def digits(tmp_path):
    prepare_digits(tmp_path / "d", size=8, samples_per_shard=500)
    return tmp_path / "d"


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_verify_passes_a_good_dataset(digits):
    report = verify(digits)
    assert report.ok and len(report.rows) == 4 and all(r["status"] == "ok" for r in report.rows)
    result = run("prepare", "verify", digits)
    assert result.exit_code == 0, result.output
    assert "ok: 1797 samples in 4 shards" in result.output


def test_flipped_bytes_are_found_by_the_checksum(digits):
    shard = digits / "train-00001-of-00003.h5"
    with h5py.File(shard) as f:
        offset = f["images"].id.get_offset()
    data = bytearray(shard.read_bytes())
    data[offset + 100] ^= 0xFF
    shard.write_bytes(bytes(data))
    report = verify(digits)
    assert not report.ok
    assert report.problems == [f"{shard}: data does not match its sha256 checksum (corrupt)"]
    result = run("prepare", "verify", digits)
    assert result.exit_code == 1
    assert "Error: 1 problem(s); first:" in result.output and "train-00001-of-00003.h5" in result.output


def test_truncated_and_missing_shards(digits):
    shard = digits / "val-00000-of-00001.h5"
    shard.write_bytes(shard.read_bytes()[:3000])
    (digits / "train-00000-of-00003.h5").unlink()
    problems = verify(digits).problems
    assert len(problems) == 2
    assert "train-00000-of-00003.h5" in problems[0] and "missing" in problems[0]
    assert "val-00000-of-00001.h5" in problems[1] and "truncated" in problems[1]


def test_out_of_range_labels_and_count_mismatch(digits):
    m = json.loads((digits / "manifest.json").read_text())
    shard = m["splits"]["val"]["shards"][0]
    with h5py.File(digits / shard["file"]) as f:
        arrays = {k: f[k][:] for k in f}
    arrays["labels"][3] = 10  # num_classes is 10
    rec = write_shard(digits / shard["file"], arrays, source="x")
    shard["sha256"] = rec["sha256"]
    m["splits"]["train"]["shards"][0]["samples"] += 1
    m["splits"]["train"]["samples"] += 1
    (digits / "manifest.json").write_text(json.dumps(m))
    problems = verify(digits).problems
    assert any("train-00000-of-00003.h5: holds 500 samples, the manifest says 501" in p for p in problems)
    assert any("field 'labels' holds 10, outside [0, 9]" in p for p in problems)


def test_vocab_mismatch_is_found(tmp_path):
    from hvdbench.data.synthetic import prepare_synthetic

    prepare_synthetic("bert", 100, tmp_path / "b", info={"vocab_size": 50, "max_seq_len": 16, "max_predictions": 3})
    with open(tmp_path / "b" / "vocab.txt", "a") as f:
        f.write("extra\n")
    assert verify(tmp_path / "b").problems[0].endswith("sha256 differs from the manifest's vocab_sha256")


def test_verify_of_a_missing_dataset_is_one_line(tmp_path):
    result = run("prepare", "verify", tmp_path / "none")
    assert result.exit_code == 1
    assert result.output.strip().count("\n") == 0 and "does not exist" in result.output


def test_cli_prepare_commands(tmp_path):
    r = run("prepare", "digits", "--out", tmp_path / "d", "--size", 8)
    assert r.exit_code == 0, r.output
    assert "train" in r.output and "1437" in r.output
    r = run("prepare", "bert", "--src", "builtin:pydoc", "--vocab-size", 800, "--dupe-factor", 1,
            "--max-seq-len", 64, "--max-predictions", 8, "--out", tmp_path / "b")
    assert r.exit_code == 0, r.output
    r = run("prepare", "pack", "--src", tmp_path / "b", "--out", tmp_path / "p", "--strategy", "nnlshp")
    assert r.exit_code == 0, r.output
    assert "packing (nnlshp)" in r.output and "speedup" in r.output
    r = run("prepare", "synthetic", "--like", "images", "--samples", 30, "--size", 4, "--out", tmp_path / "s")
    assert r.exit_code == 0, r.output
    for d in ("d", "b", "p", "s"):
        assert run("prepare", "verify", tmp_path / d).exit_code == 0


def test_cli_errors_are_one_line(tmp_path):
    r = run("prepare", "images", "--src", tmp_path, "--out", tmp_path / "o")
    assert r.exit_code == 1 and "Error:" in r.output and "no train/ folder" in r.output
    r = run("prepare", "bert", "--src", "builtin:pydoc", "--out", tmp_path / "b")
    assert r.exit_code == 1 and "exactly one of --vocab" in r.output
    prepare_digits(tmp_path / "d", size=8)
    r = run("prepare", "digits", "--out", tmp_path / "d", "--size", 16)
    assert r.exit_code == 1 and "already holds a different dataset" in r.output
    assert verify(tmp_path / "d").ok  # the refused run lost nothing
