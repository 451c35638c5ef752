"""`prepare synthetic`: seeded random data in the real formats, readable, verifiable and packable."""

import numpy as np
import pytest

from hvdbench.models.bert.packing import prepare_pack
from hvdbench.data.readers import open_dataset
from hvdbench.data.synthetic import prepare_synthetic
from hvdbench.data.verify import verify
from hvdbench.errors import DatasetError


def test_synthetic_images(tmp_path):
    m = prepare_synthetic("images", 250, tmp_path / "s", info={"image_size": 12, "num_classes": 7},
                          samples_per_shard=60, workers=2)
    assert m["kind"] == "images" and m["synthetic"] is True and m["num_classes"] == 7
    assert m["splits"]["train"]["samples"] == 238 and m["splits"]["val"]["samples"] == 12
    assert len(m["splits"]["train"]["shards"]) == 4
    batch = next(iter(open_dataset(tmp_path / "s").loader("train", 50)))
    assert batch["images"].shape == (50, 12, 12, 3) and batch["labels"].max() < 7
    assert verify(tmp_path / "s").ok


def test_synthetic_bert_has_the_real_structure_and_packs(tmp_path):
    m = prepare_synthetic("bert", 3000, tmp_path / "b", samples_per_shard=1000,
                          info={"vocab_size": 500, "max_seq_len": 64, "max_predictions": 10})
    assert m["kind"] == "bert" and m["vocab_size"] == 500
    assert (tmp_path / "b" / "vocab.txt").read_text().splitlines()[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert verify(tmp_path / "b").ok
    batch = next(iter(open_dataset(tmp_path / "b").loader("train", 1000)))
    lengths = batch["input_mask"].sum(1)
    assert np.all(batch["input_ids"][:, 0] == 2)
    assert np.all((batch["input_ids"] == 3).sum(1) + (batch["masked_lm_ids"] == 3).sum(1) >= 2)
    assert 0.05 < (lengths < 64).mean() < 0.2  # about short_seq_prob of them shorter
    used = batch["masked_lm_positions"] > 0
    assert abs(used.sum() / lengths.sum() - 0.15) < 0.01
    packed = prepare_pack(tmp_path / "b", tmp_path / "p")
    assert packed["packing"]["train"]["sequences"] == m["splits"]["train"]["samples"]
    assert verify(tmp_path / "p").ok


SMALL = {"vocab_size": 100, "max_seq_len": 32, "max_predictions": 5}


def test_synthetic_is_seeded(tmp_path):
    a = prepare_synthetic("bert", 500, tmp_path / "a", info=SMALL, seed=1)
    b = prepare_synthetic("bert", 500, tmp_path / "b", info=SMALL, seed=1)
    c = prepare_synthetic("bert", 500, tmp_path / "c", info=SMALL, seed=2)
    assert a["splits"] == b["splits"] != c["splits"]
    f = a["splits"]["train"]["shards"][0]["file"]
    assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


def test_synthetic_bad_options(tmp_path):
    with pytest.raises(DatasetError, match="--like: unknown dataset kind 'audio'"):
        prepare_synthetic("audio", 10, tmp_path / "x")
    with pytest.raises(DatasetError, match="vocab_size must exceed"):
        prepare_synthetic("bert", 10, tmp_path / "y", info={"vocab_size": 5})
    with pytest.raises(DatasetError, match="image_size do not apply to 'bert'"):
        prepare_synthetic("bert", 10, tmp_path / "z", info={"image_size": 5})
