"""What train/ asks of a framework's trainer and what a trainer asks of a model folder, each declared
once (hvdbench/frameworks/trainer.py, frameworks/torch/hooks.py): a folder's torch.py that defines
only `build` and `loss_and_stats` (the contract test's toy) gets every optional function's default, one
that defines them gets its own, one without `loss_and_stats` is refused in one line naming it; a
trainer that cannot do something optional (the base's defaults, TensorFlow's) does nothing or, for
a fault it cannot inject, refuses in one line where the loop starts.

    .venv/bin/python -m pytest tests/unit/test_trainer_contract.py
"""

import types

import pytest
import torch
from toy_model import torch as toy  # tests/toy_model: the contract test's model (tests/ is on sys.path)

from hvdbench.contracts import get_spec
from hvdbench.errors import ConfigError
from hvdbench.families.lm import torch as lm
from hvdbench.frameworks.torch import hooks as torch_hooks
from hvdbench.frameworks.torch.hooks import TorchHooks
from hvdbench.frameworks.torch.train import Trainer as TorchTrainer
from hvdbench.frameworks.trainer import Trainer
from hvdbench.models.llama31_8b import torch as llama
from hvdbench.train.config import resolve
from hvdbench.train.faults import Fault
from hvdbench.train.loop import Loop

TOY_FLAVOR = types.SimpleNamespace(features=4, hidden=8)


def run_cfg(tmp_path, **given):
    return resolve({"model": "resnet50", "flavor": "debug", "synthetic": True, "out": str(tmp_path), **given})


def test_a_folder_with_only_build_and_loss_gets_every_default(tmp_path):
    hooks = TorchHooks.of(toy)
    assert (hooks.build, hooks.loss_and_stats) == (toy.build, toy.loss_and_stats)
    model = hooks.build(TOY_FLAVOR)
    assert hooks.on_device is None  # the batch as copied
    assert hooks.compile_units is None  # --compile: the whole step
    assert hooks.shard_units(model) == []  # fsdp: the root alone
    decay, rest = hooks.param_groups(model, run_cfg(tmp_path, weight_decay=0.1))  # weight decay off biases
    assert [p.ndim for p in decay["params"]] == [2, 2, 2] and [p.ndim for p in rest["params"]] == [1, 1, 1]
    assert (decay["weight_decay"], rest["weight_decay"]) == (0.1, 0.0)
    assert isinstance(hooks.make_optimizer([decay, rest], run_cfg(tmp_path, optimizer="adamw")), torch.optim.AdamW)
    with pytest.raises(ConfigError) as e:  # the default optimizer is cfg.optimizer's
        torch_hooks.make_optimizer([decay], types.SimpleNamespace(optimizer="lamb"))
    assert "optimizer 'lamb' has no PyTorch implementation here; valid: sgd, adamw, adam" in str(e.value)
    with torch.device("meta"):  # a meta-built model: each module's reset_parameters() fills it
        meta = hooks.build(TOY_FLAVOR)
    meta.to_empty(device="cpu")
    for p in meta.parameters():
        p.data.fill_(float("nan"))
    with torch.no_grad():
        hooks.init_weights(meta)
    assert all(torch.isfinite(p).all() for p in meta.parameters())


def test_a_folder_that_defines_its_functions_gets_its_own():
    hooks = TorchHooks.of(llama)
    # llama31_8b's are the language-model family's (hvdbench/families/lm/torch.py)
    assert (hooks.shard_units, hooks.compile_units, hooks.init_weights, hooks.param_groups, hooks.make_optimizer) == \
        (lm.decoder_layers, lm.decoder_layers, lm.hf_init_weights, lm.param_groups, lm.make_optimizer)
    assert hooks.on_device is None  # the one it does not define keeps its default


def test_a_folder_without_loss_and_stats_is_refused_in_one_line():
    folder = types.ModuleType("mymodel.torch")
    folder.build = toy.build
    with pytest.raises(ConfigError) as e:
        TorchHooks.of(folder)
    assert str(e.value) == "mymodel.torch: no loss_and_stats() (docs/adding-a-model.md: what the module defines)"


def test_the_pytorch_trainer_implements_what_the_base_declares():
    """Every method the base leaves to a framework is the PyTorch trainer's own, and so are the
    optional ones it can do (compilation, phase timing, compute delay, memory, FLOPs)."""
    declared = [name for name, value in vars(Trainer).items() if callable(value) or isinstance(value, property)]
    assert {"train_step", "evaluate", "delay_compute", "start_timing", "peak_memory"} <= set(declared)
    assert [name for name in declared if name not in vars(TorchTrainer)] == ["compile"]  # nothing to prepare
    assert TorchTrainer.times_phases and not Trainer.times_phases


def test_a_trainer_that_cannot_does_nothing_or_refuses_at_the_loops_start(tmp_path):
    cannot = Trainer()
    assert (cannot.compiles, cannot.compile_s, cannot.stop_timing(), cannot.peak_memory()) == (False, None, {}, {})
    assert cannot.flops_per_sample(get_spec("resnet50"), "debug", None) is None
    slow = Fault(rank=0, size=1, env={"HVDBENCH_INJECT_COMPUTE_DELAY_S": "0.1"})
    with pytest.raises(ConfigError) as e:
        Loop(run_cfg(tmp_path), dist=None, trainer=cannot, events=None, fault=slow, ds=None, global_batch=8,
             peak_lr=0.1)
    assert str(e.value) == ("HVDBENCH_INJECT_COMPUTE_DELAY_S: this framework's trainer cannot delay its compute "
                            "(PyTorch's can)")
    with pytest.raises(NotImplementedError, match="Trainer.train_step"):
        cannot.train_step([])
