"""llama2_lora: exact Llama-2 sizes on the meta device, the fused qkv equal to transformers' own
attention, adapters the only trainable (and optimised) parameters, a batch that learns, the
cosine schedule, the 70b refusal, and the data: the docstring corpus, GovReport-style JSON lines,
prompt masking, the base checkpoint carried by the dataset.

    .venv/bin/python -m pytest tests/unit/test_llama2_lora.py
"""

import json
import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.utils.checkpoint import checkpoint

from hvdbench.frameworks.torch.vision import ensure_torchvision

ensure_torchvision()  # before peft, which imports torchvision (hvdbench/frameworks/torch/vision.py)
import peft  # noqa: E402,F401  (installed by `make setup`: a missing one fails, not skips)

from hvdbench.contracts import RunFacts, get_kind, get_spec
from hvdbench.data.readers import open_dataset
from hvdbench.data.verify import verify
from hvdbench.errors import ConfigError, DatasetError
from hvdbench.families.translation import tokens
from hvdbench.models.llama2_lora import (
    ADAPTER_PARAMETERS,
    BASE_PARAMETERS,
    FLAVORS,
    Pretraining,
    corpus,
    warmup_steps,
)
from hvdbench.models.llama2_lora import torch as L
from hvdbench.models.llama2_lora.cli import lm_base as lm_base_command
from hvdbench.models.llama2_lora.data import BASE_FILE, BOS, EOS, IGNORE, PAD, SUMMARIES
from hvdbench.models.llama2_lora.prepare import (
    PROMPT_HEAD,
    PROMPT_TAIL,
    SummaryOptions,
    prepare_lm_base,
    prepare_summaries,
)
from hvdbench.train.config import resolve

SPEC = get_spec("llama2_lora")
pytestmark = pytest.mark.usefixtures("torch_one_thread")  # tests/conftest.py: small tensors, a shared machine
TINY = replace(FLAVORS["debug"], layers=2, hidden=32, intermediate=64, heads=4, kv_heads=2, vocab_size=300,
               max_len=24)


def run_cfg(**kw):
    """The TrainConfig fields the model folder reads."""
    values = {"data": "", "precision": "fp32", "weight_decay": 1e-4, "decay_power": 1.0, "end_lr": 0.0,
              "optimizer": "adamw", "lr": 4e-3}
    return SimpleNamespace(**{**values, **kw})


def batch_of(n=4, vocab=300, length=24, seed=0):
    arrays = SUMMARIES.synthetic(n, {"vocab_size": vocab, "max_len": length}, np.random.default_rng(seed))
    return {k: torch.from_numpy(v) for k, v in arrays.items()}


# --- sizes ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("flavor, count", [("7b", 6_738_415_616), ("13b", 13_015_864_320),
                                           ("70b", 68_976_648_192)])
