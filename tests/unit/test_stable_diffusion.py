"""Stable Diffusion v2: SD v2's UNet size on the meta device, the full flavor's wiring on synthetic
latents (a narrow UNet: the real one does not fit a CPU's memory with its optimizer), the judge's
FID as a metric (real vs real far below real vs noise), the FID computed once from every rank's
features, the two-condition target, and the evaluation networks a time-to-accuracy run on latents
needs (refused in one line without them).

    .venv/bin/python -m pytest tests/unit/test_stable_diffusion.py
"""

import dataclasses

import numpy as np
import pytest
import torch

from hvdbench.frameworks.torch.vision import ensure_torchvision

ensure_torchvision()  # before diffusers, which imports torchvision (hvdbench/frameworks/torch/vision.py)
import diffusers  # noqa: E402,F401  (installed by `make setup`: a missing one fails, not skips)

from hvdbench.contracts import get_spec  # noqa: E402
from hvdbench.errors import ConfigError  # noqa: E402
from hvdbench.families.images.data import IMAGES  # noqa: E402
from hvdbench.models.stable_diffusion import torch as sd  # noqa: E402
from hvdbench.models.stable_diffusion.data import SD_LATENTS  # noqa: E402
from hvdbench.models.stable_diffusion.metric import FidMetric, moments  # noqa: E402
from hvdbench.train.config import TrainConfig  # noqa: E402

SPEC = get_spec("stable_diffusion")
pytestmark = pytest.mark.usefixtures("torch_one_thread")  # tests/conftest.py
FULL, DEBUG = SPEC.flavor("full"), SPEC.flavor("debug")
CPU = torch.device("cpu")
# The full flavor's layout (4 levels, cross-attention in 3, 2 blocks a level, linear projections)
# at a width a CPU trains in a second; every data size is still the full flavor's.
NARROW = dataclasses.replace(FULL, block_out_channels=(32, 32, 64, 64), attention_head_dim=(1, 1, 2, 2))


def n_params(model):
    return sum(p.numel() for p in model.parameters())


def run_config(**kw):
    """A resolved-looking TrainConfig: param_groups and make_optimizer read mode, optimizer, lr..."""
    return TrainConfig(model="stable_diffusion", optimizer="adamw", lr=1e-3, weight_decay=0.01, **kw)


def torch_batch(arrays):
    return {k: torch.from_numpy(v) for k, v in arrays.items()}


# --- the networks ------------------------------------------------------------------------------

def test_full_flavor_is_sd_v2_unet_with_865_9m_parameters():
    with torch.device("meta"):
        model = sd.build(FULL)
    assert n_params(model) == 865_910_724 == SPEC.parameters["full"]
    config = model.unet.config
    assert tuple(config.block_out_channels) == (320, 640, 1280, 1280)
    assert (config.cross_attention_dim, config.in_channels, config.sample_size) == (1024, 4, 64)
    assert config.use_linear_projection and tuple(config.attention_head_dim) == (5, 10, 20, 20)
    assert list(config.down_block_types) == ["CrossAttnDownBlock2D"] * 3 + ["DownBlock2D"]
    assert model.noise_schedule.config.prediction_type == "v_prediction"
    assert model.noise_schedule.config.beta_schedule == "scaled_linear"


def test_debug_flavor_is_the_0_79m_unet_with_label_prompts():
    model = sd.build(DEBUG, num_classes=10, image_size=8)
    assert n_params(model.unet) == 791_233
    # 11 prompts (10 labels and the empty one) of 4 tokens of 32.
    assert n_params(model) == 791_233 + 11 * 4 * 32 == SPEC.parameters["debug"]
    assert model.conditioning == "labels" and model.evaluators.judged == (8, 10)
    # The judge is trained for a run that evaluates, before its first step; a throughput run has none.
    sd.param_groups(model, run_config(data="d", steps=5))
    assert model.evaluators.judge is None
    sd.param_groups(model, run_config(data="d"))
    assert n_params(model.evaluators.judge) > 0  # outside the model: not counted, not trained
    assert model.evaluators.judge is sd.train_judge(8, 10)  # one a process


