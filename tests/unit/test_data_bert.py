"""`prepare bert`: real text (CPython's own docs) -> WordPiece -> NSP pairs + masked LM, MLPerf fields."""

import random

import h5py
import numpy as np
import pytest

from hvdbench.data import text
from hvdbench.data.parallel import PrepareOptions
from hvdbench.models.bert.prepare import BertOptions, document_pairs, mask_tokens, prepare_bert, truncate_pair
from hvdbench.data.readers import open_dataset
from hvdbench.data.verify import verify
from hvdbench.data.vocab import read_vocab, train_vocab, vocab_sha256
from hvdbench.errors import DatasetError

FIELDS = ["input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels"]


@pytest.fixture(scope="module")
def pydoc(tmp_path_factory):
    out = tmp_path_factory.mktemp("bert") / "pydoc"
    prepare_bert(["builtin:pydoc"], out, vocab_size=3000, opts=BertOptions(dupe_factor=3),
                 options=PrepareOptions(command="test"))
    return out


def load(path, split="train"):
    ds = open_dataset(path)
    batches = list(ds.loader(split, 256, shuffle=False, drop_last=False))
    return {k: np.concatenate([b[k] for b in batches]) for k in FIELDS}


def test_builtin_pydoc_is_real_prose():
    docs = text.read_documents("builtin:pydoc")
    assert len(docs) > 50 and sum(len(d) for d in docs) > 3000
    assert any("assert" in s for s in docs[0])


def test_text_files_one_sentence_per_line_blank_between_documents(tmp_path):
    f = tmp_path / "corpus.txt"
    f.write_text("First sentence.\nSecond one.\n\n\nOther document.\n")
    assert text.read_documents(str(f)) == [["First sentence.", "Second one."], ["Other document."]]
    assert text.expand_sources([str(tmp_path)]) == [str(f)]
    with pytest.raises(DatasetError, match="no such file"):
        text.expand_sources([str(tmp_path / "missing.txt")])
    with pytest.raises(DatasetError, match="unknown built-in corpus"):
        text.expand_sources(["builtin:wiki"])


def test_vocab_training_is_reproducible_and_covers_the_corpus(tmp_path):
    train_vocab(text.iter_sentences(["builtin:pydoc"]), 2000, True, tmp_path / "a.txt")
    train_vocab(text.iter_sentences(["builtin:pydoc"]), 2000, True, tmp_path / "b.txt")
    assert vocab_sha256(tmp_path / "a.txt") == vocab_sha256(tmp_path / "b.txt")
    tokens = read_vocab(tmp_path / "a.txt")
    assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and len(tokens) == 2000
    assert len(set(tokens)) == 2000 and any(t.startswith("##") for t in tokens)


