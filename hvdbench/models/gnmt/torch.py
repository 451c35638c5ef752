"""GNMT v2 (Wu et al. 2016, as MLPerf's PyTorch reference builds it), single-device PyTorch code.

    from hvdbench.contracts import get_spec
    from hvdbench.models.gnmt import torch as gnmt
    model = gnmt.build(get_spec("gnmt").flavor("debug"), vocab_size=4000, max_len=64)
    loss, stats = gnmt.loss_and_stats(model, batch)   # eval mode: stats {"bleu": 11 sums}

Encoder: a bidirectional LSTM, then unidirectional LSTMs, residual connections from the third
layer on. Decoder: an LSTM whose outputs query a normalized Bahdanau attention over the encoder
outputs (the "v2" layout: the attention is computed from the first decoder layer's output, so in
training it runs for all target positions at once), then LSTMs fed [hidden, attention context],
residual from the third layer, and a linear classifier with bias. One embedding matrix is shared by
source and target (the reference's shared BPE vocabulary). Uniform(-0.1, 0.1) initialisation,
dropout between layers, zero initial decoder states.

Training: label-smoothed cross-entropy (0.1), mean over target tokens. Evaluation: greedy or beam
search with the GNMT length penalty (the reference's coverage penalty is left out), BLEU
statistics as for the Transformer (both take these parts from hvdbench/families/translation/torch.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from hvdbench.families.translation.tokens import PAD, Detokenizer
from hvdbench.families.translation.torch import (
    attach_vocabulary,
    batch_bleu,
    beam_search,
    decode_steps,
    greedy_search,
    groups_with_clip,
    make_adam,
    shift_right,
    smoothed_loss,
    trim,
)
from hvdbench.frameworks.torch.recipe import flush_denormals, sized


class BahdanauAttention(nn.Module):
    """score(q, k) = v . tanh(W_q q + W_k k + b), with v normalised to length g (learnt)."""

    def __init__(self, hidden: int, init: float):
        super().__init__()
        self.linear_q = nn.Linear(hidden, hidden, bias=False)
        self.linear_k = nn.Linear(hidden, hidden, bias=False)
        self.linear_att = nn.Parameter(torch.empty(hidden).uniform_(-init, init))
        self.normalize_scalar = nn.Parameter(torch.full((1,), 1.0 / math.sqrt(hidden)))
        self.normalize_bias = nn.Parameter(torch.zeros(hidden))

    def forward(self, query: torch.Tensor, keys: torch.Tensor, processed_keys: torch.Tensor,
                allowed: torch.Tensor) -> torch.Tensor:
        """Context (B, Tq, H) for queries (B, Tq, H) over keys (B, Tk, H); allowed (B, 1, Tk)."""
        q = self.linear_q(query)
        v = self.linear_att / self.linear_att.norm() * self.normalize_scalar
        sums = torch.tanh(q.unsqueeze(2) + processed_keys.unsqueeze(1) + self.normalize_bias)  # B,Tq,Tk,H
        scores = (sums @ v).masked_fill(~allowed, -65504.0)
        return torch.bmm(F.softmax(scores.float(), dim=-1).to(keys.dtype), keys)


class GNMT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        h, layers = cfg.hidden, cfg.layers
        if layers < 2:
            raise ValueError("gnmt needs at least 2 layers (the first encoder layer is bidirectional)")
        self.embed = nn.Embedding(cfg.vocab_size, h, padding_idx=PAD)
        self.encoder = nn.ModuleList([nn.LSTM(h, h, batch_first=True, bidirectional=True),
                                      nn.LSTM(2 * h, h, batch_first=True),
                                      *[nn.LSTM(h, h, batch_first=True) for _ in range(layers - 2)]])
        self.att_rnn = nn.LSTM(h, h, batch_first=True)
        self.attention = BahdanauAttention(h, cfg.init)
        self.decoder = nn.ModuleList([nn.LSTM(2 * h, h, batch_first=True) for _ in range(layers - 1)])
        self.classifier = nn.Linear(h, cfg.vocab_size)
        self.dropout = nn.Dropout(cfg.dropout)
        for module in (self.embed, self.classifier, *self.encoder, self.att_rnn, *self.decoder):
            for name, p in module.named_parameters():
                if "bias_hh" in name:
                    nn.init.zeros_(p)
                else:
                    nn.init.uniform_(p, -cfg.init, cfg.init)
        self.detok = Detokenizer(None)  # ids as words until attach_vocabulary gives the tokenizer

    def encode(self, src: torch.Tensor, src_len: torch.Tensor) -> torch.Tensor:
        x = self.dropout(self.embed(src))
        packed = pack_padded_sequence(x, src_len.cpu(), batch_first=True, enforce_sorted=False)
        x, _ = pad_packed_sequence(self.encoder[0](packed)[0], batch_first=True, total_length=src.size(1))
        x, _ = self.encoder[1](self.dropout(x))
        for rnn in self.encoder[2:]:
            x = x + rnn(self.dropout(x))[0]
        return x

    def decode(self, tgt_in, context, processed, allowed, state=None):
        """Logits (B, T, V) and the new LSTM states; state None: zeros (the start of a sentence)."""
        state = state or [None] * (1 + len(self.decoder))
        new = []
        x, s = self.att_rnn(self.dropout(self.embed(tgt_in)), state[0])
        new.append(s)
        attn = self.attention(x, context, processed, allowed)
        x, s = self.decoder[0](self.dropout(torch.cat([x, attn], dim=2)), state[1])
        new.append(s)
        for i, rnn in enumerate(self.decoder[1:], start=2):
            y, s = rnn(self.dropout(torch.cat([x, attn], dim=2)), state[i])
            x = x + y
            new.append(s)
        return self.classifier(self.dropout(x)), new

    def forward(self, src, src_len, tgt_in):
        context = self.encode(src, src_len)
        allowed = (src != PAD)[:, None, :]
        return self.decode(tgt_in, context, self.attention.linear_k(context), allowed)[0]

    @torch.no_grad()
    def translate(self, src: torch.Tensor, src_len: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        context = self.encode(src, src_len)
        allowed = (src != PAD)[:, None, :]
        beam = cfg.beam_size
        if beam > 1:
            context, allowed = context.repeat_interleave(beam, 0), allowed.repeat_interleave(beam, 0)
        processed = self.attention.linear_k(context)

        def step(tokens, state):
            logits, state = self.decode(tokens[:, -1:], context, processed, allowed, state)
            return F.log_softmax(logits[:, -1].float(), dim=-1), state

        def reorder(state, rows):
            return [(h[:, rows], c[:, rows]) for h, c in state]

        steps = decode_steps(src_len, cfg.max_len, cfg.decode_ratio, cfg.decode_extra)
        if beam == 1:
            return greedy_search(step, None, src.size(0), steps, src.device)
        return beam_search(step, None, reorder, src.size(0), beam, steps, cfg.length_penalty, src.device)


def build(cfg, vocab_size: int | None = None, max_len: int | None = None, **_) -> GNMT:
    """The network for a flavor; vocab_size and max_len of a dataset's manifest override the
    flavor's (the synthetic defaults)."""
    flush_denormals()
    return GNMT(sized(cfg, vocab_size=vocab_size, max_len=max_len))


def loss_and_stats(model, batch):
    """Training: label-smoothed token mean. Evaluation: the same loss, and stats {"bleu": the
    batch's BLEU statistics} from translating its sources."""
    src, src_len, tgt, _ = trim(batch)
    logits = model(src, src_len, shift_right(tgt))
    loss = smoothed_loss(logits, tgt, model.cfg.label_smoothing)
    if model.training:
        return loss, {}
    return loss, {"bleu": batch_bleu(model.detok, model.translate(src, src_len), tgt)}


def param_groups(model, cfg) -> list[dict]:
    """Every group carries the reference's gradient-norm clip (5.0), applied by the optimizer."""
    attach_vocabulary(model, cfg.data)
    return groups_with_clip(model, cfg, model.cfg.grad_clip)


def make_optimizer(groups: list[dict], cfg):
    """The reference's Adam (betas 0.9/0.999, epsilon 1e-8), with the global-norm clip."""
    return make_adam(groups, cfg, betas=(0.9, 0.999), eps=1e-8)