def test_images_other_than_digits_are_refused():
    with pytest.raises(ConfigError, match="trains on sd_latents data"):
        sd.build(FULL, num_classes=10, image_size=8)
    with pytest.raises(ConfigError, match="judged by a digit classifier: it needs the 10 digits"):
        sd.build(DEBUG, num_classes=1000, image_size=8)  # the judge would score them as digits


def test_full_flavor_trains_on_synthetic_latents_of_its_sizes():
    """The spec -> kind -> batch -> model wiring of `train stable_diffusion --synthetic` (full) with a
    narrow UNet: SD v2's 4x64x64 latents drawn from 8-channel moments, 77 x 1024 text states."""
    info = SPEC.synthetic_info(FULL)
    assert info == {"latent_channels": 4, "latent_size": 64, "context_len": 77, "context_dim": 1024,
                    "clip_dim": 1024}
    raw = SD_LATENTS.synthetic(2, info, np.random.default_rng(0))
    fields = SD_LATENTS.fields(info)
    for name, array in raw.items():
        assert list(array.shape[1:]) == fields[name]["shape"] and array.dtype == fields[name]["dtype"]
    torch.manual_seed(0)
    model = sd.build(NARROW, **info)
    assert (model.unet.config.in_channels, model.unet.config.cross_attention_dim) == (4, 1024)
    batch = sd.on_device(torch_batch(raw), CPU)
    x0 = sd.clean_sample(model, batch, torch.Generator().manual_seed(0))
    assert x0.shape == (2, 4, 64, 64) and 0.5 < float(x0.std()) < 2  # scaled to about unit variance
    cfg = run_config(synthetic=True, steps=1)
    opt = sd.make_optimizer(sd.param_groups(model, cfg), cfg)  # throughput: no evaluation networks
    assert opt.defaults["eps"] == 1e-8 and opt.param_groups[0]["weight_decay"] == 0.01
    before = [p.detach().clone() for p in model.parameters()]
    model.train()
    loss, stats = sd.loss_and_stats(model, batch)
    loss.backward()
    opt.step()
    assert loss.ndim == 0 and torch.isfinite(loss) and stats == {}
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_a_batch_of_digits_is_learnt():
    torch.manual_seed(0)
    model = sd.build(DEBUG, num_classes=10, image_size=8)
    raw = IMAGES.synthetic(16, {"num_classes": 10, "image_size": 8}, np.random.default_rng(0))
    batch = sd.on_device(torch_batch(raw), CPU)
    assert batch["pixels"].shape == (16, 1, 8, 8) and float(batch["pixels"].abs().max()) <= 1

    def fixed_loss():  # the v-loss at fixed timesteps and noise
        x0 = batch["pixels"]
        t = torch.arange(16) * 60 + 10
        noise = torch.randn(x0.shape, generator=torch.Generator().manual_seed(1))
        x_t = model.noise_schedule.add_noise(x0, noise, t)
        with torch.no_grad():
            out = model(x_t, t, model.condition(batch))
        return float(torch.nn.functional.mse_loss(out, model.noise_schedule.get_velocity(x0, noise, t)))

    start = fixed_loss()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    model.train()
    for _ in range(40):
        opt.zero_grad()
        sd.loss_and_stats(model, batch)[0].backward()
        opt.step()
    assert fixed_loss() < 0.7 * start


# --- the metric --------------------------------------------------------------------------------

def test_judge_fid_of_real_vs_real_is_far_below_real_vs_noise():
    judge = sd.train_judge(8)
    data = sd.judge_data(8)
    (x_train, _), (x_val, y_val) = data["train"], data["val"]
    assert float((judge(x_val).argmax(1) == y_val).float().mean()) > 0.93  # it knows digits
    noise = torch.rand(x_val.shape, generator=torch.Generator().manual_seed(0)) * 2 - 1

    def features(x):
        return judge.features(x).double().numpy()

    real_vs_real = sd.frechet_distance(moments(features(x_train)), moments(features(x_val)))
    real_vs_noise = sd.frechet_distance(moments(features(x_val)), moments(features(noise)))
    assert real_vs_real < 15 and real_vs_noise > 200  # measured: 5.1 and 487


