"""Llama-2 with LoRA adapters for summarisation, single-device PyTorch code (transformers + peft).

    from hvdbench.contracts import get_spec
    from hvdbench.models.llama2_lora import torch as llama
    model = llama.build(get_spec("llama2_lora").flavor("debug"), vocab_size=4000, max_len=256)
    llama.load_base(model, "data/summaries")          # param_groups does it in a run
    loss, stats = llama.loss_and_stats(model, batch)  # stats {"loss_sum", "count"}: summary tokens

The base is transformers' `LlamaForCausalLM` built from a `LlamaConfig` (no download), with the
query, key and value projections fused into one `qkv_proj`, as in the MLPerf reference's model
(its checkpoint, regisss/llama2-70b-fused-qkv-mlperf, fuses them), so the adapters sit where the
reference's do. peft's LoRA (r 16, alpha 32, dropout 0.1) goes on `qkv_proj` and `o_proj`; every
base weight is frozen, so `param_groups` hands the optimizer, and through it Horovod's
DistributedOptimizer, the adapters alone: only their gradients are averaged over ranks.

Loss: cross-entropy of the next token, mean over the summary tokens (labels != IGNORE); the
output layer is applied only at those positions (the prompt's logits are never needed). The eval
metric adds the token losses and counts over every batch and rank: the mean eval loss per summary
token.

The language models' levers apply to the base (hvdbench/families/lm/torch.py, as llama31_8b's):
--activation-checkpointing recomputes its decoder layers (full, the Llama-2 flavors' default as the
reference's; selective every other one), --loss-chunks takes the summary tokens' output layer and
loss that many pieces at a time, and --compile compiles each decoder layer (compile_units), adapters
included.

Also here: `pretrain`, what `hvdbench prepare lm-base` runs (the debug flavor's base, trained as a
plain language model on text), and `save_base` / `load_base` for its checkpoint.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import asdict, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from hvdbench.errors import ConfigError, DatasetError
from hvdbench.families.lm import torch as lm
from hvdbench.frameworks import cpu_malloc_settings
from hvdbench.frameworks.torch.recipe import clip_to_groups, flush_denormals, fused, sized
from hvdbench.frameworks.torch.vision import ensure_torchvision
from hvdbench.models.llama2_lora import FLAVORS, Pretraining
from hvdbench.models.llama2_lora.data import BOS, EOS, IGNORE, PAD, base_of

ensure_torchvision()  # transformers and peft import torchvision when it is installed

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
RUN_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# The network's sizes a base checkpoint must match (what base.json's "config" records).
ARCHITECTURE = ("layers", "hidden", "intermediate", "heads", "kv_heads", "vocab_size", "rms_eps", "rope_theta",
                "tie_embeddings")


def architecture(cfg) -> dict:
    return {k: v for k, v in asdict(cfg).items() if k in ARCHITECTURE}


def llama_config(cfg):
    from transformers import LlamaConfig

    if cfg.hidden % cfg.heads or cfg.heads % cfg.kv_heads:
        raise ConfigError(f"llama2_lora: hidden {cfg.hidden} must divide into heads {cfg.heads}, and heads "
                          f"into kv_heads {cfg.kv_heads}")
    config = LlamaConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden, intermediate_size=cfg.intermediate,
        num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads, num_key_value_heads=cfg.kv_heads,
        max_position_embeddings=max(cfg.max_positions, cfg.max_len), rms_norm_eps=cfg.rms_eps,
        rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta},
        tie_word_embeddings=cfg.tie_embeddings, attention_bias=False, mlp_bias=False, use_cache=False,
        pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS)
    # PyTorch's scaled_dot_product_attention: flash / memory-efficient kernels on GPUs.
    config._attn_implementation = "sdpa"
    return config


# --- the fused query-key-value projection ------------------------------------------------------

def _fused_attention_class():
    from transformers.models.llama import modeling_llama as ml

    class FusedQKVAttention(ml.LlamaAttention):
        """LlamaAttention with q_proj, k_proj and v_proj as one Linear, `qkv_proj` (their weights
        stacked in that order): the same function and parameter count, one matmul, and one module
        for LoRA to adapt, as in the MLPerf reference. `forward` is transformers 5's
        LlamaAttention.forward with the three projections replaced by a split of the fused one."""

        @classmethod
        def fuse(cls, attn: ml.LlamaAttention) -> FusedQKVAttention:
            q, k, v = attn.q_proj, attn.k_proj, attn.v_proj
            qkv = nn.Linear(q.in_features, q.out_features + k.out_features + v.out_features, bias=False,
                            device=q.weight.device, dtype=q.weight.dtype)
            with torch.no_grad():
                qkv.weight.copy_(torch.cat([q.weight, k.weight, v.weight]))
            del attn.q_proj, attn.k_proj, attn.v_proj
            attn.qkv_proj = qkv
            attn.split_sizes = (q.out_features, k.out_features, v.out_features)
            attn.__class__ = cls
            return attn

        def forward(self, hidden_states, position_embeddings=None, attention_mask=None, past_key_values=None,
                    **kwargs):
            input_shape = hidden_states.shape[:-1]
            hidden_shape = (*input_shape, -1, self.head_dim)
            q, k, v = self.qkv_proj(hidden_states).split(self.split_sizes, dim=-1)
            query_states = q.view(hidden_shape).transpose(1, 2)
            key_states = k.view(hidden_shape).transpose(1, 2)
            value_states = v.view(hidden_shape).transpose(1, 2)
            cos, sin = position_embeddings
            query_states, key_states = ml.apply_rotary_pos_emb(query_states, key_states, cos, sin)
            if past_key_values is not None:
                key_states, value_states = past_key_values.update(key_states, value_states, self.layer_idx)
            attention_interface = ml.ALL_ATTENTION_FUNCTIONS.get_interface(
                self.config._attn_implementation, ml.eager_attention_forward)
            attn_output, attn_weights = attention_interface(
                self, query_states, key_states, value_states, attention_mask,
                dropout=0.0 if not self.training else self.attention_dropout, scaling=self.scaling, **kwargs)
            attn_output = attn_output.reshape(*input_shape, -1).contiguous()
            return self.o_proj(attn_output), attn_weights

    return FusedQKVAttention


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype):
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def build_base(cfg, device: str | torch.device | None = None):
    """The base network (LlamaForCausalLM with fused qkv, no adapters) in the flavor's base_dtype,
    on `device` (default: the GPU when there is one, so a 13B base is never staged in host memory;
    "meta" counts parameters without allocating them)."""
    from transformers import LlamaForCausalLM

    if device is None:  # inside `with torch.device("meta")` (fsdp's 70b): stay there
        device = ("meta" if torch.get_default_device().type == "meta"
                  else "cuda" if torch.cuda.is_available() else "cpu")
    fused = _fused_attention_class()
    with torch.device(device), _default_dtype(DTYPES[cfg.base_dtype]):
        model = LlamaForCausalLM(llama_config(cfg))
        for layer in model.model.layers:
            fused.fuse(layer.self_attn)
    return model


def add_adapters(base, cfg):
    """peft's LoRA on the flavor's targets; every base weight frozen."""
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules=list(cfg.lora_targets), bias="none")
    with warnings.catch_warnings():
        # peft 0.21 asks transformers 5 a deprecated question (is_gradient_checkpointing): not ours.
        warnings.simplefilter("ignore", FutureWarning)
        model = get_peft_model(base, lora)
    # Adapters in fp32 whatever the base's storage (the optimizer's copy is the weight itself).
    for p in model.parameters():
        if p.requires_grad and p.dtype != torch.float32:
            p.data = p.data.float()
    return model


def init_weights(model) -> None:
    """Values for a model built on the meta device and materialised shard by shard (--engine fsdp,
    ModelSpec.build_on_meta): transformers' own initialisation of the base (normal weights, unit
    norms) and peft's of the adapters (kaiming A, zero B: the adapted model starts as its base)."""
    base = model.get_base_model()
    base.apply(base._init_weights)
    for module in model.modules():
        if hasattr(module, "reset_lora_parameters"):
            for name in module.lora_A:
                module.reset_lora_parameters(name, True)


