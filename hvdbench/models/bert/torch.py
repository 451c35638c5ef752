"""BERT for pre-training (masked LM + next sentence), single-device PyTorch code.

    from hvdbench.contracts import get_spec
    from hvdbench.models.bert import torch as bert
    model = bert.build(get_spec("bert").flavor("debug"), vocab_size=2000, max_seq_len=128)
    loss, stats = bert.loss_and_stats(model, batch)   # stats: masked-LM {"correct", "total"}

Post-LayerNorm transformer with GELU and the MLM decoder tied to the word embeddings, as in the
original BERT and MLPerf's reference. A batch is either unpacked (one sequence per row) or packed
(several sequences per row; the fields are in hvdbench/data/packing.py). Packed rows are detected by the
`packed_input_len` field and handled so that every sequence sees exactly what it would see alone:

- attention is block-diagonal: token i attends token j iff input_mask[i] == input_mask[j]. With
  unpacked rows (mask 1/0) the same rule makes real tokens attend only real tokens; padding then
  attends only padding, which keeps every softmax row non-empty (no NaN) and is never read. Two
  ways, the same numbers (`build(..., attention=)`, TrainConfig.attention): "mask" gives SDPA that
  rule as a boolean (B,1,L,L) mask (the reference; on GPUs a mask sends SDPA to a slower kernel
  than flash attention); "varlen" hands SDPA each sequence alone as a nested (jagged) tensor, which
  GPUs run in variable-length flash kernels with no mask and no padding (padding positions then
  hold the attention's bias only; nothing reads them). FlexAttention's document mask would do the
  same on GPUs, but it has no backward on CPUs, where every path here must train;
- position embeddings come from `positions` (restarting at 0 in each sequence);
- next-sentence prediction reads each sequence's own [CLS], found from `packed_input_len`.

Loss definitions (identical for packed and unpacked input holding the same sequences):
masked LM = cross-entropy summed over every real masked token of the batch / number of those
tokens (the standard token mean, the same tokens MLPerf's accuracy counts); next sentence =
cross-entropy averaged over sequences. The training loss is their sum.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn

from hvdbench.errors import ConfigError
from hvdbench.frameworks.torch.recipe import fused
from hvdbench.models.bert import ADAMW_BETAS, ADAMW_EPSILON, LAMB_BETAS, LAMB_EPSILON, LAMB_MAX_GRAD_NORM


class SelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)  # = BERT's query, key, value, fused
        self.out = nn.Linear(cfg.hidden, cfg.hidden)
        self.attention_dropout = cfg.attention_dropout

    def forward(self, x, allowed):
        """`allowed`: the (B,1,L,L) boolean mask, or the rows' Sequences (attention="varlen")."""
        b, l, h = x.shape
        p = self.attention_dropout if self.training else 0.0
        if isinstance(allowed, Sequences):
            return self.out(allowed.attend(self.qkv(x), self.heads, p))
        q, k, v = self.qkv(x).view(b, l, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=p)
        return self.out(ctx.transpose(1, 2).reshape(b, l, h))