def test_every_rank_trains_the_same_judge():
    """The judge is seeded apart from the run's streams: a rank's own seed does not change it."""
    sd.train_judge.cache_clear()
    torch.manual_seed(1)
    a = sd.train_judge(8)
    sd.train_judge.cache_clear()
    torch.manual_seed(2)
    b = sd.train_judge(8)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


class Ranks:
    """The allgather of a Horovod job whose ranks hold `locals_` (this one is rank `rank`)."""

    def __init__(self, locals_, rank=0):
        self.locals, self.rank = locals_, rank

    def allgather_object(self, obj):
        return list(self.locals)


def fake_stats(rng, n, shift, agree):
    return {"real": rng.normal(size=(n, 6)), "fake": rng.normal(size=(n, 6)) * (1 + shift) + shift,
            "score": float(agree), "count": n, "score_name": "label_agreement"}


def reference_fid(real, fake):
    """torchmetrics' FID fed the features themselves (the concatenation over ranks)."""
    from torchmetrics.image.fid import FrechetInceptionDistance

    fid = FrechetInceptionDistance(feature=sd._Given(real.shape[1]))
    fid.update(torch.as_tensor(real), real=True)
    fid.update(torch.as_tensor(fake), real=False)
    return float(fid.compute())


def test_fid_is_computed_once_from_the_features_of_all_ranks():
    rng = np.random.default_rng(0)
    rank0 = [fake_stats(rng, 40, 0.0, 38), fake_stats(rng, 30, 0.1, 27)]  # two val batches
    rank1 = [fake_stats(rng, 50, 1.5, 20)]  # a rank whose images differ more
    metric = FidMetric({"label_agreement": 0.85})
    locals_ = [metric.local(rank0), metric.local(rank1)]
    values = []
    for rank in (0, 1):
        reduced = metric.reduce(locals_[rank], Ranks(locals_, rank))
        values.append(metric.value(reduced))
        assert metric.samples(reduced) == 120
    everything = [s for s in rank0 + rank1]
    expected = reference_fid(np.concatenate([s["real"] for s in everything]),
                             np.concatenate([s["fake"] for s in everything]))
    assert values[0] == values[1] == pytest.approx(expected, rel=1e-9)
    per_rank = [reference_fid(np.concatenate([s["real"] for s in part]), np.concatenate([s["fake"] for s in part]))
                for part in (rank0, rank1)]
    assert abs(np.mean(per_rank) - expected) > 0.05 * expected  # averaging per rank would be wrong
    assert metric.last["score"] == pytest.approx((38 + 27 + 20) / 120)


def test_a_rank_without_validation_batches_adds_nothing():
    rng = np.random.default_rng(1)
    metric = FidMetric({"label_agreement": 0.85})
    stats = [fake_stats(rng, 20, 0.2, 19)]
    locals_ = [metric.local(stats), metric.local([])]
    assert locals_[1] is None
    alone = metric.value(metric.reduce(metric.local(stats), Ranks([metric.local(stats)])))
    assert metric.value(metric.reduce(locals_[0], Ranks(locals_))) == alone


def test_the_target_needs_the_fid_and_the_score_of_the_same_evaluation(capsys):
    rng = np.random.default_rng(2)
    metric = FidMetric({"label_agreement": 0.85})
    assert metric.higher_is_better is False
    metric.check_target(90.0)

    def evaluate(agree):
        stats = [fake_stats(rng, 100, 0.0, agree)]
        return metric.value(metric.reduce(metric.local(stats), Ranks([metric.local(stats)])))

    fid = evaluate(agree=90)
    assert fid < 5 and metric.reached(fid, 90.0)
    assert not metric.reached(fid, fid / 2)  # FID above the target
    fid = evaluate(agree=80)  # a good FID, but the prompts are not followed (0.80 < 0.85)
    assert not metric.reached(fid, 90.0)
    assert "label_agreement 0.8000 (needs >= 0.85) over 100 generated images" in capsys.readouterr().out
    assert not FidMetric({"label_agreement": 0.85}).reached(1.0, 90.0)  # no evaluation yet


