"""torchvision's native operators, stood in for in pure PyTorch where its library cannot load.

    from hvdbench.frameworks.torch import vision
    vision.ensure_torchvision()      # before anything imports torchvision (transformers, peft...)
    import torchvision               # now imports, and detection models build, train and evaluate

Why: PyPI's torchvision 0.28.0 (the release paired with torch 2.13) is a CUDA build. Beside the CPU
torch 2.13.0 of hvdbench's CPU venv its `_C.so` cannot load (it needs libtorch_cuda.so), and
`import torchvision` then fails with "operator torchvision::nms does not exist" (its
`_meta_registrations.py` registers fakes for `torchvision::nms` and `qnms` unconditionally). Merely
having torchvision installed breaks transformers, peft, diffusers and torchmetrics too: they
import it when they find it installed.

What `ensure_torchvision()` does, once per process:

1. Detects the need exactly and cheaply: it finds torchvision's `_C` library with
   `importlib.util.find_spec` (no torchvision import) and asks torch to load it. When it loads (a
   GPU machine with the matching CUDA torch, or a CPU build of torchvision) nothing else happens:
   torchvision's own kernels serve every operator.
2. Otherwise it defines the operators torchvision needs at import and for detection with
   `torch.library`, under torchvision's own names, so every caller reaches them:
   - `torchvision::nms`: greedy NMS as torchvision's C++ kernel: boxes by descending score (a
     stable sort), a kept box suppresses every later box whose IoU with it is above the threshold.
   - `torchvision::roi_align`: RoIAlign with the C++ kernel's semantics (the `aligned` half-pixel
     shift, `sampling_ratio` points per bin or ceil(roi size / bins) when <= 0, bilinear
     interpolation, samples outside [-1, H] x [-1, W] count as 0), built on `F.grid_sample`, so
     autograd differentiates it (a CompositeImplicitAutograd kernel). torchvision's own Python
     fallback (`ops.roi_align._roi_align`) is `torch.compile`d and costs ~10 s per Mask R-CNN step
     on a CPU; this one a fraction of a second.
   - `torchvision::qnms`: the schema only (torchvision registers a fake for it at import); calling
     it raises.
   Then it imports torchvision and tells its `extension` module that the operators exist, so
   `roi_align` calls the operator instead of the compiled fallback. Other native operators
   (roi_pool, ps_roi_align, deform_conv2d...) stay missing: calling them raises torch's
   "operator ... does not exist"; no model here uses them.

`active()` says whether the stand-in is in use.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

_state: dict = {}  # "active": bool once ensure_torchvision() has run; "lib": the torch.library.Library


def _native_library() -> Path | None:
    """torchvision's compiled operator library, found without importing torchvision."""
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        for candidate in sorted(Path(folder).glob("_C.*")):
            if candidate.suffix in (".so", ".pyd", ".dylib"):
                return candidate
    return None


def _native_ops_load() -> bool:
    """Whether torchvision's own operators are usable: its library loads (torch.ops keeps it
    loaded; torchvision's import loads it again, which is a no-op), or torchvision is absent."""
    path = _native_library()
    if path is None:
        # No torchvision installed (nothing to repair), or an unusual layout whose import decides.
        return True
    try:
        torch.ops.load_library(str(path))
        return True
    except (OSError, RuntimeError, ImportError):
        return False


def ensure_torchvision() -> bool:
    """Make `import torchvision` work; True when the pure-PyTorch stand-in is active. Idempotent:
    later calls return at once."""
    if "active" in _state:
        return _state["active"]
    if _native_ops_load() or "torchvision" in sys.modules:
        # A torchvision imported before this call succeeded on its own: its ops are native.
        _state["active"] = False
        return False
    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
               "SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor")
    lib.impl("nms", nms, "CPU")
    lib.impl("qnms", _no_qnms, "CPU")
    # CompositeImplicitAutograd: the kernel is made of differentiable torch ops, so autograd (and
    # the meta device, for shapes) goes through it with no registration of its own.
    lib.impl("roi_align", roi_align, "CompositeImplicitAutograd")
    _state["lib"] = lib  # the registrations live as long as this object
    _state["active"] = True

    import torchvision  # noqa: F401  (imports now that nms and qnms exist)

    # torchvision decided at import that its library is missing; the operators now exist. The
    # modules from sys.modules: `torchvision.ops.roi_align` as an attribute is the function.
    sys.modules["torchvision.extension"]._has_ops = lambda: True
    sys.modules["torchvision.ops.roi_align"]._has_ops = lambda: True
    return True


