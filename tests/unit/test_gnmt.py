"""GNMT v2 network: exact size of the full flavor, a batch that learns, step-by-step decoding equal
to the teacher-forced decoder, BLEU stats in evaluation, the clip the optimizer applies.

    .venv/bin/python -m pytest tests/unit/test_gnmt.py
"""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from hvdbench.contracts import get_spec
from hvdbench.families.translation.data import TRANSLATION
from hvdbench.families.translation.tokens import PAD
from hvdbench.models.gnmt import torch as G

SPEC = get_spec("gnmt")
pytestmark = pytest.mark.usefixtures("torch_one_thread")  # tests/conftest.py


def lstm(inputs: int, hidden: int) -> int:
    return 4 * hidden * (inputs + hidden) + 8 * hidden  # PyTorch keeps two bias vectors


def expected_parameters(cfg) -> int:
    """The shared embedding; encoder: bidirectional LSTM, LSTM(2h), layers-2 LSTM(h); decoder:
    attention LSTM, Bahdanau attention (W_q, W_k, v, scalar g, bias), layers-1 LSTM(2h); the
    classifier with bias."""
    h, v, n = cfg.hidden, cfg.vocab_size, cfg.layers
    encoder = 2 * lstm(h, h) + lstm(2 * h, h) + (n - 2) * lstm(h, h)
    attention = 2 * h * h + h + 1 + h
    decoder = lstm(h, h) + attention + (n - 1) * lstm(2 * h, h)
    return v * h + encoder + decoder + h * v + v


def count(cfg, **info) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in G.build(cfg, **info).parameters())


def test_gnmt_v2_has_the_reference_size():
    full = SPEC.flavor("full")
    assert (full.layers, full.hidden, full.vocab_size, full.grad_clip) == (4, 1024, 32317, 5.0)
    assert count(full) == expected_parameters(full) == SPEC.parameters["full"] == 160_665_150  # ~160.7M
    debug = SPEC.flavor("debug")
    assert count(debug, vocab_size=4000, max_len=64) == expected_parameters(replace(debug, vocab_size=4000))


def batch_of(n=8, length=12, vocab=60, seed=0):
    return {k: torch.from_numpy(v) for k, v in
            TRANSLATION.synthetic(n, {"vocab_size": vocab, "max_len": length}, np.random.default_rng(seed)).items()}


def test_a_batch_is_learnt_with_the_clip_on_every_group():
    torch.manual_seed(0)
    model = G.build(SPEC.flavor("debug"), vocab_size=60, max_len=12)
    cfg = type("Cfg", (), {"optimizer": "adam", "lr": 1e-2, "weight_decay": 0.0, "data": ""})()
    groups = G.param_groups(model, cfg)
    assert {g["max_grad_norm"] for g in groups} == {5.0}
    opt = G.make_optimizer(groups, cfg)
    batch = batch_of()
    losses = []
    for _ in range(40):
        opt.zero_grad()
        loss, _ = G.loss_and_stats(model, batch)
        loss.backward()
        opt.step()
        assert sum(p.grad.pow(2).sum() for p in model.parameters() if p.grad is not None).sqrt() <= 5.0 + 1e-3
        losses.append(loss.item())
    assert losses[-1] < 0.6 * losses[0]


def test_step_by_step_decoding_equals_teacher_forcing():
    torch.manual_seed(1)
    model = G.build(SPEC.flavor("debug"), vocab_size=300, max_len=20).eval()
    src = torch.randint(4, 300, (3, 7))
    src[1, 5:] = PAD
    src_len = (src != PAD).sum(1)
    tgt = torch.randint(4, 300, (3, 6))
    with torch.no_grad():
        context = model.encode(src, src_len)
        allowed = (src != PAD)[:, None, :]
        processed = model.attention.linear_k(context)
        full, _ = model.decode(tgt, context, processed, allowed)
        state, steps = None, []
        for t in range(tgt.size(1)):
            logits, state = model.decode(tgt[:, t:t + 1], context, processed, allowed, state)
            steps.append(logits[:, 0])
    torch.testing.assert_close(torch.stack(steps, 1), full, atol=1e-5, rtol=1e-5)
    # Padding after a shorter source changes nothing for it (packed bidirectional layer, masked attention).
    longer = torch.cat([src, torch.full((3, 4), PAD)], dim=1)
    with torch.no_grad():
        torch.testing.assert_close(model(longer, src_len, tgt), model(src, src_len, tgt), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("beam", [1, 3])
def test_evaluation_returns_bleu_statistics(beam):
    torch.manual_seed(0)
    model = G.build(replace(SPEC.flavor("debug"), beam_size=beam), vocab_size=60, max_len=12).eval()
    batch = batch_of(n=5)
    with torch.no_grad():
        loss, stats = G.loss_and_stats(model, batch)
    assert math.isfinite(loss.item()) and stats["bleu"].shape == (11,) and stats["bleu"][-1] == 5
