"""hvdbench/frameworks/torch/vision.py: torchvision's nms and roi_align stood in for in pure PyTorch
where torchvision's native library cannot load (the CPU venv: PyPI's torchvision 0.28.0 is a CUDA
build), checked against a brute-force NMS and torchvision's own pure-Python RoIAlign; and the
libraries that import torchvision (transformers, peft, diffusers, torchmetrics) importing after it."""

import importlib.util
import subprocess
import sys
import textwrap

import pytest
import torch

from hvdbench.frameworks.torch import vision

# torchvision is the `detection` extra (scripts/setup.sh installs it); found without importing it.
if importlib.util.find_spec("torchvision") is None:
    pytest.skip("torchvision is not installed (pip install -e .[detection])", allow_module_level=True)
ACTIVE = vision.ensure_torchvision()
import torchvision  # noqa: E402
from torchvision.ops import roi_align as _ra  # noqa: E402,F401

# torchvision's pure-Python RoIAlign, "transcribed off the CUDA kernel"; lazily torch.compile'd,
# so called through __wrapped__ (eager, exact). It clamps samples outside the image to the border,
# where the C++/CUDA kernels (and the stand-in) count them as 0: compared inside the image only.
REFERENCE = sys.modules["torchvision.ops.roi_align"]._roi_align.__wrapped__


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300)


def brute_force_nms(boxes, scores, threshold):
    """Greedy NMS as written in the papers, one pair at a time."""
    order = sorted(range(len(scores)), key=lambda i: -float(scores[i]))
    keep = []
    for i in order:
        suppressed = False
        for j in keep:
            a, b = boxes[i].tolist(), boxes[j].tolist()
            w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
            h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
            inter = w * h
            union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
            if union > 0 and inter / union > threshold:
                suppressed = True
                break
        if not suppressed:
            keep.append(i)
    return keep


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7])
def test_nms_keeps_what_brute_force_greedy_nms_keeps(seed, threshold):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(300, 2, generator=g, dtype=torch.float64) * 50
    boxes = torch.cat((xy, xy + 1 + torch.rand(300, 2, generator=g, dtype=torch.float64) * 20), 1)
    scores = torch.randperm(300, generator=g).double()  # distinct scores: one right order
    kept = torchvision.ops.nms(boxes, scores, threshold).tolist()
    assert kept == brute_force_nms(boxes, scores, threshold)
    assert 0 < len(kept) < 300
    # batched_nms (per class) goes through the same operator.
    labels = torch.randint(0, 3, (300,), generator=g)
    kept = set(torchvision.ops.batched_nms(boxes, scores, labels, threshold).tolist())
    for c in range(3):
        idx = torch.nonzero(labels == c).squeeze(1)
        assert {int(idx[i]) for i in brute_force_nms(boxes[idx], scores[idx], threshold)} == \
            {i for i in kept if labels[i] == c}


@pytest.mark.parametrize("threshold", [0.3, 0.7])
def test_the_stand_in_nms_keeps_the_same_boxes_across_tiles(threshold, monkeypatch):
    """Tiles of 32 over 300 boxes: boxes kept in earlier tiles suppress later ones, the order within
    a tile still counts (the stand-in itself, also where torchvision's kernel is loaded)."""
    g = torch.Generator().manual_seed(7)
    xy = torch.rand(300, 2, generator=g) * 50
    boxes = torch.cat((xy, xy + 1 + torch.rand(300, 2, generator=g) * 20), 1)
    scores = torch.randperm(300, generator=g).float()
    whole = vision.nms(boxes, scores, threshold).tolist()
    monkeypatch.setattr(vision, "_NMS_TILE", 32)
    tiled = vision.nms(boxes, scores, threshold).tolist()
    assert tiled == whole == brute_force_nms(boxes, scores, threshold)
    assert 32 < len(tiled) < 300


def test_nms_suppresses_above_the_threshold_only():
    boxes = torch.tensor([[0, 0, 10, 10], [0, 0, 10, 5], [20, 20, 30, 30]], dtype=torch.float32)
    scores = torch.tensor([0.9, 0.8, 0.7])
    # IoU of the first two is exactly 0.5: suppressed when the threshold is below it, not at it.
    assert torchvision.ops.nms(boxes, scores, 0.5).tolist() == [0, 1, 2]
    assert torchvision.ops.nms(boxes, scores, 0.49).tolist() == [0, 2]
    assert torchvision.ops.nms(boxes[:0], scores[:0], 0.5).tolist() == []


def _rois_inside(g, n, k, height, width, scale):
    """k rois whose every sample lies inside the image (where the reference's clamping and the
    kernel's zeroing agree)."""
    batch = torch.randint(0, n, (k, 1), generator=g).float()
    x1 = torch.rand(k, generator=g) * (width - 2)
    y1 = torch.rand(k, generator=g) * (height - 2)
    x2 = x1 + 0.3 + torch.rand(k, generator=g) * (width - 1 - x1 - 0.3)
    y2 = y1 + 0.3 + torch.rand(k, generator=g) * (height - 1 - y1 - 0.3)
    return torch.cat((batch, torch.stack((x1, y1, x2, y2), 1) / scale), 1)


