"""`prepare synthetic`: seeded random data in the real formats, readable, verifiable and packable."""

import numpy as np
import pytest

from hvdbench.data.parallel import PrepareOptions
from hvdbench.models.bert.data import BERT, BERT_PACKED, wikipedia_lengths
from hvdbench.models.bert.packing import prepare_pack
from hvdbench.data.readers import open_dataset
from hvdbench.data.synthetic import prepare_synthetic
from hvdbench.data.verify import verify
from hvdbench.errors import DatasetError


def test_synthetic_images(tmp_path):
    m = prepare_synthetic("images", 250, tmp_path / "s", info={"image_size": 12, "num_classes": 7},
                          samples_per_shard=60, options=PrepareOptions(workers=2))
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
    # Wikipedia's lengths scaled to 64 tokens: ~24 % full, the mean half the row, none under 5 tokens
    assert 0.19 < (lengths == 64).mean() < 0.29 and 0.46 < lengths.mean() / 64 < 0.56 and lengths.min() >= 5
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


def test_synthetic_lengths_are_mlperfs_wikipedia():
    """MLPerf's Wikipedia at 512 tokens (Graphcore's histogram, bert/data.py): 23.4 % of the sequences
    full, a mean of 255.8 tokens, none under 5; a shorter row keeps the shape."""
    lengths = wikipedia_lengths(100_000, 512, np.random.default_rng(0))
    assert abs((lengths == 512).mean() - 0.2343) < 0.005 and abs(lengths.mean() - 255.8) < 2
    assert lengths.min() >= 5 and lengths.max() == 512
    short = wikipedia_lengths(100_000, 128, np.random.default_rng(0))
    assert abs((short == 128).mean() - 0.2343) < 0.01 and abs(short.mean() / 128 - 0.4996) < 0.01


def _rows(path):
    ds = open_dataset(path)
    batch = next(iter(ds.loader("train", ds.num_samples("train"), shuffle=False)))
    return batch, (batch["packed_input_len"] > 0).sum(1)


def test_synthetic_packed_rows_have_what_prepare_pack_writes_from_the_same_lengths(tmp_path):
    """Synthetic packed rows (`prepare synthetic --like bert_packed`, what `--synthetic-kind
    bert_packed` trains on) against `prepare synthetic --like bert` + `prepare pack --strategy
    nnlshp` (the real packing of sequences with the same lengths): the same sequences a row (~2,
    as MLPerf's packed data), the same share of rows holding 1, 2 and 3, the same lengths; the
    rows are valid packed data and count their sequences as MLPerf does."""
    info = {"vocab_size": 200, "max_seq_len": 128, "max_predictions": 20}
    prepare_synthetic("bert", 6000, tmp_path / "b", info=info, samples_per_shard=6000, val_fraction=0)
    packed = prepare_pack(tmp_path / "b", tmp_path / "p", strategy="nnlshp", max_seqs_per_pack=3)
    prepare_synthetic("bert_packed", 3000, tmp_path / "s", info={**info, "max_seqs_per_pack": 3},
                      samples_per_shard=3000, val_fraction=0)
    assert verify(tmp_path / "s").ok
    real, real_n = _rows(tmp_path / "p")
    synth, synth_n = _rows(tmp_path / "s")
    report = packed["packing"]["train"]
    assert real_n.mean() == pytest.approx(report["sequences"] / report["packs"])
    assert 1.9 < real_n.mean() < 2.1 and synth_n.mean() == pytest.approx(real_n.mean(), rel=0.03)
    share = lambda n: np.bincount(n, minlength=4)[1:] / len(n)  # noqa: E731
    assert np.abs(share(synth_n) - share(real_n)).max() < 0.04, (share(synth_n), share(real_n))
    lengths = lambda b: b["packed_input_len"][b["packed_input_len"] > 0]  # noqa: E731
    assert lengths(synth).mean() == pytest.approx(lengths(real).mean(), rel=0.03)
    assert (lengths(synth) == 128).mean() == pytest.approx((lengths(real) == 128).mean(), abs=0.03)
    assert BERT_PACKED.mlperf_samples(synth) == synth_n.sum()
    assert BERT.mlperf_samples(BERT.synthetic(5, info, np.random.default_rng(0))) == 5  # a row, a sequence
