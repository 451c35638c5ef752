"""`hvdbench prepare c4` (hvdbench/families/lm/c4.py): C4-layout JSON lines (gzip or plain, the first
bytes decide) -> lm_tokens shards: documents joined by EOS and cut into sequences of seq_len + 1
tokens sharing one token (Megatron's layout), bad lines counted and named (or an error with
--strict), empty documents skipped, a given tokenizer file or a trained BPE, validation from
--val-src (the first sequences, in order) or held-out documents, the built-in pydoc text in C4's
place, and a rerun that keeps every finished shard.

    .venv/bin/python -m pytest tests/unit/test_c4.py
"""

import gzip
import json

import numpy as np
import pytest
from click.testing import CliRunner

from hvdbench.cli.main import cli
from hvdbench.data.parallel import PrepareOptions
from hvdbench.data.readers import open_dataset
from hvdbench.data.verify import verify
from hvdbench.errors import DatasetError
from hvdbench.families.lm import tokenizer as tk
from hvdbench.families.lm.c4 import BUILTIN_NOTE, C4Options, cut, prepare_c4
from hvdbench.files import file_sha256

EOS = 0
WORDS = [f"w{i}" for i in range(40)]


def word_tokenizer(path):
    """A given tokenizer with known ids: word wK is id K + 2 (0 is <|end_of_text|>, 1 unknown)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {tk.EOS_TOKEN: 0, "[UNK]": 1, **{w: i + 2 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path))
    return path


def ids(text: str) -> list[int]:
    return [int(w[1:]) + 2 for w in text.split()]


def doc(rng, n: int) -> str:
    return " ".join(rng.choice(WORDS, n))


def write_lines(path, lines, gz=False):
    data = "".join(line + "\n" for line in lines).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.fixture
def corpus(tmp_path):
    """Two C4-style training files (the first gzip, named .json: its bytes say so) with a bad
    line, a text that is no string and an empty document, beside a validation file as in C4's en/
    folder; the validation file again outside it, for --val-src."""
    rng = np.random.default_rng(0)
    a_docs, b_docs, v_docs = ([doc(rng, int(rng.integers(3, 12))) for _ in range(k)] for k in (12, 10, 8))
    a = [json.dumps({"text": d, "url": "u", "timestamp": "t"}) for d in a_docs]
    a[3:3] = ["{not json", json.dumps({"text": "   \n"}), json.dumps({"text": 5}), ""]  # lines 4-7
    src = tmp_path / "src"
    src.mkdir()
    write_lines(src / "c4-train.00000-of-01024.json", a, gz=True)
    write_lines(src / "c4-train.00001-of-01024.json", [json.dumps({"text": d}) for d in b_docs])
    val = write_lines(tmp_path / "c4-validation.json", [json.dumps({"text": d}) for d in v_docs])
    # C4's en/ folder holds its validation files beside the training ones: a folder trains on c4-train.*
    write_lines(src / "c4-validation.00000-of-00008.json", [json.dumps({"text": d}) for d in v_docs], gz=True)
    return {"src": src, "val": val, "a": a_docs, "b": b_docs, "v": v_docs,
            "tokenizer": word_tokenizer(tmp_path / "words.json")}


def stream(docs) -> np.ndarray:
    return np.asarray([t for d in docs for t in [*ids(d), EOS]], np.int32)


def rows(ds, split) -> np.ndarray:
    return np.concatenate([ds.arrays(s["file"])["tokens"] for s in ds.manifest["splits"][split]["shards"]])


def test_documents_joined_by_eos_and_cut_into_fixed_length_sequences(corpus, tmp_path):
    out = tmp_path / "c4"
    m = prepare_c4([str(corpus["src"])], out, tokenizer=str(corpus["tokenizer"]), val_src=[str(corpus["val"])],
                   opts=C4Options(seq_len=4, val_sequences=3), options=PrepareOptions(workers=1))
    ds = open_dataset(out)
    assert (m["vocab_size"], m["seq_len"], m["eos_id"], m["eos_token"]) == (len(WORDS) + 2, 4, EOS, tk.EOS_TOKEN)
    assert ds.fields == {"tokens": {"shape": [5], "dtype": "int32"}}
    # Each file's training sequences are its stream's windows of 5 sharing one token, in seeded order.
    for k, docs in enumerate((corpus["a"], corpus["b"])):
        got = ds.arrays(f"train-{k:05d}-of-00002.h5")["tokens"]
        want, tail = cut(stream(docs), 4)
        assert len(got) == len(want) == (len(stream(docs)) - 1) // 4
        assert sorted(map(tuple, got)) == sorted(map(tuple, want)) and not np.array_equal(got, want)
        assert np.array_equal(want[1:, 0], want[:-1, -1])  # consecutive sequences share one token
    assert m["tail_tokens_dropped"] == sum(cut(stream(d), 4)[1] for d in (corpus["a"], corpus["b"]))
    # Validation: the first 3 sequences of --val-src's documents, in order (not shuffled).
    assert np.array_equal(rows(ds, "val"), cut(stream(corpus["v"]), 4)[0][:3])
    # The bad lines are counted and the first named by file and line; the empty document skipped.
    assert m["documents"]["train"] == 22 and m["empty_documents"] == 1  # the folder's validation file left out
    assert m["bad_lines"]["count"] == 2
    assert m["bad_lines"]["first"][0].endswith("c4-train.00000-of-01024.json:4: not a JSON object")
    assert m["bad_lines"]["first"][1].endswith(":6: no string 'text' (C4's layout: {\"text\": ..., \"url\": ...})")
    # The given tokenizer is the one beside the shards, named as given.
    assert m["tokenizer"].startswith("given: ") and m["tokenizer_sha256"] == file_sha256(corpus["tokenizer"])
    assert file_sha256(out / "tokenizer.json") == file_sha256(corpus["tokenizer"])
    assert not verify(out).problems


def test_strict_makes_the_first_bad_line_an_error_naming_it(corpus, tmp_path):
    with pytest.raises(DatasetError) as e:
        prepare_c4([str(corpus["src"])], tmp_path / "c4", tokenizer=str(corpus["tokenizer"]),
                   val_src=[str(corpus["val"])], opts=C4Options(seq_len=4, strict=True),
                   options=PrepareOptions(workers=1))
    assert "c4-train.00000-of-01024.json:4: not a JSON object" in str(e.value) and "\n" not in str(e.value)


def test_a_trained_tokenizer_holds_out_whole_documents_and_says_what_it_is(corpus, tmp_path):
    out = tmp_path / "c4"
    m = prepare_c4([str(corpus["src"])], out,
                   opts=C4Options(vocab_size=300, seq_len=4, val_fraction=0.25), options=PrepareOptions(workers=1))
    assert m["tokenizer"].startswith("trained here: byte-level BPE") and "not Llama 3.1's" in m["tokenizer"]
    tok = tk.load(out / "tokenizer.json")
    assert tk.eos_id(tok) == m["eos_id"] == 0 and m["vocab_size"] == tk.vocab_size(tok) <= 300
    # A quarter of the first file's 12 documents are held out; every other document trains.
    assert m["documents"] == {"train": 9 + 10, "val": 3}
    assert "3 documents of" in m["validation"] and m["splits"]["val"]["samples"] >= 1
    # The same options train the same tokenizer (a rerun's shards keep their names' hashes).
    again = prepare_c4([str(corpus["src"])], tmp_path / "again",
                       opts=C4Options(vocab_size=300, seq_len=4, val_fraction=0.25), options=PrepareOptions(workers=1))
    assert again["tokenizer_sha256"] == m["tokenizer_sha256"]


def test_a_rerun_keeps_finished_shards_and_remakes_a_lost_one(corpus, tmp_path):
    out = tmp_path / "c4"
    kw = dict(tokenizer=str(corpus["tokenizer"]), val_src=[str(corpus["val"])], opts=C4Options(seq_len=4),
              options=PrepareOptions(workers=2))
    first = prepare_c4([str(corpus["src"])], out, **kw)  # two worker processes
    kept, lost = out / "train-00000-of-00002.h5", out / "train-00001-of-00002.h5"
    before = kept.stat().st_mtime_ns
    lost.unlink()
    (out / "manifest.json").unlink()  # as an interrupted prepare leaves it
    second = prepare_c4([str(corpus["src"])], out, **kw)
    assert kept.stat().st_mtime_ns == before and lost.is_file()
    assert second["splits"] == first["splits"]
    with pytest.raises(DatasetError, match="already holds a different dataset"):
        prepare_c4([str(corpus["src"])], out, **{**kw, "opts": C4Options(seq_len=3)})


def test_the_builtin_text_stands_in_for_c4_and_says_so(tmp_path):
    m = prepare_c4("builtin:pydoc", tmp_path / "pydoc", options=PrepareOptions(workers=1))
    assert (m["seq_len"], m["vocab_size"], m["corpus"], m["note"]) == (256, 2048, "builtin:pydoc", BUILTIN_NOTE)
    assert "stands in for C4" in m["note"] and "not C4" in m["note"]
    assert m["documents"]["train"] + m["documents"]["val"] == 79 and m["documents"]["val"] == 8
    assert m["splits"]["train"]["samples"] > 400 and m["splits"]["val"]["samples"] > 30


def test_bad_sources_are_one_line_errors(corpus, tmp_path):
    with pytest.raises(DatasetError, match="no such file or folder"):
        prepare_c4([str(tmp_path / "nope")], tmp_path / "o1")
    with pytest.raises(DatasetError, match="unknown built-in corpus 'builtin:wiki'"):
        prepare_c4(["builtin:wiki"], tmp_path / "o2")
    with pytest.raises(DatasetError, match="not a Hugging Face tokenizers file"):
        prepare_c4([str(corpus["src"])], tmp_path / "o3", tokenizer=str(corpus["val"]),
                   options=PrepareOptions(workers=1))
    with pytest.raises(DatasetError, match="has no token '<s>'"):
        prepare_c4([str(corpus["src"])], tmp_path / "o4", tokenizer=str(corpus["tokenizer"]),
                   opts=C4Options(eos_token="<s>"), options=PrepareOptions(workers=1))
    cut_short = tmp_path / "short.json.gz"
    cut_short.write_bytes(gzip.compress(b'{"text": "w1 w2"}\n' * 50)[:-12])
    with pytest.raises(DatasetError, match="damaged gzip file"):
        prepare_c4([str(cut_short)], tmp_path / "o5", tokenizer=str(corpus["tokenizer"]),
                   options=PrepareOptions(workers=1))


def test_the_command_line_summarises_what_it_skipped(corpus, tmp_path):
    out = tmp_path / "c4"
    result = CliRunner().invoke(cli, ["prepare", "c4", "--src", str(corpus["src"]), "--tokenizer",
                                      str(corpus["tokenizer"]), "--val-src", str(corpus["val"]), "--seq-len", "4",
                                      "--workers", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "skipped 1 empty document(s) and 2 bad line(s), e.g. " in result.output
    assert open_dataset(out).num_samples("val") == len(cut(stream(corpus["v"]), 4)[0])  # all: fewer than 1,024


def test_validation_text_named_as_training_text_is_refused(corpus, tmp_path):
    # Time-to-accuracy would reach its target on text it trained on: one line, nothing written.
    train_file = corpus["src"] / "c4-train.00001-of-01024.json"
    kw = dict(tokenizer=str(corpus["tokenizer"]), opts=C4Options(seq_len=4), options=PrepareOptions(workers=1))
    link = tmp_path / "link.json"
    link.symlink_to(corpus["val"])
    cases = [
        ([str(corpus["src"])], [str(train_file)],
         f"{train_file}: given to --val-src and to --src: its validation documents would be trained on"),
        ([str(corpus["val"]), str(train_file)], [str(link)],
         f"{link}: given to --val-src and to --src (as {corpus['val']}): its validation documents would be "
         "trained on"),
        ([str(corpus["src"]), str(train_file)], [str(corpus["val"])],
         f"{train_file}: given twice to --src: its documents would be read twice"),
        ([str(train_file)], [str(corpus["val"]), str(corpus["val"])],
         f"{corpus['val']}: given twice to --val-src: its documents would be read twice"),
    ]
    for src, val, message in cases:
        with pytest.raises(DatasetError) as e:
            prepare_c4(src, tmp_path / "c4", val_src=val, **kw)
        assert str(e.value) == message
    assert not (tmp_path / "c4").exists()


@pytest.mark.parametrize("content, why", [
    (b"{not json\n[1, 2\n", "2 line(s) not read, the first line 1: not a JSON object"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "3 line(s) not read, the first line 1: not UTF-8 (byte 0)"),
    (b'{"text": "caf\xe9"}\n', "1 line(s) not read, the first line 1: not UTF-8 (byte 13)"),
    (b'{"text": "  "}\n{"text": "\\n\\t"}\n', "2 empty document(s) (only whitespace in 'text')"),
    (b"\n \n", "(no lines but blank ones)"),
])
def test_a_source_without_documents_says_what_is_wrong_and_makes_no_folder(corpus, tmp_path, content, why):
    # Each used to end in "0 documents are too few to hold out a validation split" and an empty folder.
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    for src, val in (([str(bad)], None), ([str(corpus["src"])], [str(bad)])):
        with pytest.raises(DatasetError) as e:
            prepare_c4(src, tmp_path / "c4", val_src=val, tokenizer=str(corpus["tokenizer"]),
                       opts=C4Options(seq_len=4), options=PrepareOptions(workers=1))
        sep = " " if why.startswith("(") else ": "
        assert str(e.value) == f"{bad}: no documents in it{sep}{why}"
        assert not (tmp_path / "c4").exists()
    one = tmp_path / "one.json"
    one.write_bytes(b'{"text": "w1 w2"}\n')
    with pytest.raises(DatasetError) as e:
        prepare_c4([str(one)], tmp_path / "c4", tokenizer=str(corpus["tokenizer"]),
                   opts=C4Options(seq_len=4), options=PrepareOptions(workers=1))
    assert str(e.value) == f"{one}: 1 documents are too few to hold out a validation split"
    assert not (tmp_path / "c4").exists()


def test_a_byte_order_mark_keeps_the_first_document(corpus, tmp_path):
    bom = write_lines(tmp_path / "bom.json", [json.dumps({"text": d}) for d in corpus["b"]])
    bom.write_bytes(b"\xef\xbb\xbf" + bom.read_bytes())
    m = prepare_c4([str(bom)], tmp_path / "c4", tokenizer=str(corpus["tokenizer"]), val_src=[str(corpus["val"])],
                   opts=C4Options(seq_len=4), options=PrepareOptions(workers=1))
    assert m["documents"]["train"] == len(corpus["b"]) and m["bad_lines"]["count"] == 0