def test_instances_have_the_bert_structure(pydoc):
    m = open_dataset(pydoc).manifest
    assert m["kind"] == "bert" and m["max_seq_len"] == 128 and m["max_predictions"] == 20
    assert m["vocab_size"] == 3000 and m["vocab_sha256"] == vocab_sha256(pydoc / "vocab.txt")
    assert {k: v["dtype"] for k, v in m["fields"].items()} == {k: "int32" for k in FIELDS}
    tokens = read_vocab(pydoc / "vocab.txt")
    cls, sep, mask = tokens.index("[CLS]"), tokens.index("[SEP]"), tokens.index("[MASK]")
    a = load(pydoc)
    n = len(a["input_ids"])
    assert n > 1500 and m["splits"]["val"]["samples"] > 50
    lengths = a["input_mask"].sum(1)
    pos = np.arange(128)[None, :]
    np.testing.assert_array_equal(a["input_mask"], (pos < lengths[:, None]).astype(np.int32))  # 1s then 0s
    assert np.all(a["input_ids"][:, 0] == cls)
    assert np.all(a["input_ids"][pos >= lengths[:, None]] == 0)
    labels_at = a["input_ids"].copy()
    rows = np.arange(n)[:, None]
    used = a["masked_lm_positions"] > 0
    labels_at[rows, a["masked_lm_positions"]] = np.where(used, a["masked_lm_ids"], labels_at[rows, a["masked_lm_positions"]])
    for i in range(n):  # the original text: [CLS] A [SEP] B [SEP], segment 0 for A, 1 for B
        ids = labels_at[i, :lengths[i]]
        seps = np.nonzero(ids == sep)[0]
        assert len(seps) == 2 and seps[1] == lengths[i] - 1 and 1 < seps[0] < lengths[i] - 2
        np.testing.assert_array_equal(a["segment_ids"][i, :lengths[i]], (np.arange(lengths[i]) > seps[0]).astype(int))
        p = a["masked_lm_positions"][i][used[i]]
        assert len(p) >= 1 and np.all(np.diff(p) > 0) and p.max() < lengths[i]
        assert not np.any(np.isin(labels_at[i, p], [cls, sep]))
        assert np.all(a["masked_lm_ids"][i][~used[i]] == 0)
    assert np.all(lengths <= 128) and (lengths == 128).mean() > 0.5
    nsp = a["next_sentence_labels"]
    assert set(nsp.tolist()) == {0, 1} and 0.4 < nsp.mean() < 0.65
    assert mask not in a["masked_lm_ids"]
    assert verify(pydoc).ok


def test_masking_statistics_on_the_real_corpus(pydoc):
    """15 % of tokens are predicted; of those 80 % [MASK], 10 % random, 10 % unchanged."""
    mask = read_vocab(pydoc / "vocab.txt").index("[MASK]")
    a = load(pydoc)
    used = a["masked_lm_positions"] > 0
    predicted = int(used.sum())
    assert predicted > 20000
    assert abs(predicted / a["input_mask"].sum() - 0.15) < 0.01
    shown = np.take_along_axis(a["input_ids"], a["masked_lm_positions"], 1)[used]
    truth = a["masked_lm_ids"][used]
    as_mask, unchanged = np.mean(shown == mask), np.mean(shown == truth)
    assert abs(as_mask - 0.8) < 0.02 and abs(unchanged - 0.1) < 0.02 and abs(1 - as_mask - unchanged - 0.1) < 0.02


def test_masking_statistics_vectorised_on_many_lengths():
    rng = np.random.default_rng(0)
    n, length = 40000, 64
    lengths = rng.integers(8, length + 1, n)
    pos = np.arange(length)[None, :]
    inside = pos < lengths[:, None]
    ids = np.where(inside, rng.integers(10, 1000, (n, length)), 0).astype(np.int32)
    ids[:, 0] = 2
    ids[pos == (lengths - 1)[:, None]] = 3
    arrays = {"input_ids": ids, "input_mask": inside.astype(np.int32)}
    out = mask_tokens(arrays, BertOptions(max_seq_len=length, max_predictions=20),
                      {"cls": 2, "sep": 3, "mask": 4}, np.arange(10, 1000, dtype=np.int32), rng)
    used = out["masked_lm_positions"] > 0
    assert abs(used.sum() / inside.sum() - 0.15) < 0.01
    shown = np.take_along_axis(out["input_ids"], out["masked_lm_positions"], 1)[used]
    assert abs(np.mean(shown == 4) - 0.8) < 0.02
    assert abs(np.mean(shown == out["masked_lm_ids"][used]) - 0.1) < 0.02
    untouched = np.ones_like(ids, bool)
    untouched[np.arange(n)[:, None], out["masked_lm_positions"]] &= ~used
    np.testing.assert_array_equal(out["input_ids"][untouched], ids[untouched])


