"""MPI-parallel prepare: `mpirun -np 2 hvdbench prepare ...` makes the same dataset as one process."""

import json
import shlex

import pytest
from conftest import run

from hvdbench.data.readers import open_dataset
from hvdbench.families.images.digits import write_tree

pytestmark = [pytest.mark.integration]


def samples(path):
    ds = open_dataset(path)
    out = {}
    for split in ds.splits:
        for b in ds.loader(split, 64, shuffle=False, drop_last=False):
            for i in range(len(b["labels"])):
                out.setdefault(split, []).append(b["images"][i].tobytes() + bytes([b["labels"][i]]))
    return {split: sorted(v) for split, v in out.items()}


def mpi(mpirun, *argv):
    return [mpirun, "-np", "2", "--oversubscribe", *map(str, argv)]


@pytest.mark.timeout(240)
def test_two_ranks_make_the_same_image_dataset(tmp_path, mpirun, hvdbench_bin):
    write_tree(tmp_path / "tree", size=24, per_class=6)
    common = ["prepare", "images", "--src", tmp_path / "tree", "--size", 16, "--samples-per-shard", 7]
    run([hvdbench_bin, *common, "--out", tmp_path / "one", "--workers", 1])
    proc = run(mpi(mpirun, hvdbench_bin, *common, "--out", tmp_path / "two", "--workers", 2))
    assert proc.stdout.count("train") == 1  # rank 0 alone reports
    one = json.loads((tmp_path / "one" / "manifest.json").read_text())
    two = json.loads((tmp_path / "two" / "manifest.json").read_text())
    assert one["splits"] == two["splits"]  # same shards, counts and checksums
    assert len(two["splits"]["train"]["shards"]) == 9  # 60 images / 7: both ranks wrote some
    assert samples(tmp_path / "one") == samples(tmp_path / "two")
    for shard in two["splits"]["train"]["shards"]:
        assert (tmp_path / "one" / shard["file"]).read_bytes() == (tmp_path / "two" / shard["file"]).read_bytes()
    assert shlex.split(two["command"])[:3] == ["hvdbench", "prepare", "images"]
    assert not list((tmp_path / "two").glob("*.partial"))
    run([hvdbench_bin, "prepare", "verify", tmp_path / "two"])


@pytest.mark.timeout(240)
def test_two_ranks_make_the_same_bert_and_packed_datasets(tmp_path, mpirun, hvdbench_bin):
    from hvdbench.data.text import read_documents

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    docs = read_documents("builtin:pydoc")
    for k in range(3):
        (corpus / f"part-{k}.txt").write_text("\n\n".join("\n".join(d) for d in docs[k::3]) + "\n")
    common = ["prepare", "bert", "--src", corpus, "--vocab-size", 1000, "--dupe-factor", 1,
              "--max-seq-len", 64, "--max-predictions", 8]
    run([hvdbench_bin, *common, "--out", tmp_path / "one"])
    run(mpi(mpirun, hvdbench_bin, *common, "--out", tmp_path / "two"))
    one = json.loads((tmp_path / "one" / "manifest.json").read_text())
    two = json.loads((tmp_path / "two" / "manifest.json").read_text())
    assert one["vocab_sha256"] == two["vocab_sha256"] and one["splits"] == two["splits"]
    run(mpi(mpirun, hvdbench_bin, "prepare", "pack", "--src", tmp_path / "two", "--out", tmp_path / "packed"))
    packed = json.loads((tmp_path / "packed" / "manifest.json").read_text())
    assert packed["packing"]["train"]["sequences"] == two["splits"]["train"]["samples"]
    run([hvdbench_bin, "prepare", "verify", tmp_path / "packed"])


@pytest.mark.timeout(120)
def test_a_bad_input_fails_on_every_rank_without_hanging(tmp_path, mpirun, hvdbench_bin):
    (tmp_path / "tree" / "train" / "cat").mkdir(parents=True)  # an empty class folder
    proc = run(mpi(mpirun, hvdbench_bin, "prepare", "images", "--src", tmp_path / "tree", "--out", tmp_path / "o"),
               check=False, timeout=100)
    assert proc.returncode != 0
    assert "empty class folder" in proc.stderr
    assert not (tmp_path / "o" / "manifest.json").exists()
