"""Sequence packing for BERT (Krell et al., 2021, "Efficient Sequence Packing without
Cross-contamination"; MLPerf's packed BERT pipeline): several short sequences share one sample.

    hvdbench prepare pack --src data/wiki --out data/wiki-packed --strategy nnlshp --max-seqs-per-pack 3

Both strategies work on the sequence-length histogram only (not on the sequences), so they are fast
for any number of sequences, and return a packing strategy: a list of (count, lengths) meaning
"make `count` packs holding one sequence of each of these lengths".

- SPFHP (shortest-pack-first histogram packing): lengths longest first; each goes into the open pack
  with the least room left that still fits it (best fit), whole histogram bins at a time; a new pack
  is opened when none fits. A pack closes when full or holding `max_seqs_per_pack` sequences.
- NNLSHP (non-negative least squares histogram packing): enumerate every combination of at most
  `max_seqs_per_pack` lengths that fills a pack exactly, solve min ||A x - h||, x >= 0 (A: how many
  sequences of each length a combination uses, h: the histogram) with scipy's NNLS, use the
  rounded-down repetition counts as far as the histogram allows, and pack what is left with SPFHP.

The packed sample (all int32; S = max sequences per pack, P = max predictions per sequence): input_ids,
segment_ids (L); input_mask (L) = 1-based index of the sequence each token belongs to, 0 = padding;
positions (L), restarting at 0 for each sequence; masked_lm_positions, masked_lm_ids,
masked_lm_weights (P*S), the weights being the 1-based sequence index of each prediction;
next_sentence_labels, packed_input_len, packed_masked_lm_len (S), 0 where a slot is empty.
"""

from __future__ import annotations

import hashlib
import math
import shutil
from collections import defaultdict
from pathlib import Path

import h5py
import numpy as np

from hvdbench.data import manifest as mf
from hvdbench.data.parallel import PrepareOptions, ShardJob, World, finish, run_jobs, start
from hvdbench.data.shards import write_shard
from hvdbench.errors import DatasetError

STRATEGIES = ("spfhp", "nnlshp")
Strategy = list[tuple[int, tuple[int, ...]]]  # (number of packs, lengths in each pack)


def histogram(lengths: np.ndarray, max_len: int) -> np.ndarray:
    """counts[l] = number of sequences of length l, for l = 0..max_len."""
    return np.bincount(np.asarray(lengths, np.int64), minlength=max_len + 1)[:max_len + 1]


