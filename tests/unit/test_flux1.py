"""Flux.1 (MLPerf flux1): the full transformer's exact size on the meta device and the blocks FSDP
shards, the debug flavor's forward and backward, the reference's 8-timestep validation loss
(deterministic, rank-count independent, equal to a hand computation), the optimizer's clipping,
the MLLOG keys, and `prepare flux-latents` with tiny encoders saved here (no download): shapes,
dtypes, the manifest's encoders, a resumed rerun, and one-line errors for bad input.

    .venv/bin/python -m pytest tests/unit/test_flux1.py
"""

import dataclasses
import json
import math

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from hvdbench.frameworks.torch.vision import ensure_torchvision

ensure_torchvision()  # before diffusers and transformers, which import torchvision (frameworks/torch/vision.py)
import diffusers  # noqa: E402
import transformers  # noqa: E402

from hvdbench.cli.main import cli  # noqa: E402
from hvdbench.contracts import RunFacts, get_spec  # noqa: E402
from hvdbench.data.readers import open_dataset  # noqa: E402
from hvdbench.data.verify import verify  # noqa: E402
from hvdbench.errors import DatasetError  # noqa: E402
from hvdbench.models.flux1 import torch as fx  # noqa: E402
from hvdbench.models.flux1.data import FLUX_LATENTS  # noqa: E402
from hvdbench.models.flux1.metric import TimestepLoss  # noqa: E402
from hvdbench.models.flux1.prepare import EncoderFolders, LatentOptions, prepare_flux_latents  # noqa: E402
from hvdbench.train.config import TrainConfig  # noqa: E402

SPEC = get_spec("flux1")
FULL, DEBUG = SPEC.flavor("full"), SPEC.flavor("debug")
# The full flavor's layout at a width a CPU builds in a blink (for the flux_latents path).
NARROW = dataclasses.replace(FULL, layers=1, single_layers=1, heads=2, head_dim=8, axes_dims_rope=(2, 2, 4),
                             gradient_checkpointing=False)


pytestmark = pytest.mark.usefixtures("torch_one_thread")  # tests/conftest.py


def n_params(model):
    return sum(p.numel() for p in model.parameters())


class OneRank:
    """The metric's reduce on a single process."""

    def allreduce_sum(self, x):
        return x


def digits_batch(n=12, seed=0):
    rng = np.random.default_rng(seed)
    images = np.repeat(rng.integers(0, 256, (n, 8, 8, 1), dtype=np.uint8), 3, axis=-1)
    return {"images": torch.from_numpy(images), "labels": torch.from_numpy(rng.integers(0, 10, n))}


def evaluate(model, batches, metric=TimestepLoss()):
    model.eval()
    state = metric.start()
    with torch.no_grad():
        for batch in batches:
            _, stats = fx.loss_and_stats(model, fx.on_device(batch, "cpu"))
            state = metric.update(state, stats)
    return metric.reduce(metric.local(state), OneRank())


# --- the networks ------------------------------------------------------------------------------

def test_full_flavor_is_the_reference_flux_schnell_with_11_89b_parameters():
    with torch.device("meta"):
        model = fx.build(FULL)
    # torchtitan's flux-schnell FluxModel layer by layer: img_in, time_in, vector_in, txt_in, 19
    # double blocks, 38 single blocks, the final layer (FLUX.1-dev's extra guidance embedder aside).
    h, mlp, head = 3072, 12288, 128
    lin = lambda i, o: i * o + o  # noqa: E731
    double = 2 * (lin(h, 6 * h) + lin(h, 3 * h) + 2 * head + lin(h, h) + lin(h, mlp) + lin(mlp, h))
    single = lin(h, 3 * h + mlp) + lin(h + mlp, h) + 2 * head + lin(h, 3 * h)
    reference = (lin(64, h) + lin(256, h) + lin(h, h) + lin(768, h) + lin(h, h) + lin(4096, h)
                 + 19 * double + 38 * single + lin(h, 64) + lin(h, 2 * h))
    assert n_params(model) == reference == 11_891_178_560 == SPEC.parameters["full"]
    config = model.transformer.config
    assert (config.num_layers, config.num_single_layers, config.num_attention_heads, config.attention_head_dim) \
        == (19, 38, 24, 128)
    assert (config.in_channels, config.joint_attention_dim, config.pooled_projection_dim) == (64, 4096, 768)
    assert not config.guidance_embeds and tuple(config.axes_dims_rope) == (16, 56, 56)
    assert model.transformer.gradient_checkpointing  # the reference's full activation checkpointing
    assert SPEC.build_on_meta == ("full",)


