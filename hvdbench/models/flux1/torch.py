"""Flux.1's MMDiT in PyTorch with diffusers: single-device code (Horovod, DDP or FSDP2 is applied in
hvdbench/frameworks/torch/).

    from hvdbench.contracts import get_spec
    with torch.device("meta"):
        model = build(get_spec("flux1").flavor("full"))      # 11,891,178,560 parameters
    model = build(get_spec("flux1").flavor("debug"), num_classes=10, image_size=8)
    loss, stats = loss_and_stats(model, on_device(batch, device))

The network is diffusers' FluxTransformer2DModel in MLPerf's configuration (torchtitan's
"flux-schnell" FluxModel: 19 double-stream and 38 single-stream blocks, 24 heads of 128, 64 input
channels, T5 states of 4096 and a pooled CLIP vector of 768, RoPE axes (16, 56, 56), no guidance
embedding), initialised as torchtitan initialises it (`init_weights`: adaLN-Zero modulations and a
zero output layer).

Training (`model.training`) is rectified flow as the reference's train.py: per sample t ~ U(0, 1) and
Gaussian noise, x_t = (1 - t) x0 + t noise (on the 2 x 2-packed latents), and the transformer
regresses the velocity noise - x0 (MSE); 10 % of the captions are replaced by the empty one (the
reference's classifier-free-guidance drop). Each rank draws its own timesteps, noise and drops (a
generator seeded from the run's seed and the rank). x0 and the condition come from either kind:

- `flux_latents` (the full flavor, MLPerf's setting): x0 is drawn from the stored latent mean and
  log-variance (already shifted and scaled, data.py); the condition is the stored T5 states and
  pooled CLIP vector; the empty caption is the encoders' output for "" that `prepare flux-latents`
  stores beside the shards (zeros on synthetic data).
- `images` (the debug flavor: `hvdbench prepare digits --size 8`): x0 is the grey digit in [-1, 1]
  (1 channel, packed into 2 x 2 patches: 16 tokens of 4 channels, as Flux packs its latents; the
  pixels stand in for the VAE's latents); the condition is the label's learned embeddings (t5_len
  tokens of t5_dim and one pooled vector of clip_dim: the labels stand in for T5 and CLIP). The
  empty caption is an extra learned "class".

Evaluation (`not model.training`) is the reference's validation loss (metric.py): the same loss at
t = i / 8 for the sample's timestep index i (the `timestep` field of flux_latents data; images
data has none, so every validation digit is evaluated at all 8, which keeps the counts equal and the
estimate steadier), with noise (and the latent draw) seeded by the sample's own bytes and i, so the
value does not depend on the evaluation's round nor on how many ranks share the split.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import torch
from torch import nn

from hvdbench.frameworks.torch import vision

vision.ensure_torchvision()  # diffusers imports torchvision when it is installed

from diffusers import FluxTransformer2DModel  # noqa: E402

from hvdbench.errors import ConfigError, DatasetError  # noqa: E402
from hvdbench.frameworks.torch.recipe import clip_to_groups, fused  # noqa: E402

PATCH = 2  # Flux packs 2 x 2 latent pixels into one token
TIMESTEPS = 8  # the validation loss's t = i / 8


# --- the network -------------------------------------------------------------------------------

def transformer_config(cfg, channels: int, t5_dim: int, clip_dim: int) -> dict:
    """FluxTransformer2DModel's arguments for a flavor: `channels` latent channels packed 2 x 2."""
    return {"patch_size": 1, "in_channels": channels * PATCH * PATCH, "num_layers": cfg.layers,
            "num_single_layers": cfg.single_layers, "attention_head_dim": cfg.head_dim,
            "num_attention_heads": cfg.heads, "joint_attention_dim": t5_dim, "pooled_projection_dim": clip_dim,
            "guidance_embeds": cfg.guidance_embeds, "axes_dims_rope": tuple(cfg.axes_dims_rope)}


