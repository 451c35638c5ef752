"""The detection models (ssd, retinanet, maskrcnn): exact parameter counts of the MLPerf-size
flavors (built on the meta device, no weights), SSD300's 8,732 default boxes, debug flavors that
learn on a batch of detection data, evaluation stats in the shape CocoMap reads, and a one-line
error for Mask R-CNN on data without masks."""

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("torchvision") is None:
    pytest.skip("torchvision is not installed (pip install -e .[detection])", allow_module_level=True)

import torch  # noqa: E402

from hvdbench.contracts import get_spec  # noqa: E402
from hvdbench.errors import DatasetError  # noqa: E402
from hvdbench.families.detection.data import DETECTION, encode_masks  # noqa: E402
from hvdbench.families.detection.metric import CocoMap  # noqa: E402

MODELS = ("ssd", "retinanet", "maskrcnn")
pytestmark = pytest.mark.usefixtures("torch_one_thread")  # tests/conftest.py


def _module(name):
    return get_spec(name).framework_module("torch")


def _counts(model):
    return (sum(p.numel() for p in model.parameters()),
            sum(p.numel() for p in model.parameters() if p.requires_grad))


@pytest.mark.parametrize("name, total, trained", [
    ("ssd", 19_972_534, 19_972_534),  # SSD300-ResNet34, 81 classes (MLPerf: ~20.0M)
    # ResNeXt50-32x4d FPN, 264 classes (MLPerf: 37.1M); stem and layer1 frozen as the reference
    ("retinanet", 37_060_652, 36_849_004),
    # R-50-FPN, 81 classes, FrozenBatchNorm2d (torchvision's trainable-BN build: 44,400,693)
    ("maskrcnn", 44_347_573, 44_125_173),
])
def test_full_flavors_have_mlperfs_parameter_counts(name, total, trained):
    spec = get_spec(name)
    cfg = spec.flavor("full")
    with torch.device("meta"):
        model = _module(name).build(cfg, **spec.synthetic_info(cfg))
    assert _counts(model) == (total, trained)
    assert spec.parameters["full"] == trained  # what a run records: the parameters it trains


def test_ssd300_places_8732_default_boxes():
    spec = get_spec("ssd")
    mod = _module("ssd")
    model = mod.build(spec.flavor("full"), num_classes=80)
    assert mod.num_default_boxes(model, 300) == 8732
    assert model.head.classification_head.num_columns == 81


def _batch(name, n=4, seed=0):
    """A device batch of random scenes shaped like the debug flavor's data (masks for maskrcnn)."""
    spec = get_spec(name)
    info = spec.synthetic_info(spec.flavor("debug"))
    raw = DETECTION.synthetic(n, info, np.random.default_rng(seed))
    return info, raw


