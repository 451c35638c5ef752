"""The `sd_latents` dataset kind: what Stable Diffusion's UNet trains on once the frozen encoders
have run (MLPerf's reference keeps its VAE and OpenCLIP text encoder outside the timed loop too).

    hvdbench prepare synthetic --like sd_latents --samples 2048 --out data/sd-synthetic
    hvdbench prepare synthetic --like sd_latents --samples 256 --info latent_size=32 --out data/sd-small

One sample is one image and its caption, precomputed (float16):

- `moments` (2 x latent_channels, latent_size, latent_size): the VAE encoder's latent distribution,
  its mean then its log-variance (MLPerf's "latent moments"); the model draws a latent from it every
  step and scales it by the VAE's factor (0.18215), as the reference does;
- `context` (context_len, context_dim): the caption's text-encoder states that the UNet attends to
  (SD v2: OpenCLIP ViT-H's penultimate layer, 77 x 1024);
- `clip_text` (clip_dim,): the caption's CLIP text embedding, for the CLIP score of the images the
  model generates from `context` at evaluation (only the val split's are read).

The debug flavor trains on the `images` kind instead (`hvdbench prepare digits --size 8`: real
digits and their labels, which become learned prompt tokens); see torch.py.
"""

from __future__ import annotations

import numpy as np

from hvdbench.contracts import DatasetKind
from hvdbench.data.manifest import field_spec

# SD v2 at 512 x 512: the VAE's 8x downsampling gives 64 x 64 x 4 latents; OpenCLIP ViT-H's text
# tower gives 77 tokens x 1024 (the context) and a 1024-d embedding (the CLIP score's).
SD2 = {"latent_channels": 4, "latent_size": 64, "context_len": 77, "context_dim": 1024, "clip_dim": 1024}


class SDLatents(DatasetKind):
    name = "sd_latents"
    info_keys = ("latent_channels", "latent_size", "context_len", "context_dim", "clip_dim")
    # Precomputed from a source in its own order: readers shuffle single samples.
    shuffled_when_written = False
    # ~230 KB a sample at SD v2's sizes: 256 samples make shards of ~60 MB.
    samples_per_shard = 256
    synthetic_defaults = dict(SD2)

    def fields(self, info: dict) -> dict[str, dict]:
        c, s = int(info["latent_channels"]), int(info["latent_size"])
        return {"moments": field_spec((2 * c, s, s), "float16"),
                "context": field_spec((int(info["context_len"]), int(info["context_dim"])), "float16"),
                "clip_text": field_spec((int(info["clip_dim"]),), "float16")}

    def synthetic(self, n: int, info: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Random samples with the statistics of real ones: latent means of SD's VAE have a standard
        deviation of about 1 / 0.18215 (the factor that scales them to unit variance), their
        log-variances are small (the encoder is nearly deterministic), text states ~N(0, 1), and
        CLIP embeddings have unit length."""
        c, s = int(info["latent_channels"]), int(info["latent_size"])
        mean = rng.standard_normal((n, c, s, s), dtype=np.float32) * np.float32(1 / 0.18215)
        logvar = rng.uniform(-12.0, -6.0, (n, c, s, s)).astype(np.float32)
        clip = rng.standard_normal((n, int(info["clip_dim"])), dtype=np.float32)
        clip /= np.linalg.norm(clip, axis=1, keepdims=True)
        return {"moments": np.concatenate([mean, logvar], axis=1).astype(np.float16),
                "context": rng.standard_normal((n, int(info["context_len"]), int(info["context_dim"])),
                                               dtype=np.float32).astype(np.float16),
                "clip_text": clip.astype(np.float16)}


SD_LATENTS = SDLatents()
