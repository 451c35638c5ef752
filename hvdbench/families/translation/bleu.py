"""Corpus BLEU that reduces exactly across ranks: sacrebleu's sufficient statistics, summed.

    stats = bleu_stats(hypotheses, references)      # per batch, on each rank: 11 numbers
    metric = BLEU_METRIC                             # the specs' metric (transformer and gnmt)

Corpus BLEU is not an average of per-batch or per-rank BLEU: it is computed once from n-gram
counts summed over the whole test set. So each rank sums, over its batches, what sacrebleu itself
sums over sentences (hypothesis length, reference length, matching and total n-grams for
n = 1..4), one allreduce adds the ranks' vectors, and the value is sacrebleu's `compute_bleu` on
the sums: exactly `sacrebleu.corpus_bleu` on the union of every rank's sentences.

Scoring follows MLPerf's GNMT and Transformer: uncased (`sacrebleu -lc`), tokenized with
`--tokenize intl` (Unicode punctuation and symbols split, as in WMT's mteval-v14 international
tokenizer), one reference, sacrebleu's default smoothing ('exp', which only matters when an
n-gram order has no match at all).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from hvdbench.contracts import Metric

MAX_ORDER = 4
TOKENIZE = "intl"
LOWERCASE = True
# The vector: [hypothesis length, reference length, matches n=1..4, totals n=1..4, sentences].
N_STATS = 2 + 2 * MAX_ORDER + 1


@lru_cache(maxsize=1)
def _scorer():
    from sacrebleu.metrics import BLEU

    return BLEU(lowercase=LOWERCASE, tokenize=TOKENIZE, max_ngram_order=MAX_ORDER)


def bleu_stats(hypotheses: list[str], references: list[str]) -> np.ndarray:
    """The sufficient statistics of one batch of (detokenized) sentences."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    out = np.zeros(N_STATS, np.float64)
    if not hypotheses:
        return out
    score = _scorer().corpus_score(list(hypotheses), [list(references)])
    out[0], out[1] = score.sys_len, score.ref_len
    out[2:2 + MAX_ORDER] = score.counts
    out[2 + MAX_ORDER:2 + 2 * MAX_ORDER] = score.totals
    out[-1] = len(hypotheses)
    return out


def bleu_from_stats(stats) -> float:
    """sacrebleu's corpus BLEU (0-100) from summed statistics."""
    stats = np.asarray(stats, np.float64)
    if stats[-1] == 0:
        return math.nan
    scorer = _scorer()
    ints = [round(v) for v in stats]  # counts: exact integers in float64 up to 2**53
    return float(scorer.compute_bleu(
        correct=ints[2:2 + MAX_ORDER], total=ints[2 + MAX_ORDER:2 + 2 * MAX_ORDER], sys_len=ints[0],
        ref_len=ints[1], smooth_method=scorer.smooth_method, smooth_value=scorer.smooth_value,
        effective_order=False, max_ngram_order=MAX_ORDER).score)


class Bleu(Metric):
    """Uncased corpus BLEU (0-100, higher is better) from `loss_and_stats`'s stats {"bleu": the
    batch's `bleu_stats` vector (a host tensor or array)}."""

    name = "bleu"
    higher_is_better = True
    bounds = (0.0, 100.0)

    def start(self) -> np.ndarray:
        return np.zeros(N_STATS, np.float64)

    def update(self, state: np.ndarray, stats: dict) -> np.ndarray:
        value = stats["bleu"]
        value = value.cpu().numpy() if hasattr(value, "cpu") else np.asarray(value)
        return state + np.asarray(value, np.float64)

    def local(self, state: np.ndarray) -> np.ndarray:
        return np.asarray(state, np.float64)

    def reduce(self, local: np.ndarray, dist) -> np.ndarray:
        return np.asarray(dist.allreduce_sum(local), np.float64)

    def value(self, reduced: np.ndarray) -> float:
        return bleu_from_stats(reduced)

    def samples(self, reduced: np.ndarray) -> int:
        return int(reduced[-1])


BLEU_METRIC = Bleu()