def test_same_seed_same_bytes(tmp_path):
    opts = BertOptions(dupe_factor=1, seed=3)
    for name in ("a", "b"):
        prepare_bert(["builtin:pydoc"], tmp_path / name, vocab_size=1000, opts=opts)
    for f in ("vocab.txt", "train-00000-of-00001.h5", "val-00000-of-00001.h5"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    prepare_bert(["builtin:pydoc"], tmp_path / "c", vocab=tmp_path / "a" / "vocab.txt",
                 opts=BertOptions(dupe_factor=1, seed=4))
    with h5py.File(tmp_path / "a" / "train-00000-of-00001.h5") as fa, \
            h5py.File(tmp_path / "c" / "train-00000-of-00001.h5") as fc:
        assert not np.array_equal(fa["input_ids"][:100], fc["input_ids"][:100])


def test_given_vocab_several_files_and_workers(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    docs = text.read_documents("builtin:pydoc")
    for k in range(3):
        part = docs[k::3]
        (corpus / f"part-{k}.txt").write_text("\n\n".join("\n".join(d) for d in part) + "\n")
    train_vocab(text.iter_sentences(["builtin:pydoc"]), 1500, True, tmp_path / "vocab.txt")
    m = prepare_bert([str(corpus)], tmp_path / "ds", vocab=tmp_path / "vocab.txt",
                     opts=BertOptions(dupe_factor=1, max_seq_len=64, max_predictions=10),
                     options=PrepareOptions(workers=2))
    assert [s["file"] for s in m["splits"]["train"]["shards"]] == [f"train-0000{k}-of-00003.h5" for k in range(3)]
    assert m["vocab_sha256"] == vocab_sha256(tmp_path / "vocab.txt") == vocab_sha256(tmp_path / "ds" / "vocab.txt")
    assert m["documents"] == len(docs)
    assert verify(tmp_path / "ds").ok
    assert load(tmp_path / "ds")["input_ids"].shape[1] == 64


def test_bad_input(tmp_path):
    with pytest.raises(DatasetError, match="exactly one of --vocab FILE and --vocab-size N"):
        prepare_bert(["builtin:pydoc"], tmp_path / "a")
    bad = tmp_path / "vocab.txt"
    bad.write_text("hello\nworld\n")
    with pytest.raises(DatasetError, match=r"vocab\.txt: not a BERT vocabulary \(no \[CLS\]"):
        prepare_bert(["builtin:pydoc"], tmp_path / "b", vocab=bad)
    with pytest.raises(DatasetError, match="max-predictions"):
        prepare_bert(["builtin:pydoc"], tmp_path / "c", vocab_size=100, opts=BertOptions(max_predictions=200))
    with pytest.raises(DatasetError, match="missing.txt: no such file"):
        prepare_bert([str(tmp_path / "missing.txt")], tmp_path / "d", vocab_size=100)


def test_pairs_follow_the_reference_algorithm():
    rng = random.Random(0)
    docs = []
    for d in range(20):
        lengths = [rng.randint(3, 30) for _ in range(rng.randint(1, 12))]
        docs.append((np.arange(sum(lengths), dtype=np.int32) + 1000 * d, np.cumsum([0] + lengths)))
    opts = BertOptions(max_seq_len=64, short_seq_prob=0.0)
    pairs = [p for i in range(len(docs)) for p in document_pairs(docs, i, opts, random.Random(i))]
    assert pairs
    for a, b, random_next in pairs:
        assert len(a) >= 1 and len(b) >= 1 and len(a) + len(b) <= 61
        same_doc = a[0] // 1000 == b[0] // 1000
        if not random_next:  # B continues A in the same document
            assert same_doc and b[0] > a[-1]
    assert 0.3 < np.mean([p[2] for p in pairs]) < 0.7


def test_truncation_trims_the_longer_side():
    rng = random.Random(1)
    a, b = truncate_pair(np.arange(50), np.arange(10), 30, rng)
    assert len(a) + len(b) == 30 and len(b) == 10
    a, b = truncate_pair(np.arange(40), np.arange(40), 30, rng)
    assert len(a) == len(b) == 15
