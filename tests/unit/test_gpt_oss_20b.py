"""gpt_oss_20b: gpt-oss-20b's published size and MLPerf's on the meta device, alternating sliding-window
and full attention, a debug batch that learns, the experts' token counts in the evaluation stats,
the router-load metric (one allreduce, a rank without batches included), the decoder layers as
FSDP's units, and a meta-built model filled by init_weights.

    .venv/bin/python -m pytest tests/unit/test_gpt_oss_20b.py
"""

import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from hvdbench.contracts import get_spec
from hvdbench.families.lm.data import LM_TOKENS
from hvdbench.families.lm.metric import RoutedLogPerplexity, load_summary
from hvdbench.models.gpt_oss_20b import torch as G

SPEC = get_spec("gpt_oss_20b")


pytestmark = pytest.mark.usefixtures("torch_one_thread")  # tests/conftest.py


def batch_of(n=4, vocab=2048, seq_len=32, seed=0):
    arrays = LM_TOKENS.synthetic(n, {"vocab_size": vocab, "seq_len": seq_len}, np.random.default_rng(seed))
    return {k: torch.from_numpy(v) for k, v in arrays.items()}


def run_cfg(**kw):
    return SimpleNamespace(**{"flavor": "debug", "data": "", "optimizer": "adamw", "lr": 3e-3, "weight_decay": 0.1,
                              **kw})


def count(cfg):
    with torch.device("meta"):
        model = G.build(cfg)
    return model, sum(p.numel() for p in model.parameters())


def test_the_full_flavor_is_gpt_oss_20b_with_mlperfs_vocabulary():
    full = SPEC.flavor("full")
    # gpt-oss-20b as published (its own 201,088-token vocabulary): 20.91B.
    assert count(replace(full, vocab_size=201088))[1] == 20_914_757_184
    # MLPerf's C4 files use Llama 3.1's 128,256 tokens.
    model, n = count(full)
    assert n == 20_495_244_864 == SPEC.parameters["full"] and SPEC.build_on_meta == ("full",)
    c = model.config
    assert (c.num_hidden_layers, c.hidden_size, c.num_local_experts, c.num_experts_per_tok, c.num_attention_heads,
            c.num_key_value_heads, c.sliding_window) == (24, 2880, 32, 4, 64, 8, 128)
    assert c.layer_types == ["sliding_attention", "full_attention"] * 12
    assert c.rope_parameters == {"rope_type": "default", "rope_theta": 150000.0} and c.router_aux_loss_coef == 0.0
    units = G.shard_units(model)
    assert len(units) == 24 and all(type(u).__name__ == "GptOssDecoderLayer" for u in units)


def test_the_debug_flavor_learns_and_counts_its_experts_tokens():
    torch.manual_seed(0)
    model = G.build(SPEC.flavor("debug"), vocab_size=2048, seq_len=32)
    assert sum(p.numel() for p in model.parameters()) == SPEC.parameters["debug"]
    batch = batch_of()
    opt = G.make_optimizer(G.param_groups(model, run_cfg()), run_cfg())
    losses = []
    for _ in range(8):
        loss, stats = G.loss_and_stats(model, batch)
        assert "expert_tokens" not in stats  # training: no router statistics
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] == pytest.approx(math.log(2048), abs=0.3) and losses[-1] < losses[0] - 1.0
    model.eval()
    with torch.no_grad():
        loss, stats = G.loss_and_stats(model, batch)
    # Every token of every layer goes to its top 2 of 8 experts.
    layers = SPEC.flavor("debug").layers
    assert stats["top_k"] == 2 and stats["expert_tokens"].shape == (8,) and len(model.model.layers) == layers
    assert int(stats["expert_tokens"].sum()) == 4 * 32 * 2 * layers == 2 * layers * stats["count"]


class FakeDist:
    """Two ranks' allreduce: the other rank's vector is given."""

    def __init__(self, other, rank=0):
        self.other, self.rank = other, rank

    def allreduce_sum(self, x):
        return np.asarray(x) + self.other


def test_the_router_load_travels_with_the_loss_in_one_allreduce():
    said = []
    metric = RoutedLogPerplexity(slots=32, say=said.append)
    state = metric.start()
    for loads in ([10, 0, 5, 5], [6, 2, 4, 4]):
        state = metric.update(state, {"loss_sum": torch.tensor(12.0), "count": 4,
                                      "expert_tokens": torch.tensor(loads), "top_k": 2})
    mine = metric.local(state)
    idle = metric.local(metric.start())  # a rank that had no evaluation batch sends as many numbers
    assert mine.shape == idle.shape == (5 + 32,)
    reduced = metric.reduce(mine, FakeDist(idle))
    assert metric.value(reduced) == pytest.approx(3.0) and metric.samples(reduced) == 8
    load = metric.last_load
    assert (load["experts"], load["top_k"], load["routed"]) == (4, 2, 36)
    assert load["share"] == pytest.approx([16 / 36, 2 / 36, 9 / 36, 9 / 36], abs=1e-4)
    assert load["max_over_even"] == pytest.approx(16 / 9) and load["min_over_even"] == pytest.approx(2 / 9)
    assert len(said) == 1 and "36 token slots to 4 experts (top-2), busiest 1.78x and idlest 0.22x" in said[0]
    assert not metric.higher_is_better and metric.name == "log_perplexity"
    assert load_summary(np.ones(8), 2)["cv"] == 0.0


def test_a_model_built_on_the_meta_device_is_filled_by_init_weights():
    cfg = SPEC.flavor("debug")
    with torch.device("meta"):
        model = G.build(cfg, seq_len=32)
    model.to_empty(device="cpu")
    G.init_weights(model)
    for name, p in model.named_parameters():
        assert torch.isfinite(p).all(), name
        if name.endswith("experts.gate_up_proj_bias") or name.endswith("experts.down_proj_bias"):
            assert not p.any(), name
    assert model.model.layers[0].mlp.experts.gate_up_proj.std().item() == pytest.approx(0.02, rel=0.1)
    loss, _ = G.loss_and_stats(model, batch_of())
    assert loss.item() == pytest.approx(math.log(2048), abs=0.3)


def test_biases_and_sinks_are_not_decayed():
    model = G.build(SPEC.flavor("debug"), seq_len=16)
    decay, rest = G.param_groups(model, run_cfg())
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(not names[id(p)].endswith("bias") for p in decay["params"])
    assert {n.rsplit(".", 1)[-1] for n in map(names.get, map(id, rest["params"]))} >= {
        "sinks", "bias", "gate_up_proj_bias", "down_proj_bias", "weight"}  # norms' weights, 1-D
    assert any(p.ndim == 3 for p in decay["params"])  # the stacked experts
