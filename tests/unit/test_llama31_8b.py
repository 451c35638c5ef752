"""llama31_8b: the reference's exact size on the meta device, a debug batch that learns, the decoder
layers as FSDP's units, a meta-built model filled by init_weights, the lm family's AdamW (clipping,
the cosine after the warm-up, weight decay on matrices only) and the closed division's MLLOG keys.

    .venv/bin/python -m pytest tests/unit/test_llama31_8b.py
"""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from hvdbench.contracts import RunFacts, get_spec
from hvdbench.families.lm import torch as lm
from hvdbench.families.lm.data import LM_TOKENS
from hvdbench.models.llama31_8b import FLAVORS
from hvdbench.models.llama31_8b import torch as L
from hvdbench.train.schedule import lr_at

SPEC = get_spec("llama31_8b")


pytestmark = pytest.mark.usefixtures("torch_one_thread")  # tests/conftest.py


def run_cfg(**kw):
    """The TrainConfig fields the model folder reads."""
    values = {"flavor": "debug", "data": "", "optimizer": "adamw", "lr": 3e-3, "weight_decay": 0.1}
    return SimpleNamespace(**{**values, **kw})


def batch_of(n=4, vocab=2048, seq_len=32, seed=0):
    arrays = LM_TOKENS.synthetic(n, {"vocab_size": vocab, "seq_len": seq_len}, np.random.default_rng(seed))
    return {k: torch.from_numpy(v) for k, v in arrays.items()}


def test_the_full_flavor_is_llama_3_1_8b_exactly_on_the_meta_device():
    with torch.device("meta"):
        model = L.build(SPEC.flavor("full"))
    assert sum(p.numel() for p in model.parameters()) == 8_030_261_248 == SPEC.parameters["full"]
    assert all(p.is_meta for p in model.parameters())
    c = model.config
    assert (c.num_hidden_layers, c.hidden_size, c.intermediate_size, c.num_attention_heads, c.num_key_value_heads,
            c.vocab_size) == (32, 4096, 14336, 32, 8, 128256)
    assert c.rope_parameters["rope_theta"] == 500000.0 and c.rope_parameters["rope_type"] == "llama3"
    assert not c.tie_word_embeddings and SPEC.build_on_meta == ("full",)
    units = L.shard_units(model)
    assert len(units) == 32 and all(type(u).__name__ == "LlamaDecoderLayer" for u in units)


def test_the_debug_flavor_learns_a_batch():
    torch.manual_seed(0)
    model = L.build(SPEC.flavor("debug"), vocab_size=2048, seq_len=32)
    assert sum(p.numel() for p in model.parameters()) == SPEC.parameters["debug"]
    batch = batch_of()
    opt = L.make_optimizer(L.param_groups(model, run_cfg()), run_cfg())
    losses = []
    for _ in range(8):
        loss, stats = L.loss_and_stats(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert stats["count"] == 4 * 32 and math.isclose(float(stats["loss_sum"]) / stats["count"], losses[-1], rel_tol=1e-5)
    assert losses[0] == pytest.approx(math.log(2048), abs=0.3) and losses[-1] < losses[0] - 1.0


def test_a_model_built_on_the_meta_device_is_filled_by_init_weights():
    cfg = SPEC.flavor("debug")
    with torch.device("meta"):
        model = L.build(cfg, seq_len=32)
    model.to_empty(device="cpu")
    L.init_weights(model)
    fresh = L.build(cfg, seq_len=32)
    assert torch.equal(model.model.rotary_emb.inv_freq, fresh.model.rotary_emb.inv_freq)
    for (name, p), q in zip(model.named_parameters(), fresh.parameters()):
        assert torch.isfinite(p).all(), name
        if name.endswith("norm.weight"):
            assert torch.equal(p, torch.ones_like(p))
        else:
            assert p.std().item() == pytest.approx(q.std().item(), rel=0.1), name  # normal(0, 0.02)
    loss, _ = L.loss_and_stats(model, batch_of())
    assert loss.item() == pytest.approx(math.log(2048), abs=0.3)


def test_weight_decay_falls_on_matrices_only():
    model = L.build(SPEC.flavor("debug"), seq_len=16)
    decay, rest = L.param_groups(model, run_cfg())
    names = {id(p): n for n, p in model.named_parameters()}
    assert decay["weight_decay"] == 0.1 and rest["weight_decay"] == 0.0
    assert all(p.ndim == 2 for p in decay["params"]) and all("norm" in names[id(p)] for p in rest["params"])
    assert len(decay["params"]) + len(rest["params"]) == len(list(model.parameters()))


def test_adamw_clips_and_turns_the_held_peak_into_the_references_cosine():
    """The shared schedule with decay_power 0 warms up and holds the peak; the optimizer decays it
    along a cosine to 0.1 x the peak over schedule_steps - warm-up steps, and clips to 1.0."""
    w = torch.nn.Parameter(torch.zeros(3))
    groups = [{"params": [w], "weight_decay": 0.0, "max_grad_norm": 1.0, "schedule_steps": 10, "end_ratio": 0.1}]
    opt = lm.make_optimizer(groups, run_cfg(lr=1.0))
    w.grad = torch.zeros(3)
    opt.step()  # a fresh optimizer's state-creating step (Horovod's broadcast takes it): not counted
    peak, warmup, rates = 1.0, 3, []
    for step in range(14):
        opt.param_groups[0]["lr"] = lr_at(step, peak, warmup, 1000, 0.0, 0.0)
        w.grad = torch.tensor([30.0, 40.0, 0.0])  # norm 50
        opt.step()
        rates.append(opt.param_groups[0]["lr"])
        assert torch.linalg.vector_norm(w.grad).item() == pytest.approx(1.0, rel=1e-5)
    assert rates[:3] == pytest.approx([1 / 3, 2 / 3, 1.0])
    cosine = [0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, k / (10 - warmup)))) for k in range(11)]
    assert rates[3:] == pytest.approx(cosine)  # from the peak to 0.1 at step 10, then held
    assert rates[-1] == pytest.approx(0.1)


def test_the_closed_divisions_keys_are_the_references():
    cfg = run_cfg(flavor="full", weight_decay=0.1)
    facts = RunFacts(global_batch=32, peak_lr=8e-4, steps_per_epoch=None, max_steps=100, warmup_steps=128)
    logged = SPEC.mllog_values(cfg, facts)
    assert logged == {
        "max_sequence_length": 8192, "opt_end_learning_rate": pytest.approx(8e-5),
        "opt_learning_rate_decay_steps": 1_200_000 - 128, "opt_learning_rate_decay_schedule": "cosine with linear warmup",
        "opt_adamw_beta_1": 0.9, "opt_adamw_beta_2": 0.95, "opt_adamw_epsilon": 1e-5, "opt_adamw_weight_decay": 0.1,
        "opt_gradient_clip_norm": 1.0, "max_steps": 1_200_000}
    assert SPEC.benchmark == "llama31_8b" and SPEC.mlperf_target == 3.3 and not SPEC.metric.higher_is_better
    assert SPEC.defaults["eval_every"] == 12288 and SPEC.defaults["eval_unit"] == "samples"
    assert FLAVORS["full"].schedule_steps == 1_200_000
