"""The `flux_latents` dataset kind: what Flux.1's transformer trains on once the frozen encoders have
run (MLPerf's flux1 reference trains on such precomputed encodings too: T5 and CLIP text encodings and
the VAE's latent mean and log-variance).

    hvdbench prepare flux-latents --images DIR --captions FILE --t5 T5_DIR --clip CLIP_DIR --vae VAE_DIR --out DIR
    hvdbench prepare synthetic --like flux_latents --samples 256 --out data/flux-synthetic

One sample is one image and its caption, precomputed (float16):

- `t5` (t5_len, t5_dim): T5-v1.1-XXL's last hidden states of the caption (256 x 4096), the sequence
  the transformer attends to;
- `clip` (clip_dim,): CLIP ViT-L/14's pooled text embedding (768), added to the timestep embedding;
- `latent_mean`, `latent_logvar` (latent_channels, latent_size, latent_size): the VAE encoder's latent
  distribution (16 x 32 x 32 for 256 x 256 images), already in the space the transformer trains in:
  the reference draws z ~ N(mean, exp(logvar)) and uses (z - shift) x scale (FLUX's AE: shift 0.1159,
  scale 0.3611); stored here as (mean - shift) x scale and logvar + 2 ln(scale), the same
  distribution, so a run needs no VAE constant;
- `timestep` (): the validation timestep index i in 0..7 (t = i / 8) the sample is evaluated at, i mod
  8 in the split's order, as the reference's COCO subset carries it (equal counts per timestep when
  the split is a multiple of 8); training samples carry one too, unused.

The debug flavor trains on the `images` kind instead (`hvdbench prepare digits --size 8`, real
digits and their labels: the labels stand in for the captions, 2 x 2 pixel patches for the VAE's
latents; see torch.py).
"""

from __future__ import annotations

import numpy as np

from hvdbench.contracts import DatasetKind
from hvdbench.data.manifest import field_spec

# Flux.1 at MLPerf's 256 x 256: the AE's 8x downsampling gives 16 x 32 x 32 latents (packed as
# 16 x 16 tokens of 2 x 2 x 16 = 64 channels); T5-XXL gives 256 tokens x 4096, CLIP-L a 768-d vector.
FLUX1 = {"latent_channels": 16, "latent_size": 32, "t5_len": 256, "t5_dim": 4096, "clip_dim": 768}
TIMESTEPS = 8  # the validation loss's equidistant timesteps t = i / 8, i = 0..7


class FluxLatents(DatasetKind):
    name = "flux_latents"
    info_keys = ("latent_channels", "latent_size", "t5_len", "t5_dim", "clip_dim")
    # Precomputed in the source's order: readers shuffle single samples.
    shuffled_when_written = False
    # ~2.1 MB a sample at Flux.1's sizes (the T5 states are 2 MB): 64 samples make ~135 MB shards.
    samples_per_shard = 64
    synthetic_defaults = dict(FLUX1)

    def fields(self, info: dict) -> dict[str, dict]:
        c, s = int(info["latent_channels"]), int(info["latent_size"])
        return {"t5": field_spec((int(info["t5_len"]), int(info["t5_dim"])), "float16"),
                "clip": field_spec((int(info["clip_dim"]),), "float16"),
                "latent_mean": field_spec((c, s, s), "float16"),
                "latent_logvar": field_spec((c, s, s), "float16"),
                "timestep": field_spec((), "int64")}

    def limits(self, manifest: dict) -> dict[str, tuple[float, float]]:
        return {"timestep": (0, TIMESTEPS - 1)}

    def synthetic(self, n: int, info: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Random samples with the statistics of real ones: scaled latent means of about unit
        deviation (what FLUX's scale factor is for), small log-variances (the encoder is nearly
        deterministic), text states ~N(0, 0.3^2) (T5's last layer norm keeps them small), and the
        timestep indices in order."""
        c, s = int(info["latent_channels"]), int(info["latent_size"])
        t5 = rng.standard_normal((n, int(info["t5_len"]), int(info["t5_dim"])), dtype=np.float32) * np.float32(0.3)
        return {"t5": t5.astype(np.float16),
                "clip": rng.standard_normal((n, int(info["clip_dim"])), dtype=np.float32).astype(np.float16),
                "latent_mean": rng.standard_normal((n, c, s, s), dtype=np.float32).astype(np.float16),
                "latent_logvar": rng.uniform(-9.0, -5.0, (n, c, s, s)).astype(np.float16),
                "timestep": (np.arange(n) % TIMESTEPS).astype(np.int64)}


FLUX_LATENTS = FluxLatents()