def shard_units(model) -> list:
    """The base's decoder layers with their adapters (lm.decoder_layers): what --engine fsdp shards
    and --compile compiles one by one (regional compilation), as llama31_8b's."""
    return lm.decoder_layers(model.get_base_model())


compile_units = shard_units


def flavor_name(cfg) -> str:
    return next((name for name, f in FLAVORS.items() if f is cfg), "")


def build(cfg, vocab_size: int | None = None, max_len: int | None = None, activation_checkpointing: str = "none",
          loss_chunks: int = 0, **_):
    """The LoRA model for a flavor (a peft PeftModel around LlamaForCausalLM); vocab_size and
    max_len of a dataset's manifest override the flavor's (the synthetic defaults); the run's
    --activation-checkpointing of the base's decoder layers (non-reentrant: the frozen embeddings'
    output needs no grad) and --loss-chunks (lm.apply_levers). A flavor too large for one GPU (70b)
    runs under --engine fsdp only (SPEC.refuse), which builds it on the meta device and
    materialises each rank's shard (init_weights)."""
    flush_denormals()
    cfg = sized(cfg, vocab_size=vocab_size, max_len=max_len)
    model = add_adapters(build_base(cfg), cfg)
    lm.apply_levers(model, lm.decoder_layers(model.get_base_model()), activation_checkpointing, loss_chunks)
    model.lora_cfg = cfg
    return model


