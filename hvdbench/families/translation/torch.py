"""What the translation models' PyTorch code shares (hvdbench/models/transformer/ and gnmt/ torch.py
import it): single-device code (Horovod is applied in frameworks/torch/dist.py).

    from hvdbench.families.translation.torch import trim, shift_right, smoothed_loss
    src, src_len, tgt, tgt_len = trim(batch)              # the batch's common padding cut off

The trimming of padded batches, teacher forcing's shifted input, the label-smoothed loss, greedy
and beam search with the GNMT length penalty, the BLEU statistics of a decoded batch (bleu.py),
the dataset's tokenizer attached for evaluation, and Adam with optional gradient clipping.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from hvdbench.errors import ConfigError
from hvdbench.families.translation.bleu import bleu_stats
from hvdbench.families.translation.data import tokenizer_path
from hvdbench.families.translation.tokens import BOS, EOS, PAD, Detokenizer
from hvdbench.frameworks.torch.recipe import clip_to_groups, fused


def trim(batch: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(src, src_len, tgt, tgt_len) with the batch's common padding cut off (batches hold
    sentences of similar length: prepare buckets them)."""
    src_len, tgt_len = batch["src_len"].long(), batch["tgt_len"].long()
    ls, lt = int(src_len.max()), int(tgt_len.max())
    return batch["src"][:, :ls].long(), src_len, batch["tgt"][:, :lt].long(), tgt_len


def shift_right(tgt: torch.Tensor) -> torch.Tensor:
    """Decoder input: BOS, then the target without its last position (teacher forcing)."""
    return torch.cat([torch.full_like(tgt[:, :1], BOS), tgt[:, :-1]], dim=1)


def smoothed_loss(logits: torch.Tensor, labels: torch.Tensor, smoothing: float) -> torch.Tensor:
    """Label-smoothed cross-entropy, mean over the non-padding target tokens."""
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=PAD,
                           label_smoothing=smoothing)


