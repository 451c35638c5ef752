"""Stable Diffusion v2's UNet in PyTorch with diffusers: single-device code (Horovod is applied in
frameworks/torch/dist.py).

    from hvdbench.contracts import get_spec
    cfg = get_spec("stable_diffusion").flavor("full")
    model = build(cfg)                                   # 865,910,724 parameters: SD v2's UNet
    model = build(get_spec("stable_diffusion").flavor("debug"), num_classes=10, image_size=8)
    loss, stats = loss_and_stats(model, on_device(batch, device))

Training (`model.training`) is DDPM with v-prediction, as SD v2: a timestep t of SD's 1000
(scaled-linear betas 0.00085..0.012) and Gaussian noise per sample, x_t = sqrt(a_t) x0 +
sqrt(1 - a_t) noise, and the UNet regresses v = sqrt(a_t) noise - sqrt(1 - a_t) x0 (MSE). Each rank
draws its own timesteps and noise (a generator seeded from the run's seed and the rank). x0 and the
condition come from either kind of data:

- `sd_latents` (the full flavor, MLPerf's setting): x0 is a latent drawn from the precomputed VAE
  moments and scaled by 0.18215; the condition is the caption's precomputed text states.
- `images` (the debug flavor: `hvdbench prepare digits --size 8`): x0 is the grey digit in [-1, 1];
  the condition is the label's `tokens_per_class` learned prompt tokens.

A share `prompt_dropout` (10 %) of the conditions is replaced by the empty prompt (an extra learned
"class", or zero text states), so that classifier-free guidance can be used when sampling.

Evaluation (`not model.training`) generates one image per validation sample with DDIM
(`sample_steps`, `guidance`), from noise seeded by that sample's own bytes (the images do not depend
on the number of ranks), and returns the features the FID needs and a per-image score (metric.py):

- `images`: a judge, a small CNN trained in about a second on the real training digits before a
  time-to-accuracy run's first step (`param_groups`; a throughput run, which evaluates nothing,
  trains none), gives the features (its penultimate layer) of the real and generated digits, and
  the score: whether it classifies a generated digit as the prompted label (label agreement, the
  CLIP score's stand-in).
- `sd_latents`: networks the user provides (exported files named by HVDBENCH_SD_VAE_DECODER,
  HVDBENCH_SD_FID_FEATURES and HVDBENCH_SD_CLIP, see the README) decode the val latents and the
  generated ones, give their FID features and the CLIP score against the caption's `clip_text`. A
  time-to-accuracy run without them is refused before anything starts (the folder's `refuse`), or,
  for the debug flavor on such data, before training starts (`param_groups`).
"""

from __future__ import annotations

import os
import warnings
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor

from hvdbench.frameworks.torch import vision

vision.ensure_torchvision()  # diffusers and torchmetrics import torchvision when it is installed

from diffusers import DDIMScheduler, DDPMScheduler, UNet2DConditionModel  # noqa: E402

from hvdbench.errors import ConfigError
from hvdbench.frameworks.torch.recipe import fused
from hvdbench.models.stable_diffusion import EVAL_NETWORKS, evaluation_refusal, missing_networks

# SD v2's noise schedule (scheduler_config.json of stabilityai/stable-diffusion-2).
SCHEDULE = {"num_train_timesteps": 1000, "beta_start": 0.00085, "beta_end": 0.012,
            "beta_schedule": "scaled_linear", "prediction_type": "v_prediction"}
# SD's sampler settings for DDIM: the last step ends at alpha_0 (not 1), timesteps offset by one.
DDIM = {"clip_sample": False, "set_alpha_to_one": False, "steps_offset": 1, "timestep_spacing": "leading"}
VAE_SCALE = 0.18215  # SD's VAE latents times this have unit variance
JUDGED_CLASSES = 10  # the judge of `images` data knows scikit-learn's digits


# --- the network -------------------------------------------------------------------------------