def test_shard_units_are_the_double_and_single_stream_blocks():
    with torch.device("meta"):
        model = fx.build(FULL)
    units = fx.shard_units(model)
    assert len(units) == 57
    assert all(isinstance(u, diffusers.models.transformers.transformer_flux.FluxTransformerBlock) for u in units[:19])
    assert all(isinstance(u, diffusers.models.transformers.transformer_flux.FluxSingleTransformerBlock)
               for u in units[19:])
    inside = {id(p) for u in units for p in u.parameters()}
    assert len(inside) == sum(1 for u in units for _ in u.parameters())  # no parameter in two units
    # The blocks hold almost all of the 11.9B; the root unit keeps the embedders and the output layer.
    assert sum(p.numel() for u in units for p in u.parameters()) > 0.99 * n_params(model)
    debug = fx.build(DEBUG, num_classes=10, image_size=8)
    assert [type(u).__name__ for u in fx.shard_units(debug)] == ["FluxTransformerBlock"] * 2 + \
        ["FluxSingleTransformerBlock"] * 2


def test_init_weights_fills_a_model_built_on_the_meta_device():
    """FSDP materialises a meta-built model with to_empty and then calls init_weights: every
    parameter must be written (NaN before, finite after), with the reference's zero output layer."""
    with torch.device("meta"):
        model = fx.build(DEBUG, num_classes=10, image_size=8)
    model.to_empty(device="cpu")
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(math.nan)
    fx.init_weights(model)
    assert all(torch.isfinite(p).all() for p in model.parameters())
    tr = model.transformer
    assert not tr.proj_out.weight.any() and not tr.transformer_blocks[0].norm1.linear.weight.any()
    assert tr.single_transformer_blocks[0].attn.norm_q.weight.eq(1).all()
    # q, k, v as torchtitan's one fused matrix: Xavier's bound over 3 x 64 outputs, not 64.
    bound = math.sqrt(6 / (64 + 3 * 64))
    assert tr.transformer_blocks[0].attn.to_q.weight.abs().max() <= bound


def test_debug_flavor_forward_backward_and_learning():
    torch.manual_seed(0)
    model = fx.build(DEBUG, num_classes=10, image_size=8)
    # 4 blocks 64 wide plus 11 learned captions (10 labels and the empty one) of 4 x 32 and 32.
    assert n_params(model) == SPEC.parameters["debug"] == n_params(model.transformer) + 11 * (4 * 32 + 32)
    cfg = TrainConfig(model="flux1", flavor="debug", optimizer="adamw", lr=3e-3, weight_decay=0.1, synthetic=True)
    opt = fx.make_optimizer(fx.param_groups(model, cfg), cfg)
    batch = fx.on_device(digits_batch(16), "cpu")
    model.train()
    first = fx.loss_and_stats(model, batch)[0]
    first.backward()
    assert torch.isfinite(first) and all(p.grad is not None for p in model.parameters())
    # The zero-initialised output layer predicts 0: the loss is E[(noise - x0)^2] = 1 + E[x0^2].
    assert 1.0 < first.item() < 3.0
    opt.step()
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss, stats = fx.loss_and_stats(model, batch)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert stats == {} and np.mean(losses[-5:]) < 0.8 * first.item()


def test_each_rank_draws_its_own_timesteps_and_noise():
    batch = fx.on_device(digits_batch(8), "cpu")
    losses = []
    for rank in (0, 1, 0):
        torch.manual_seed(0)
        model = fx.build(DEBUG, num_classes=10, image_size=8, rank=rank)
        model.train()
        losses.append(fx.loss_and_stats(model, batch)[0].item())
    assert losses[0] == losses[2] != losses[1]


def test_images_of_the_full_flavor_or_odd_size_are_refused():
    from hvdbench.errors import ConfigError

    with pytest.raises(ConfigError, match="trains on flux_latents data"):
        fx.build(FULL, num_classes=10, image_size=8)
    with pytest.raises(ConfigError, match="must be even"):
        fx.build(DEBUG, num_classes=10, image_size=9)


# --- the validation loss -----------------------------------------------------------------------