# --- evaluation --------------------------------------------------------------------------------

def digits_batch(indices):
    x, y = sd.judge_data(8)["val"]
    images = ((x[indices, 0] + 1) * 127.5).round().to(torch.uint8).unsqueeze(-1).repeat(1, 1, 1, 3)
    return sd.on_device({"images": images, "labels": y[indices]}, CPU)


def test_each_validation_digit_gets_its_own_noise_whatever_the_batch():
    """Noise seeded by the sample's bytes: an image does not depend on how the val split is cut
    into ranks and batches."""
    both, second = digits_batch([0, 1]), digits_batch([1])
    a = sd.sample_noise(both, (2, 1, 8, 8), CPU)
    b = sd.sample_noise(second, (1, 1, 8, 8), CPU)
    assert torch.equal(a[1], b[0]) and not torch.equal(a[0], a[1])


def test_debug_evaluation_returns_judge_features_and_label_agreement():
    torch.manual_seed(0)
    model = sd.build(dataclasses.replace(DEBUG, sample_steps=2), num_classes=10, image_size=8)
    model.train(False)
    batch = digits_batch(list(range(12)))
    loss, stats = sd.loss_and_stats(model, batch)
    assert stats["real"].shape == stats["fake"].shape == (12, 64)
    assert stats["count"] == 12 and 0 <= stats["score"] <= 12 and stats["score_name"] == "label_agreement"
    assert torch.isfinite(loss)