def unet_config(cfg, channels: int, sample_size: int, context_dim: int) -> dict:
    """UNet2DConditionModel's arguments: SD v2's layout (cross-attention in the first
    `cross_attention_levels` down blocks and the last as many up blocks, linear projections in the
    transformers), sized by the flavor."""
    levels, attention = len(cfg.block_out_channels), cfg.cross_attention_levels
    return {"sample_size": sample_size, "in_channels": channels, "out_channels": channels,
            "down_block_types": ("CrossAttnDownBlock2D",) * attention + ("DownBlock2D",) * (levels - attention),
            "up_block_types": ("UpBlock2D",) * (levels - attention) + ("CrossAttnUpBlock2D",) * attention,
            "block_out_channels": tuple(cfg.block_out_channels), "layers_per_block": cfg.layers_per_block,
            # diffusers' name for SD v2's heads per level (5, 10, 20, 20: 64 channels a head).
            "attention_head_dim": cfg.attention_head_dim, "cross_attention_dim": context_dim,
            "use_linear_projection": cfg.use_linear_projection, "norm_num_groups": cfg.norm_num_groups}


@dataclass
class Evaluators:
    """The frozen networks evaluation uses, kept out of the module tree: they are not trained, not
    counted, not broadcast nor saved with the model."""

    judge: nn.Module | None = None  # images: features and labels of digits (`ready_judge`)
    judged: tuple[int, int] | None = None  # images: the digits' size and classes the judge is for
    vae_decoder: object | None = None  # sd_latents: the user's exported networks
    fid_features: object | None = None
    clip: object | None = None


class StableDiffusion(nn.Module):
    def __init__(self, cfg, channels: int, sample_size: int, context_dim: int, num_classes: int | None,
                 rank: int = 0):
        super().__init__()
        self.cfg, self.channels, self.sample_size = cfg, channels, sample_size
        self.rank = rank  # seeds this rank's stream of timesteps, noise and prompt drops
        self.unet = UNet2DConditionModel(**unet_config(cfg, channels, sample_size, context_dim))
        # images: the prompt of class k is `tokens_per_class` learned tokens; row num_classes is
        # the empty prompt. sd_latents: the empty prompt is zero text states.
        self.num_classes = num_classes
        self.prompts = (nn.Embedding(num_classes + 1, cfg.tokens_per_class * context_dim)
                        if num_classes else None)
        if self.prompts is not None:
            nn.init.normal_(self.prompts.weight, std=1.0)
        self.context_dim = context_dim
        self.noise_schedule = DDPMScheduler(**SCHEDULE)
        self.evaluators = Evaluators()
        self._rng: torch.Generator | None = None

    @property
    def conditioning(self) -> str:
        return "labels" if self.prompts is not None else "context"

    def generator(self, device: torch.device) -> torch.Generator:
        """This rank's stream of timesteps, noise and prompt drops (seeded from the run's seed and
        the rank): with the global generator, which every rank seeds alike, all ranks would draw
        the same timesteps and noise every step."""
        if self._rng is None or self._rng.device != device:
            self._rng = torch.Generator(device=device)
            self._rng.manual_seed((torch.initial_seed() * 1_000_003 + self.rank) % 2**63)
        return self._rng

    def condition(self, batch: dict, drop: torch.Tensor | None = None) -> torch.Tensor:
        """(B, tokens, context_dim): the batch's prompts; `drop` (B,) bools make them empty."""
        if self.prompts is not None:
            labels = batch["labels"].long()
            if drop is not None:
                labels = torch.where(drop, torch.full_like(labels, self.num_classes), labels)
            return self.prompts(labels).view(len(labels), self.cfg.tokens_per_class, self.context_dim)
        context = batch["context"].float()
        return context if drop is None else context * (~drop).view(-1, 1, 1)

    def empty_condition(self, like: torch.Tensor) -> torch.Tensor:
        if self.prompts is not None:
            empty = self.prompts.weight[self.num_classes].view(1, self.cfg.tokens_per_class, self.context_dim)
            return empty.expand(len(like), -1, -1)
        return torch.zeros_like(like)

    def forward(self, x, t, condition):
        return self.unet(x, t, encoder_hidden_states=condition).sample


