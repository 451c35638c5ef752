"""Bad input to the model and data classes (issue 30, third round): each is refused in one line naming
the file, record, key or value at fault, with a non-zero exit, before anything already written is
touched. COCO boxes that are not finite or have a negative size, non-finite values in any float
field of any kind at `prepare verify`, MovieLens ids beyond the shards' int32 and ratings files
without a row, and on a CPU a precision the model cannot run (gnmt's fp16 LSTMs) or a LoRA base that
cannot fit, refused before the model is built."""

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from hvdbench.cli.main import cli
from hvdbench.data.parallel import PrepareOptions
from hvdbench.data.shards import write_shard
from hvdbench.data.synthetic import prepare_synthetic
from hvdbench.data.verify import verify
from hvdbench.errors import DatasetError


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def one_error_line(result) -> str:
    assert result.exit_code != 0, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


# --- prepare coco: boxes that are not finite or have a negative size ------------------------------

def coco_src(root, bbox, width=60, height=40):
    """A one-image COCO layout (the image file is only stat'ed before the checks refuse)."""
    (root / "annotations").mkdir(parents=True)
    (root / "train2017").mkdir()
    (root / "train2017" / "a.jpg").write_bytes(b"not decoded before the checks")
    data = {"images": [{"id": 1, "file_name": "a.jpg", "width": width, "height": height}],
            "categories": [{"id": 1, "name": "thing"}],
            "annotations": [{"id": 7, "image_id": 1, "category_id": 1, "bbox": [1, 1, 5, 5], "iscrowd": 0},
                            {"id": 42, "image_id": 1, "category_id": 1, "bbox": bbox, "iscrowd": 0}]}
    path = root / "annotations" / "instances_train2017.json"
    path.write_text(json.dumps(data))  # NaN and Infinity as Python's json writes (and COCO tools read) them
    return path


@pytest.mark.parametrize("bbox, words", [
    ([math.nan, 1, 2, 3], "holds a non-finite value (NaN or infinity)"),
    ([1, 1, math.nan, 3], "holds a non-finite value (NaN or infinity)"),
    ([1, 1, 2, math.inf], "holds a non-finite value (NaN or infinity)"),
    ([-math.inf, 1, 2, 3], "holds a non-finite value (NaN or infinity)"),
    ([5, 5, -2, 3], "has a negative width or height"),
    ([5, 5, 2, -0.5], "has a negative width or height"),
])
def test_coco_refuses_non_finite_and_negative_size_boxes_naming_file_and_annotation(tmp_path, bbox, words):
    ann = coco_src(tmp_path / "coco", bbox)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("already here")
    error = one_error_line(run("prepare", "coco", "--src", tmp_path / "coco", "--out", out, "--splits", "train",
                               "--no-masks"))
    assert f"{ann}: annotation 42 (train2017/a.jpg): bbox" in error and words in error
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]  # nothing written, nothing lost


def test_coco_refuses_an_image_without_width_or_height(tmp_path):
    ann = coco_src(tmp_path / "coco", [1, 1, 2, 2], width=0)
    error = one_error_line(run("prepare", "coco", "--src", tmp_path / "coco", "--out", tmp_path / "out",
                               "--splits", "train", "--no-masks"))
    assert f"{ann}: images[0]: image 1 is 0x40; width and height must be positive" in error
    assert not (tmp_path / "out").exists()


# --- prepare verify: non-finite values in every float field, of any kind -------------------------

def poke(root, field, sample, value, split="train"):
    """Write `value` into one sample of a shard's field, re-recording its checksum (so only the
    value check can find it); returns the shard's path."""
    manifest = json.loads((root / "manifest.json").read_text())
    shard = manifest["splits"][split]["shards"][0]
    path = root / shard["file"]
    with h5py.File(path) as f:
        arrays = {k: f[k][:] for k in f}
    arrays[field][sample].flat[-1] = value
    shard["sha256"] = write_shard(path, arrays, source="poked")["sha256"]
    (root / "manifest.json").write_text(json.dumps(manifest))
    return path


