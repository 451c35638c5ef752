"""`prepare translation` (aligned files and builtin:gettext-de), its tokenizer, the `translation`
kind and the BLEU metric that reduces exactly across ranks.

    .venv/bin/python -m pytest tests/unit/test_translation_data.py
"""

import json
import re
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
from click.testing import CliRunner

from hvdbench.cli.main import cli
from hvdbench.contracts import get_kind
from hvdbench.data.parallel import PrepareOptions
from hvdbench.data.readers import open_dataset
from hvdbench.data.synthetic import prepare_synthetic
from hvdbench.data.verify import verify
from hvdbench.errors import DatasetError
from hvdbench.families.translation import catalogs, tokens
from hvdbench.families.translation.bleu import BLEU_METRIC, bleu_from_stats, bleu_stats
from hvdbench.families.translation.data import TRANSLATION, tokenizer_path
from hvdbench.families.translation.prepare import TranslationOptions, prepare_translation
from hvdbench.files import file_sha256

ROOT = Path(__file__).resolve().parents[2]
NUMBERS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
ZAHLEN = ["eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn"]
THINGS = [("file", "Datei"), ("directory", "Verzeichnis"), ("branch", "Zweig"), ("option", "Option")]


def corpus(n: int = 200) -> tuple[list[str], list[str]]:
    """Aligned English/German lines with placeholders, of varied length (distinct up to 200)."""
    en, de = [], []
    for k in range(n):
        (thing, ding), count = THINGS[(k // 10) % len(THINGS)], k % 10
        extra = " and %s" * ((k // 40) % 5)
        en.append(f"cannot open {NUMBERS[count]} {thing} %s{extra}")
        de.append(f"{ZAHLEN[count]} {ding} %s kann nicht geöffnet werden{extra.replace('and', 'und')}")
    return en, de


def write_pair(tmp_path, en, de, name="train"):
    src, tgt = tmp_path / f"{name}.en", tmp_path / f"{name}.de"
    src.write_text("".join(s + "\n" for s in en), encoding="utf-8")
    tgt.write_text("".join(s + "\n" for s in de), encoding="utf-8")
    return str(src), str(tgt)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tr")
    en, de = corpus()
    src, tgt = write_pair(tmp, en, de)
    out = tmp / "data"
    opts = TranslationOptions(vocab_size=300, max_len=32, val_fraction=0.1, bucket_samples=16, samples_per_shard=64)
    m = prepare_translation(src, out, tgt=tgt, opts=opts, options=PrepareOptions(command="test"))
    return out, m, en, de


def rows(path, split, batch=1000):
    return [b for b in open_dataset(path).loader(split, batch, shuffle=False, drop_last=False)]


def test_aligned_files_become_padded_ids_that_decode_to_the_text(small):
    out, m, en, de = small
    assert m["kind"] == "translation" and m["max_len"] == 32 and m["vocab_size"] <= 300
    assert m["splits"]["val"]["samples"] == 20 and m["splits"]["train"]["samples"] == 180
    assert len(m["splits"]["train"]["shards"]) == 3  # 64 per shard
    assert m["vocab_sha256"] == file_sha256(out / "vocab.txt")
    assert m["tokenizer_sha256"] == file_sha256(out / "tokenizer.json")
    assert len((out / "vocab.txt").read_text(encoding="utf-8").splitlines()) == m["vocab_size"]
    assert m["corpus"] == "files" and m["dropped_too_long"] == {"train": 0, "val": 0}
    assert not (out / ".translation-arrays").exists()  # the staging arrays are removed
    detok = tokens.Detokenizer(tokenizer_path(out))
    pairs = set(zip(en, de))
    seen = set()
    for split in ("train", "val"):
        for b in rows(out, split):
            for side in ("src", "tgt"):
                ids, lengths = b[side], b[f"{side}_len"]
                assert ids.dtype == np.int32 and ids.shape[1] == 32
                at = np.arange(32)[None, :]
                assert (ids[at == (lengths - 1)[:, None]] == tokens.EOS).all()  # EOS last
                assert (ids[at >= lengths[:, None]] == tokens.PAD).all()  # then padding
                assert (ids[at < (lengths - 1)[:, None]] > tokens.UNK).all()  # subwords before
            seen |= set(zip(detok(b["src"].tolist()), detok(b["tgt"].tolist())))
    assert seen == pairs  # every pair exactly back (byte-level BPE loses nothing)
    assert verify(out).ok


def test_training_pairs_are_bucketed_by_length(small):
    out, _, _, _ = small
    lengths = np.concatenate([np.maximum(b["src_len"], b["tgt_len"]) for b in rows(out, "train")])
    buckets = [lengths[i:i + 16] for i in range(0, len(lengths), 16)]
    # Within a bucket of 16 (as written), lengths are sorted and close; buckets come in random order.
    assert all((np.diff(b) >= 0).all() for b in buckets)
    assert np.mean([b.max() - b.min() for b in buckets]) <= 2
    firsts = [int(b[0]) for b in buckets]
    assert firsts != sorted(firsts)
    val = np.concatenate([b["src_len"] for b in rows(out, "val")])
    assert (np.diff(val) >= 0).all()  # validation sorted by source length


def test_placeholders_stay_whole_and_the_tokenizer_is_reproducible(small, tmp_path):
    out, m, en, de = small
    tok = tokens.load_tokenizer(out / "tokenizer.json")
    pieces = tok.encode("cannot open two file %s and %s").tokens
    assert "Ġ%s" in pieces  # the placeholder with its space, one token
    src, tgt = write_pair(tmp_path, en, de)
    opts = TranslationOptions(vocab_size=300, max_len=32, val_fraction=0.1, bucket_samples=16, samples_per_shard=64)
    again = prepare_translation(src, tmp_path / "again", tgt=tgt, opts=opts, options=PrepareOptions(command="test"))
    assert again["tokenizer_sha256"] == m["tokenizer_sha256"]
    assert [s["sha256"] for s in again["splits"]["train"]["shards"]] == \
        [s["sha256"] for s in m["splits"]["train"]["shards"]]


def test_misaligned_files_fail_with_one_line_naming_both(tmp_path):
    en, de = corpus(50)
    src, tgt = write_pair(tmp_path, en, de[:-3])
    with pytest.raises(DatasetError) as e:
        prepare_translation(src, tmp_path / "out", tgt=tgt, opts=TranslationOptions(vocab_size=300))
    message = str(e.value)
    assert "\n" not in message and src in message and tgt in message and "50" in message and "47" in message
    result = CliRunner().invoke(cli, ["prepare", "translation", "--src", src, "--tgt", tgt, "--out",
                                      str(tmp_path / "cli")])
    assert result.exit_code == 1
    assert re.search(rf"Error: .*{re.escape(src)} has 50 lines, {re.escape(tgt)} has 47", result.output)


def test_given_validation_files_and_too_long_pairs(tmp_path):
    en, de = corpus(200)
    src, tgt = write_pair(tmp_path, en, de)
    vsrc, vtgt = write_pair(tmp_path, ["cannot open two file %s", "x " * 40], ["zwei Datei %s kann nicht", "y " * 40],
                            name="val")
    m = prepare_translation(src, tmp_path / "out", tgt=tgt, val_src=vsrc, val_tgt=vtgt,
                            opts=TranslationOptions(vocab_size=300, max_len=16))
    assert m["splits"]["val"]["samples"] == 1 and m["dropped_too_long"]["val"] == 1  # dropped, never cut
    assert m["splits"]["train"]["samples"] + m["dropped_too_long"]["train"] == 200
    assert 0 < m["dropped_too_long"]["train"] < 200
    with pytest.raises(DatasetError, match="--val-src and --val-tgt"):
        prepare_translation(src, tmp_path / "o2", tgt=tgt, val_src=vsrc, opts=TranslationOptions(vocab_size=300))


# --- builtin:gettext-de --------------------------------------------------------------------------


def write_mo(path: Path, entries: dict[bytes, bytes], charset: str = "UTF-8") -> None:
    """A GNU .mo file (little-endian) with a header declaring `charset`."""
    entries = {b"": f"Content-Type: text/plain; charset={charset}\n".encode(), **entries}
    keys = sorted(entries)
    ids, strs = b"", b""
    id_table, str_table = [], []
    for k in keys:
        id_table.append((len(k), len(ids)))
        ids += k + b"\0"
        str_table.append((len(entries[k]), len(strs)))
        strs += entries[k] + b"\0"
    n = len(keys)
    start = 28 + 16 * n
    data = struct.pack("<7I", 0x950412DE, 0, n, 28, 28 + 8 * n, 0, 0)
    data += b"".join(struct.pack("<2I", length, start + off) for length, off in id_table)
    data += b"".join(struct.pack("<2I", length, start + len(ids) + off) for length, off in str_table)
    path.write_bytes(data + ids + strs)


def test_mo_parser_keeps_singulars_drops_context_and_skips_other_charsets(tmp_path):
    write_mo(tmp_path / "a.mo", {b"cannot open %s": "kann %s nicht öffnen".encode(),
                                 b"menu\x04_Open": b"_\xc3\x96ffnen",
                                 b"%d file\x00%d files": b"%d Datei\x00%d Dateien",
                                 b"untranslated": b""})
    charset, pairs = catalogs.read_mo(tmp_path / "a.mo")
    assert charset == "utf-8"
    assert sorted(pairs) == [("%d file", "%d Datei"), ("_Open", "_Öffnen"), ("cannot open %s", "kann %s nicht öffnen")]
    assert catalogs.clean("_Open\n  the\tfile") == "Open the file"
    write_mo(tmp_path / "b.mo", {b"yes": b"ja"}, charset="ISO-8859-1")
    assert catalogs.read_mo(tmp_path / "b.mo") == ("iso-8859-1", [])
    (tmp_path / "c.mo").write_bytes(b"not a catalog at all, long enough to parse")
    with pytest.raises(DatasetError, match="c.mo: not a gettext .mo file"):
        catalogs.read_mo(tmp_path / "c.mo")


def test_the_package_list_is_the_one_setup_installs():
    text = (ROOT / "scripts" / "setup.sh").read_text()
    array = re.search(r"GETTEXT_PACKAGES=\(([^)]*)\)", text).group(1).split()
    assert tuple(array) == catalogs.GETTEXT_PACKAGES


def test_a_missing_package_or_catalog_is_named(monkeypatch):
    versions = {p: "1.0" for p in catalogs.GETTEXT_PACKAGES}
    monkeypatch.setattr(catalogs, "package_versions", lambda packages=None: {**versions, "git": None})
    with pytest.raises(DatasetError, match=r"package\(s\) git not installed"):
        catalogs.catalog_pairs()
    monkeypatch.setattr(catalogs, "package_versions", lambda packages=None: versions)
    monkeypatch.setattr(catalogs, "package_catalogs",
                        lambda p, locale_dir=None: [] if p == "tar" else [Path("/nonexistent") / f"{p}.mo"])
    with pytest.raises(DatasetError, match=r"no German catalog .* from package\(s\) .*tar"):
        catalogs.catalog_pairs()


needs_catalogs = pytest.mark.skipif(
    shutil.which("dpkg-query") is None or not catalogs.LOCALE_DIR.is_dir(),
    reason="builtin:gettext-de needs Debian's German catalogs (make setup installs them)")


@needs_catalogs
def test_builtin_gettext_corpus(tmp_path):
    m = prepare_translation("builtin:gettext-de", tmp_path / "g", opts=TranslationOptions(vocab_size=4000, max_len=64),
                            options=PrepareOptions(command="test"))
    total = m["splits"]["train"]["samples"] + m["splits"]["val"]["samples"]
    assert total > 10000 and m["corpus_pairs"] > 10000  # thousands of real human-translated pairs
    assert set(m["packages"]) == set(catalogs.GETTEXT_PACKAGES) and all(m["packages"].values())
    assert re.fullmatch(r"[0-9a-f]{64}", m["corpus_sha256"])
    assert "git.mo" in m["catalogs"] and not any(name.startswith("iso_") for name in m["catalogs"])
    assert m["vocab_size"] == 4000 and verify(tmp_path / "g").ok
    again = catalogs.catalog_pairs()
    assert again["sha256"] == m["corpus_sha256"]
    assert any("%s" in en and "%s" in de for en, de in again["pairs"])  # placeholders kept
    with pytest.raises(DatasetError, match="English->German"):
        prepare_translation("builtin:gettext-de", tmp_path / "x", opts=TranslationOptions(src_lang="de", tgt_lang="en"))


# --- the kind --------------------------------------------------------------------------------


def test_synthetic_translation_data_verifies(tmp_path):
    assert get_kind("translation") is TRANSLATION
    m = prepare_synthetic("translation", 300, tmp_path / "s", info={"vocab_size": 500, "max_len": 20})
    assert m["fields"]["src"] == {"shape": [20], "dtype": "int32"}
    assert verify(tmp_path / "s").ok
    b = TRANSLATION.synthetic(64, {"vocab_size": 500, "max_len": 20}, np.random.default_rng(0))
    assert b["src_len"].min() >= 5 and b["tgt_len"].max() <= 20
    assert tokenizer_path(tmp_path / "s") is None  # synthetic: the model scores ids as words
    assert json.loads((tmp_path / "s" / "manifest.json").read_text())["synthetic"] is True


# --- BLEU ------------------------------------------------------------------------------------


class SumDist:
    """Two ranks' allreduce_sum, done by hand."""

    def __init__(self, locals_):
        self.locals = locals_

    def allreduce_sum(self, values):
        return sum(np.asarray(v, np.float64) for v in self.locals)


def test_bleu_of_summed_rank_statistics_is_sacrebleu_on_the_union():
    hyps = ["Die Datei %s kann nicht geöffnet werden.", "zwei Zweige", "Fehler: %s", "Verzeichnis nicht gefunden",
            "Das ist ein Test", "ungültige Option „%s“", "Speicher erschöpft"]
    refs = ["Datei %s kann nicht geöffnet werden", "Zwei Zweige!", "Fehler beim Lesen: %s", "Verzeichnis fehlt",
            "das ist ein kleiner Test", "Ungültige Option „%s“", "Speicher ist erschöpft"]
    expected = sacrebleu.corpus_bleu(hyps, [refs], lowercase=True, tokenize="intl").score
    # Rank 0 evaluates two batches, rank 1 one; the metric sums per rank, then across ranks.
    rank0 = BLEU_METRIC.update(BLEU_METRIC.update(BLEU_METRIC.start(), {"bleu": bleu_stats(hyps[:2], refs[:2])}),
                               {"bleu": bleu_stats(hyps[2:3], refs[2:3])})
    rank1 = BLEU_METRIC.update(BLEU_METRIC.start(), {"bleu": bleu_stats(hyps[3:], refs[3:])})
    locals_ = [BLEU_METRIC.local(rank0), BLEU_METRIC.local(rank1)]
    reduced = BLEU_METRIC.reduce(locals_[0], SumDist(locals_))
    assert BLEU_METRIC.value(reduced) == pytest.approx(expected, abs=1e-9)
    assert BLEU_METRIC.samples(reduced) == 7
    # Not the mean of the ranks' own BLEU scores.
    own = [bleu_from_stats(x) for x in locals_]
    assert abs(sum(own) / 2 - expected) > 0.1
    assert bleu_from_stats(bleu_stats(refs, refs)) == pytest.approx(100.0)
    assert BLEU_METRIC.reached(25.0, 25.0) and not BLEU_METRIC.reached(24.9, 25.0)
