"""Transformer (Vaswani et al. 2017) for translation, single-device PyTorch code.

    from hvdbench.contracts import get_spec
    from hvdbench.models.transformer import torch as transformer
    model = transformer.build(get_spec("transformer").flavor("debug"), vocab_size=4000, max_len=64)
    transformer.attach_vocabulary(model, "data/gettext-de")  # param_groups does it in a run
    loss, stats = transformer.loss_and_stats(model, batch)   # eval mode: stats {"bleu": 11 sums}

Pre-LayerNorm encoder-decoder built from torch.nn's TransformerEncoderLayer/DecoderLayer
(norm_first=True, as the MLPerf reference's tensor2tensor "transformer_big" normalizes before each
sub-layer) with final LayerNorms, sinusoidal positions, one embedding matrix shared by source,
target and the output projection (scaled by sqrt(d_model) at the input, no output bias).

Training: label-smoothed cross-entropy, mean over target tokens (padding ignored). Evaluation
(model.training False): the same loss, plus a translation of every source sentence by greedy
search (beam_size 1) or beam search with the GNMT length penalty ((5 + len) / 6) ** alpha, turned
back into text with the dataset's tokenizer and scored against the decoded references; the
stats are the batch's BLEU sufficient statistics (the translation family's bleu.py), which the
metric sums.

What it shares with gnmt (the trimming of padded batches, the label-smoothed loss, beam search, the
BLEU statistics of a decoded batch, Adam with optional gradient clipping) is the translation
family's, hvdbench/families/translation/torch.py.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn

from hvdbench.errors import ConfigError
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


def sinusoids(length: int, dim: int) -> torch.Tensor:
    """tensor2tensor's timing signal: sines on the first half of the channels, cosines on the other."""
    half = dim // 2
    scale = math.log(10000.0) / max(half - 1, 1)
    freqs = torch.exp(torch.arange(half, dtype=torch.float32) * -scale)
    angles = torch.arange(length, dtype=torch.float32)[:, None] * freqs[None, :]
    signal = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    return F.pad(signal, (0, dim % 2))


class Transformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.embed = nn.Embedding(cfg.vocab_size, d, padding_idx=PAD)
        nn.init.normal_(self.embed.weight, std=d ** -0.5)
        with torch.no_grad():
            self.embed.weight[PAD].zero_()

        def enc_layer():
            return nn.TransformerEncoderLayer(d, cfg.heads, cfg.ffn, cfg.dropout, batch_first=True, norm_first=True)

        def dec_layer():
            return nn.TransformerDecoderLayer(d, cfg.heads, cfg.ffn, cfg.dropout, batch_first=True, norm_first=True)

        self.encoder = nn.TransformerEncoder(enc_layer(), cfg.encoder_layers, norm=nn.LayerNorm(d),
                                             enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(dec_layer(), cfg.decoder_layers, norm=nn.LayerNorm(d))
        self.dropout = nn.Dropout(cfg.dropout)
        self.register_buffer("positions", sinusoids(cfg.max_positions, d), persistent=False)
        self.detok = Detokenizer(None)  # ids as words until attach_vocabulary gives the tokenizer

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids) * math.sqrt(self.cfg.d_model) + self.positions[:ids.size(1)].to(self.embed.weight.dtype)
        return self.dropout(x)

    def encode(self, src: torch.Tensor):
        pad = src == PAD
        return self.encoder(self.embed_tokens(src), src_key_padding_mask=pad), pad

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_pad: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V) for every position of tgt_in (causal), through the tied embedding."""
        t = tgt_in.size(1)
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=tgt_in.device), diagonal=1)
        h = self.decoder(self.embed_tokens(tgt_in), memory, tgt_mask=causal, tgt_is_causal=True,
                         memory_key_padding_mask=src_pad)
        return h @ self.embed.weight.t()

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        memory, pad = self.encode(src)
        return self.decode(tgt_in, memory, pad)

    @torch.no_grad()
    def translate(self, src: torch.Tensor, src_len: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        memory, pad = self.encode(src)
        beam = cfg.beam_size
        if beam > 1:
            memory, pad = memory.repeat_interleave(beam, 0), pad.repeat_interleave(beam, 0)
        cache = DecoderCache(self, memory, pad)

        def step(tokens, state):
            return F.log_softmax(cache.next_logits(tokens[:, -1], tokens.size(1) - 1, state).float(), dim=-1), state

        def reorder(state, rows):
            return [(k[rows], v[rows]) for k, v in state]

        steps = decode_steps(src_len, cfg.max_len, cfg.decode_ratio, cfg.decode_extra)
        if beam == 1:
            return greedy_search(step, cache.start(), src.size(0), steps, src.device)
        return beam_search(step, cache.start(), reorder, src.size(0), beam, steps, cfg.length_penalty, src.device)


def _split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    b, t, d = x.shape
    return x.view(b, t, heads, d // heads).transpose(1, 2)


class DecoderCache:
    """The decoder one token at a time (evaluation): each layer keeps its self-attention keys and
    values of the tokens so far, and the cross-attention keys and values of the source are
    computed once. The same weights and sums as `Transformer.decode` on the whole prefix (a test
    checks the logits agree), at a fraction of the cost. Dropout is off: evaluation only."""

    def __init__(self, model: Transformer, memory: torch.Tensor, src_pad: torch.Tensor):
        self.model, self.heads = model, model.cfg.heads
        self.allowed = (~src_pad)[:, None, None, :]  # (N, 1, 1, S): True = a real source token
        self.memory_kv = []
        for layer in model.decoder.layers:
            attn = layer.multihead_attn
            d = attn.embed_dim
            w, b = attn.in_proj_weight, attn.in_proj_bias
            k = _split_heads(F.linear(memory, w[d:2 * d], b[d:2 * d]), self.heads)
            v = _split_heads(F.linear(memory, w[2 * d:], b[2 * d:]), self.heads)
            self.memory_kv.append((k, v))

    def start(self) -> list:
        n, dev = self.allowed.size(0), self.allowed.device
        dim, dtype = self.model.cfg.d_model // self.heads, self.model.embed.weight.dtype
        empty = torch.zeros(n, self.heads, 0, dim, device=dev, dtype=dtype)
        return [(empty, empty) for _ in self.model.decoder.layers]

    def next_logits(self, token: torch.Tensor, position: int, state: list) -> torch.Tensor:
        """Logits (N, V) of the token after `token` (N,) at `position`; `state` grows in place."""
        m = self.model
        x = m.embed(token[:, None]) * math.sqrt(m.cfg.d_model) + m.positions[position].to(m.embed.weight.dtype)
        for i, layer in enumerate(m.decoder.layers):
            sa, ca = layer.self_attn, layer.multihead_attn
            q, k, v = (_split_heads(t, self.heads) for t in
                       F.linear(layer.norm1(x), sa.in_proj_weight, sa.in_proj_bias).chunk(3, dim=-1))
            keys, values = state[i]
            keys, values = torch.cat([keys, k], dim=2), torch.cat([values, v], dim=2)
            state[i] = (keys, values)
            x = x + sa.out_proj(F.scaled_dot_product_attention(q, keys, values).transpose(1, 2).flatten(2))
            d = ca.embed_dim
            q = _split_heads(F.linear(layer.norm2(x), ca.in_proj_weight[:d], ca.in_proj_bias[:d]), self.heads)
            mk, mv = self.memory_kv[i]
            ctx = F.scaled_dot_product_attention(q, mk, mv, attn_mask=self.allowed)
            x = x + ca.out_proj(ctx.transpose(1, 2).flatten(2))
            x = x + layer.linear2(layer.activation(layer.linear1(layer.norm3(x))))
        return m.decoder.norm(x)[:, -1] @ m.embed.weight.t()


def build(cfg, vocab_size: int | None = None, max_len: int | None = None, **_) -> Transformer:
    """The network for a flavor; vocab_size and max_len of a dataset's manifest override the
    flavor's (the synthetic defaults)."""
    flush_denormals()
    cfg = sized(cfg, vocab_size=vocab_size, max_len=max_len)
    if cfg.d_model % cfg.heads:
        raise ConfigError(f"transformer: d_model {cfg.d_model} is not a multiple of heads {cfg.heads}")
    cfg = replace(cfg, max_positions=max(cfg.max_positions, cfg.max_len))
    return Transformer(cfg)


def loss_and_stats(model, batch):
    """Training: label-smoothed token mean, stats {"tokens"}. Evaluation: the same loss, and
    stats {"bleu": the batch's BLEU statistics} from translating its sources."""
    src, src_len, tgt, _ = trim(batch)
    logits = model(src, shift_right(tgt))
    loss = smoothed_loss(logits, tgt, model.cfg.label_smoothing)
    if model.training:
        return loss, {}
    hyps = model.translate(src, src_len)
    return loss, {"bleu": batch_bleu(model.detok, hyps, tgt)}


def param_groups(model, cfg) -> list[dict]:
    attach_vocabulary(model, cfg.data)
    return groups_with_clip(model, cfg, model.cfg.grad_clip)


def make_optimizer(groups: list[dict], cfg):
    """The reference's Adam: betas (0.9, 0.997), epsilon 1e-9."""
    return make_adam(groups, cfg, betas=(0.9, 0.997), eps=1e-9)

