"""The GPU levers (issue 37), each an option that also runs on CPUs, checked against the eager,
unfused, masked reference they replace:

- attention="varlen" (BERT): every sequence of a packed row attends alone through nested tensors;
  the same losses, per-sequence numbers and gradients as the boolean-mask path (1e-5);
- --fused-optimizer: LAMB's compiled update and torch's fused SGD/AdamW against their foreach
  updates over steps with a changing learning rate (1e-6 relative);
- --compile (BERT: each encoder layer, no graph break on data-dependent sizes; with varlen
  attention under ddp and fsdp, LAMB's compiled update, which compiles once, under horovod),
  --channels-last, --overlap-copies, fused SGD: a one-process trainer under horovod, ddp and fsdp against the same run
  plain: the loss after 3 steps agrees within 1e-4 relative with compile (inductor reorders the
  sums), 1e-5 without, and compile_s is measured only when something compiled.

The compiles take ~3 minutes on a busy 2-core machine with inductor's cache empty, ~20 s with it.

    .venv/bin/python -m pytest tests/unit/test_levers.py
"""

import numpy as np
import pytest
import torch

from hvdbench.contracts import get_spec
from hvdbench.errors import ConfigError
from hvdbench.frameworks.torch.train import compile_mode
from hvdbench.models.bert import torch as bert
from hvdbench.models.bert.data import BERT
from hvdbench.train.config import resolve
from hvdbench.train.options import resolve_train_args

pytestmark = pytest.mark.usefixtures("torch_one_thread")

BERT_SPEC = get_spec("bert")
DEBUG = BERT_SPEC.flavor("debug")
VOCAB = 300


# --- the options -------------------------------------------------------------------------------


def test_the_levers_reach_train_set_and_layout_settings(tmp_path):
    base = {"model": "resnet50", "flavor": "debug", "synthetic": True, "out": str(tmp_path / "o")}
    cfg = resolve(base)
    assert (cfg.compile, cfg.fused_optimizer, cfg.attention, cfg.channels_last, cfg.overlap_copies) == \
        ("auto", False, "mask", False, False)  # ResNet-50 compiles where it wins (GPUs); the rest: CPUs' best
    assert resolve({**base, "model": "bert"}).compile == "off"
    cfg = resolve_train_args("bert", ["--synthetic", "--compile", "max-autotune", "--fused-optimizer",
                                      "--attention", "varlen", "--channels-last", "--overlap-copies"], out="o")
    assert (cfg.compile, cfg.fused_optimizer, cfg.attention, cfg.channels_last, cfg.overlap_copies) == \
        ("max-autotune", True, "varlen", True, True)
    assert resolve_train_args("resnet50", ["--synthetic", "--set", "compile=reduce-overhead"], out="o").compile == \
        "reduce-overhead"
    assert resolve(base, layout={"fused_optimizer": True}).fused_optimizer


@pytest.mark.parametrize("given, said", [
    ({"compile": "fast"}, "compile 'fast' is not one of off, auto, default, max-autotune, reduce-overhead"),
    ({"attention": "flash"}, "attention 'flash' is not one of mask, varlen"),
    ({"framework": "tensorflow", "compile": "default", "channels_last": True},
     "compile, channels_last: levers of the PyTorch trainer; --framework tensorflow has none"),
    ({"model": "bert", "compile": "reduce-overhead", "attention": "varlen"},
     "--compile reduce-overhead replays the step's kernels as CUDA graphs, which needs a static step; "
     "--attention varlen's sizes change with every batch"),
])
def test_levers_that_cannot_apply_are_one_line(tmp_path, given, said):
    with pytest.raises(ConfigError) as e:
        resolve({"model": "resnet50", "flavor": "debug", "synthetic": True, "out": str(tmp_path), **given})
    assert said in str(e.value) and "\n" not in str(e.value)


def test_compile_auto_compiles_on_a_gpu_only_cuda_graphs_need_one_and_tensorflow_is_asked_nothing(tmp_path):
    assert compile_mode("auto", torch.device("cuda", 0)) == "default"
    assert compile_mode("auto", torch.device("cpu")) == "off"
    assert compile_mode("max-autotune", torch.device("cpu")) == "max-autotune"  # asked for: done anywhere
    assert compile_mode("reduce-overhead", torch.device("cuda", 0)) == "reduce-overhead"
    with pytest.raises(ConfigError) as e:  # torch.compile would compile without CUDA graphs, and say nothing
        compile_mode("reduce-overhead", torch.device("cpu"))
    assert "--compile reduce-overhead captures the step in CUDA graphs, which need a CUDA GPU; this rank trains " \
           "on cpu" in str(e.value) and "\n" not in str(e.value)
    assert resolve({"model": "bert", "flavor": "debug", "synthetic": True, "out": str(tmp_path),
                    "compile": "reduce-overhead"}).compile == "reduce-overhead"  # mask attention: a static step
    cfg = resolve({"model": "resnet50", "flavor": "debug", "synthetic": True, "out": str(tmp_path),
                   "framework": "tensorflow"})  # ResNet-50's default auto is no lever TensorFlow refuses
    assert cfg.compile == "auto"