# --- the base checkpoint ------------------------------------------------------------------------

def base_state(base) -> dict[str, torch.Tensor]:
    """The base's weights by name, a tied output layer once (it is the embedding)."""
    state = base.state_dict()
    if base.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    return {k: v.detach().contiguous() for k, v in state.items()}


def save_base(base, path: Path) -> None:
    from safetensors.torch import save_file

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    save_file(base_state(base), str(tmp))
    tmp.replace(path)


def load_base(model, data_dir: str | Path | None) -> bool:
    """Load the base checkpoint a prepared dataset carries into the LoRA model's frozen base (the
    adapters keep their fresh start); False when the dataset has none (synthetic data: the base
    stays random, for throughput). A checkpoint of other sizes than the run's network is an error."""
    from safetensors.torch import load_file

    found = base_of(data_dir)
    if found is None:
        return False
    want = architecture(model.lora_cfg)
    got = {k: found["config"].get(k) for k in want}
    if got != want:
        diff = ", ".join(f"{k} {got[k]} (network: {want[k]})" for k in want if got[k] != want[k])
        raise DatasetError(f"{found['path']}: the base was trained with other sizes than this flavor: {diff}")
    inner = model.get_base_model()
    target = inner.state_dict()
    weights = load_file(str(found["path"]))
    mapped = {}
    for key, value in weights.items():
        # peft keeps an adapted Linear's own weight as `<module>.base_layer.weight`.
        name = key if key in target else key.replace(".weight", ".base_layer.weight")
        if name not in target:
            raise DatasetError(f"{found['path']}: weight {key!r} has no place in the network")
        mapped[name] = value
    missing = [k for k in target if k not in mapped and "lora_" not in k
               and not (k == "lm_head.weight" and inner.config.tie_word_embeddings)]
    if missing:
        raise DatasetError(f"{found['path']}: no weight for {missing[0]!r} ({len(missing)} missing)")
    inner.load_state_dict(mapped, strict=False)
    return True


def cast_base(model, dtype: torch.dtype) -> None:
    """Frozen weights in the run's precision (bf16 runs keep a bf16 base, as the reference; fp32
    runs an fp32 one); the adapters stay fp32."""
    for p in model.parameters():
        if not p.requires_grad and p.is_floating_point() and p.dtype != dtype:
            p.data = p.data.to(dtype)


# --- training ----------------------------------------------------------------------------------

def trim(batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, labels) with the batch's common padding cut off."""
    n = int(batch["length"].max())
    return batch["input_ids"][:, :n].long(), batch["labels"][:, :n].long()


def labelled(model, input_ids: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, object]:
    """(the hidden states of the labelled positions, their next tokens, the base) (labels shifted by
    one, as transformers does): where the output layer is applied, and nowhere else."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    # No attention mask: padding only follows a sequence's last token, which causal attention
    # never lets a real token see (and its labels are IGNORE).
    hidden = inner.model(input_ids=input_ids, use_cache=False).last_hidden_state
    target = labels[:, 1:]
    keep = target != IGNORE
    return hidden[:, :-1][keep], target[keep], inner


def token_losses(model, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each labelled next token, with the output layer applied at those positions only."""
    hidden, target, inner = labelled(model, input_ids, labels)
    return F.cross_entropy(inner.lm_head(hidden).float(), target, reduction="none")


def loss_and_stats(model, batch):
    """(mean loss over the batch's summary tokens, {"loss_sum", "count"} for the eval loss); a model
    built with --loss-chunks > 1 takes their logits and loss that many pieces at a time
    (lm.chunked_cross_entropy: never every summary token's fp32 logits at once)."""
    input_ids, labels = trim(batch)
    chunks = getattr(model, "loss_chunks", 0)
    if chunks > 1:
        hidden, target, inner = labelled(model, input_ids, labels)
        total, count = lm.chunked_cross_entropy(hidden, target, inner.lm_head, chunks), target.numel()
    else:
        losses = token_losses(model, input_ids, labels)
        total, count = losses.sum(), losses.numel()
    return total / max(count, 1), {"loss_sum": total.detach(), "count": count}


def param_groups(model, cfg) -> list[dict]:
    """The first call that sees the run's config: load the dataset's base checkpoint, store the
    frozen base in the run's precision, and give the optimizer the adapters alone (all 2-D: weight
    decay on every one, as the reference's Trainer), each group carrying the clipping limit and the
    schedule's end (see AdamW)."""
    load_base(model, cfg.data)
    cast_base(model, RUN_DTYPES[cfg.precision])
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": params, "weight_decay": cfg.weight_decay, "max_grad_norm": model.lora_cfg.grad_clip,
             "cosine": cfg.decay_power == 1.0, "end_lr": cfg.end_lr, "peak_lr": 0.0}]