@pytest.mark.parametrize("like, info, field, value", [
    # boxes have a range ([0, image_size]), which NaN passes: every comparison with it is false
    ("detection", {"image_size": 16, "num_classes": 3, "max_objects": 2}, "boxes", np.nan),
    ("detection", {"image_size": 16, "num_classes": 3, "max_objects": 2}, "boxes", -np.inf),
    # float16 fields without a range at all
    ("sd_latents", {"latent_channels": 1, "latent_size": 2, "context_len": 2, "context_dim": 2, "clip_dim": 2},
     "context", np.inf),
    ("sd_latents", {"latent_channels": 1, "latent_size": 2, "context_len": 2, "context_dim": 2, "clip_dim": 2},
     "clip_text", np.nan),
])
def test_verify_refuses_non_finite_float_values_naming_shard_field_and_sample(tmp_path, like, info, field, value):
    root = tmp_path / "d"
    prepare_synthetic(like, 12, root, info=info, val_fraction=0.25, options=PrepareOptions(workers=1))
    assert verify(root).ok
    shard = poke(root, field, 3, value)
    problems = verify(root).problems
    assert problems == [f"{shard}: field {field!r} holds {float(value)} at sample 3, not a finite number"]
    result = run("prepare", "verify", root)  # the table of shards, then the error
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == f"Error: 1 problem(s); first: {problems[0]}"


def test_verify_names_the_sample_of_an_out_of_range_float(tmp_path):
    root = tmp_path / "d"
    prepare_synthetic("detection", 12, root, info={"image_size": 16, "num_classes": 3, "max_objects": 2},
                      val_fraction=0.25, options=PrepareOptions(workers=1))
    shard = poke(root, "boxes", 5, 16.5)
    assert verify(root).problems == [f"{shard}: field 'boxes' holds 16.5, outside [0, 16], at sample 5"]


# --- prepare movielens: ids beyond int32, files without a rating row -----------------------------