class Flux(nn.Module):
    def __init__(self, cfg, channels: int, size: int, t5_len: int, t5_dim: int, clip_dim: int,
                 num_classes: int | None, rank: int = 0):
        super().__init__()
        self.cfg, self.channels, self.size = cfg, channels, size
        self.t5_len, self.t5_dim, self.clip_dim = t5_len, t5_dim, clip_dim
        self.rank = rank  # seeds this rank's stream of timesteps, noise and caption drops
        self.transformer = FluxTransformer2DModel(**transformer_config(cfg, channels, t5_dim, clip_dim))
        if cfg.gradient_checkpointing:
            self.transformer.enable_gradient_checkpointing()
        # images: the caption of class k is learned (row num_classes: the empty caption).
        self.num_classes = num_classes
        if num_classes:
            self.captions = nn.Embedding(num_classes + 1, t5_len * t5_dim)
            self.pooled = nn.Embedding(num_classes + 1, clip_dim)
        # flux_latents: the empty caption's (T5 states, CLIP vector), float32 on the host; kept out of
        # the module's state (not trained, not sharded, unaffected by building on the meta device).
        self.empty: tuple[torch.Tensor, torch.Tensor] | None = None
        self._rng: torch.Generator | None = None

    @property
    def conditioning(self) -> str:
        return "labels" if self.num_classes else "text"

    def generator(self, device: torch.device) -> torch.Generator:
        """This rank's stream (seeded from the run's seed and the rank): with the global generator,
        which every rank seeds alike, all ranks would draw the same timesteps and noise."""
        if self._rng is None or self._rng.device != device:
            self._rng = torch.Generator(device=device)
            self._rng.manual_seed((torch.initial_seed() * 1_000_003 + self.rank) % 2**63)
        return self._rng

    def condition(self, batch: dict, drop: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(sequence (B, t5_len, t5_dim), pooled (B, clip_dim)); `drop` (B,) bools empty the caption."""
        if self.num_classes:
            labels = batch["labels"].long()
            if drop is not None:
                labels = torch.where(drop, torch.full_like(labels, self.num_classes), labels)
            return self.captions(labels).view(len(labels), self.t5_len, self.t5_dim), self.pooled(labels)
        seq, pooled = batch["t5"].float(), batch["clip"].float()
        if drop is not None:
            empty_seq, empty_pooled = self.empty_caption(seq.device)
            seq = torch.where(drop.view(-1, 1, 1), empty_seq, seq)
            pooled = torch.where(drop.view(-1, 1), empty_pooled, pooled)
        return seq, pooled

    def empty_caption(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """The empty caption's (T5 states, CLIP vector) on `device` (copied there once)."""
        if self.empty is None:  # synthetic data: no encoder ran, zeros stand for ""
            self.empty = (torch.zeros(self.t5_len, self.t5_dim), torch.zeros(self.clip_dim))
        if self.empty[0].device != device:
            self.empty = (self.empty[0].to(device), self.empty[1].to(device))
        return self.empty

    def forward(self, x_t: torch.Tensor, t: torch.Tensor, seq: torch.Tensor, pooled: torch.Tensor) -> torch.Tensor:
        """The predicted velocity of packed latents x_t (B, tokens, 4 x channels) at times t (B,) in [0, 1]."""
        grid = self.size // PATCH
        img_ids = torch.zeros(grid, grid, 3, device=x_t.device)
        img_ids[..., 1] = torch.arange(grid, device=x_t.device).view(-1, 1)  # row
        img_ids[..., 2] = torch.arange(grid, device=x_t.device).view(1, -1)  # column
        txt_ids = torch.zeros(seq.shape[1], 3, device=x_t.device)  # text tokens sit at position 0
        return self.transformer(hidden_states=x_t, encoder_hidden_states=seq, pooled_projections=pooled,
                                timestep=t, img_ids=img_ids.view(-1, 3), txt_ids=txt_ids, return_dict=False)[0]


def build(cfg, num_classes: int | None = None, image_size: int | None = None,
          latent_channels: int | None = None, latent_size: int | None = None, t5_len: int | None = None,
          t5_dim: int | None = None, clip_dim: int | None = None, rank: int = 0, **_data_info) -> Flux:
    """The transformer for `images` data (num_classes, image_size: label captions) or for
    `flux_latents` data (the other keys; the flavor's sizes when none is given). `rank`: the
    trainer's (it seeds the rank's timesteps and noise). Works under `torch.device("meta")`."""
    if image_size is not None:
        if cfg.latent_channels != 1:
            raise ConfigError(f"the {cfg.name} flavor trains on flux_latents data (precomputed T5 and CLIP "
                              f"encodings and VAE latents), not on images; use --flavor debug for images")
        if int(image_size) % PATCH:
            raise ConfigError(f"flux1 packs 2 x 2 pixels into a token: the image size must be even, got {image_size}")
        model = Flux(cfg, 1, int(image_size), cfg.t5_len, cfg.t5_dim, cfg.clip_dim, int(num_classes), rank)
    else:
        size = int(latent_size or cfg.latent_size)
        if size % PATCH:
            raise ConfigError(f"flux1 packs 2 x 2 latent pixels into a token: latent_size must be even, got {size}")
        model = Flux(cfg, int(latent_channels or cfg.latent_channels), size, int(t5_len or cfg.t5_len),
                     int(t5_dim or cfg.t5_dim), int(clip_dim or cfg.clip_dim), None, rank)
    init_weights(model)
    return model


def _xavier(linears: list[nn.Linear]) -> None:
    """Xavier-uniform over the stack of `linears` as one matrix (torchtitan's fused qkv, or the
    single block's linear1 = q, k, v and the MLP's input), biases zero."""
    fan_in = linears[0].in_features
    fan_out = sum(layer.out_features for layer in linears)
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    for layer in linears:
        nn.init.uniform_(layer.weight, -bound, bound)
        if layer.bias is not None:
            nn.init.zeros_(layer.bias)


def _normal(linears: list[nn.Linear], std: float = 0.02) -> None:
    for layer in linears:
        nn.init.normal_(layer.weight, std=std)
        nn.init.zeros_(layer.bias)


def _zero(linears: list[nn.Linear]) -> None:
    for layer in linears:
        nn.init.zeros_(layer.weight)
        nn.init.zeros_(layer.bias)


@torch.no_grad()
def init_weights(model: Flux) -> None:
    """torchtitan's FluxModel.init_weights on diffusers' modules (also what fills a model built on the
    meta device once FSDP has given it memory): Xavier-uniform for the input projections, attention
    (q, k, v as one matrix, as torchtitan fuses them) and MLPs, N(0, 0.02) for the timestep and pooled
    text embedders, zero for every adaLN modulation and the output layer (each block starts as the
    identity and the network predicts zero), unit RMSNorm scales. The label captions (images data)
    are N(0, 1)."""
    tr = model.transformer
    _xavier([tr.x_embedder])
    _xavier([tr.context_embedder])
    embed = tr.time_text_embed
    _normal([embed.timestep_embedder.linear_1, embed.timestep_embedder.linear_2,
             embed.text_embedder.linear_1, embed.text_embedder.linear_2])
    if hasattr(embed, "guidance_embedder"):
        _normal([embed.guidance_embedder.linear_1, embed.guidance_embedder.linear_2])
    for block in tr.transformer_blocks:
        attn = block.attn
        _xavier([attn.to_q, attn.to_k, attn.to_v])
        _xavier([attn.add_q_proj, attn.add_k_proj, attn.add_v_proj])
        _xavier([attn.to_out[0]])
        _xavier([attn.to_add_out])
        for ff in (block.ff, block.ff_context):
            _xavier([ff.net[0].proj])
            _xavier([ff.net[2]])
        _zero([block.norm1.linear, block.norm1_context.linear])
        for norm in (attn.norm_q, attn.norm_k, attn.norm_added_q, attn.norm_added_k):
            norm.reset_parameters()
    for block in tr.single_transformer_blocks:
        attn = block.attn
        _xavier([attn.to_q, attn.to_k, attn.to_v, block.proj_mlp])
        _xavier([block.proj_out])
        _zero([block.norm.linear])
        for norm in (attn.norm_q, attn.norm_k):
            norm.reset_parameters()
    _zero([tr.norm_out.linear, tr.proj_out])
    if model.num_classes:
        nn.init.normal_(model.captions.weight)
        nn.init.normal_(model.pooled.weight)


def shard_units(model: Flux) -> list[nn.Module]:
    """The blocks FSDP2 shards one by one: the 19 double-stream and 38 single-stream blocks."""
    return [*model.transformer.transformer_blocks, *model.transformer.single_transformer_blocks]


# --- data, loss and the validation loss ----------------------------------------------------------

def on_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """uint8 NHWC images (grey, repeated over 3 channels) -> one float channel in [-1, 1]; float16
    encodings and latents -> float32."""
    out = dict(batch)
    if "images" in batch:
        out["pixels"] = batch["images"][..., 0].unsqueeze(1).float().div_(127.5).sub_(1.0)
    for name in ("t5", "clip", "latent_mean", "latent_logvar"):
        if name in batch:
            out[name] = batch[name].float()
    return out


def pack(x: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) -> (B, H/2 x W/2, C x 2 x 2): the reference's pack_latents (tokens in row-major
    order, channels as (c, ph, pw))."""
    b, c, h, w = x.shape
    x = x.view(b, c, h // PATCH, PATCH, w // PATCH, PATCH).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (h // PATCH) * (w // PATCH), c * PATCH * PATCH)


def clean_sample(batch: dict, eps: torch.Tensor | None) -> torch.Tensor:
    """x0: the image, or a latent drawn from the stored distribution: mean + exp(logvar / 2) x eps."""
    if "pixels" in batch:
        return batch["pixels"]
    return batch["latent_mean"] + torch.exp(0.5 * batch["latent_logvar"]) * eps


def flow_loss(model: Flux, x0: torch.Tensor, noise: torch.Tensor, t: torch.Tensor, seq: torch.Tensor,
              pooled: torch.Tensor) -> torch.Tensor:
    """Per-sample rectified-flow loss: mean over the latent of (v(x_t, t) - (noise - x0))^2."""
    tt = t.view(-1, 1, 1, 1)
    x_t = (1.0 - tt) * x0 + tt * noise
    pred = model(pack(x_t), t, seq, pooled)
    return (pred.float() - pack(noise - x0).float()).pow(2).mean(dim=(1, 2))


def train_loss(model: Flux, batch: dict) -> torch.Tensor:
    device = next(iter(v for v in batch.values() if torch.is_tensor(v))).device
    rng = model.generator(device)
    shape = batch["pixels"].shape if "pixels" in batch else batch["latent_mean"].shape
    n = shape[0]
    eps = None if "pixels" in batch else torch.randn(shape, device=device, generator=rng)
    x0 = clean_sample(batch, eps)
    t = torch.rand(n, device=device, generator=rng)
    noise = torch.randn(shape, device=device, generator=rng)
    drop = torch.rand(n, device=device, generator=rng) < model.cfg.caption_dropout
    seq, pooled = model.condition(batch, drop)
    return flow_loss(model, x0, noise, t, seq, pooled).mean()


def sample_seeds(batch: dict) -> list[int]:
    """One seed per validation sample from its own bytes (and label): the same sample gets the same
    noise at every evaluation, on whatever rank reads it."""
    keys = (batch["images"] if "images" in batch else batch["latent_mean"]).detach().cpu().numpy()
    labels = batch["labels"].detach().cpu().numpy().astype(np.int64) if "labels" in batch else None
    seeds = []
    for i in range(len(keys)):
        seed = zlib.crc32(np.ascontiguousarray(keys[i]).tobytes())
        if labels is not None:
            seed = zlib.crc32(labels[i].tobytes(), seed)
        seeds.append(seed)
    return seeds


def seeded_normal(seeds: list[int], index: torch.Tensor, shape: tuple[int, ...], stream: int) -> torch.Tensor:
    """(len(seeds), *shape) standard normals, row k from (seeds[k], index[k], stream)."""
    rows = [torch.randn(shape, generator=torch.Generator().manual_seed(
        zlib.crc32(np.array([int(i), stream], np.int64).tobytes(), s))) for s, i in zip(seeds, index.tolist())]
    return torch.stack(rows)


def validation_losses(model: Flux, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """(per-item losses, their timestep indices): each sample at its `timestep` (flux_latents), or
    each at all 8 (images)."""
    device = next(iter(v for v in batch.values() if torch.is_tensor(v))).device
    seeds = sample_seeds(batch)
    n = len(seeds)
    if "timestep" in batch:
        index = batch["timestep"].long().cpu()
        rows = torch.arange(n)
    else:  # every sample at every timestep: item k is sample k // 8 at index k % 8
        index = torch.arange(TIMESTEPS).repeat(n)
        rows = torch.arange(n).repeat_interleave(TIMESTEPS)
    seeds = [seeds[r] for r in rows.tolist()]
    rows = rows.to(device)
    if "pixels" in batch:
        x0 = batch["pixels"][rows]
    else:
        shape = tuple(batch["latent_mean"].shape[1:])
        eps = seeded_normal(seeds, index, shape, stream=1).to(device)
        x0 = clean_sample({k: batch[k][rows] for k in ("latent_mean", "latent_logvar")}, eps)
    noise = seeded_normal(seeds, index, tuple(x0.shape[1:]), stream=0).to(device)
    seq, pooled = model.condition({k: v[rows] for k, v in batch.items() if k in ("labels", "t5", "clip")})
    t = index.to(device=device, dtype=torch.float32) / TIMESTEPS
    return flow_loss(model, x0, noise, t, seq, pooled), index.to(device)


def loss_and_stats(model: Flux, batch: dict[str, torch.Tensor]):
    """Training: (rectified-flow MSE, {}). Evaluation: (the mean validation loss, per-timestep sums
    and counts for metric.TimestepLoss)."""
    if model.training:
        return train_loss(model, batch), {}
    losses, index = validation_losses(model, batch)
    sums = torch.zeros(TIMESTEPS, device=losses.device, dtype=torch.float64).index_add_(0, index, losses.double())
    counts = torch.bincount(index, minlength=TIMESTEPS).double()
    samples = len(batch["labels"] if "labels" in batch else batch["latent_mean"])
    return losses.mean(), {"timestep_loss": sums.detach(), "timestep_count": counts, "samples": samples}


# --- the optimizer ------------------------------------------------------------------------------

def load_empty_caption(model: Flux, data) -> None:
    """The empty caption's encodings that `prepare flux-latents` stored beside the shards."""
    from pathlib import Path

    from hvdbench.data.manifest import inside, read_manifest
    from hvdbench.files import file_sha256

    manifest = read_manifest(Path(data))
    entry = manifest.get("empty_caption")
    if not entry:
        return  # synthetic or foreign data: zeros stand for the empty caption
    path = Path(data) / inside(entry.get("file"), f"{Path(data) / 'manifest.json'}: empty_caption.file")
    if not path.is_file() or file_sha256(path) != entry.get("sha256"):
        raise DatasetError(f"{path}: missing or changed since the dataset was prepared (the empty caption's "
                           f"encodings); prepare the dataset again")
    with np.load(path) as arrays:
        model.empty = (torch.from_numpy(arrays["t5"].astype(np.float32)),
                       torch.from_numpy(arrays["clip"].astype(np.float32)))