class Sequences:
    """Where each sequence of a batch lies among its rows' tokens, for attention="varlen": `tokens`,
    the flat (B*L) index of every non-padding token, in order; `offsets`, where each sequence starts
    among them (and the end). A sequence is a run of equal non-zero input_mask values in one row."""

    def __init__(self, input_mask):
        b, l = input_mask.shape
        flat = input_mask.flatten()
        real = flat != 0
        row_start = torch.arange(b * l, device=flat.device) % l == 0
        starts = real & (row_start | (flat != flat.roll(1)))
        self.shape = (b, l)
        self.tokens = real.nonzero().squeeze(1)  # host syncs once per forward, shared by every layer
        first = starts[self.tokens].nonzero().squeeze(1)
        self.offsets = torch.cat([first, first.new_tensor([len(self.tokens)])])
        # The longest and shortest sequence, known to SDPA up front: it would read them back from the
        # device in every layer, forward and backward.
        lengths = self.offsets.diff().cpu()
        self.longest, self.shortest = int(lengths.max()), int(lengths.min())

    # Left out of a compiled layer (--compile): its sizes are the data's (the tokens kept, each
    # sequence's length), and SDPA over nested tensors on CPUs unbinds them into a list dynamo cannot
    # trace, so inside the layer it broke the graph on data-dependent sizes (and recompiled as they
    # changed). The layer's dense parts compile around it.
    @torch.compiler.disable
    def attend(self, qkv, heads: int, dropout: float):
        """Self-attention of each sequence alone: qkv (B,L,3H) -> context (B,L,H), zero at padding."""
        b, l = self.shape
        h = qkv.size(-1) // 3
        # (3, tokens, heads, head dim), each of q, k, v contiguous: SDPA's nested kernels need it
        picked = qkv.flatten(0, 1).index_select(0, self.tokens).view(-1, 3, heads, h // heads).transpose(0, 1)
        # (sequences, their lengths, heads, head dim) -> SDPA's (sequences, heads, length, head dim)
        q, k, v = (torch.nested.nested_tensor_from_jagged(x, self.offsets, min_seqlen=self.shortest,
                                                          max_seqlen=self.longest).transpose(1, 2)
                   for x in picked.contiguous().unbind(0))
        ctx = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout).transpose(1, 2).values()
        full = ctx.new_zeros(b * l, h).index_copy(0, self.tokens, ctx.reshape(-1, h))
        return full.view(b, l, h)


class Layer(nn.Module):
    """One post-LN encoder layer: x = LN(x + attn(x)); x = LN(x + FFN(x))."""

    def __init__(self, cfg):
        super().__init__()
        self.attention = SelfAttention(cfg)
        self.attention_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.ffn_in = nn.Linear(cfg.hidden, cfg.intermediate)
        self.ffn_out = nn.Linear(cfg.intermediate, cfg.hidden)
        self.ffn_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x, allowed):
        x = self.attention_norm(x + self.dropout(self.attention(x, allowed)))
        return self.ffn_norm(x + self.dropout(self.ffn_out(F.gelu(self.ffn_in(x)))))


class BertForPreTraining(nn.Module):
    def __init__(self, cfg, attention: str = "mask"):
        super().__init__()
        self.cfg = cfg
        self.attention = attention
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden)
        self.position_embeddings = nn.Embedding(cfg.max_positions, cfg.hidden)
        self.segment_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden)
        self.embedding_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.num_layers))
        self.pooler = nn.Linear(cfg.hidden, cfg.hidden)  # tanh(W h_[CLS]) feeds next-sentence
        self.nsp = nn.Linear(cfg.hidden, 2)
        self.mlm_transform = nn.Linear(cfg.hidden, cfg.hidden)
        self.mlm_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        # The decoder's weight is word_embeddings.weight (tied); only its bias is its own.
        self.mlm_bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        self.apply(self._init)

    def _init(self, m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=self.cfg.init_std)
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.bias)

    def encode(self, input_ids, segment_ids, positions, input_mask):
        """Final hidden states (B, L, H); attention never crosses input_mask groups."""
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)
             + self.segment_embeddings(segment_ids))
        x = self.dropout(self.embedding_norm(x))
        if self.attention == "varlen":
            allowed = Sequences(input_mask)
        else:
            allowed = (input_mask[:, :, None] == input_mask[:, None, :]).unsqueeze(1)  # (B,1,L,L)
        for layer in self.layers:
            x = layer(x, allowed)
        return x

    def mlm_logits(self, hidden):
        """Vocabulary logits for hidden states (..., H) through the tied decoder."""
        h = self.mlm_norm(F.gelu(self.mlm_transform(hidden)))
        return h @ self.word_embeddings.weight.t() + self.mlm_bias

    def forward(self, batch):
        """Logits and their validity masks, laid out per prediction and per sequence slot:
        mlm_logits (B,P,V), mlm_labels/mlm_seq (B,P) with mlm_seq = sequence slot of each prediction
        (-1: padding); nsp_logits (B,S,2), nsp_labels/nsp_valid (B,S) (S = 1 unpacked)."""
        ids = batch["input_ids"].long()
        mask = batch["input_mask"].long()
        b, l = ids.shape
        mlm_positions = batch["masked_lm_positions"].long()
        packed = "packed_input_len" in batch
        if packed:
            positions = batch["positions"].long()
            lengths = batch["packed_input_len"].long()  # (B,S), 0 = empty slot
            # Sequence k starts where sequences 0..k-1 end: its [CLS] is at the exclusive cumsum.
            # (Empty slots point past the end when the pack is full: clamp; they are ignored.)
            cls_at = (torch.cumsum(lengths, dim=1) - lengths).clamp(max=l - 1)
            nsp_labels = batch["next_sentence_labels"].long()
            nsp_valid = lengths > 0
            mlm_seq = batch["masked_lm_weights"].long() - 1  # 1-based sequence index, 0 padding
        else:
            positions = torch.arange(l, device=ids.device).expand(b, l)
            cls_at = torch.zeros(b, 1, dtype=torch.long, device=ids.device)
            nsp_labels = batch["next_sentence_labels"].long().view(b, 1)
            nsp_valid = torch.ones(b, 1, dtype=torch.bool, device=ids.device)
            # Position 0 is [CLS], never masked: a 0 position is padding.
            mlm_seq = torch.where(mlm_positions > 0, 0, -1)
        hidden = self.encode(ids, batch["segment_ids"].long(), positions, mask)
        h = hidden.size(-1)
        cls = torch.gather(hidden, 1, cls_at.unsqueeze(-1).expand(-1, -1, h))
        nsp_logits = self.nsp(torch.tanh(self.pooler(cls)))
        picked = torch.gather(hidden, 1, mlm_positions.unsqueeze(-1).expand(-1, -1, h))
        return {
            "hidden": hidden,
            "mlm_logits": self.mlm_logits(picked),
            "mlm_labels": batch["masked_lm_ids"].long(),
            "mlm_seq": mlm_seq,
            "nsp_logits": nsp_logits,
            "nsp_labels": torch.where(nsp_valid, nsp_labels, 0),
            "nsp_valid": nsp_valid,
        }


