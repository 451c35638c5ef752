"""The language models' levers (issue 46) on their debug flavors, against the plain model they replace:

- --activation-checkpointing full/selective: the same loss and gradients (recomputing is exact), and
  fewer bytes kept for backward (full < selective < none, counted by autograd's saved-tensor hooks);
- --loss-chunks: the chunked cross-entropy is the plain one within 1e-5 relative (the sum in another
  order), with the same gradients, and no tensor kept for backward holds a whole batch's logits;
- the one-GPU flavor full-4l: full's layer shape at 4 layers, its parameters exact, its FLOPs counted;
- --precision fp8: refused in one line off CUDA GPUs of compute capability >= 8.9; torchao's
  conversion swaps the linears the rule picks (where torchao is installed: the optional fp8 extra);
- refusals: the levers for a network without decoder layers, fsdp's reshard for another engine.

The trainer's runs with these levers (and regional compile) are in tests/unit/test_levers.py.

    .venv/bin/python -m pytest tests/unit/test_lm_levers.py
"""

import dataclasses
import importlib.util

import numpy as np
import pytest
import torch

from hvdbench.contracts import get_spec
from hvdbench.errors import ConfigError
from hvdbench.families.lm import torch as lm
from hvdbench.families.lm.data import LM_TOKENS
from hvdbench.frameworks.torch import fp8
from hvdbench.peaks import peak_precision, peak_tflops
from hvdbench.train.config import resolve

pytestmark = pytest.mark.usefixtures("torch_one_thread")  # tests/conftest.py

LLMS = ("llama31_8b", "gpt_oss_20b")
VOCAB, SEQ = 2048, 32


def batch_of(n=2, seed=0):
    arrays = LM_TOKENS.synthetic(n, {"vocab_size": VOCAB, "seq_len": SEQ}, np.random.default_rng(seed))
    return {k: torch.from_numpy(v) for k, v in arrays.items()}


def built(name, **levers):
    torch.manual_seed(0)
    spec = get_spec(name)
    return spec.framework_module("torch").build(spec.flavor("debug"), vocab_size=VOCAB, seq_len=SEQ, **levers)


def step(name, **levers):
    """(loss, every gradient, bytes autograd kept for backward) of one forward and backward."""
    model = built(name, **levers)
    kept = []

    def pack(t):
        kept.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss, _ = get_spec(name).framework_module("torch").loss_and_stats(model, batch_of())
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in model.named_parameters()}, sum(kept)


@pytest.mark.parametrize("name", LLMS)
def test_checkpointing_keeps_the_loss_and_gradients_and_fewer_activations(name):
    loss, grads, none = step(name)
    kept = {}
    for mode in ("selective", "full"):
        mode_loss, mode_grads, kept[mode] = step(name, activation_checkpointing=mode)
        torch.testing.assert_close(mode_loss, loss, rtol=1e-6, atol=0)
        for key, grad in grads.items():
            torch.testing.assert_close(mode_grads[key], grad, rtol=1e-5, atol=1e-7, msg=key)
    assert kept["full"] < kept["selective"] < none


@pytest.mark.parametrize("name", LLMS)
def test_the_chunked_loss_is_the_plain_one_without_whole_logits(name):
    loss, grads, _ = step(name)
    model = built(name, loss_chunks=4)
    shapes = []

    def pack(t):
        shapes.append(t.shape)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        chunked, stats = get_spec(name).framework_module("torch").loss_and_stats(model, batch_of())
    chunked.backward()
    torch.testing.assert_close(chunked.detach(), loss, rtol=1e-5, atol=0)  # stated tolerance: 1e-5 relative
    assert stats["count"] == 2 * SEQ and stats["loss_sum"].item() == pytest.approx(chunked.item() * 2 * SEQ, rel=1e-6)
    for key, grad in grads.items():
        torch.testing.assert_close(dict(model.named_parameters())[key].grad, grad, rtol=1e-4, atol=1e-6, msg=key)
    def whole_logits(kept):  # a kept tensor over the vocabulary for every token of the batch
        return [s for s in kept if len(s) and s[-1] == VOCAB and s.numel() >= 2 * SEQ * VOCAB]

    assert not whole_logits(shapes)
    plain_kept = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: plain_kept.append(t.shape) or t, lambda t: t):
        get_spec(name).framework_module("torch").loss_and_stats(built(name), batch_of())
    assert whole_logits(plain_kept)  # the plain loss keeps them: the check above can fail


def test_chunked_cross_entropy_counts_every_token_once_whatever_the_split():
    torch.manual_seed(1)
    head = torch.nn.Linear(8, 50, bias=False)
    hidden, targets = torch.randn(3, 7, 8), torch.randint(0, 50, (3, 7))
    plain = torch.nn.functional.cross_entropy(head(hidden).flatten(0, 1), targets.flatten(), reduction="sum")
    for chunks in (1, 2, 5, 21, 40):  # 40 > 21 tokens: torch.chunk gives 21 pieces
        torch.testing.assert_close(lm.chunked_cross_entropy(hidden, targets, head, chunks), plain, rtol=1e-6, atol=0)


@pytest.mark.parametrize("name, layers, parameters", [("llama31_8b", 4, 1_923_125_248),
                                                      ("gpt_oss_20b", 4, 4_031_505_344)])