def active() -> bool:
    """Whether the pure-PyTorch operators stand in for torchvision's (after ensure_torchvision)."""
    return ensure_torchvision()


# --- the operators -------------------------------------------------------------------------------

# Boxes NMS resolves together: a tile's IoU with the boxes kept so far is one tensor operation,
# and only the greedy order within the tile is a loop (over numpy booleans, ~1 us a box). One
# box at a time in torch cost ~10 operations of ~10 us per kept box: 107 ms per Mask R-CNN debug
# RPN call, a third of its training step.
_NMS_TILE = 256


def _suppressed(boxes: torch.Tensor, areas: torch.Tensor, rows: torch.Tensor, cols: slice,
                iou_threshold: float) -> torch.Tensor:
    """(len(rows), cols) booleans: IoU of box rows[r] with box c above the threshold, computed as
    torchvision does (areas (x2-x1)(y2-y1), no +1; a zero union gives NaN, which suppresses
    nothing) and compared in double, as the C++ kernel compares its float IoU with a double."""
    a, b = boxes[rows, None, :], boxes[None, cols, :]
    w = (torch.minimum(a[..., 2], b[..., 2]) - torch.maximum(a[..., 0], b[..., 0])).clamp(min=0)
    h = (torch.minimum(a[..., 3], b[..., 3]) - torch.maximum(a[..., 1], b[..., 1])).clamp(min=0)
    inter = w * h
    iou = inter / (areas[rows, None] + areas[None, cols] - inter)
    return iou.double() > iou_threshold