@pytest.mark.parametrize("name", MODELS)
def test_debug_flavor_counts_and_learns_a_batch(name):
    spec = get_spec(name)
    mod = _module(name)
    info, raw = _batch(name)
    torch.manual_seed(0)
    model = mod.build(spec.flavor("debug"), **info)
    assert _counts(model) == (spec.parameters["debug"],) * 2
    batch = mod.on_device({k: torch.from_numpy(v) for k, v in raw.items()}, torch.device("cpu"))
    assert batch["images"].shape == (4, 3, 64, 64) and batch["images"].dtype == torch.float32
    model.train()
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    losses = []
    for _ in range(8):
        loss, _ = mod.loss_and_stats(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(np.isfinite(losses))
    assert min(losses[-3:]) < 0.8 * losses[0], losses


@pytest.mark.parametrize("name", MODELS)
def test_evaluation_returns_coco_map_stats(name):
    spec = get_spec(name)
    mod = _module(name)
    info, raw = _batch(name, n=3, seed=1)
    raw["crowd"][0, 0] = 1  # a crowd region stays in the ground truth (the evaluator ignores it)
    model = mod.build(spec.flavor("debug"), **info).eval()
    with torch.no_grad():
        loss, stats = mod.loss_and_stats(model, mod.on_device({k: torch.from_numpy(v) for k, v in raw.items()},
                                                              torch.device("cpu")))
    assert float(loss) == 0.0
    assert stats["mask_floor"] == (0.40 if name == "maskrcnn" else None)
    assert [im["image_id"] for im in stats["images"]] == raw["image_id"].tolist()
    for i, im in enumerate(stats["images"]):
        n = int(raw["num_objects"][i])
        assert im["size"] == 64 and im["gt_boxes"].shape == (n, 4)
        assert (im["gt_labels"] == raw["labels"][i, :n]).all()  # 0..C-1, whatever the model's own
        assert im["gt_crowd"].tolist() == raw["crowd"][i, :n].astype(bool).tolist()
        k = len(im["scores"])
        assert im["boxes"].shape == (k, 4) and im["labels"].shape == (k,)
        assert all(0 <= label < info["num_classes"] for label in im["labels"])
        for key in ("boxes", "scores", "labels", "gt_boxes"):
            assert isinstance(im[key], np.ndarray)  # host objects, no tensors
        if name == "maskrcnn":
            assert len(im["gt_masks"]) == n and all(isinstance(m, bytes) for m in im["gt_masks"])
            assert len(im["masks"]) == k
        else:
            assert im["gt_masks"] is None and im["masks"] is None
    # CocoMap takes them as they are (an untrained model scores near 0).
    value = CocoMap().value([stats])
    assert 0.0 <= value <= 1.0


def test_targets_skip_crowd_padding_and_empty_boxes_and_shift_labels_for_background():
    from hvdbench.families.detection.torch import targets

    masks = np.zeros((3, 8, 8), np.uint8)
    masks[:, 2:5, 2:5] = 1
    batch = {"images": torch.zeros(1, 3, 8, 8), "num_objects": torch.tensor([3]),
             "boxes": torch.tensor([[[1.0, 1, 4, 4], [2, 2, 2, 6], [0, 0, 8, 8], [0, 0, 0, 0]]]),
             "labels": torch.tensor([[0, 1, 2, -1]], dtype=torch.int32),
             "crowd": torch.tensor([[0, 0, 1, 0]], dtype=torch.uint8),
             "masks": torch.from_numpy(encode_masks(np.concatenate([masks, masks[:1] * 0]), 32)[None])}
    # Object 1 has no width, object 2 is a crowd, row 3 is padding: only object 0 is trained on.
    with_bg, = targets(batch, background=True, masks=True)
    assert with_bg["boxes"].tolist() == [[1.0, 1, 4, 4]] and with_bg["labels"].tolist() == [1]
    assert with_bg["masks"].shape == (1, 8, 8) and int(with_bg["masks"].sum()) == 9
    without, = targets(batch, background=False)
    assert without["labels"].tolist() == [0] and "masks" not in without


def test_maskrcnn_refuses_data_without_masks():
    spec = get_spec("maskrcnn")
    with pytest.raises(DatasetError, match="prepare .*--masks"):
        _module("maskrcnn").build(spec.flavor("debug"), num_classes=10, image_size=64, max_objects=3, mask_bytes=0)


def test_specs_share_the_detection_kind_and_metric():
    ssd, retinanet, maskrcnn = (get_spec(n) for n in MODELS)
    assert ssd.kinds == retinanet.kinds == maskrcnn.kinds == (DETECTION,)
    assert ssd.prepare_commands == ("hvdbench.models.ssd.cli:coco",
                                    "hvdbench.models.ssd.cli:digit_scenes")
    assert retinanet.prepare_commands == maskrcnn.prepare_commands == ()
    assert (ssd.mlperf_target, retinanet.mlperf_target, maskrcnn.mlperf_target) == (0.212, 0.34, 0.377)
    assert (ssd.benchmark, retinanet.benchmark, maskrcnn.benchmark) == ("ssd", "ssd", "maskrcnn")
    assert maskrcnn.flavor("full").mask_target == 0.339
    for spec in (ssd, retinanet, maskrcnn):
        assert isinstance(spec.metric, CocoMap)