def test_the_llama2_sizes_are_exact_on_the_meta_device(flavor, count):
    """Llama-2's published counts (transformers' LlamaForCausalLM, 32,000 tokens, untied): fusing q, k
    and v into one qkv_proj keeps them; the adapters are r 16 on qkv_proj and o_proj (70b: the
    reference's 44.6M)."""
    cfg = FLAVORS[flavor]
    base = L.build_base(cfg, device="meta")
    assert sum(p.numel() for p in base.parameters()) == count == BASE_PARAMETERS[flavor]
    model = L.add_adapters(base, cfg)
    adapters = sum(p.numel() for p in model.parameters() if p.requires_grad)
    qkv_out = cfg.hidden + 2 * cfg.kv_heads * (cfg.hidden // cfg.heads)
    per_layer = cfg.lora_rank * (cfg.hidden + qkv_out) + cfg.lora_rank * 2 * cfg.hidden
    assert adapters == cfg.layers * per_layer == ADAPTER_PARAMETERS[flavor]
    assert SPEC.parameters[flavor] == adapters  # what a run trains, allreduces and records
    assert ADAPTER_PARAMETERS["70b"] == 44_564_480


def test_the_debug_flavor_builds_with_its_counts():
    model = L.build(SPEC.flavor("debug"), vocab_size=4000, max_len=256)
    assert sum(p.numel() for p in model.parameters()) == 1_352_832 == BASE_PARAMETERS["debug"] + 49_152
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == SPEC.parameters["debug"] == 49_152


def test_70b_builds_on_the_meta_device_for_fsdp_with_the_reference_counts():
    """--engine fsdp builds the 70b flavor on the meta device (SPEC.build_on_meta) and shards it; the
    build itself no longer refuses (the engine decides, SPEC.refuse)."""
    import torch

    assert SPEC.build_on_meta == ("70b",)
    with torch.device("meta"):
        model = L.build(SPEC.flavor("70b"))
    assert all(p.is_meta for p in model.parameters())
    assert sum(p.numel() for p in model.parameters() if not p.requires_grad) == BASE_PARAMETERS["70b"]
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == SPEC.parameters["70b"] == 44_564_480
    assert len(L.shard_units(model)) == 80


def test_70b_is_refused_by_train_sweep_and_study_before_anything_starts(tmp_path):
    """The spec's `refuse` hook, called by config.validate: `train` resolves through it, and a sweep
    (and a study's sweeps) resolve every layout through it before launching or writing anything."""
    from hvdbench.sweep.build import build_spec
    from hvdbench.sweep.options import SweepOptions
    from hvdbench.train.config import resolve

    with pytest.raises(ConfigError) as e:
        build_spec(SweepOptions(tmp_path / "sw", "llama2_lora", ("--flavor", "70b", "--synthetic"), hosts="localhost:2"))
    message = str(e.value)
    assert "llama2_lora/70b cannot run under --engine horovod" in message
    assert "\n" not in message and not (tmp_path / "sw").exists()
    for words in ("68.98B", "138 GB", "--engine fsdp", "8 x 80 GB", "--flavor 7b or 13b"):
        assert words in message
    with pytest.raises(ConfigError, match="llama2_lora/70b cannot run under --engine ddp.*--engine fsdp"):
        resolve({"model": "llama2_lora", "flavor": "70b", "synthetic": True, "engine": "ddp",
                 "out": str(tmp_path / "t")})
    # fsdp shards it: the spec lets it through; the layout's GPUs decide (the worker's memory check)
    assert SPEC.refuse(resolve({"model": "llama2_lora", "flavor": "70b", "synthetic": True, "engine": "fsdp",
                                "out": str(tmp_path / "t")}), {}) is None
    for flavor in ("debug", "7b", "13b"):  # one replica per rank: not refused here
        assert SPEC.refuse(resolve({"model": "llama2_lora", "flavor": flavor, "synthetic": True,
                                    "out": str(tmp_path / "t")}), {}) is None


def test_the_memory_check_counts_the_frozen_base_and_names_the_flavor_that_fits():
    """A LoRA run holds its frozen base (in the run's precision) beside the adapters it trains; the
    spec's exact counts let the worker check before building a 7B base."""
    from hvdbench.train import memory

    assert memory.exact_counts(SPEC, "7b") == (ADAPTER_PARAMETERS["7b"], BASE_PARAMETERS["7b"])
    run = SimpleNamespace(flavor="7b", framework="torch", batch_per_gpu=1, precision="bf16", optimizer="adamw", engine="horovod")
    bf16 = memory.estimate(SPEC, run)
    fp32 = memory.estimate(SPEC, memory.run_of(run, precision="fp32"))
    assert fp32.fixed - bf16.fixed == 2 * BASE_PARAMETERS["7b"]  # the base in 4 bytes, not 2
    assert bf16.fixed > 2 * BASE_PARAMETERS["7b"] and bf16.per_sample > 0
    with pytest.raises(ConfigError) as e:
        memory.check_fits(SPEC, run, local_ranks=1, available=16 * 10**9)
    assert "\n" not in str(e.value)
    assert str(e.value).startswith("llama2_lora/7b (torch, horovod) needs ~18.4 GB for batch 1 per rank")
    assert str(e.value).endswith("try --flavor debug")
    memory.check_fits(SPEC, SimpleNamespace(**{**vars(run), "flavor": "debug"}), local_ranks=1, available=16 * 10**9)


def test_the_70b_layer_flavor_is_refused_on_a_cpu_for_its_activations():
    """Issue 57 case 13: 70b-4l on a 24 GB CPU machine was not refused (its 7.9 GB base fits, its 8,192-token
    rows' activations were not counted) and printed nothing for minutes."""
    from hvdbench.train import memory

    run = SimpleNamespace(flavor="70b-4l", framework="torch", batch_per_gpu=1, precision="bf16", optimizer="adamw",
                          engine="horovod")
    assert memory.estimate(SPEC, run).fixed < 24 * 10**9  # the base alone fits
    with pytest.raises(ConfigError, match=r"^llama2_lora/70b-4l \(torch, horovod\) needs ~2\d\.\d GB for batch 1 per "
                                          r"rank, and this machine has 24.0 GB available per rank"):
        memory.check_fits(SPEC, run, local_ranks=1, available=24 * 10**9)


# --- the network ----------------------------------------------------------------------------------

def test_fused_qkv_computes_what_transformers_attention_computes():
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    plain = LlamaForCausalLM(L.llama_config(TINY)).eval()
    fused = L.build_base(TINY, device="cpu").eval()
    state = {}
    for key, value in plain.state_dict().items():
        if ".q_proj." in key:
            prefix = key.split(".q_proj.")[0]
            state[f"{prefix}.qkv_proj.weight"] = torch.cat(
                [plain.state_dict()[f"{prefix}.{p}.weight"] for p in ("q_proj", "k_proj", "v_proj")])
        elif ".k_proj." not in key and ".v_proj." not in key:
            state[key] = value
    fused.load_state_dict(state)
    ids = torch.randint(4, TINY.vocab_size, (2, 10))
    with torch.no_grad():
        assert torch.allclose(plain(ids).logits, fused(ids).logits, atol=1e-5)


def test_only_the_adapters_are_trained_and_handed_to_the_optimizer():
    """What Horovod's DistributedOptimizer averages is what the optimizer holds: the 16 adapter
    tensors of the debug flavor (4 layers x qkv/o x A/B), never a base weight; the base gets no
    gradient at all."""
    model = L.build(SPEC.flavor("debug"), vocab_size=4000, max_len=256)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert len(trainable) == 16 and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    assert {n.split(".self_attn.")[1].split(".")[0] for n in trainable} == {"qkv_proj", "o_proj"}
    groups = L.param_groups(model, run_cfg())
    in_optimizer = {id(p) for g in groups for p in g["params"]}
    assert in_optimizer == {id(p) for p in model.parameters() if p.requires_grad}
    assert sum(p.numel() for g in groups for p in g["params"]) == 49_152
    loss, _ = L.loss_and_stats(model, batch_of(vocab=4000, length=32))
    loss.backward()
    for name, p in model.named_parameters():
        assert (p.grad is not None) == (name in trainable), name
    # lora_B starts at zero, so every adapter's B gets a gradient at once
    assert all(p.grad.abs().sum() > 0 for n, p in model.named_parameters() if ".lora_B." in n)


def test_loss_counts_summary_tokens_only():
    model = L.build(TINY).eval()
    batch = batch_of()
    loss, stats = L.loss_and_stats(model, batch)
    assert stats["count"] == int((batch["labels"] != IGNORE).sum())
    assert float(stats["loss_sum"]) / stats["count"] == pytest.approx(float(loss.detach()))
    # The prompt's tokens change nothing but what the summary is conditioned on; a label set to
    # IGNORE drops out of the count.
    batch["labels"][0, -1] = IGNORE
    assert L.loss_and_stats(model, batch)[1]["count"] == stats["count"] - 1


def test_a_batch_is_learnt():
    """The adapters alone steer a frozen base to the batch's summaries (here one repeated token). A
    random base's tied output layer at its initial scale (std 0.02) caps every logit near 0.6, so the
    test scales it up: it stands for a base whose output layer has been trained."""
    torch.manual_seed(0)
    model = L.build(TINY)
    with torch.no_grad():
        model.get_base_model().model.embed_tokens.weight.mul_(50)
    cfg = run_cfg(lr=1e-2)
    opt = L.make_optimizer(L.param_groups(model, cfg), cfg)
    batch = batch_of()
    summary = batch["labels"] != IGNORE
    batch["input_ids"][summary] = batch["labels"][summary] = 7
    losses = []
    for _ in range(30):
        loss, _ = L.loss_and_stats(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[0] > 5 and losses[-1] < 0.1, losses


def test_bf16_base_with_checkpointing_trains_adapters_in_fp32():
    """The Llama-2 flavors' path, at a tiny size: a bf16 base (built so), activation checkpointing,
    bf16 autocast, fp32 adapters and optimizer."""
    cfg = replace(FLAVORS["7b"], layers=2, hidden=32, intermediate=64, heads=4, kv_heads=2, vocab_size=300,
                  max_len=24)
    resolved = resolve({"model": "llama2_lora", "flavor": "7b", "synthetic": True, "out": "o"})
    assert resolved.activation_checkpointing == "full"  # the Llama-2 flavors' default, as the reference's
    model = L.build(cfg, activation_checkpointing=resolved.activation_checkpointing)
    assert all(layer.forward.func is checkpoint for layer in model.get_base_model().model.layers)
    run = run_cfg(precision="bf16")
    opt = L.make_optimizer(L.param_groups(model, run), run)
    assert {p.dtype for p in model.parameters() if not p.requires_grad} == {torch.bfloat16}
    assert {p.dtype for p in model.parameters() if p.requires_grad} == {torch.float32}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, _ = L.loss_and_stats(model.train(), batch_of())
    loss.backward()
    opt.step()
    assert math.isfinite(float(loss.detach()))


def test_an_fp32_run_of_a_bf16_flavor_gets_an_fp32_base():
    cfg = replace(FLAVORS["13b"], layers=1, hidden=32, intermediate=64, heads=4, kv_heads=4, vocab_size=300)
    model = L.build(cfg)
    L.param_groups(model, run_cfg(precision="fp32"))
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_adamw_clips_and_turns_the_linear_decay_into_the_reference_cosine():
    p = torch.nn.Parameter(torch.zeros(4))
    group = {"params": [p], "weight_decay": 0.0, "max_grad_norm": 0.3, "cosine": True, "end_lr": 0.0, "peak_lr": 0.0}
    opt = L.AdamW([group], lr=1.0, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    peak, steps = 4e-3, 10
    for step in range(steps):
        linear = peak * (1 - step / steps)  # what the shared schedule hands over (decay_power 1)
        opt.param_groups[0]["lr"] = linear
        p.grad = torch.full((4,), 10.0)
        opt.step()
        assert opt.param_groups[0]["lr"] == pytest.approx(peak * 0.5 * (1 + math.cos(math.pi * step / steps)))
        assert p.grad.norm() == pytest.approx(0.3)  # clipped before the update


def test_only_adamw():
    with pytest.raises(ConfigError, match="adamw"):
        L.make_optimizer([{"params": [torch.nn.Parameter(torch.zeros(1))]}], run_cfg(optimizer="sgd"))


def test_mllog_keys_of_the_closed_division():
    cfg = run_cfg(flavor="7b")
    values = SPEC.mllog_values(cfg, RunFacts(8, 4e-4, None, 1024, 0))
    assert values == {"lora_rank": 16, "lora_alpha": 32, "opt_gradient_clip_norm": 0.3,
                      "opt_adamw_weight_decay": 1e-4}
    assert SPEC.benchmark == "llama2_70b_lora" and SPEC.mlperf_target == 0.925
    assert not SPEC.metric.higher_is_better and SPEC.metric.reached(5.9, SPEC.target("debug"))


# --- the kind and its data -------------------------------------------------------------------------

def test_synthetic_samples_are_full_length_with_the_prompt_masked():
    arrays = SUMMARIES.synthetic(16, {"vocab_size": 32000, "max_len": 64}, np.random.default_rng(1))
    assert get_kind("summaries") is SUMMARIES
    ids, labels = arrays["input_ids"], arrays["labels"]
    assert ids.shape == labels.shape == (16, 64) and (arrays["length"] == 64).all()
    assert (ids[:, 0] == BOS).all() and (ids[:, -1] == EOS).all()
    for row_ids, row_labels in zip(ids, labels):
        start = int(np.argmax(row_labels != IGNORE))
        assert 8 <= 64 - start <= 16  # an eighth to a quarter of the sequence is summary
        assert (row_labels[:start] == IGNORE).all() and (row_labels[start:] == row_ids[start:]).all()


def test_docstrings_split_into_body_and_summary():
    body = " ".join(["word"] * 25)
    assert corpus.docstring_pair(f"Do the thing.\n\n{body}") == (body, "Do the thing.")
    assert corpus.docstring_pair(f"Two-line\nsummary.\n\n{body}") is None  # not a one-line summary
    assert corpus.docstring_pair("Only a summary.") is None
    assert corpus.docstring_pair("Summary.\n\nToo short a body.") is None
    source = f'"""Module summary.\n\n{body}\n"""\nclass A:\n    """Class summary.\n\n    {body}\n    """\n'
    assert [s for _, s in corpus.source_pairs(source.encode())] == ["Module summary.", "Class summary."]
    assert corpus.source_pairs(b"def broken(:") == []


# Parsing the standard library is most of these two tests' time (corpus.py caches it per process): one
# pytest-xdist worker runs both (`make test`'s --dist loadgroup), so it is parsed once.
STDLIB_PARSE = pytest.mark.xdist_group("stdlib-docstrings")


@STDLIB_PARSE
def test_the_stdlib_corpus_is_real_and_without_test_suites():
    found = corpus.stdlib_pairs()
    assert 1500 <= len(found["pairs"]) <= 2500  # 1,900 on CPython 3.11
    assert len({s for _, s in found["pairs"]}) > 0.9 * len(found["pairs"])
    assert all(20 <= len(b.split()) <= 300 and "\n" not in s for b, s in found["pairs"])


def test_jsonl_pairs_and_their_errors(tmp_path):
    good = tmp_path / "gov.jsonl"
    good.write_text('{"input": "The report.", "output": "Its summary."}\n\n'
                    '{"report": "Another.", "summary": "Short."}\n', encoding="utf-8")
    assert corpus.read_jsonl(good) == [("The report.", "Its summary."), ("Another.", "Short.")]
    for text, expected in (('{"input": "x"}\n', "gov.jsonl:1: needs a document"),
                           ('[1, 2]\n', "gov.jsonl:1: not a JSON object"),
                           ('{"input": "a", "output": "b"}\nnot json\n', "gov.jsonl:2: not a JSON object")):
        good.write_text(text, encoding="utf-8")
        with pytest.raises(DatasetError, match=expected):
            corpus.read_jsonl(good)
    with pytest.raises(DatasetError, match="no such file"):
        corpus.read_jsonl(tmp_path / "missing.jsonl")
    with pytest.raises(DatasetError, match="unknown built-in corpus"):
        corpus.load("builtin:nothing")


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    """A base made by the real `prepare_lm_base` with two steps of pre-training (seconds)."""
    out = tmp_path_factory.mktemp("lm-base")
    info = prepare_lm_base(out, seq_len=32, training=Pretraining(steps=2, batch=4, warmup=1, threads=1))
    return out, info


def test_the_commands_defaults_are_the_pretraining_defaults():
    """One set of defaults: `prepare lm-base` without options pre-trains as Pretraining() does (before,
    the command said 300 steps and one thread while the dataclass said 1,200 and PyTorch's default)."""
    given = {p.name: p.default for p in lm_base_command.params}
    assert Pretraining(steps=given["steps"], batch=given["batch"], lr=given["lr"], warmup=warmup_steps(given["steps"]),
                       seed=given["seed"], threads=given["threads"]) == Pretraining()
    assert (warmup_steps(300), warmup_steps(10), warmup_steps(1200)) == (15, 1, 60)


def test_lm_base_writes_weights_tokenizer_and_what_it_is(tiny_base):
    out, info = tiny_base
    assert {p.name for p in out.iterdir()} == {"base.safetensors", "base.json", "tokenizer.json", "vocab.txt"}
    assert info["config"] == L.architecture(replace(FLAVORS["debug"], vocab_size=4000))
    assert "not Meta's" in info["note"] and info["parameters"] == BASE_PARAMETERS["debug"]
    assert json.loads((out / "base.json").read_text())["weights_sha256"] == info["weights_sha256"]
    # A rerun with the same options finds it done; other options are refused.
    assert prepare_lm_base(out, seq_len=32, training=Pretraining(steps=2, batch=4, warmup=1, threads=1)) == info
    with pytest.raises(DatasetError, match="other options"):
        prepare_lm_base(out, seq_len=32, training=Pretraining(steps=3, batch=4, warmup=1, threads=1))


def write_jsonl(path, pairs):
    path.write_text("".join(json.dumps({"input": d, "output": s}) + "\n" for d, s in pairs), encoding="utf-8")
    return str(path)


def test_summaries_from_jsonl_mask_the_prompt(tiny_base, tmp_path):
    base, _ = tiny_base
    long_doc = " ".join(["The agency reviewed the program and found gaps."] * 20)
    train = [(f"Report {k}: the office audited {k} accounts and found errors.", f"Audit {k} found errors.")
             for k in range(12)] + [(long_doc, "Gaps were found."), ("Short.", " ".join(["summary"] * 80))]
    val = [("The committee met twice and approved the budget.", "The budget was approved.")]
    out = tmp_path / "gov"
    manifest = prepare_summaries(write_jsonl(tmp_path / "train.jsonl", train), out, base=base,
                                 val_src=write_jsonl(tmp_path / "val.jsonl", val), opts=SummaryOptions(max_len=64))
    assert manifest["kind"] == "summaries" and (manifest["vocab_size"], manifest["max_len"]) == (4000, 64)
    # The long document is cut to fit; the pair whose summary alone does not fit is dropped.
    assert manifest["truncated_documents"] == {"train": 1, "val": 0}
    assert manifest["dropped_too_long"] == {"train": 1, "val": 0}
    assert (manifest["splits"]["train"]["samples"], manifest["splits"]["val"]["samples"]) == (13, 1)
    assert "not Meta's" in manifest["base"]["note"] and (out / BASE_FILE).is_file()
    assert not verify(out).problems

    tok = tokens.load_tokenizer(out / "tokenizer.json")
    ds = open_dataset(out)
    batch = next(iter(ds.loader("val", 1, shuffle=False, drop_last=False)))
    ids, labels, n = batch["input_ids"][0], batch["labels"][0], int(batch["length"][0])
    answer = labels != IGNORE
    start = int(np.argmax(answer))
    # -100 on BOS, the prompt and the padding; the summary's tokens and EOS are their own labels.
    assert (labels[:start] == IGNORE).all() and (labels[n:] == IGNORE).all() and answer[start:n].all()
    assert (labels[start:n] == ids[start:n]).all() and ids[n - 1] == EOS and (ids[n:] == PAD).all()
    assert ids[0] == BOS
    assert tok.decode(ids[1:start].tolist()) == PROMPT_HEAD + val[0][0] + PROMPT_TAIL
    assert tok.decode(ids[start:n - 1].tolist()) == " " + val[0][1]
    assert manifest["summary_tokens"]["val"] == n - start

    # The base travels with the dataset: the network loads it from --data, checked by sha256.
    model = L.build(SPEC.flavor("debug"), **ds.data_info)
    L.param_groups(model, run_cfg(data=str(out)))
    from safetensors.torch import load_file

    saved = load_file(str(out / BASE_FILE))
    inner = model.get_base_model().state_dict()
    key = "model.layers.0.self_attn.qkv_proj.weight"
    assert torch.equal(inner[key.replace(".weight", ".base_layer.weight")], saved[key])
    assert torch.equal(inner["model.embed_tokens.weight"], saved["model.embed_tokens.weight"])


def test_a_changed_or_mismatched_base_is_refused(tiny_base, tmp_path):
    base, _ = tiny_base
    out = tmp_path / "gov"
    prepare_summaries(write_jsonl(tmp_path / "t.jsonl", [("A report on audits.", "Audits.")] * 4), out, base=base,
                      opts=SummaryOptions(max_len=64, val_fraction=0.25))
    small = L.build(replace(FLAVORS["debug"], layers=2), vocab_size=4000, max_len=64)
    with pytest.raises(DatasetError, match="layers 4 \\(network: 2\\)"):
        L.load_base(small, out)
    with open(out / BASE_FILE, "ab") as f:
        f.write(b"\0")
    with pytest.raises(DatasetError, match="sha256 differs"):
        L.load_base(L.build(SPEC.flavor("debug"), vocab_size=4000, max_len=64), out)


@STDLIB_PARSE
def test_builtin_summaries_count_and_split(tiny_base, tmp_path):
    base, _ = tiny_base
    out = tmp_path / "stdlib"
    manifest = prepare_summaries("builtin:stdlib-docstrings", out, base=base, opts=SummaryOptions(max_len=256))
    pairs = manifest["corpus_pairs"]
    assert 1500 <= pairs <= 2500 and manifest["python"] and manifest["corpus"] == "builtin:stdlib-docstrings"
    splits = manifest["splits"]
    assert splits["train"]["samples"] + splits["val"]["samples"] == pairs  # nothing dropped at 256 tokens
    assert splits["val"]["samples"] == round(0.1 * pairs)
    assert manifest["summary_tokens"]["train"] > 10 * splits["train"]["samples"]