def param_groups(model: Flux, cfg) -> list[dict]:
    """Every trainable parameter in one group with the run's weight decay (the reference's AdamW
    decays biases and norms too), carrying the gradient clipping limit (see AdamW). The first hook
    that sees the run's data: where the empty caption's encodings are loaded."""
    if model.conditioning == "text" and not getattr(cfg, "synthetic", False) and getattr(cfg, "data", None):
        load_empty_caption(model, cfg.data)
    return [{"params": [p for p in model.parameters() if p.requires_grad], "weight_decay": cfg.weight_decay,
             "max_grad_norm": model.cfg.grad_clip}]


class AdamW(torch.optim.AdamW):
    """torch's AdamW that first clips the global gradient norm to the groups' `max_grad_norm` (the
    reference's max_norm 1.0; frameworks/torch/recipe.clip_to_groups, sharded gradients included).
    Under Horovod the DistributedOptimizer subclasses this class and steps after its allreduce, so
    the clipping sees the averaged gradients, as the reference's does."""

    def step(self, closure=None):
        clip_to_groups(self)
        return super().step(closure)


def make_optimizer(groups: list[dict], cfg):
    """The reference's AdamW: betas (0.9, 0.95), epsilon 1e-8 (torchtitan's), weight decay from the groups."""
    if cfg.optimizer != "adamw":
        raise ConfigError(f"optimizer {cfg.optimizer!r}: flux1 trains with its reference's adamw")
    return AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=cfg.weight_decay, **fused(cfg))