# --- BERT: variable-length attention = the block-diagonal mask --------------------------------


# Three of them fit a 128-token row, and they are long enough for a leak across a row's sequences to
# show (synthetic instances take Wikipedia's lengths: 43 % of them under 16 tokens at 48).
LENGTHS = np.array([40, 30, 44, 48, 36])


def synthetic(n, max_seq_len=48, seed=0):
    """`n` (at most 5) random instances of LENGTHS' lengths, as the `bert` kind makes them."""
    info = {"vocab_size": VOCAB, "max_seq_len": max_seq_len, "max_predictions": DEBUG.max_predictions}
    return {k: torch.from_numpy(v) for k, v in BERT.instances(LENGTHS[:n], info, np.random.default_rng(seed)).items()}


def packed(b, groups, length=128, slots=3):
    """Rows of `b` packed by hand as `hvdbench prepare pack` writes them (tests/unit/test_bert_model.py)."""
    from test_bert_model import pack

    return pack(b, groups, length, slots)


def twins(seed=0):
    """The same weights under both attentions; weights far from BERT's 0.02 init, so that attention
    is far from uniform and a leak across sequences would show."""
    torch.manual_seed(seed)
    mask = bert.build(DEBUG, vocab_size=VOCAB)
    with torch.no_grad():
        for p in mask.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.15)
    varlen = bert.build(DEBUG, vocab_size=VOCAB, attention="varlen")
    varlen.load_state_dict(mask.state_dict())
    return mask, varlen