def test_validation_loss_is_deterministic_and_independent_of_batching():
    torch.manual_seed(0)
    model = fx.build(DEBUG, num_classes=10, image_size=8)
    with torch.no_grad():  # a model that predicts something (the output layer starts at zero)
        model.transformer.proj_out.weight.normal_(std=0.05)
    batch = digits_batch(12)
    whole = evaluate(model, [batch])
    metric = TimestepLoss()
    assert metric.value(whole) == metric.value(evaluate(model, [batch]))  # the same at every evaluation
    # Two ranks with half each (summed before dividing): the same value.
    halves = [{k: v[:5] for k, v in batch.items()}, {k: v[5:] for k, v in batch.items()}]
    split = evaluate(model, halves[:1]) + evaluate(model, halves[1:])
    assert metric.value(split) == pytest.approx(metric.value(whole), rel=1e-12)
    # images data: every digit at all 8 timesteps, so the counts are equal.
    assert list(whole[8:16]) == [12.0] * 8 and metric.samples(whole) == 12


def test_validation_loss_matches_a_hand_computation():
    """A model whose prediction is known (zero: the output layer's initial state) on latents with
    unequal timestep counts: the value is the mean over timesteps of each timestep's mean loss
    (not the mean over samples), each loss mean((0 - (noise - x0))^2) with x0 the stored mean
    (log-variance -30: no spread) and the noise seeded by the sample's bytes."""
    torch.manual_seed(0)
    cfg = dataclasses.replace(NARROW, latent_channels=2, latent_size=4, t5_len=3, t5_dim=8, clip_dim=8)
    model = fx.build(cfg)
    rng = np.random.default_rng(1)
    mean = rng.standard_normal((5, 2, 4, 4)).astype(np.float32)
    batch = {"latent_mean": torch.from_numpy(mean), "latent_logvar": torch.full((5, 2, 4, 4), -30.0),
             "t5": torch.zeros(5, 3, 8), "clip": torch.zeros(5, 8), "timestep": torch.tensor([0, 0, 0, 3, 7])}
    reduced = evaluate(model, [batch])
    seeds = fx.sample_seeds(batch)
    noise = fx.seeded_normal(seeds, batch["timestep"], (2, 4, 4), stream=0).numpy()
    per_sample = ((noise - mean) ** 2).mean(axis=(1, 2, 3))
    by_hand = np.mean([per_sample[:3].mean(), per_sample[3], per_sample[4]])
    assert TimestepLoss().value(reduced) == pytest.approx(by_hand, rel=1e-5)
    assert by_hand != pytest.approx(per_sample.mean(), rel=1e-3)  # the mean of means, not the mean
    assert list(reduced[8:16]) == [3, 0, 0, 1, 0, 0, 0, 1]


def test_timestep_loss_metric_sums_then_divides():
    metric = TimestepLoss()
    reduced = np.array([2.0, 4.0, 0, 0, 0, 0, 0, 1.0] + [2, 4, 0, 0, 0, 0, 0, 2] + [8])
    assert metric.per_timestep(reduced)[[0, 1, 7]] == pytest.approx([1.0, 1.0, 0.5])
    assert metric.value(reduced) == pytest.approx((1.0 + 1.0 + 0.5) / 3)
    assert metric.reached(0.5, 0.586) and not metric.reached(0.6, 0.586) and not metric.higher_is_better
    assert math.isnan(metric.value(np.zeros(17)))


# --- optimizer and MLLOG ---------------------------------------------------------------------------

def test_adamw_is_the_references_and_clips_the_gradient_norm_to_1():
    model = torch.nn.Linear(4, 4)
    cfg = TrainConfig(model="flux1", optimizer="adamw", lr=1e-3, weight_decay=0.1)
    opt = fx.make_optimizer([{"params": list(model.parameters()), "weight_decay": 0.1, "max_grad_norm": 1.0}], cfg)
    assert opt.defaults["betas"] == (0.9, 0.95) and opt.defaults["eps"] == 1e-8
    for p in model.parameters():
        p.grad = torch.full_like(p, 100.0)
    opt.step()
    norm = torch.sqrt(sum(p.grad.pow(2).sum() for p in model.parameters()))
    assert norm.item() == pytest.approx(1.0, rel=1e-4)