def length_penalty(length: torch.Tensor | float, alpha: float):
    """GNMT's ((5 + length) / 6) ** alpha (Wu et al. 2016), which the references use."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(step, state, reorder, batch: int, beam: int, max_steps: int, alpha: float,
                device) -> torch.Tensor:
    """The best translation of each of `batch` sentences, (batch, steps) ids ending in EOS (then
    PAD), by beam search of width `beam` (1: greedy) with the GNMT length penalty.

    `step(tokens (N, t), state) -> (log-probabilities of the next token (N, V), state)` for the N =
    batch * beam rows (BOS first in tokens) (row r is beam r % beam of sentence r // beam); `reorder(state, rows)` picks
    the rows the surviving beams came from. A finished hypothesis (it chose EOS) scores its
    log-probability / length_penalty; the search stops when no live beam can beat it.
    """
    n = batch * beam
    tokens = torch.full((n, 1), BOS, dtype=torch.long, device=device)
    scores = torch.zeros(batch, beam, device=device)
    scores[:, 1:] = -math.inf  # all beams start equal: keep one until the first step
    best = torch.full((batch,), -math.inf, device=device)
    best_seq = torch.full((batch, max_steps), PAD, dtype=torch.long, device=device)
    offsets = (torch.arange(batch, device=device) * beam)[:, None]
    for t in range(max_steps):
        logp, state = step(tokens, state)
        vocab = logp.size(-1)
        cand = (scores[:, :, None] + logp.float().view(batch, beam, vocab)).view(batch, -1)
        top, index = cand.topk(min(2 * beam, cand.size(1)), dim=1)  # >= beam of them are not EOS
        word, origin = index % vocab, index // vocab
        # Candidates that end here: keep the best by normalised score.
        ended = torch.where(word == EOS, top / length_penalty(t + 1.0, alpha), -math.inf)
        ended_best, ended_at = ended.max(dim=1)
        better = ended_best > best
        if better.any():
            rows = (offsets[:, 0] + origin.gather(1, ended_at[:, None])[:, 0])
            seq = torch.cat([tokens[rows, 1:], torch.full((batch, 1), EOS, dtype=torch.long, device=device)], 1)
            seq = F.pad(seq, (0, max_steps - seq.size(1)), value=PAD)
            best = torch.where(better, ended_best, best)
            best_seq = torch.where(better[:, None], seq, best_seq)
        # Live beams: the best `beam` candidates that did not end.
        live = torch.where(word == EOS, -math.inf, top)
        scores, pick = live.topk(beam, dim=1)
        rows = (offsets + origin.gather(1, pick)).view(-1)
        tokens = torch.cat([tokens[rows], word.gather(1, pick).view(-1, 1)], dim=1)
        state = reorder(state, rows)
        # Live scores only fall; at most they are divided by the largest penalty.
        if bool((best >= scores[:, 0] / length_penalty(float(max_steps), alpha)).all()):
            break
    # Sentences with nothing finished keep their best live beam (cut at max_steps).
    none = best == -math.inf
    if none.any():
        fallback = F.pad(tokens.view(batch, beam, -1)[:, 0, 1:], (0, max_steps + 1 - tokens.size(1)), value=PAD)
        best_seq = torch.where(none[:, None], fallback, best_seq)
    return best_seq


@torch.no_grad()
def greedy_search(step, state, batch: int, max_steps: int, device) -> torch.Tensor:
    """(batch, steps) ids: the most likely next token each step, until every sentence chose EOS
    (PAD after it). `step` as for beam_search, with N = batch."""
    tokens = torch.full((batch, 1), BOS, dtype=torch.long, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    for _ in range(max_steps):
        logp, state = step(tokens, state)
        word = torch.where(done, PAD, logp.argmax(-1))
        tokens = torch.cat([tokens, word[:, None]], dim=1)
        done |= word == EOS
        if bool(done.all()):
            break
    return tokens[:, 1:]


def decode_steps(src_len: torch.Tensor, max_len: int, ratio: float, extra: int) -> int:
    """How many tokens a translation may have: ratio x the longest source + extra, at most max_len."""
    return max(1, min(max_len, math.ceil(ratio * int(src_len.max())) + extra))


def batch_bleu(detok: Detokenizer, hypotheses: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """The BLEU statistics of decoded hypotheses against the batch's targets, as a host tensor."""
    hyps = detok(hypotheses.cpu().tolist())
    refs = detok(tgt.cpu().tolist())
    return torch.from_numpy(bleu_stats(hyps, refs))


class Adam(torch.optim.Adam):
    """torch's Adam; when the parameter groups carry `max_grad_norm` > 0 the global gradient norm
    is clipped to it first. Under Horovod the DistributedOptimizer subclasses this class, so the
    clipping sees the gradients already averaged over ranks (as one process would)."""

    def step(self, closure=None):
        clip_to_groups(self)
        return super().step(closure)


def make_adam(groups: list[dict], cfg, betas: tuple[float, float], eps: float):
    if cfg.optimizer != "adam":
        raise ConfigError(f"optimizer {cfg.optimizer!r}: this model trains with its reference's adam")
    return Adam(groups, lr=cfg.lr, betas=betas, eps=eps, **fused(cfg))


def attach_vocabulary(model, data_dir: str | None) -> None:
    """Give the model the dataset's tokenizer, which turns translations back into text for BLEU.
    The core hands `build` only the manifest's whole-number sizes, so the run's config (its --data
    folder), first seen by `param_groups`, is where the tokenizer is found."""
    model.detok = Detokenizer(tokenizer_path(data_dir))


def groups_with_clip(model, cfg, max_grad_norm: float) -> list[dict]:
    """Weight decay off biases and norms (cfg.weight_decay is 0 for the translation models) and
    the clipping limit carried by every group (see Adam)."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.ndim > 1], "weight_decay": cfg.weight_decay,
             "max_grad_norm": max_grad_norm},
            {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0, "max_grad_norm": max_grad_norm}]
