"""llama2_lora's levers (issue 46): the language models' levers on its base where they apply, on
the debug flavor against the plain model (the trainer's runs with them, regional compile included,
are in tests/unit/test_levers.py):

- --activation-checkpointing full/selective recomputes the base's decoder layers: the same loss
  and adapter gradients (LoRA's dropout masks replayed), fewer bytes kept for backward;
- --loss-chunks: the summary tokens' loss in pieces is the plain one within 1e-5 relative, with
  the same gradients, and no kept tensor holds every summary token's logits;
- --compile compiles the base's decoder layers, adapters included (compile_units);
- the Llama-2 flavors recompute every layer by default, as the reference; fp8, which does not apply
  to a frozen base inside LoRA layers, is refused in one line, and a lever that does not apply
  elsewhere is refused in one line naming llama2_lora's base among those it applies to.

    .venv/bin/python -m pytest tests/unit/test_lora_levers.py
"""

import numpy as np
import pytest
import torch

from hvdbench.contracts import get_spec
from hvdbench.errors import ConfigError
from hvdbench.models.llama2_lora import torch as lora
from hvdbench.models.llama2_lora.data import IGNORE, SUMMARIES
from hvdbench.train.config import resolve

pytestmark = pytest.mark.usefixtures("torch_one_thread")  # tests/conftest.py

SPEC = get_spec("llama2_lora")
VOCAB, MAX_LEN = 4000, 64


def batch_of(n=2, seed=0):
    arrays = SUMMARIES.synthetic(n, {"vocab_size": VOCAB, "max_len": MAX_LEN}, np.random.default_rng(seed))
    return {k: torch.from_numpy(v) for k, v in arrays.items()}


def step(**levers):
    """(loss, every adapter's gradient, bytes autograd kept for backward) of one forward and backward
    in training mode (LoRA's dropout on), from one seed."""
    torch.manual_seed(0)
    model = lora.build(SPEC.flavor("debug"), vocab_size=VOCAB, max_len=MAX_LEN, **levers).train()
    kept, shapes = [], []

    def pack(t):
        kept.append(t.numel() * t.element_size())
        shapes.append(t.shape)
        return t

    torch.manual_seed(1)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss, stats = lora.loss_and_stats(model, batch_of())
    loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
    return loss.detach(), stats, grads, sum(kept), shapes


def test_checkpointing_the_base_keeps_the_loss_and_gradients_and_fewer_activations():
    loss, _, grads, none, _ = step()
    assert grads and all(g is not None for g in grads.values())
    kept = {}
    for mode in ("selective", "full"):
        mode_loss, _, mode_grads, kept[mode], _ = step(activation_checkpointing=mode)
        torch.testing.assert_close(mode_loss, loss, rtol=1e-6, atol=0)
        for key, grad in grads.items():
            torch.testing.assert_close(mode_grads[key], grad, rtol=1e-5, atol=1e-7, msg=key)
    assert kept["full"] < kept["selective"] < none


def test_the_chunked_loss_over_summary_tokens_is_the_plain_one():
    loss, stats, grads, _, plain_shapes = step()
    chunked, chunked_stats, chunked_grads, _, shapes = step(loss_chunks=4)
    torch.testing.assert_close(chunked, loss, rtol=1e-5, atol=0)  # stated tolerance: 1e-5 relative
    labelled = int((batch_of()["labels"][:, 1:] != IGNORE).sum())
    assert chunked_stats["count"] == stats["count"] == labelled > 8
    assert chunked_stats["loss_sum"].item() == pytest.approx(stats["loss_sum"].item(), rel=1e-5)
    for key, grad in grads.items():
        torch.testing.assert_close(chunked_grads[key], grad, rtol=1e-4, atol=1e-6, msg=key)

    def all_logits(kept):  # a kept tensor over the vocabulary for every summary token
        return [s for s in kept if len(s) and s[-1] == VOCAB and s.numel() >= labelled * VOCAB]

    assert all_logits(plain_shapes) and not all_logits(shapes)  # the check can fail: the plain loss keeps them


def test_compile_units_are_the_bases_decoder_layers_with_their_adapters():
    model = lora.build(SPEC.flavor("debug"), vocab_size=VOCAB, max_len=MAX_LEN)
    units = lora.compile_units(model)
    assert units == list(model.get_base_model().model.layers) and len(units) == SPEC.flavor("debug").layers
    assert all(any("lora_A" in name for name, _ in unit.named_parameters()) for unit in units)


def test_the_llama2_flavors_recompute_every_layer_and_what_does_not_apply_is_refused(tmp_path):
    from hvdbench.frameworks.torch.train import run_keywords
    from hvdbench.models.resnet50 import torch as resnet

    for flavor in ("7b", "13b", "70b"):
        cfg = resolve({"model": "llama2_lora", "flavor": flavor, "engine": "fsdp", "synthetic": True,
                       "out": str(tmp_path)})
        assert cfg.activation_checkpointing == "full" and cfg.precision == "bf16"
    debug = resolve({"model": "llama2_lora", "flavor": "debug", "synthetic": True, "out": str(tmp_path),
                     "activation_checkpointing": "selective", "loss_chunks": 4})
    assert run_keywords(lora.build, None, debug) == {"activation_checkpointing": "selective", "loss_chunks": 4}
    base = {"model": "resnet50", "flavor": "debug", "synthetic": True, "out": str(tmp_path)}
    with pytest.raises(ConfigError, match="llama2_lora --precision fp8: its linears are a frozen base inside "
                                          "peft's LoRA layers"):
        resolve({"model": "llama2_lora", "flavor": "debug", "synthetic": True, "out": str(tmp_path),
                 "precision": "fp8"})
    with pytest.raises(ConfigError, match="resnet50's network has no vocabulary loss to chunk "
                                          r"\(llama31_8b's, gpt_oss_20b's and llama2_lora's base have\)"):
        run_keywords(resnet.build, None, resolve({**base, "loss_chunks": 4}))


def test_the_one_gpu_flavor_is_70bs_layer_at_four_layers(tmp_path):
    """70b-4l: MLPerf's 70B layer (width, heads, vocabulary, adapters, 8,192 tokens) at 4 layers, its
    parameters exact; a whole replica per GPU, so every engine runs it, in bf16."""
    import dataclasses

    from hvdbench.models.llama2_lora import ADAPTER_PARAMETERS, BASE_PARAMETERS, FLAVORS

    small = FLAVORS["70b-4l"]
    assert dataclasses.replace(small, layers=80, data_parallel=False) == FLAVORS["70b"] and small.layers == 4
    with torch.device("meta"):
        model = lora.build(small)
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert (frozen, trained) == (BASE_PARAMETERS["70b-4l"], ADAPTER_PARAMETERS["70b-4l"]) == (3_946_913_792, 2_228_224)
    assert trained * 80 == ADAPTER_PARAMETERS["70b"] * 4  # the same adapters a layer
    cfg = resolve({"model": "llama2_lora", "flavor": "70b-4l", "engine": "horovod", "synthetic": True,
                   "out": str(tmp_path)})
    assert (cfg.precision, cfg.activation_checkpointing, cfg.batch_per_gpu) == ("bf16", "none", 1)