def stand_in_networks(tmp_path, clip_dim):
    """Files with the interfaces of EVAL_NETWORKS, exported as a user would: a VAE decoder that
    upsamples 8x and a CLIP image tower that projects (TorchScript), a feature network that pools
    (torch.export, with a dynamic batch)."""

    class Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(4, 3, 1)

        def forward(self, latents):
            return torch.tanh(torch.nn.functional.interpolate(self.conv(latents), scale_factor=8.0))

    class Features(torch.nn.Module):
        def forward(self, images):
            return torch.nn.functional.adaptive_avg_pool2d(images.float() / 255, 4).flatten(1)

    class Clip(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(3, clip_dim)

        def forward(self, images):
            return self.proj(images.float().mean(dim=(2, 3)))

    env = {"HVDBENCH_SD_VAE_DECODER": str(tmp_path / "decoder.pt"), "HVDBENCH_SD_CLIP": str(tmp_path / "clip.pt"),
           "HVDBENCH_SD_FID_FEATURES": str(tmp_path / "features.pt2")}
    torch.jit.script(Decoder()).save(env["HVDBENCH_SD_VAE_DECODER"])
    torch.jit.script(Clip()).save(env["HVDBENCH_SD_CLIP"])
    images = torch.zeros((2, 3, 64, 64), dtype=torch.uint8)
    exported = torch.export.export(Features(), (images,), dynamic_shapes={"images": {0: torch.export.Dim("batch")}})
    torch.export.save(exported, env["HVDBENCH_SD_FID_FEATURES"])
    return env


def test_time_to_accuracy_on_latents_refuses_without_evaluation_networks(monkeypatch):
    for name in sd.EVAL_NETWORKS:
        monkeypatch.delenv(name, raising=False)
    model = sd.build(NARROW, latent_size=8)
    sd.param_groups(model, run_config(data="d", steps=5))  # throughput on real data: nothing needed
    with pytest.raises(ConfigError) as e:
        sd.param_groups(model, run_config(data="d"))
    message = str(e.value)
    assert "\n" not in message and message.startswith("stable_diffusion/full: a time-to-accuracy run")
    assert all(name in message for name in sd.EVAL_NETWORKS) and "--synthetic" in message
    monkeypatch.setenv("HVDBENCH_SD_CLIP", "/x")  # the others are named when one is given
    with pytest.raises(ConfigError, match="set HVDBENCH_SD_VAE_DECODER, HVDBENCH_SD_FID_FEATURES to"):
        sd.param_groups(model, run_config(data="d"))


def test_the_spec_refuses_the_full_flavors_time_to_accuracy_by_the_ranks_environment():
    """SPEC.refuse, before anything is built or launched: it reads the environment it is given (the
    ranks': a sweep's own with its --env), not this process's; a throughput run and the debug flavor
    (whose data may be images) pass."""
    spec = get_spec("stable_diffusion")
    networks = {name: "/exported/network.pt2" for name in sd.EVAL_NETWORKS}
    full, debug = run_config(data="d", flavor="full"), run_config(data="d", flavor="debug")
    message = spec.refuse(full, {})
    assert message.startswith("stable_diffusion/full: a time-to-accuracy run on sd_latents data")
    assert all(name in message for name in sd.EVAL_NETWORKS)
    assert spec.refuse(full, {"HVDBENCH_SD_CLIP": "/x"}).count("HVDBENCH_SD_CLIP") == 0  # the others only
    assert spec.refuse(full, networks) is None
    assert spec.refuse(run_config(data="d", flavor="full", steps=5), {}) is None  # throughput
    assert spec.refuse(debug, {}) is None


def test_an_evaluation_network_that_is_not_an_exported_file_is_named(tmp_path, monkeypatch):
    env = stand_in_networks(tmp_path, clip_dim=16)
    (tmp_path / "bad.pt").write_text("not a module")
    for name, value in {**env, "HVDBENCH_SD_FID_FEATURES": str(tmp_path / "bad.pt")}.items():
        monkeypatch.setenv(name, value)
    model = sd.build(NARROW, latent_size=8)
    with pytest.raises(ConfigError, match=r"HVDBENCH_SD_FID_FEATURES=.*bad.pt: not a torch.export \(.pt2\) or TorchScript file"):
        sd.param_groups(model, run_config(data="d"))


def test_latents_evaluation_uses_the_provided_networks(tmp_path, monkeypatch):
    info = {"latent_channels": 4, "latent_size": 8, "context_len": 77, "context_dim": 1024, "clip_dim": 16}
    for name, value in stand_in_networks(tmp_path, info["clip_dim"]).items():
        monkeypatch.setenv(name, value)
    torch.manual_seed(0)
    model = sd.build(dataclasses.replace(NARROW, sample_steps=2, guidance=8.0), **info)
    sd.param_groups(model, run_config(data="d"))  # time-to-accuracy: loads them
    assert model.evaluators.vae_decoder is not None and model.evaluators.clip is not None
    model.train(False)
    batch = sd.on_device(torch_batch(SD_LATENTS.synthetic(3, info, np.random.default_rng(0))), CPU)
    _, stats = sd.loss_and_stats(model, batch)
    assert stats["real"].shape == stats["fake"].shape == (3, 3 * 4 * 4)  # pooled 64x64 decoded images
    assert stats["score_name"] == "clip_score" and -3 <= stats["score"] <= 3 and stats["count"] == 3
    metric = FidMetric({"clip_score": 0.15})
    value = metric.value(metric.reduce(metric.local([stats, stats]), Ranks([metric.local([stats, stats])])))
    assert np.isfinite(value) and metric.last["score_name"] == "clip_score"


# --- the spec ----------------------------------------------------------------------------------

def test_spec_recipe_and_kinds():
    assert SPEC.data_kinds == ("sd_latents", "images") and SPEC.benchmark == "stable_diffusion"
    assert SPEC.target("full") == SPEC.target("debug") == 90.0  # MLPerf's FID, and the debug's
    assert SPEC.metric.score_floors == {"clip_score": 0.15, "label_agreement": 0.85}
    assert (SPEC.defaults["optimizer"], SPEC.defaults["weight_decay"]) == ("adamw", 0.01)
    assert SPEC.defaults["lr"] / SPEC.defaults["lr_base_batch"] == pytest.approx(1.25e-7)  # MLPerf's rule
    assert (DEBUG.sample_steps, DEBUG.guidance, FULL.sample_steps, FULL.guidance) == (10, 1.5, 50, 8.0)