def test_mllog_keys_of_the_closed_division():
    cfg = TrainConfig(model="flux1", flavor="full", optimizer="adamw", weight_decay=0.1, eval_every=262144.0,
                      eval_unit="samples")
    logged = SPEC.mllog_values(cfg, RunFacts(global_batch=512, peak_lr=2e-4, steps_per_epoch=2148,
                                             max_steps=30000, warmup_steps=1600))
    assert logged == {"opt_adamw_beta_1": 0.9, "opt_adamw_beta_2": 0.95, "opt_adamw_epsilon": 1e-8,
                      "opt_adamw_weight_decay": 0.1, "opt_gradient_clip_norm": 1.0, "evaluation_frequency": 262144}
    defaults = SPEC.defaults
    warmup_steps = round(defaults["warmup_epochs"] * (1_099_776 // 512))
    assert (defaults["lr"], defaults["weight_decay"], warmup_steps) == (2e-4, 0.1, 1600)  # RCP flux_ref_512


# --- prepare flux-latents with tiny local encoders ---------------------------------------------------

WORDS = ["<pad>", "</s>", "<unk>", "a", "photo", "of", "digit", "zero", "one", "two", "three", "cat"]
TINY = LatentOptions(val_fraction=0.2, size=16, t5_len=6, batch=3, samples_per_shard=4)  # for the tiny encoders


def save_tokenizer(folder):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>",
                                         unk_token="<unk>").save_pretrained(folder)


@pytest.fixture(scope="module")
def encoders(tmp_path_factory):
    """T5 (16-d states), CLIP (12-d pooled) and an AutoencoderKL (4 channels, 2x down, shift 0.1,
    scale 0.5) built from configs and saved with save_pretrained, each folder with its tokenizer."""
    base = tmp_path_factory.mktemp("encoders")
    torch.manual_seed(0)
    t5 = transformers.T5EncoderModel(transformers.T5Config(vocab_size=len(WORDS), d_model=16, d_kv=8, d_ff=32,
                                                           num_layers=1, num_heads=2, pad_token_id=0,
                                                           eos_token_id=1))
    t5.save_pretrained(base / "t5")
    save_tokenizer(base / "t5")
    clip = transformers.CLIPTextModel(transformers.CLIPTextConfig(
        vocab_size=len(WORDS), hidden_size=12, intermediate_size=24, num_hidden_layers=1, num_attention_heads=2,
        max_position_embeddings=77, pad_token_id=0, eos_token_id=1, bos_token_id=1))
    clip.save_pretrained(base / "clip")
    save_tokenizer(base / "clip")
    vae = diffusers.AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                                  up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(8, 8),
                                  layers_per_block=1, latent_channels=4, norm_num_groups=4, sample_size=16,
                                  scaling_factor=0.5, shift_factor=0.1)
    vae.save_pretrained(base / "vae")
    return EncoderFolders(t5=base / "t5", clip=base / "clip", vae=base / "vae")


def image_set(folder, n, captions=True):
    from PIL import Image

    folder.mkdir(parents=True)
    rng = np.random.default_rng(n)
    names = [f"img{i:02d}.png" for i in range(n)]
    for name in names:
        Image.fromarray(rng.integers(0, 256, (20, 24, 3), dtype=np.uint8)).save(folder / name)
    lines = ["file_name\tcaption"] + [f"{name}\ta photo of digit {WORDS[7 + i % 4]}" for i, name in enumerate(names)]
    (folder.parent / f"{folder.name}.tsv").write_text("\n".join(lines[:-1] if not captions else lines) + "\n")
    return folder, folder.parent / f"{folder.name}.tsv"