def nms(dets: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """Indices of the boxes greedy non-maximum suppression keeps, by descending score.

    `dets` (N, 4) are x1, y1, x2, y2; IoU as torchvision computes it (`_suppressed`). The boxes
    are taken in tiles of _NMS_TILE by score: a tile's boxes that a box kept before it suppresses
    go at once, then the rest are kept or suppressed in order within the tile, as the C++ kernel
    does one box at a time. Memory O(N x _NMS_TILE), so thousands of boxes are fine.
    """
    if dets.numel() == 0:
        return torch.empty(0, dtype=torch.long, device=dets.device)
    order = torch.sort(scores, descending=True, stable=True).indices
    boxes = dets[order]
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    n = boxes.shape[0]
    keep = torch.empty(0, dtype=torch.long)
    for start in range(0, n, _NMS_TILE):
        tile = slice(start, min(start + _NMS_TILE, n))
        alive = torch.ones(tile.stop - start, dtype=torch.bool)
        if keep.numel():
            alive &= ~_suppressed(boxes, areas, keep, tile, iou_threshold).any(0)
        within = _suppressed(boxes, areas, torch.arange(start, tile.stop), tile, iou_threshold).numpy()
        alive = alive.numpy()
        for j in range(len(alive)):
            if alive[j]:
                alive[j + 1:] &= ~within[j, j + 1:]
        keep = torch.cat((keep, start + torch.from_numpy(alive.nonzero()[0])))
    return order[keep]


def _no_qnms(dets, scores, iou_threshold):
    raise NotImplementedError("torchvision::qnms (quantized NMS) needs torchvision's native library, "
                              "which cannot load beside this torch build")


def roi_align(input: torch.Tensor, rois: torch.Tensor, spatial_scale: float, pooled_height: int,
              pooled_width: int, sampling_ratio: int, aligned: bool) -> torch.Tensor:
    """RoIAlign of `rois` (K, 5: batch index, x1, y1, x2, y2 in input pixels / spatial_scale) over
    `input` (N, C, H, W): (K, C, pooled_height, pooled_width), the C++ kernel's values.

    Each bin averages grid_h x grid_w bilinear samples. Rois are taken in groups of one image and
    one sampling grid (a fixed `sampling_ratio` makes one group per image; the adaptive one,
    ceil(roi size / bins), a few), and each group is one `grid_sample` call with
    align_corners=True (normalised -1/+1 = pixel centres 0 and size-1) and border padding (a
    sample in [-1, 0] reads row 0, one in [H-1, H] row H-1, as the kernel clamps them); samples
    outside [-1, H] are multiplied by 0.
    """
    num_rois, channels = rois.shape[0], input.shape[1]
    height, width = input.shape[-2], input.shape[-1]
    work = input if input.dtype in (torch.float32, torch.float64) else input.float()
    out = work.new_zeros((num_rois, channels, pooled_height, pooled_width))
    if num_rois == 0:
        return out.to(input.dtype)
    rois = rois.detach().to(work.dtype)
    offset = 0.5 if aligned else 0.0
    start_x = rois[:, 1] * spatial_scale - offset
    start_y = rois[:, 2] * spatial_scale - offset
    roi_w = rois[:, 3] * spatial_scale - offset - start_x
    roi_h = rois[:, 4] * spatial_scale - offset - start_y
    if not aligned:  # the legacy kernel makes every roi at least one pixel
        roi_w, roi_h = roi_w.clamp(min=1.0), roi_h.clamp(min=1.0)
    bin_w, bin_h = roi_w / pooled_width, roi_h / pooled_height
    if sampling_ratio > 0:
        grid_w = torch.full((num_rois,), sampling_ratio, dtype=torch.long, device=rois.device)
        grid_h = grid_w
    else:
        grid_w = torch.ceil(roi_w / pooled_width).clamp(min=0).long()
        grid_h = torch.ceil(roi_h / pooled_height).clamp(min=0).long()
    batch = rois[:, 0].long()

    groups = torch.stack((batch, grid_h, grid_w), dim=1)
    for n, gh, gw in torch.unique(groups, dim=0).tolist():
        if gh == 0 or gw == 0:  # an empty (or inverted) aligned roi has no sample: its bins are 0
            continue
        sel = torch.nonzero((groups == groups.new_tensor((n, gh, gw))).all(dim=1)).squeeze(1)
        # Sample positions: bin p's sample i sits at start + p * bin + (i + 0.5) * bin / grid.
        ys = _sample_positions(start_y[sel], bin_h[sel], pooled_height, gh)  # (k, PH * gh)
        xs = _sample_positions(start_x[sel], bin_w[sel], pooled_width, gw)  # (k, PW * gw)
        inside = ((ys >= -1.0) & (ys <= height))[:, :, None] & ((xs >= -1.0) & (xs <= width))[:, None, :]
        k = sel.numel()
        grid = torch.stack((_normalise(xs, width)[:, None, :].expand(k, ys.shape[1], xs.shape[1]),
                            _normalise(ys, height)[:, :, None].expand(k, ys.shape[1], xs.shape[1])), dim=-1)
        grid = grid.reshape(1, k * ys.shape[1], xs.shape[1], 2)
        samples = F.grid_sample(work[n:n + 1], grid, mode="bilinear", padding_mode="border",
                                align_corners=True)  # (1, C, k * PH * gh, PW * gw)
        samples = samples.view(channels, k, ys.shape[1], xs.shape[1]) * inside.to(work.dtype)
        # Each bin's mean of its gh x gw samples: avg_pool2d takes them in place (a sum over two
        # strided dimensions of a 6-d view cost 1.7x as much, forward and backward).
        pooled = F.avg_pool2d(samples, (gh, gw))  # (C, k, PH, PW)
        out = out.index_copy(0, sel, pooled.permute(1, 0, 2, 3))
    return out.to(input.dtype)


def _sample_positions(start: torch.Tensor, bin_size: torch.Tensor, bins: int, grid: int) -> torch.Tensor:
    steps = torch.arange(bins, device=start.device, dtype=start.dtype)[:, None]
    within = (torch.arange(grid, device=start.device, dtype=start.dtype)[None, :] + 0.5) / grid
    offsets = (steps + within).reshape(-1)  # bin + (i + 0.5) / grid, in bins
    return start[:, None] + offsets[None, :] * bin_size[:, None]


def _normalise(coords: torch.Tensor, size: int) -> torch.Tensor:
    """Pixel coordinates -> grid_sample's [-1, 1] with align_corners=True (a size of 1: 0)."""
    return coords * (2.0 / max(size - 1, 1)) - 1.0 if size > 1 else torch.zeros_like(coords)