def build(cfg, num_classes: int | None = None, image_size: int | None = None,
          latent_channels: int | None = None, latent_size: int | None = None,
          context_dim: int | None = None, rank: int = 0, **_data_info) -> StableDiffusion:
    """The UNet for `images` data (num_classes, image_size: learned label prompts, a judge for
    evaluation) or for `sd_latents` data (the other keys; the flavor's sizes when none is given).
    `rank` is the one the trainer hands it (it seeds the rank's timesteps and noise)."""
    if image_size is not None:
        if cfg.latent_channels != 1:
            raise ConfigError(f"the {cfg.name} flavor trains on sd_latents data (precomputed VAE latents "
                              f"and text states), not on images; use --flavor debug for images")
        if int(num_classes) != JUDGED_CLASSES:
            raise ConfigError(f"stable_diffusion on images is judged by a digit classifier: it needs the 10 "
                              f"digits (`hvdbench prepare digits --size 8`), not {num_classes} classes")
        model = StableDiffusion(cfg, 1, int(image_size), cfg.context_dim, int(num_classes), rank)
        model.evaluators.judged = (int(image_size), int(num_classes))
        return model
    return StableDiffusion(cfg, int(latent_channels or cfg.latent_channels),
                           int(latent_size or cfg.latent_size), int(context_dim or cfg.context_dim), None, rank)


def ready_judge(model: StableDiffusion) -> None:
    """Train the judge of a model built for `images` (once a process: `train_judge` keeps it), unless
    tensors made here hold no values (a parameter or FLOP count needs no judge)."""
    nets = model.evaluators
    if nets.judge is None and nets.judged is not None and not _valueless():
        nets.judge = train_judge(*nets.judged)


def _valueless() -> bool:
    """Whether tensors made here hold no values: a build on the meta device (a parameter count) or
    under FakeTensorMode (flops.py's count), where a judge trained on fake digits would cost ~40
    CPU-seconds and stay in train_judge's cache, fake, for the process's real runs."""
    probe = torch.empty(0)
    return probe.device.type == "meta" or isinstance(probe, FakeTensor)


def on_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """uint8 NHWC images (grey, repeated over 3 channels) -> one float channel in [-1, 1];
    float16 moments and text states -> float32."""
    out = dict(batch)
    if "images" in batch:
        out["pixels"] = batch["images"][..., 0].unsqueeze(1).float().div_(127.5).sub_(1.0)
    for name in ("moments", "context", "clip_text"):
        if name in batch:
            out[name] = batch[name].float()
    return out


def clean_sample(model: StableDiffusion, batch: dict, generator: torch.Generator | None) -> torch.Tensor:
    """x0: the image, or a latent drawn from the moments (their mean when `generator` is None)."""
    if "pixels" in batch:
        return batch["pixels"]
    mean, logvar = batch["moments"].chunk(2, dim=1)
    if generator is None:
        return mean * VAE_SCALE
    eps = torch.randn(mean.shape, device=mean.device, generator=generator)
    return (mean + torch.exp(0.5 * logvar.clamp(-30.0, 20.0)) * eps) * VAE_SCALE


def diffusion_loss(model: StableDiffusion, batch: dict) -> torch.Tensor:
    rng = model.generator(next(model.parameters()).device)
    x0 = clean_sample(model, batch, rng)
    n, device = len(x0), x0.device
    t = torch.randint(0, model.noise_schedule.config.num_train_timesteps, (n,), device=device, generator=rng)
    noise = torch.randn(x0.shape, device=device, generator=rng)
    drop = torch.rand(n, device=device, generator=rng) < model.cfg.prompt_dropout
    x_t = model.noise_schedule.add_noise(x0, noise, t)
    v = model.noise_schedule.get_velocity(x0, noise, t)
    return F.mse_loss(model(x_t, t, model.condition(batch, drop)).float(), v.float())


def loss_and_stats(model: StableDiffusion, batch: dict[str, torch.Tensor]):
    """Training: (v-prediction MSE, {}). Evaluation: (the same loss, stats for metric.FidMetric)."""
    if model.training:
        return diffusion_loss(model, batch), {}
    return diffusion_loss(model, batch), evaluate_batch(model, batch)


# --- sampling ----------------------------------------------------------------------------------