ATTENTIONS = ("mask", "varlen")


def compile_units(model) -> list[nn.Module]:
    """The encoder layers, which `--compile` compiles one by one (regional compilation: one layer's
    compile, reused by the others of its shape; BERT-large's whole step compiled with varlen had
    not finished compiling in 150 s on an H200, broken at each batch's sequence lengths). With the
    mask, a layer is one graph; with varlen, the dense parts around the attention (Sequences.attend
    stays eager)."""
    return list(model.layers)


def build(cfg, vocab_size: int | None = None, max_seq_len: int | None = None, attention: str = "mask",
          **_) -> nn.Module:
    """The network for a flavor; vocab_size/max_seq_len from the dataset manifest override the
    flavor's (other data_info keys are for other models and are ignored); `attention`: how a row's
    sequences are kept apart (the module's doc)."""
    if attention not in ATTENTIONS:
        raise ConfigError(f"bert: attention {attention!r} is not one of {', '.join(ATTENTIONS)}")
    if vocab_size is not None:
        cfg = replace(cfg, vocab_size=int(vocab_size))
    if max_seq_len is not None and int(max_seq_len) > cfg.max_positions:
        cfg = replace(cfg, max_positions=int(max_seq_len))  # a larger table, same architecture
    if cfg.hidden % cfg.heads:
        raise ConfigError(f"bert: hidden {cfg.hidden} is not a multiple of heads {cfg.heads}")
    return BertForPreTraining(cfg, attention)