@pytest.mark.parametrize("layout", ["unpacked", "packed"])
def test_varlen_attention_gives_the_masks_losses_and_gradients(layout):
    mask, varlen = twins()
    b = synthetic(5, seed=3)
    batch = b if layout == "unpacked" else packed(b, [[0, 1, 2], [3, 4]])
    with torch.no_grad():
        for key, value in bert.sequence_losses(mask, batch).items():
            torch.testing.assert_close(bert.sequence_losses(varlen, batch)[key], value, atol=1e-5, rtol=1e-5)
    real = batch["input_mask"] > 0  # padding positions hold different (unread) values
    torch.testing.assert_close(varlen(batch)["hidden"][real], mask(batch)["hidden"][real], atol=1e-5, rtol=1e-5)
    for model in (mask, varlen):
        bert.loss_and_stats(model, batch)[0].backward()
    for (name, p), q in zip(mask.named_parameters(), varlen.parameters()):
        torch.testing.assert_close(q.grad, p.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_varlen_keeps_a_packed_rows_sequences_apart():
    """Negative control: the same rows with every token marked as one sequence (input_mask 1)
    change the later sequences' losses under varlen: the test above can fail."""
    _, varlen = twins()
    batch = packed(synthetic(5, seed=3), [[0, 1, 2], [3, 4]])
    merged = {**batch, "input_mask": (batch["input_mask"] > 0).int()}
    with torch.no_grad():
        good = bert.sequence_losses(varlen, batch)["mlm_loss_sum"]
        bad = bert.sequence_losses(varlen, merged)["mlm_loss_sum"]
    later = batch["packed_input_len"] > 0
    later[:, 0] = False
    assert ((good - bad).abs()[later] > 1e-2).all()


def test_varlen_trains_with_attention_dropout_under_bf16():
    torch.manual_seed(0)
    cfg = type(DEBUG)(**{**DEBUG.__dict__, "attention_dropout": 0.1})
    model = bert.build(cfg, vocab_size=VOCAB, attention="varlen").train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, stats = bert.loss_and_stats(model, packed(synthetic(5, seed=3), [[0, 1, 2], [3, 4]]))
    loss.backward()
    assert torch.isfinite(loss) and model.layers[0].attention.qkv.weight.grad.abs().sum() > 0


def test_varlen_keeps_the_references_attention_dropout():
    """varlen is the reference model, not one without attention dropout: with only attention dropout
    on, two training forwards differ under both attentions (and two evaluation forwards do not)."""
    cfg = type(DEBUG)(**{**DEBUG.__dict__, "attention_dropout": 0.5, "dropout": 0.0})
    batch = packed(synthetic(5, seed=3), [[0, 1, 2], [3, 4]])
    for attention in ("mask", "varlen"):
        model = bert.build(cfg, vocab_size=VOCAB, attention=attention)
        for training, differ in ((True, True), (False, False)):
            model.train(training)
            with torch.no_grad():
                first, second = model(batch)["hidden"], model(batch)["hidden"]
            assert bool((first - second).abs().max() > 1e-3) is differ, (attention, training)


def test_varlen_attention_for_a_network_without_it_is_refused(tmp_path):
    from hvdbench.frameworks.torch.train import run_keywords
    from hvdbench.models.resnet50 import torch as resnet

    base = {"model": "resnet50", "flavor": "debug", "synthetic": True, "out": str(tmp_path), "attention": "varlen"}
    with pytest.raises(ConfigError, match="--attention varlen: resnet50's network has no attention to choose"):
        resolve(base)  # as the run's configuration resolves, before any network is built (a sweep's check)
    cfg = resolve({**base, "model": "bert"})
    with pytest.raises(ConfigError, match="--attention varlen: bert's network has no attention to choose"):
        run_keywords(resnet.build, None, cfg)
    assert run_keywords(bert.build, None, cfg) == {"attention": "varlen"}


def test_an_unknown_attention_is_refused():
    with pytest.raises(ConfigError, match="bert: attention 'flex' is not one of mask, varlen"):
        bert.build(DEBUG, vocab_size=VOCAB, attention="flex")


# --- fused optimizers = their foreach updates -------------------------------------------------


def steps(make, n=4, seed=0):
    """`n` steps of a fresh optimizer (from `make(params)`) on fixed random gradients, the learning
    rate changing every step as a warm-up ramp does; the parameters after them."""
    torch.manual_seed(seed)
    params = [torch.nn.Parameter(torch.randn(shape)) for shape in ((7, 5), (5,), (3, 2, 2))]
    opt = make(params)
    for i in range(n):
        for p in params:
            p.grad = torch.randn_like(p)
        for group in opt.param_groups:
            group["lr"] = 0.01 * (i + 1)
        opt.step()
    return [p.detach().clone() for p in params]


def test_compiled_lamb_is_lambs_update_and_compiles_once():
    """One group (trust ratio, weight decay and clipping on), its update compiled on the first step
    (~15 s on a CPU here); the steps after it, whose step count and learning rate change, compile
    nothing more (dynamo told to fail on a recompile; the count and rate were Python numbers, baked
    into the graph, before they were 0-d tensors: a second compile)."""
    def lamb(compiled):
        return lambda ps: bert.Lamb([{"params": ps, "weight_decay": 0.01, "max_grad_norm": 1.0}], lr=0.01,
                                    compiled=compiled)

    torch._dynamo.reset()
    first = steps(lamb(True), n=1)
    with torch._dynamo.config.patch(error_on_recompile=True):
        fused = steps(lamb(True))  # the same shapes: the graph compiled above, whatever the step and rate
    for a, b in zip(first, steps(lamb(False), n=1)):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    for fused, plain in zip(fused, steps(lamb(False))):
        torch.testing.assert_close(fused, plain, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["sgd", "adamw"])
def test_torchs_fused_update_is_its_foreach_update(tmp_path, name):
    from hvdbench.frameworks.torch.hooks import make_optimizer

    def make(fused):
        cfg = resolve({"model": "resnet50", "flavor": "debug", "synthetic": True, "out": str(tmp_path),
                       "fused_optimizer": fused, "optimizer": name})
        return lambda ps: make_optimizer([{"params": ps, "weight_decay": 1e-3}], cfg)

    assert make(True)([torch.nn.Parameter(torch.zeros(1))]).param_groups[0]["fused"]
    for fused, plain in zip(steps(make(True)), steps(make(False))):
        torch.testing.assert_close(fused, plain, rtol=1e-6, atol=1e-6)


# --- the trainer: levers on against off, one process under each engine ------------------------


@pytest.fixture(scope="module", params=["horovod", "ddp", "fsdp"])
def one_rank(request):
    """A one-process `Dist` of the engine (Horovod's, or a torch.distributed group of one), once per
    module and engine: Horovod cannot start again in a process once it has shut down (MPI_Finalize)."""
    from hvdbench.frameworks.torch.train import init_dist

    dist = init_dist(threads=1, engine=request.param)
    yield request.param, dist
    dist.shutdown()


def loss_after(one_rank, model, steps=3, flavor=None, **levers):
    """The loss on a fixed synthetic batch after `steps` optimizer steps of the debug flavor (or
    `flavor`, a config of its size: a forward with gradients on, as training runs it: no recompile
    for a grad-free mode), and the trainer's compile_s."""
    from hvdbench.frameworks.torch.train import Trainer

    engine, dist = one_rank
    cfg = resolve({"model": model, "flavor": "debug", "synthetic": True, "out": "unused", "engine": engine,
                   "batch_per_gpu": 4, **levers})
    spec = get_spec(model)
    flavor = flavor or spec.flavor("debug")
    info = spec.synthetic_info(flavor)
    trainer = Trainer(cfg, spec.framework_module("torch"), flavor, info, dist)
    batch = trainer.device_batch(spec.kinds[0].synthetic(4, info, np.random.default_rng(0)))
    trainer.set_lr(0.01)
    for _ in range(steps):
        trainer.train_step([batch])
    loss, _ = trainer.net(batch)
    return loss.item(), trainer.compile_s


def test_one_rank_has_no_communication_to_expose(one_rank):
    """One rank has no collective to wait for: ddp and fsdp probe nothing and record no exposed
    communication (the probe's noise read as 10.7 ms of it under ddp, issue 50), and ddp wraps no
    DistributedDataParallel."""
    from hvdbench.frameworks.torch.train import Trainer

    engine, dist = one_rank
    cfg = resolve({"model": "resnet50", "flavor": "debug", "synthetic": True, "out": "unused", "engine": engine,
                   "batch_per_gpu": 4})
    spec = get_spec("resnet50")
    flavor = spec.flavor("debug")
    info = spec.synthetic_info(flavor)
    trainer = Trainer(cfg, spec.framework_module("torch"), flavor, info, dist)
    batch = trainer.device_batch(spec.kinds[0].synthetic(4, info, np.random.default_rng(0)))
    trainer.set_lr(0.01)
    trainer.start_timing([batch])
    trainer.train_step([batch])
    totals = trainer.stop_timing()
    # no unsynchronised probe: the step's compute is not split into compute and a wait for no one
    assert trainer.unsynced_s is None and totals["compute"] > 0
    # nor a DDP reducer at one rank (as Horovod's optimizer registers no hooks there): its hooks cost
    # 15 % of a small step's CPU time (benchmarks/bench_train.py --clock cpu)
    assert not isinstance(trainer.net, torch.nn.parallel.DistributedDataParallel)


def test_channels_last_fused_and_overlapped_copies_train_as_plain(one_rank):
    plain, compile_s = loss_after(one_rank, "resnet50")
    levers, _ = loss_after(one_rank, "resnet50", channels_last=True, fused_optimizer=True, overlap_copies=True)
    assert levers == pytest.approx(plain, rel=1e-5) and compile_s is None


def test_compiled_bert_with_compiled_lamb_trains_as_eager(one_rank):
    """Each encoder layer compiled (regional) against the eager, foreach reference: the loss after 3
    steps within 1e-4 (inductor sums in another order). Under horovod the reference's mask attention
    with LAMB's compiled update (the optimizer Horovod rebuilds from the groups; under ddp it is the
    same update, ~30 s more to compile on a CPU; over FSDP2's sharded (DTensor) parameters its two
    groups took 64 s to compile on this loaded 2-core machine, and gave the eager loss within 3e-7);
    under ddp and fsdp varlen attention, eager inside the compiled layers."""
    eager, compile_s = loss_after(one_rank, "bert")
    torch._dynamo.reset()  # compile under this engine, not with what another engine's test compiled
    horovod = one_rank[0] == "horovod"
    compiled, compiled_s = loss_after(one_rank, "bert", compile="default", attention="mask" if horovod else "varlen",
                                      fused_optimizer=horovod)
    assert compiled == pytest.approx(eager, rel=1e-4)
    assert compile_s is None and compiled_s > 0


def test_llm_levers_train_as_eager(one_rank):
    """llama31_8b's debug flavor: full activation checkpointing and the chunked loss (under fsdp also
    without resharding after forward) against the plain run, the loss after 3 steps within 1e-5
    relative; under fsdp, regional compile (each decoder layer) with full checkpointing and the
    chunked loss within 1e-4 (inductor sums in another order; the other engines compile the same
    layers). Every layer checkpointed, the two layers are one graph: 51 s with inductor's cache empty
    on the busy 2-core machine (selective checkpointing's two graphs: 73 s)."""
    engine = one_rank[0]
    plain, plain_s = loss_after(one_rank, "llama31_8b")
    levers, levers_s = loss_after(one_rank, "llama31_8b", activation_checkpointing="full", loss_chunks=4,
                                  **({"fsdp_reshard_after_forward": False} if engine == "fsdp" else {}))
    assert levers == pytest.approx(plain, rel=1e-5) and plain_s is None and levers_s is None
    if engine == "fsdp":
        torch._dynamo.reset()
        compiled, compiled_s = loss_after(one_rank, "llama31_8b", compile="default", loss_chunks=4,
                                          activation_checkpointing="full")
        assert compiled == pytest.approx(plain, rel=1e-4) and compiled_s > 0


def test_lora_base_levers_train_as_eager(one_rank):
    """llama2_lora's debug flavor: its base's full activation checkpointing and the chunked loss
    over the summary tokens against the plain run, the loss after 3 steps within 1e-5 relative
    (LoRA's dropout on: checkpointing replays its masks); under ddp, regional compile (each decoder
    layer, adapters included) within 1e-4 of eager without LoRA's dropout, whose masks inductor
    draws from a generator of its own."""
    import dataclasses

    # The debug flavor's rows at 64 tokens, not 256: what checkpointing and the chunks change does
    # not depend on the length, and the steps cost a quarter.
    short = dataclasses.replace(get_spec("llama2_lora").flavor("debug"), max_len=64)
    plain, _ = loss_after(one_rank, "llama2_lora", flavor=short)
    levers, levers_s = loss_after(one_rank, "llama2_lora", flavor=short, activation_checkpointing="full", loss_chunks=4)
    assert levers == pytest.approx(plain, rel=1e-5) and levers_s is None
    if one_rank[0] == "ddp":
        still = dataclasses.replace(short, lora_dropout=0.0)
        eager, _ = loss_after(one_rank, "llama2_lora", flavor=still, activation_checkpointing="full")
        torch._dynamo.reset()
        compiled, compiled_s = loss_after(one_rank, "llama2_lora", flavor=still, compile="default",
                                          activation_checkpointing="full")
        assert compiled == pytest.approx(eager, rel=1e-4) and compiled_s > 0


@pytest.mark.parametrize("attention", ["mask", "varlen"])
def test_a_compiled_bert_layer_breaks_on_no_data_dependent_size(attention):
    """--compile compiles BERT's encoder layers one by one; dynamo traces a training layer (on packed
    rows) as one graph with the mask; with varlen, around its attention only, which it is told to
    leave eager (its sizes are the data's: inside the graph they broke it, at `aten.nonzero`, `.item()`
    and SDPA's nested tensors)."""
    model = bert.build(DEBUG, vocab_size=VOCAB, attention=attention).train()
    assert bert.compile_units(model) == list(model.layers)
    mask = packed(synthetic(5, seed=3), [[0, 1, 2], [3, 4]])["input_mask"].long()
    allowed = bert.Sequences(mask) if attention == "varlen" else (mask[:, :, None] == mask[:, None, :]).unsqueeze(1)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model.layers[0])(torch.randn(*mask.shape, DEBUG.hidden), allowed)
    reasons = [b.reason for b in explained.break_reasons]
    if attention == "mask":
        assert (explained.graph_count, explained.graph_break_count) == (1, 0), reasons
    else:
        assert reasons and all("torch.compiler.disable" in r and "Sequences.attend" in r for r in reasons), reasons


def test_regional_compile_compiles_each_decoder_layer_not_the_step():
    from hvdbench.frameworks.torch.engines import LossModule
    from hvdbench.frameworks.torch.train import compile_regions
    from hvdbench.models.llama31_8b import torch as llama

    model = llama.build(get_spec("llama31_8b").flavor("debug"))
    net = LossModule(model, llama.loss_and_stats)
    before = [layer.forward for layer in model.model.layers]
    compile_regions(net, llama.compile_units, model, "default")
    assert net._compiled_call_impl is None  # the step itself stays eager
    for layer, forward in zip(model.model.layers, before):
        assert layer.forward is not forward and getattr(layer.forward, "_torchdynamo_orig_callable", None) == forward
    compile_regions(net, None, model, "default")  # a model without compile_units: the whole step
    assert net._compiled_call_impl is not None