class AdamW(torch.optim.AdamW):
    """torch's AdamW with the reference's gradient clipping and cosine decay.

    Clipping: the global norm of the gradients is clipped to the groups' `max_grad_norm` first.
    Under Horovod the DistributedOptimizer subclasses this class, so the clipping sees the
    gradients already averaged over ranks (as the reference's single optimizer does).

    Cosine: hvdbench's shared schedule decays linearly from the peak to end_lr when decay_power is
    1 (its only decay is polynomial). A group with `cosine` turns that linear rate into the cosine
    rate at the same point of the schedule: with f = (lr - end) / (peak - end), the fraction of the
    decay still ahead, the rate is end + (peak - end) (1 - cos(pi f)) / 2; the peak is the largest
    rate the schedule has handed over (a linear warm-up is thus left as it is).
    """

    def step(self, closure=None):
        for group in self.param_groups:
            if group.get("cosine"):
                lr, end = group["lr"], group.get("end_lr", 0.0)
                group["peak_lr"] = peak = max(group.get("peak_lr", 0.0), lr)
                if peak > end:
                    f = min(1.0, max(0.0, (lr - end) / (peak - end)))
                    group["lr"] = end + (peak - end) * (1.0 - math.cos(math.pi * f)) / 2.0
        clip_to_groups(self)
        return super().step(closure)


def make_optimizer(groups: list[dict], cfg):
    """The reference's AdamW (betas 0.9/0.999, epsilon 1e-8: transformers' Trainer defaults)."""
    if cfg.optimizer != "adamw":
        raise ConfigError(f"optimizer {cfg.optimizer!r}: llama2_lora trains with its reference's adamw")
    return AdamW(groups, lr=cfg.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=cfg.weight_decay, **fused(cfg))


# --- pre-training the debug base (hvdbench prepare lm-base) ------------------------------------

def lm_loss(base, windows: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over every position of full windows (no padding)."""
    hidden = base.model(input_ids=windows, use_cache=False).last_hidden_state
    logits = base.lm_head(hidden[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1).float(), windows[:, 1:].flatten())


@torch.no_grad()
def lm_eval(base, windows: torch.Tensor, batch: int) -> float:
    base.eval()
    total = sum(float(lm_loss(base, windows[i:i + batch])) * len(windows[i:i + batch])
                for i in range(0, len(windows), batch))
    base.train()
    return total / max(1, len(windows))


def pretrain(cfg, train, val, training: Pretraining, log=None) -> tuple[object, dict]:
    """Train the base (no adapters) as a language model on token windows (train: (N, T) int32):
    AdamW (0.9, 0.95, weight decay 0.1 off norms) with a linear warm-up and a cosine decay to 0,
    gradient norm clipped to 1, batches drawn at random with `training.seed`. Returns (base, facts)."""
    import time

    import numpy as np

    steps, batch, lr, warmup = training.steps, training.batch, training.lr, training.warmup
    flush_denormals()
    cpu_malloc_settings(on_gpu=False)  # pre-trained on the CPU (build_base below)
    if training.threads:
        torch.set_num_threads(training.threads)
    torch.manual_seed(training.seed)
    base = build_base(replace(cfg, base_dtype="float32"), device="cpu")
    decay = [p for n, p in base.named_parameters() if p.ndim > 1]
    rest = [p for n, p in base.named_parameters() if p.ndim <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95), eps=1e-8)
    train_t, val_t = torch.from_numpy(np.asarray(train)).long(), torch.from_numpy(np.asarray(val)).long()
    rng = np.random.default_rng(training.seed)
    before = lm_eval(base, val_t, 64)
    t0, cpu0 = time.perf_counter(), time.process_time()
    base.train()
    for step in range(steps):
        rate = lr * (step + 1) / warmup if step < warmup else \
            lr * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))
        for g in opt.param_groups:
            g["lr"] = rate
        rows = torch.from_numpy(rng.integers(0, len(train_t), batch))
        loss = lm_loss(base, train_t[rows])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(base.parameters(), 1.0)
        opt.step()
        if log and (step + 1) % max(1, steps // 10) == 0:
            log(f"step {step + 1}/{steps}: train loss {loss.item():.3f}, {time.perf_counter() - t0:.0f} s")
    facts = {"val_loss_before": round(before, 4), "val_loss": round(lm_eval(base, val_t, 64), 4),
             "train_seconds": round(time.perf_counter() - t0, 1),
             "train_cpu_seconds": round(time.process_time() - cpu0, 1), "threads": torch.get_num_threads()}
    return base, facts