def sequence_losses(model, batch):
    """Per sequence slot (B,S): masked-LM cross-entropy summed over its masked tokens, their count,
    correct predictions, next-sentence cross-entropy, and whether the slot holds a sequence."""
    out = model(batch)
    s = out["nsp_logits"].size(1)
    logits, labels, seq = out["mlm_logits"], out["mlm_labels"], out["mlm_seq"]
    valid = seq >= 0
    ce = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), reduction="none")
    ce = torch.where(valid.flatten(), ce, 0.0).view_as(labels)
    hit = ((logits.argmax(-1) == labels) & valid).float()
    # Scatter each prediction's numbers to its sequence slot (padding goes to slot 0 with zeros).
    slot = seq.clamp(min=0)
    zeros = torch.zeros(labels.size(0), s, dtype=ce.dtype, device=ce.device)
    nsp = F.cross_entropy(out["nsp_logits"].flatten(0, 1).float(), out["nsp_labels"].flatten(),
                          reduction="none").view(-1, s)
    return {
        "mlm_loss_sum": zeros.scatter_add(1, slot, ce),
        "mlm_count": zeros.scatter_add(1, slot, valid.float()),
        "mlm_correct": zeros.scatter_add(1, slot, hit),
        "nsp_loss": torch.where(out["nsp_valid"], nsp, 0.0),
        "valid": out["nsp_valid"],
    }


def loss_and_stats(model, batch):
    """Training loss = masked-LM token mean + next-sentence mean over sequences; stats count the
    masked-LM predictions (metric masked_lm_accuracy = correct / total)."""
    per = sequence_losses(model, batch)
    total = per["mlm_count"].sum()
    mlm = per["mlm_loss_sum"].sum() / total.clamp(min=1)
    nsp = per["nsp_loss"].sum() / per["valid"].sum().clamp(min=1)
    stats = {"correct": per["mlm_correct"].sum().detach(), "total": total.detach()}
    return mlm + nsp, stats


# --- the optimizer -----------------------------------------------------------------------------