def test_the_one_gpu_flavor_is_fulls_layer_at_four_layers(name, layers, parameters):
    from hvdbench.frameworks.torch.flops import flops_rows

    spec = get_spec(name)
    small, full = spec.flavor("full-4l"), spec.flavor("full")
    assert dataclasses.replace(small, layers=full.layers) == full and small.layers == layers
    with torch.device("meta"):
        model = spec.framework_module("torch").build(small)
    assert sum(p.numel() for p in model.parameters()) == parameters == spec.parameters["full-4l"]
    (row,) = flops_rows((name,), ("full-4l",))  # what `hvdbench bench flops` lists
    assert row["tokens"] == 8192 and 0.99 < float(row["ratio"]) < 1.01  # counted = 6N + attention formula


def test_the_full_flavors_default_to_full_checkpointing_and_the_chunked_loss(tmp_path):
    for name in LLMS:
        cfg = resolve({"model": name, "synthetic": True, "out": str(tmp_path)})
        assert (cfg.activation_checkpointing, cfg.loss_chunks, cfg.precision) == ("full", 8, "bf16")
        debug = resolve({"model": name, "flavor": "debug", "synthetic": True, "out": str(tmp_path)})
        assert (debug.activation_checkpointing, debug.loss_chunks) == ("none", 0)


def test_levers_for_a_network_without_decoder_layers_are_refused(tmp_path):
    from hvdbench.frameworks.torch.train import run_keywords
    from hvdbench.models.llama31_8b import torch as llama
    from hvdbench.models.resnet50 import torch as resnet

    base = {"model": "resnet50", "flavor": "debug", "synthetic": True, "out": str(tmp_path)}
    with pytest.raises(ConfigError, match="--activation-checkpointing full: resnet50's network has no decoder"):
        run_keywords(resnet.build, None, resolve({**base, "activation_checkpointing": "full"}))
    with pytest.raises(ConfigError, match="--loss-chunks 4: resnet50's network has no vocabulary loss"):
        run_keywords(resnet.build, None, resolve({**base, "loss_chunks": 4}))
    llm = resolve({**base, "model": "llama31_8b", "activation_checkpointing": "selective", "loss_chunks": 4})
    assert run_keywords(llama.build, None, llm) == {"activation_checkpointing": "selective", "loss_chunks": 4}


@pytest.mark.parametrize("settings, message", [
    ({"fsdp_reshard_after_forward": False}, "--no-fsdp-reshard-after-forward: FSDP2's option; --engine horovod"),
    ({"loss_chunks": -1}, "loss_chunks must not be negative, got -1"),
    ({"activation_checkpointing": "op"}, "activation_checkpointing 'op' is not one of none, selective, full"),
    ({"framework": "tensorflow", "model": "resnet50", "precision": "fp8"}, "--precision fp8: float8 linears are "
                                                                            "PyTorch's"),
])
def test_bad_lever_settings_are_refused_in_one_line(tmp_path, settings, message):
    base = {"model": "llama31_8b", "flavor": "debug", "synthetic": True, "out": str(tmp_path)}
    with pytest.raises(ConfigError, match=message):
        resolve({**base, **settings})
    assert resolve({**base, "engine": "fsdp", "fsdp_reshard_after_forward": False}).fsdp_reshard_after_forward is False


def test_fp8_is_refused_off_cuda_and_measured_against_the_bf16_peak():
    why = fp8.refusal(torch.device("cpu"))
    assert why == "--precision fp8: float8 matmuls need a CUDA GPU of compute capability >= 8.9; this run is on cpu"
    assert "\n" not in why
    assert peak_precision("fp8") == "bf16" and peak_precision("bf16") == "bf16"
    assert peak_tflops("NVIDIA H100 80GB HBM3", peak_precision("fp8")) == 989.4


def test_fp8_picks_the_linears_torchtitan_converts():
    model = built("llama31_8b")
    picked = {name for name, m in model.named_modules() if fp8.converts(m, name)}
    linears = {name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    assert "lm_head" in linears and "lm_head" not in picked
    assert picked == linears - {"lm_head"}  # the debug flavor's sizes are multiples of 16
    assert not fp8.converts(torch.nn.Linear(24, 32), "model.layers.0.mlp.up_proj")  # 24: not a multiple of 16


@pytest.mark.skipif(importlib.util.find_spec("torchao") is None,
                    reason="torchao is the optional fp8 extra (pip install 'hvdbench[fp8]'), not in make setup: "
                           "beside torch 2.13 its import prints load errors into every diffusers run")
def test_torchaos_conversion_swaps_the_picked_linears_and_keeps_the_loss_close():
    model = built("llama31_8b")
    with torch.no_grad():
        plain, _ = lm.next_token_loss(model, batch_of())[:2]
    linears = sum(fp8.converts(m, n) for n, m in model.named_modules())
    assert fp8.to_float8(model) == linears == 7 * 2  # q, k, v, o, gate, up, down in each of 2 layers
    with torch.no_grad():
        low, _ = lm.next_token_loss(model, batch_of())[:2]
    assert low.item() == pytest.approx(plain.item(), rel=0.02)  # float8's rounding, not another model


def test_fp8_on_a_gpu_older_than_ada_or_without_torchao_is_refused(monkeypatch):
    """No CUDA GPU here: torch's answers about one are stood in for (the rule, not the device, is tested)."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100-SXM4-80GB")
    assert fp8.refusal(torch.device("cuda", 0)) == ("--precision fp8: NVIDIA A100-SXM4-80GB has compute capability "
                                                    "8.0; float8 matmuls need >= 8.9")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert fp8.refusal(torch.device("cuda", 0)) == "--precision fp8 needs torchao: pip install 'hvdbench[fp8]'"