def ratings(tmp_path, text, name="ratings.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("row, shown", [
    ("1e23,2,3.5,5", "user id 1e23"),
    ("2147483648,2,3.5,5", "user id 2147483648"),
    ("1,99999999999999999999999,3.5,5", "item id 99999999999999999999999"),
    ("1,3.0e10,3.5,5", "item id 3.0e10"),
])
def test_movielens_refuses_ids_beyond_the_shards_int32_naming_file_and_line(tmp_path, row, shown):
    from hvdbench.models.ncf.prepare import prepare_movielens

    src = ratings(tmp_path, "userId,movieId,rating,timestamp\n1,2,3.5,4\n" + row + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow warning would be one
        with pytest.raises(DatasetError) as e:
            prepare_movielens(str(src), tmp_path / "out")
    assert str(e.value) == f"{src}:3: {shown} is beyond 2147483647, the largest id the shards' int32 holds"
    assert not (tmp_path / "out").exists()
    error = one_error_line(run("prepare", "movielens", "--src", src, "--out", tmp_path / "out"))
    assert f"{src}:3: {shown} is beyond" in error


@pytest.mark.parametrize("text, message", [
    ("userId,movieId,rating,timestamp\n", "no rating rows"),
    ("userId,movieId,rating,timestamp\n\n\n", "no rating rows"),
    ("", "empty file (no rating rows)"),
])
def test_movielens_without_a_rating_row_is_one_line_and_no_numpy_warning(tmp_path, capfd, text, message):
    src = ratings(tmp_path, text)
    result = run("prepare", "movielens", "--src", src, "--out", tmp_path / "out")
    assert one_error_line(result) == f"Error: {src}: {message}"
    captured = capfd.readouterr()
    assert "Warning" not in captured.err + captured.out and "loadtxt" not in captured.err + captured.out


# --- train on a CPU: checks before the model is built --------------------------------------------

class FakeDist:
    rank, size, local_size, cross_size = 0, 1, 1, 1
    hostname, device_name = "here", "cpu"
    versions: dict = {}  # nothing to warn of: the torch-range warning has its own test

    def allgather_object(self, value):
        return [value]


class Built(Exception):
    """The trainer was constructed (the model built)."""


@pytest.fixture
def worker(monkeypatch):
    """hvdbench.train.worker.run with a framework whose Trainer raises Built: what the worker does
    before building the model, on a CPU, without a framework."""
    from hvdbench import frameworks
    from hvdbench.train import worker as worker_mod

    def trainer(*args, **kwargs):
        raise Built()

    fake = SimpleNamespace(init_dist=lambda *a, **k: FakeDist(), Trainer=trainer)
    monkeypatch.setattr(frameworks, "load", lambda name: fake)
    monkeypatch.delenv("HVDBENCH_HOST_MEMORY_GB", raising=False)

    def start(tmp_path, **options):
        from hvdbench.train.config import resolve

        cfg = resolve({"synthetic": True, "out": str(tmp_path / "run"), **options})
        worker_mod.run(cfg, {"rank": 0, "host": "here", "t0": 0.0})
    return start, worker_mod.AgreedError


def test_gnmt_fp16_on_a_cpu_is_refused_before_building_naming_the_cause(worker, tmp_path):
    start, refused = worker
    with pytest.raises(refused) as e:
        start(tmp_path, model="gnmt", flavor="debug", precision="fp16")
    assert str(e.value) == ("gnmt cannot train in fp16 on the CPU: its LSTMs have no fp16 kernel there (oneDNN); "
                            "use --precision bf16 or fp32")
    with pytest.raises(Built):
        start(tmp_path / "b", model="gnmt", flavor="debug", precision="bf16")


def test_fp16_that_runs_slowly_on_a_cpu_is_warned_once(worker, tmp_path, capsys):
    start, _ = worker
    with pytest.raises(Built):
        start(tmp_path, model="ssd", flavor="debug", precision="fp16")
    warned = [ln for ln in capsys.readouterr().out.splitlines() if "warning: fp16 on a CPU" in ln]
    assert warned == ["[hvdbench] warning: fp16 on a CPU runs most ops emulated: the debug flavors measured "
                      "2-18x slower than in fp32 (torch); --precision bf16 or fp32 runs faster here"]
    with pytest.raises(Built):
        start(tmp_path / "b", model="ssd", flavor="debug", precision="fp32")
    assert "warning" not in capsys.readouterr().out


def test_a_lora_base_that_cannot_fit_is_refused_before_it_is_built(worker, tmp_path, monkeypatch):
    start, refused = worker
    monkeypatch.setenv("HVDBENCH_HOST_MEMORY_GB", "16")
    with pytest.raises(refused) as e:
        start(tmp_path, model="llama2_lora")  # the default flavor, 7b, in bf16
    assert str(e.value).startswith("llama2_lora/7b (torch, horovod) needs ~18.4 GB for batch 1 per rank")
    assert str(e.value).endswith("16.0 GB available per rank (1 on this host); try --flavor debug")
    with pytest.raises(Built):  # the flavor it names passes the check and gets built
        start(tmp_path / "d", model="llama2_lora", flavor="debug")


def test_a_flavor_without_exact_counts_is_checked_after_building(worker, tmp_path, monkeypatch):
    start, _ = worker
    monkeypatch.setenv("HVDBENCH_HOST_MEMORY_GB", "0.001")
    with pytest.raises(Built):  # bert/base has no exact counts in its spec: built first, then checked
        start(tmp_path, model="bert", flavor="base")


# --- train: a manifest whose sizes the data breaks (token ids past its vocab_size) -------------------

def test_train_on_token_ids_past_the_manifests_vocabulary_is_one_line_naming_the_shard(tmp_path):
    # It failed deep in the model (`IndexError: index out of range in self`); `prepare verify` knew.
    root = tmp_path / "d"
    prepare_synthetic("lm_tokens", 16, root, info={"vocab_size": 256, "seq_len": 16},
                      val_fraction=0.25, options=PrepareOptions(workers=1))
    shard = poke(root, "tokens", 0, 300)  # one token id past the manifest's vocab_size
    out = tmp_path / "run"
    proc = subprocess.run([str(Path(sys.executable).parent / "hvdbench"), "train", "llama31_8b", "--flavor", "debug",
                           "--data", str(root), "--steps", "2", "--warmup-steps", "0", "--batch-per-gpu", "12",
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    error = json.loads((out / "result.json").read_text())["error"]
    assert error.endswith(f"{shard}: field 'tokens' holds 300 at sample 0, outside [0, 255] (the manifest's "
                          f"'lm_tokens' sizes); `hvdbench prepare verify {root}` checks every value"), error