class Lamb(torch.optim.Optimizer):
    """LAMB (You et al., "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes",
    Algorithm 2) as MLPerf's BERT reference implements it. Per parameter tensor x with gradient g:

        m = b1 m + (1 - b1) g            v = b2 v + (1 - b2) g^2
        r = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + weight_decay x
        x = x - lr * (||x|| / ||r||) * r      (trust ratio 1 where either norm is 0, or adapt=False)

    Group options beside lr, betas, eps, weight_decay: `adapt` (the trust ratio; the reference
    leaves it off LayerNorms and biases, with their weight decay), `max_grad_norm` (> 0: the
    global gradient norm over every group is clipped to it first) and `compiled` (the update
    through torch.compile, --fused-optimizer: its multi-tensor kernels fused into a few; the step
    count and learning rate reach it as 0-d tensors on the device, so each group's update compiles
    on the first step and never again). Under Horovod the
    DistributedOptimizer subclasses this class and rebuilds it from the parameter groups, so every
    option lives in the groups, and the clipping sees gradients already averaged over ranks.

    The moments are created with the optimizer: Horovod's broadcast of an optimizer without state
    would otherwise take a step with zero gradients, which LAMB's weight decay turns into a real
    update of every weight (x shrinks by lr x).
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = LAMB_BETAS,
                 eps: float = LAMB_EPSILON, weight_decay: float = 0.0, adapt: bool = True,
                 max_grad_norm: float = 0.0, compiled: bool = False):
        if not lr > 0 or not 0 <= betas[0] < 1 or not 0 <= betas[1] < 1 or eps < 0 or weight_decay < 0:
            raise ValueError(f"Lamb: invalid lr {lr}, betas {betas}, eps {eps} or weight_decay {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      adapt=adapt, max_grad_norm=max_grad_norm, compiled=compiled))
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = {"step": 0, "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                                 "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}
        self._device_scalars = {}  # id(group) -> its step count and learning rate on the device (compiled)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        limit = max(float(g["max_grad_norm"]) for g in self.param_groups)
        scale = None
        if limit > 0:
            grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
            if grads:
                total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
                scale = (limit / (total + 1e-6)).clamp(max=1.0)  # as torch.nn.utils.clip_grad_norm_
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                self._update(group, params, scale)
        return loss

    def _update(self, group: dict, params: list, scale) -> None:
        """One step of the group's parameters: `lamb_update` on tensor lists (multi-tensor
        "foreach" kernels), compiled when the group says so. On an H100, BERT-large's optimizer
        step takes 20 ms in foreach kernels (a loop over the tensors took 61 ms; torch's AdamW, 10 ms)."""
        states = [self.state[p] for p in params]
        for s in states:
            s["step"] += 1
        steps, lr, update = [s["step"] for s in states], group["lr"], lamb_update
        if group.get("compiled") and len(set(steps)) == 1:  # (a tensor that missed a step: eager)
            # Python numbers would be constants of the compiled graph, recompiled when they change:
            # 0-d tensors on the device are inputs instead, refilled in place (no copy, no sync).
            held = self._device_scalars.setdefault(id(group), torch.zeros(2, device=params[0].device))
            held[0].fill_(steps[0])
            held[1].fill_(lr)
            steps, lr, update = held[0], held[1], compiled_lamb_update
        update(params, [p.grad for p in params], [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states],
               steps, lr, *group["betas"], group["eps"], group["weight_decay"], group["adapt"], scale)


def lamb_update(params, grads, m, v, steps, lr, beta1: float, beta2: float, eps: float,
                weight_decay: float, adapt: bool, scale) -> None:
    """LAMB's update (Lamb's doc) of `params` in place, with their gradients, moments and step
    counts (`steps`: one per tensor, or a 0-d tensor for all of them, as `lr` may be one);
    `scale`: the gradients' clipping factor (a tensor) or None."""
    if isinstance(steps, torch.Tensor):
        bias1, bias2 = 1 - beta1 ** steps, 1 - beta2 ** steps
    else:
        bias1, bias2 = [1 - beta1 ** s for s in steps], [1 - beta2 ** s for s in steps]
    if scale is not None:
        grads = torch._foreach_mul(grads, scale)
    torch._foreach_mul_(m, beta1)
    torch._foreach_add_(m, grads, alpha=1 - beta1)
    torch._foreach_mul_(v, beta2)
    torch._foreach_addcmul_(v, grads, grads, value=1 - beta2)
    denom = torch._foreach_div(v, bias2)
    torch._foreach_sqrt_(denom)
    torch._foreach_add_(denom, eps)
    update = torch._foreach_div(m, bias1)
    torch._foreach_div_(update, denom)
    if weight_decay:
        torch._foreach_add_(update, params, alpha=weight_decay)
    if adapt:
        w_norm = torch.stack(torch._foreach_norm(params))
        u_norm = torch.stack(torch._foreach_norm(update))
        # On the device: no read-back per tensor.
        ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
        torch._foreach_mul_(update, list(ratio.unbind()))
    if isinstance(lr, torch.Tensor):
        torch._foreach_mul_(update, lr)
        lr = 1.0
    torch._foreach_add_(params, update, alpha=-lr)


def compiled_lamb_update(*args) -> None:
    """lamb_update through torch.compile, compiled on its first call for each group (dynamo, then
    inductor), the step count and learning rate given as 0-d tensors (Lamb._update), so that no
    later call compiles again."""
    _compiled_lamb()(*args)


@functools.cache
def _compiled_lamb():
    return torch.compile(lamb_update)  # made on first use: importing the model needs no compiler


def param_groups(model, cfg) -> list[dict]:
    """The reference's split: weight decay and LAMB's trust ratio on weight matrices and
    embeddings, neither on biases and LayerNorms (every 1-d parameter here); LAMB's gradient
    clipping carried by both groups."""
    params = [p for p in model.parameters() if p.requires_grad]
    clip = LAMB_MAX_GRAD_NORM if cfg.optimizer == "lamb" else 0.0
    return [{"params": [p for p in params if p.ndim > 1], "weight_decay": cfg.weight_decay, "adapt": True,
             "max_grad_norm": clip},
            {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0, "adapt": False,
             "max_grad_norm": clip}]


def make_optimizer(groups: list[dict], cfg):
    """LAMB (MLPerf's reference, the default) or AdamW; --fused-optimizer compiles LAMB's update and
    gives AdamW torch's fused kernels."""
    if cfg.optimizer == "lamb":
        return Lamb(groups, lr=cfg.lr, betas=LAMB_BETAS, eps=LAMB_EPSILON, compiled=cfg.fused_optimizer)
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=cfg.lr, betas=ADAMW_BETAS, eps=ADAMW_EPSILON, **fused(cfg))
    raise ConfigError(f"optimizer {cfg.optimizer!r}: bert trains with lamb (MLPerf's reference) or adamw")