def sample_noise(batch: dict, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """Starting noise per sample, seeded by the sample's own bytes: the same validation sample gets
    the same noise at every evaluation and whatever rank holds it."""
    keys = batch["images"] if "images" in batch else batch["context"]
    rows = []
    for i in range(shape[0]):
        seed = zlib.crc32(keys[i].cpu().numpy().tobytes())
        if "labels" in batch:
            seed = zlib.crc32(np.int64(batch["labels"][i].item()).tobytes(), seed)
        rows.append(torch.randn(shape[1:], generator=torch.Generator().manual_seed(seed)))
    return torch.stack(rows).to(device)


@torch.no_grad()
def generate(model: StableDiffusion, condition: torch.Tensor, noise: torch.Tensor, steps: int,
             guidance: float) -> torch.Tensor:
    """DDIM from `noise` in `steps` steps; with guidance != 1, classifier-free guidance against the
    empty prompt (v_uncond + guidance x (v_cond - v_uncond))."""
    sampler = DDIMScheduler(**SCHEDULE, **DDIM)
    sampler.set_timesteps(steps, device=noise.device)
    x = noise * sampler.init_noise_sigma
    empty = model.empty_condition(condition) if guidance != 1.0 else None
    for t in sampler.timesteps:
        if empty is None:
            v = model(x, t, condition)
        else:
            v_empty, v_cond = model(torch.cat([x, x]), t, torch.cat([empty, condition])).chunk(2)
            v = v_empty + guidance * (v_cond - v_empty)
        x = sampler.step(v, t, x).prev_sample
    return x


def to_uint8(images: torch.Tensor) -> torch.Tensor:
    """[-1, 1] floats -> uint8 0..255, as an image file would hold them."""
    return ((images.float().clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8)


@torch.no_grad()
def evaluate_batch(model: StableDiffusion, batch: dict) -> dict:
    cfg, device = model.cfg, next(model.parameters()).device
    condition = model.condition(batch)
    real = clean_sample(model, batch, None)
    noise = sample_noise(batch, tuple(real.shape), device)
    fake = generate(model, condition, noise, cfg.sample_steps, cfg.guidance)
    if model.conditioning == "labels":
        ready_judge(model)  # param_groups readied it for a run; a direct call gets it here
        judge = model.evaluators.judge.to(device)
        # Generated digits are quantised as the real ones are (uint8), then judged alike.
        real_features = judge.features(real)
        fake_features = judge.features(to_uint8(fake).float().div(127.5).sub(1.0))
        agree = (judge.head(fake_features).argmax(dim=1) == batch["labels"].long()).sum()
        return {"real": real_features.double().cpu().numpy(), "fake": fake_features.double().cpu().numpy(),
                "score": float(agree), "count": len(real), "score_name": "label_agreement"}
    nets = model.evaluators
    if nets.vae_decoder is None:
        raise ConfigError(evaluation_refusal(model.cfg, missing_networks()))
    real_images = to_uint8(nets.vae_decoder(real / VAE_SCALE))
    fake_images = to_uint8(nets.vae_decoder(fake / VAE_SCALE))
    embedding = F.normalize(nets.clip(fake_images).float(), dim=-1)
    clip = (embedding * F.normalize(batch["clip_text"].float(), dim=-1)).sum(dim=-1)
    return {"real": nets.fid_features(real_images).double().cpu().numpy(),
            "fake": nets.fid_features(fake_images).double().cpu().numpy(),
            "score": float(clip.sum()), "count": len(real), "score_name": "clip_score"}


# --- the metric's numbers ------------------------------------------------------------------------

class _Given(nn.Module):
    """A 'feature network' that passes features through (they were computed on each rank)."""

    def __init__(self, num_features: int):
        super().__init__()
        self.num_features = num_features  # torchmetrics reads it instead of probing with an image

    def forward(self, x):
        return x


def frechet_distance(real: dict, fake: dict) -> float:
    """FID from the moments (n, sum, outer) of all real and all generated features, computed by
    torchmetrics' FrechetInceptionDistance, whose state is exactly these sums."""
    from torchmetrics.image.fid import FrechetInceptionDistance

    fid = FrechetInceptionDistance(feature=_Given(len(real["sum"])))
    for side, m in (("real", real), ("fake", fake)):
        setattr(fid, f"{side}_features_sum", torch.as_tensor(m["sum"], dtype=torch.float64))
        setattr(fid, f"{side}_features_cov_sum", torch.as_tensor(m["outer"], dtype=torch.float64))
        setattr(fid, f"{side}_features_num_samples", torch.tensor(int(m["n"])))
    fid.orig_dtype = torch.float64
    with warnings.catch_warnings():
        # "compute called before update": the state was set above, not by update().
        warnings.simplefilter("ignore", UserWarning)
        return float(fid.compute())


# --- the judge (debug evaluation) ----------------------------------------------------------------

class Judge(nn.Module):
    """A small CNN digit classifier: its penultimate layer (64 ReLU units) is the FID's feature
    space, its prediction the label agreement's."""

    def __init__(self, size: int, classes: int, width: int = 16, features: int = 64):
        super().__init__()
        self.num_features = features
        self.body = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), nn.ReLU(),
            nn.Flatten(), nn.Linear(2 * width * ((size + 1) // 2) ** 2, features), nn.ReLU())
        self.head = nn.Linear(features, classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def judge_data(size: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The real digits at `size` px as `prepare digits` splits them by default (val 0.2, seed 0):
    {split: (grey images (n, 1, size, size) in [-1, 1], labels)}."""
    from hvdbench.families.images.digits import load

    out = {}
    for split, (images, labels) in load(size, val_fraction=0.2, seed=0).items():
        x = torch.from_numpy(images[..., 0].copy()).unsqueeze(1).float().div(127.5).sub(1.0)
        out[split] = (x, torch.from_numpy(labels))
    return out


@lru_cache(maxsize=None)
def train_judge(size: int, classes: int = 10, epochs: int = 15) -> Judge:
    """The judge trained on the real training digits (about a second on one core; 0.96-0.98 on
    the val digits). Seeded and on one thread, apart from the run's random streams, so that every
    rank trains the same judge."""
    x, y = judge_data(size)["train"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]), torch.enable_grad():  # also when first asked in evaluation
            torch.manual_seed(1234)
            judge = Judge(size, classes)
            opt = torch.optim.Adam(judge.parameters(), lr=3e-3)
            for _ in range(epochs):
                for idx in torch.randperm(len(x)).split(64):
                    opt.zero_grad()
                    F.cross_entropy(judge(x[idx]), y[idx]).backward()
                    opt.step()
    finally:
        torch.set_num_threads(threads)
    judge.eval()
    judge.requires_grad_(False)
    return judge


# --- the run's evaluation networks, optimizer ----------------------------------------------------

def load_network(path: Path, device: torch.device):
    """A network the user exported: a torch.export archive (`torch.export.save`, *.pt2, with a
    dynamic batch dimension) or a TorchScript file (`torch.jit.save`), ready for inference."""
    if path.suffix == ".pt2":
        # An exported program is already in inference form (it has no train/eval switch).
        return torch.export.load(str(path)).module().to(device)
    module = torch.jit.load(str(path), map_location=device)
    module.eval()
    return module


def load_evaluation_networks(model: StableDiffusion, env=os.environ) -> None:
    """The user's networks (see EVAL_NETWORKS) into `model.evaluators`; ConfigError naming the
    settings that are missing, or the file that is not an exported network."""
    missing = missing_networks(env)
    if missing:
        raise ConfigError(evaluation_refusal(model.cfg, missing))
    device = next(model.parameters()).device
    for name in EVAL_NETWORKS:
        path = Path(env[name])
        try:
            module = load_network(path, device)
        except Exception as e:  # noqa: BLE001 - a missing, unreadable or foreign file alike
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise ConfigError(f"{name}={path}: not a torch.export (.pt2) or TorchScript file "
                              f"({type(e).__name__}{': ' + first if first else ''})") from None
        setattr(model.evaluators, name.removeprefix("HVDBENCH_SD_").lower(), module)


def param_groups(model: StableDiffusion, cfg) -> list[dict]:
    """Every trainable parameter with the run's weight decay (the reference's AdamW decays biases and
    norms too). The first hook that sees the run's mode, so the place where a time-to-accuracy run
    readies its evaluation before any training step (and outside the timed run): on images it trains
    the judge (a throughput run needs none: 1-2 CPU-seconds a rank and scikit-learn's import spared),
    on sd_latents it loads the evaluation networks, or is refused."""
    if cfg.mode == "time_to_accuracy" and model.conditioning == "labels":
        ready_judge(model)
    elif cfg.mode == "time_to_accuracy":
        load_evaluation_networks(model)
    return [{"params": [p for p in model.parameters() if p.requires_grad], "weight_decay": cfg.weight_decay}]


def make_optimizer(groups: list[dict], cfg):
    """MLPerf's AdamW (betas 0.9/0.999, eps 1e-8: the core's adamw has eps 1e-6); sgd and adam as
    the core's."""
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.999), eps=1e-8, **fused(cfg))
    if cfg.optimizer == "adam":
        return torch.optim.Adam(groups, lr=cfg.lr, betas=(0.9, 0.999), eps=1e-8, **fused(cfg))
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum)
    raise ConfigError(f"optimizer {cfg.optimizer!r} has no PyTorch implementation here; valid: adamw, adam, sgd")