def test_prepare_writes_encodings_latents_and_the_manifest(encoders, tmp_path):
    images, captions = image_set(tmp_path / "train", 10)
    out = tmp_path / "flux"
    manifest = prepare_flux_latents(images, captions, out, encoders=encoders, opts=TINY)
    assert manifest["kind"] == "flux_latents"
    info = {k: manifest[k] for k in FLUX_LATENTS.info_keys}
    assert info == {"latent_channels": 4, "latent_size": 8, "t5_len": 6, "t5_dim": 16, "clip_dim": 12}
    assert {s: v["samples"] for s, v in manifest["splits"].items()} == {"train": 8, "val": 2}
    assert manifest["fields"]["t5"] == {"shape": [6, 16], "dtype": "float16"}
    assert manifest["fields"]["latent_mean"] == {"shape": [4, 8, 8], "dtype": "float16"}
    enc = manifest["encoders"]
    assert (enc["t5"]["class"], enc["clip"]["class"], enc["vae"]["class"]) == \
        ("T5EncoderModel", "CLIPTextModel", "AutoencoderKL")
    assert enc["t5"]["path"] == str(encoders.t5.resolve()) and enc["vae"]["shift_factor"] == 0.1
    assert "config_sha256" in enc["clip"] and enc["clip"]["weight_files"] == ["model.safetensors"]

    report = verify(out)  # `hvdbench prepare verify`: checksums, shapes, timestep indices in 0..7
    assert report.ok and len(report.rows) == 3, report.problems
    ds = open_dataset(out)
    val = next(iter(ds.loader("val", 2, rank=0, size=1, seed=0, shuffle=False, drop_last=False)))
    assert val["t5"].dtype == np.float16 and val["t5"].shape == (2, 6, 16) and val["clip"].shape == (2, 12)
    assert val["latent_logvar"].shape == (2, 4, 8, 8) and list(val["timestep"]) == [0, 1]
    # The latents are the VAE's distribution, shifted and scaled: check one image by hand.
    from hvdbench.models.flux1.prepare import decode_image

    names = sorted(p.name for p in images.iterdir())
    vae = diffusers.AutoencoderKL.from_pretrained(encoders.vae)
    with torch.no_grad():
        dists = vae.encode(torch.from_numpy(np.stack([decode_image(images / n, 16) for n in names]))).latent_dist
    expected = ((dists.mean - 0.1) * 0.5).numpy()
    match = [np.allclose(val["latent_mean"][0], e, atol=2e-3) for e in expected]
    assert sum(match) == 1
    assert np.allclose(val["latent_logvar"][0], (dists.logvar + 2 * math.log(0.5)).numpy()[match.index(True)],
                       atol=2e-2)
    with np.load(out / manifest["empty_caption"]["file"]) as empty:
        assert empty["t5"].shape == (6, 16) and empty["clip"].shape == (12,)

    # A narrow Flux trains and evaluates on it, with the stored empty caption for dropped ones.
    model = fx.build(NARROW, **ds.data_info)
    cfg = TrainConfig(model="flux1", optimizer="adamw", lr=1e-3, weight_decay=0.1, data=str(out))
    fx.param_groups(model, cfg)
    assert model.empty is not None and model.empty[0].shape == (6, 16)
    batch = fx.on_device({k: torch.from_numpy(v) for k, v in val.items()}, "cpu")
    model.train()
    assert torch.isfinite(fx.loss_and_stats(model, batch)[0])
    assert TimestepLoss().samples(evaluate(model, [{k: torch.from_numpy(v) for k, v in val.items()}])) == 2

    # A rerun of the same command keeps every shard.
    times = {p.name: p.stat().st_mtime_ns for p in out.glob("*.h5")}
    again = prepare_flux_latents(images, captions, out, encoders=encoders, opts=TINY)
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.h5")} == times
    assert again["splits"] == manifest["splits"]
    assert json.loads((out / "manifest.json").read_text())["empty_caption"] == manifest["empty_caption"]


def cli_prepare(images, captions, out, encoders, **changes):
    options = {"--images": images, "--captions": captions, "--t5": encoders.t5, "--clip": encoders.clip,
               "--vae": encoders.vae, "--out": out, "--size": 16, "--t5-len": 4, **changes}
    return CliRunner().invoke(cli, ["prepare", "flux-latents", *[str(x) for kv in options.items() for x in kv]])


def test_bad_input_is_a_one_line_error(encoders, tmp_path):
    images, captions = image_set(tmp_path / "train", 4, captions=False)  # the last image has no caption
    result = cli_prepare(images, captions, tmp_path / "out", encoders)
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert result.output.startswith(f"Error: {images / 'img03.png'}: no caption in {captions}")

    images, captions = image_set(tmp_path / "ok", 4)
    result = cli_prepare(images, captions, tmp_path / "out", encoders, **{"--t5": tmp_path / "no-t5"})
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert result.output.startswith(f"Error: --t5 {tmp_path / 'no-t5'}: no such folder")
    result = cli_prepare(images, captions, tmp_path / "out", encoders, **{"--vae": encoders.t5})
    assert result.exit_code == 1 and "not an AutoencoderKL config" in result.output
    result = cli_prepare(images, captions, tmp_path / "out", encoders, **{"--size": 18})
    assert result.exit_code == 1 and "must be a multiple of 4" in result.output

    (captions.parent / "bad.tsv").write_text("name\ttext\nimg00.png\ta cat\n")
    with pytest.raises(DatasetError, match=r"bad.tsv:1: the header must name the columns file_name and caption"):
        prepare_flux_latents(images, captions.parent / "bad.tsv", tmp_path / "out", encoders=encoders,
                             opts=LatentOptions(size=16))
    (captions.parent / "extra.tsv").write_text(captions.read_text() + "img99.png\ta cat\n")
    with pytest.raises(DatasetError, match=r"img99.png has a caption but is not an image"):
        prepare_flux_latents(images, captions.parent / "extra.tsv", tmp_path / "out", encoders=encoders,
                             opts=LatentOptions(size=16))
    assert not (tmp_path / "out" / "manifest.json").exists()