@pytest.mark.parametrize("sampling_ratio", [-1, 0, 1, 2])
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("scale", [1.0, 0.25])
def test_roi_align_matches_torchvisions_reference_inside_the_image(sampling_ratio, aligned, scale):
    """In float64 the two agree to rounding; in float32 to grid_sample's coordinate rounding
    (its [-1, 1] normalisation costs about one float32 ulp of the pixel coordinate)."""
    for dtype, forward_tol, grad_tol in ((torch.float64, 1e-10, 1e-10), (torch.float32, 5e-5, 2e-4)):
        g = torch.Generator().manual_seed(sampling_ratio + 7 * aligned + int(8 * scale))
        x = torch.randn(2, 4, 19, 27, generator=g, dtype=dtype).requires_grad_()
        rois = _rois_inside(g, 2, 30, 19, 27, scale).to(dtype)
        out = torchvision.ops.roi_align(x, rois, (7, 5), scale, sampling_ratio, aligned)
        ref = REFERENCE(x, rois, scale, 7, 5, sampling_ratio, aligned)
        assert out.shape == (30, 4, 7, 5) and out.dtype == dtype
        assert (out - ref).abs().max() < forward_tol
        weights = torch.randn(out.shape, generator=g, dtype=dtype)
        grad, = torch.autograd.grad((out * weights).sum(), x)
        grad_ref, = torch.autograd.grad((ref * weights).sum(), x)
        assert (grad - grad_ref).abs().max() < grad_tol
        assert grad.abs().sum() > 0


def test_roi_align_counts_samples_outside_minus_one_to_h_as_zero():
    x = torch.arange(16.0).view(1, 1, 4, 4)
    # One sample per bin; 2x2 bins over (2, 2)-(8, 8): bin centres at 3.5 and 6.5 on each axis.
    # Only the (3.5, 3.5) sample is inside [-1, 4] on both axes: it reads pixel (3, 3) = 15
    # (clamped to the last row and column); the others are outside and count as 0.
    rois = torch.tensor([[0, 2.0, 2.0, 8.0, 8.0]])
    out = torchvision.ops.roi_align(x, rois, (2, 2), 1.0, 1, False)
    assert out.flatten().tolist() == [15.0, 0.0, 0.0, 0.0]
    # The same just inside the bound (-1 <= y < 0 reads row 0) and just outside it.
    inside = torch.tensor([[0, -1.5, -1.5, -0.5, -0.5]])  # one sample at (-1, -1)
    outside = torch.tensor([[0, -2.5, -2.5, -1.5, -1.5]])  # one sample at (-2, -2)
    assert torchvision.ops.roi_align(x, inside, (1, 1), 1.0, 1, True).item() == 0.0 + x[0, 0, 0, 0]
    assert torchvision.ops.roi_align(x, outside, (1, 1), 1.0, 1, True).item() == 0.0
    # An empty aligned roi has no sample at all.
    assert torchvision.ops.roi_align(x, torch.tensor([[0, 1.0, 1.0, 1.0, 1.0]]), (2, 2), 1.0, -1,
                                     True).abs().sum() == 0


def test_ensure_torchvision_is_idempotent():
    assert vision.ensure_torchvision() is ACTIVE
    assert vision.active() is ACTIVE


def test_transformers_peft_diffusers_and_torchmetrics_import_after_the_shim():
    proc = _python("""
        from hvdbench.frameworks.torch import vision
        vision.ensure_torchvision()
        import transformers, peft, diffusers
        from peft import LoraConfig, get_peft_model
        from diffusers import UNet2DConditionModel
        from transformers import LlamaForCausalLM
        from torchmetrics.image.fid import FrechetInceptionDistance
        import torchvision.models.detection
        print("ok")
    """)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")


def test_the_shim_is_needed_exactly_where_torchvisions_library_cannot_load():
    """Without the shim torchvision imports only where its native library loads; the shim detects
    which case this machine is, and does nothing where the library loads."""
    proc = _python("import torchvision; print(torchvision.extension._has_ops())")
    if ACTIVE:  # this machine's torch cannot load torchvision's library (the CPU venv)
        assert proc.returncode != 0
        assert "operator torchvision::nms does not exist" in proc.stderr
        assert vision._native_ops_load() is False
    else:  # a matching pair (CUDA torch + torchvision 0.28.0): native ops, shim inactive
        assert proc.returncode == 0 and proc.stdout.strip() == "True", proc.stderr[-2000:]
        assert "lib" not in vision._state
        assert torch.ops.torchvision.nms.default._schema is not None