def spfhp(hist: np.ndarray, max_len: int, max_per_pack: int) -> Strategy:
    open_packs: dict[int, list[list]] = defaultdict(list)  # tokens used -> [[count, lengths], ...]
    closed: Strategy = []

    def place(count: int, lengths: tuple, used: int) -> None:
        if not count:
            return
        if len(lengths) == max_per_pack or used == max_len:
            closed.append((count, lengths))
        else:
            open_packs[used].append([count, lengths])

    for length in range(max_len, 0, -1):
        n = int(hist[length])
        while n:
            # Best fit: the fullest open pack this length still fits into.
            used = next((u for u in range(max_len - length, 0, -1) if open_packs.get(u)), None)
            if used is None:
                # New packs; like one-at-a-time best fit, each takes as many of this length as fit.
                k = min(max_per_pack, max_len // length)
                place(n // k, (length,) * k, k * length)
                if n % k:
                    place(1, (length,) * (n % k), (n % k) * length)
                break
            count, lengths = open_packs[used].pop()
            k = min(count, n)
            if count > k:
                open_packs[used].append([count - k, lengths])
            place(k, lengths + (length,), used + length)
            n -= k
    closed += [(c, lengths) for group in open_packs.values() for c, lengths in group]
    return _merge(closed)


def exact_combinations(lengths: list[int], max_len: int, max_per_pack: int) -> list[tuple[int, ...]]:
    """Every non-increasing tuple of at most max_per_pack of `lengths` summing to exactly max_len."""
    present = set(lengths)
    desc = sorted(present, reverse=True)
    out = []

    def extend(prefix: tuple, room: int, cap: int) -> None:
        if room in present and room <= cap:
            out.append(prefix + (room,))
        if len(prefix) + 2 > max_per_pack:
            return
        for length in desc:
            if length <= cap and length < room:
                extend(prefix + (length,), room - length, length)

    extend((), max_len, max_len)
    return out


def nnlshp(hist: np.ndarray, max_len: int, max_per_pack: int) -> Strategy:
    from scipy.optimize import nnls

    hist = np.asarray(hist, np.int64)
    present = [int(l) for l in np.nonzero(hist)[0] if l > 0]
    combos = exact_combinations(present, max_len, max_per_pack)
    strategy: Strategy = []
    remaining = hist.copy()
    if combos:
        rows = {length: i for i, length in enumerate(present)}
        a = np.zeros((len(present), len(combos)))
        for j, combo in enumerate(combos):
            for length in combo:
                a[rows[length], j] += 1
        x, _ = nnls(a, hist[present].astype(float), maxiter=50 * len(combos))
        # Whole packs only, and never more sequences of a length than there are.
        for j in np.argsort(-x):
            want = int(math.floor(x[j] + 1e-9))
            if want <= 0:
                break
            need = np.bincount(combos[j], minlength=max_len + 1)
            used = np.nonzero(need)[0]
            take = min(want, int(np.min(remaining[used] // need[used])))
            if take:
                strategy.append((take, combos[j]))
                remaining -= take * need
    return _merge(strategy + spfhp(remaining, max_len, max_per_pack))


def _merge(strategy: Strategy) -> Strategy:
    counts: dict[tuple, int] = defaultdict(int)
    for count, lengths in strategy:
        if count:
            counts[tuple(sorted(lengths, reverse=True))] += count
    return sorted(((c, k) for k, c in counts.items()), key=lambda item: (-sum(item[1]), item[1]))


def make_strategy(name: str, hist: np.ndarray, max_len: int, max_per_pack: int) -> Strategy:
    if name not in STRATEGIES:
        raise DatasetError(f"unknown packing strategy {name!r}; valid: {', '.join(STRATEGIES)}")
    return (spfhp if name == "spfhp" else nnlshp)(hist, max_len, max_per_pack)


def stats(hist: np.ndarray, packs: int, max_len: int, max_per_pack: int) -> dict:
    """Sequences, packs, padding before/after, speed-up, and the efficiency no packing can beat."""
    hist = np.asarray(hist, np.int64)
    sequences = int(hist.sum())
    tokens = int((hist * np.arange(len(hist))).sum())
    bound = max(math.ceil(tokens / max_len), math.ceil(sequences / max_per_pack)) if sequences else 0
    return {"sequences": sequences, "packs": int(packs), "tokens": tokens,
            "padding_before": 1 - tokens / (sequences * max_len) if sequences else 0.0,
            "padding_after": 1 - tokens / (packs * max_len) if packs else 0.0,
            "speedup": sequences / packs if packs else 0.0,
            "efficiency": tokens / (packs * max_len) if packs else 0.0,
            "efficiency_bound": tokens / (bound * max_len) if bound else 0.0}


def assign(lengths: np.ndarray, strategy: Strategy, max_per_pack: int, rng: np.random.Generator) -> np.ndarray:
    """(packs, max_per_pack) sequence indices, -1 = empty slot: each sequence in exactly one pack."""
    pools = {}
    for length in np.unique(lengths):
        idx = np.nonzero(lengths == length)[0]
        pools[int(length)] = list(rng.permutation(idx)[::-1])  # pop() from the end
    packs = np.full((sum(c for c, _ in strategy), max_per_pack), -1, np.int64)
    row = 0
    for count, combo in strategy:
        for slot, length in enumerate(combo):
            pool = pools[length]
            packs[row:row + count, slot] = pool[len(pool) - count:][::-1]
            del pool[len(pool) - count:]
        row += count
    if any(pools.values()):
        raise AssertionError("packing strategy does not match the histogram")
    return packs[rng.permutation(len(packs))]


def pack_arrays(src: dict[str, np.ndarray], packs: np.ndarray, max_len: int, max_pred: int) -> dict[str, np.ndarray]:
    """Build the packed fields from unpacked instances (vectorised per slot)."""
    n, slots = packs.shape
    seq_len = src["input_mask"].sum(1).astype(np.int64)
    mlm_len = (src["masked_lm_positions"] != 0).sum(1).astype(np.int64)
    width = max_pred * slots
    out = {name: np.zeros((n, max_len), np.int32) for name in ("input_ids", "input_mask", "segment_ids", "positions")}
    out.update({name: np.zeros((n, width), np.int32)
                for name in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")})
    out.update({name: np.zeros((n, slots), np.int32)
                for name in ("next_sentence_labels", "packed_input_len", "packed_masked_lm_len")})
    col = np.arange(max_len)[None, :]
    mcol = np.arange(width)[None, :]
    offset = np.zeros(n, np.int64)
    moffset = np.zeros(n, np.int64)
    for j in range(slots):
        seq = packs[:, j]
        has = seq >= 0
        s = np.where(has, seq, 0)
        length = np.where(has, seq_len[s], 0)
        mlen = np.where(has, mlm_len[s], 0)
        # Token p of the pack comes from position p - offset of sequence j, where that lies inside it.
        inside = (col >= offset[:, None]) & (col < (offset + length)[:, None])
        src_pos = np.clip(col - offset[:, None], 0, max_len - 1)
        for name in ("input_ids", "segment_ids"):
            out[name] = np.where(inside, np.take_along_axis(src[name][s], src_pos, 1), out[name])
        out["input_mask"][inside] = j + 1
        out["positions"] = np.where(inside, src_pos, out["positions"])
        m_inside = (mcol >= moffset[:, None]) & (mcol < (moffset + mlen)[:, None])
        m_src = np.clip(mcol - moffset[:, None], 0, max_pred - 1)
        out["masked_lm_positions"] = np.where(
            m_inside, np.take_along_axis(src["masked_lm_positions"][s], m_src, 1) + offset[:, None],
            out["masked_lm_positions"])
        out["masked_lm_ids"] = np.where(m_inside, np.take_along_axis(src["masked_lm_ids"][s], m_src, 1),
                                        out["masked_lm_ids"])
        out["masked_lm_weights"][m_inside] = j + 1
        out["next_sentence_labels"][:, j] = np.where(has, src["next_sentence_labels"][s], 0)
        out["packed_input_len"][:, j] = length
        out["packed_masked_lm_len"][:, j] = mlen
        offset += length
        moffset += mlen
    return {k: v.astype(np.int32) for k, v in out.items()}


def packed_fields(max_len: int, max_pred: int, slots: int) -> dict:
    seq, pred, per = (max_len,), (max_pred * slots,), (slots,)
    names = {"input_ids": seq, "input_mask": seq, "segment_ids": seq, "positions": seq,
             "masked_lm_positions": pred, "masked_lm_ids": pred, "masked_lm_weights": pred,
             "next_sentence_labels": per, "packed_input_len": per, "packed_masked_lm_len": per}
    return {k: mf.field_spec(shape, "int32") for k, shape in names.items()}


def prepare_pack(src: Path, out: Path, *, strategy: str = "spfhp", max_seqs_per_pack: int = 3, seed: int = 0,
                 options: PrepareOptions = PrepareOptions()) -> dict:
    """Pack a prepared `bert` dataset shard by shard; writes the histogram and the report beside it."""
    src, out = Path(src), Path(out)
    if strategy not in STRATEGIES:
        raise DatasetError(f"unknown packing strategy {strategy!r}; valid: {', '.join(STRATEGIES)}")
    if max_seqs_per_pack < 1:
        raise DatasetError("--max-seqs-per-pack must be at least 1")
    source = mf.read_manifest(src)
    if source["kind"] != "bert":
        raise DatasetError(f"{src}: a {source['kind']!r} dataset; packing needs a 'bert' one "
                           f"(from `hvdbench prepare bert`)")
    if src.resolve() == out.resolve():
        raise DatasetError("--out must differ from --src")
    world = World.detect()
    max_len, max_pred = source["max_seq_len"], source["max_predictions"]
    params = {"src": str(src.resolve()), "src_sha256": [s["sha256"] for sp in source["splits"].values()
                                                        for s in sp["shards"]],
              "strategy": strategy, "max_seqs_per_pack": max_seqs_per_pack, "seed": seed}
    start(out, "bert_packed", params, options.overwrite, world)
    ph = mf.params_hash(params)
    jobs = [ShardJob.single(split, shard["file"], hashlib.sha256(f"{ph}/{shard['file']}".encode()).hexdigest(),
                            {"src": str(src / shard["file"]), "strategy": strategy, "slots": max_seqs_per_pack,
                             "max_len": max_len, "max_pred": max_pred, "seed": [seed, i]})
            for split, info in source["splits"].items() for i, shard in enumerate(info["shards"])]
    records = run_jobs(out, jobs, _make_shard, world=world, workers=options.workers, label="pack")
    report, hists = {}, {}
    for split in source["splits"]:
        files = [job.file for job in jobs if job.outputs[0][0] == split]
        hist = np.sum([records[f]["info"]["histogram"] for f in files], axis=0).astype(np.int64)
        hists[split] = hist.tolist()
        report[split] = stats(hist, sum(records[f]["samples"] for f in files), max_len, max_seqs_per_pack)
    if world.rank == 0:
        mf.atomic_write_json(out / "per_seqlen.json", {"max_seq_len": max_len, "histogram": hists})
        mf.atomic_write_json(out / "packing.json", {"strategy": strategy, "max_seqs_per_pack": max_seqs_per_pack,
                                                    **report})
        if not (out / "vocab.txt").is_file():
            shutil.copyfile(src / source.get("vocab_file", "vocab.txt"), out / "vocab.txt")
    manifest = mf.new_manifest("bert_packed", packed_fields(max_len, max_pred, max_seqs_per_pack), seed, params,
                               options.command, vocab_size=source["vocab_size"], vocab_sha256=source["vocab_sha256"],
                               vocab_file="vocab.txt", max_seq_len=max_len, max_predictions=max_pred,
                               max_seqs_per_pack=max_seqs_per_pack, packing={"strategy": strategy, **report},
                               source_dataset=str(src.resolve()))
    return finish(out, jobs, records, manifest, world)


def _make_shard(job: ShardJob, out: Path) -> dict:
    w = job.work
    with h5py.File(w["src"], "r") as f:
        src = {name: f[name][:] for name in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                                             "masked_lm_ids", "next_sentence_labels")}
    lengths = src["input_mask"].sum(1)
    hist = histogram(lengths, w["max_len"])
    strategy = make_strategy(w["strategy"], hist, w["max_len"], w["slots"])
    packs = assign(lengths, strategy, w["slots"], np.random.default_rng(w["seed"]))
    arrays = pack_arrays(src, packs, w["max_len"], w["max_pred"])
    return write_shard(out / job.file, arrays, job.source, info={"histogram": hist.tolist()})
