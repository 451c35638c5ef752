"""`hvdbench prepare coco` on a tiny COCO-format folder written here (PIL-drawn JPEGs, polygons, a
crowd's uncompressed RLE, category ids 1, 3, 90): boxes and masks round-trip against pycocotools'
own rasterisation, bad annotations fail with one line naming the culprit, a rerun resumes, and two
MPI ranks make the same dataset as one process.

The command is invoked through click's CliRunner on hvdbench.models.ssd.cli.coco (the same
function `hvdbench prepare coco` runs once the SSD spec lists it), and the MPI case calls
prepare_coco under mpirun.
"""

import json
import math
import sys

import h5py
import numpy as np
import pytest
from click.testing import CliRunner
from conftest import run

from hvdbench.errors import DatasetError
from hvdbench.models.ssd.cli import coco
from hvdbench.families.detection.data import decode_masks

pytestmark = [pytest.mark.integration]

S = 32  # the canvas
CATEGORIES = [{"id": 1, "name": "circle"}, {"id": 3, "name": "square"}, {"id": 90, "name": "triangle"}]


def polygon_box(points):
    xs, ys = points[0::2], points[1::2]
    return [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]


def circle(cx, cy, r, n=16):
    return [round(v, 2) for k in range(n) for v in (cx + r * math.cos(2 * math.pi * k / n),
                                                     cy + r * math.sin(2 * math.pi * k / n))]


def uncompressed_rle(mask):
    """COCO's uncompressed RLE of a mask: run lengths over its column-major pixels, zeros first."""
    flat = mask.flatten(order="F")
    edges = np.flatnonzero(np.diff(flat)) + 1
    runs = np.diff(np.concatenate([[0], edges, [len(flat)]])).tolist()
    if flat[0]:
        runs = [0] + runs
    return {"size": list(mask.shape), "counts": runs}


def write_coco(root):
    """root/{train,val}2017/*.jpg and root/annotations/instances_{train,val}2017.json."""
    from PIL import Image, ImageDraw

    # (file, width, height, [(category id, polygon or crowd block)])
    layout = {
        "train": [("a.jpg", 60, 40, [(1, circle(15, 20, 9)), (3, [30, 5, 55, 5, 55, 30, 30, 30]),
                                     (90, [40, 32, 50, 39, 36, 39])]),
                  ("b.jpg", 30, 50, [(90, [2, 48, 28, 48, 15, 20]), (3, ("crowd", 4, 2, 26, 18))]),
                  ("c.jpg", 48, 48, [])],  # no object: kept
        "val": [("d.jpg", 50, 50, [(3, [10, 10, 40, 10, 40, 45, 10, 45])]),
                ("e.jpg", 64, 24, [(1, circle(12, 12, 10)), (90, [30, 22, 60, 22, 45, 2])])],
    }
    ann_id, image_id = 100, 1
    for split, images in layout.items():
        (root / f"{split}2017").mkdir(parents=True)
        data = {"images": [], "annotations": [], "categories": CATEGORIES}
        for file, w, h, objs in images:
            im = Image.new("RGB", (w, h), (20, 30, 40))
            draw = ImageDraw.Draw(im)
            for cat, shape in objs:
                ann = {"id": ann_id, "image_id": image_id, "category_id": cat, "iscrowd": 0}
                if shape[0] == "crowd":
                    _, x1, y1, x2, y2 = shape
                    mask = np.zeros((h, w), np.uint8)
                    mask[y1:y2, x1:x2] = 1
                    ann.update(iscrowd=1, segmentation=uncompressed_rle(mask), bbox=[x1, y1, x2 - x1, y2 - y1])
                    draw.rectangle([x1, y1, x2 - 1, y2 - 1], fill=(200, 200, 60))
                else:
                    ann.update(segmentation=[shape], bbox=polygon_box(shape))
                    draw.polygon(shape, fill=(60 * cat % 255, 200, 120))
                data["annotations"].append(ann)
                ann_id += 1
            im.save(root / f"{split}2017" / file, quality=90)
            data["images"].append({"id": image_id, "file_name": file, "width": w, "height": h})
            image_id += 1
        (root / "annotations").mkdir(exist_ok=True)
        (root / "annotations" / f"instances_{split}2017.json").write_text(json.dumps(data))
    return root


def prepare(src, out, *extra):
    return CliRunner().invoke(coco, ["--src", str(src), "--out", str(out), "--image-size", str(S),
                                     "--workers", "1", *map(str, extra)])


def samples(out, split):
    """Every sample of a split, read straight from the shards."""
    manifest = json.loads((out / "manifest.json").read_text())
    rows = []
    for shard in manifest["splits"][split]["shards"]:
        with h5py.File(out / shard["file"], "r") as f:
            fields = {k: f[k][()] for k in f}
        rows += [{k: v[i] for k, v in fields.items()} for i in range(len(fields["image_id"]))]
    return rows


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    return write_coco(tmp_path_factory.mktemp("coco") / "src")


# pycocotools 2.0.11's own annToMask warns under numpy 2 (hvdbench's decode_rle silences it).
@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_boxes_and_masks_round_trip(src, tmp_path):
    from PIL import Image
    from pycocotools.coco import COCO

    out = tmp_path / "out"
    result = prepare(src, out, "--max-objects", 2, "--samples-per-shard", 2)
    assert result.exit_code == 0, result.output
    assert "dropped 1 object(s) beyond --max-objects 2 in 1 image(s)" in result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["category_ids"] == [1, 3, 90] and manifest["class_names"] == ["circle", "square", "triangle"]
    assert manifest["num_classes"] == 3 and manifest["max_objects"] == 2 and manifest["mask_bytes"] % 8 == 0
    assert manifest["dropped"] == {"objects": 1, "images": 1, "degenerate_boxes": 0}
    assert [manifest["splits"][s]["samples"] for s in ("train", "val")] == [3, 2]
    index = {1: 0, 3: 1, 90: 2}
    for split in ("train", "val"):
        gt = COCO(str(src / "annotations" / f"instances_{split}2017.json"))
        rows = samples(out, split)
        assert [int(r["image_id"]) for r in rows] == sorted(gt.getImgIds())
        for row in rows:
            info = gt.loadImgs(int(row["image_id"]))[0]
            w, h = info["width"], info["height"]
            scale = S / max(w, h)
            nw, nh = round(w * scale), round(h * scale)
            anns = sorted(gt.loadAnns(gt.getAnnIds(imgIds=info["id"])), key=lambda a: a["id"])
            if len(anns) > 2:  # the two largest boxes are kept (in id order)
                big = sorted(anns, key=lambda a: -a["bbox"][2] * a["bbox"][3])[:2]
                anns = sorted(big, key=lambda a: a["id"])
            n = int(row["num_objects"])
            assert n == len(anns)
            masks = decode_masks(row["masks"][:n], S)
            for j, ann in enumerate(anns):
                x, y, bw, bh = ann["bbox"]
                want = np.float32(np.array([x, y, x + bw, y + bh], np.float64) * scale)
                assert np.array_equal(row["boxes"][j], want)
                assert row["labels"][j] == index[ann["category_id"]] and row["crowd"][j] == ann["iscrowd"]
                own = np.asarray(Image.fromarray(gt.annToMask(ann)).resize((nw, nh), Image.Resampling.NEAREST))
                expected = np.zeros((S, S), np.uint8)
                expected[:nh, :nw] = own
                assert np.array_equal(masks[j], expected), (split, ann["id"])
                assert masks[j].any()
            assert (row["labels"][n:] == -1).all() and not row["masks"][n:].any()
            assert not row["images"][nh:].any() and not row["images"][:, nw:].any()  # letterbox padding
            assert row["images"][:nh, :nw].mean() > 10
    crowd = [r for r in samples(out, "train") if r["crowd"].any()]
    assert len(crowd) == 1

    from hvdbench.data.verify import verify

    assert verify(out).ok

    # A rerun keeps every shard; after losing one, a rerun remakes only that one.
    stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("*.h5")}
    assert prepare(src, out, "--max-objects", 2, "--samples-per-shard", 2).exit_code == 0
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.h5")} == stamps
    (out / "train-00001-of-00002.h5").unlink()
    (out / "manifest.json").unlink()
    assert prepare(src, out, "--max-objects", 2, "--samples-per-shard", 2).exit_code == 0
    after = {p.name: p.stat().st_mtime_ns for p in out.glob("*.h5")}
    assert {k: v for k, v in after.items() if k != "train-00001-of-00002.h5"} == \
        {k: v for k, v in stamps.items() if k != "train-00001-of-00002.h5"}
    assert json.loads((out / "manifest.json").read_text())["splits"] == manifest["splits"]


def test_without_masks_and_one_split(src, tmp_path):
    result = prepare(src, tmp_path / "o", "--no-masks", "--splits", "val")
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert manifest["mask_bytes"] == 0 and "masks" not in manifest["fields"] and list(manifest["splits"]) == ["val"]


def broken(src, tmp_path, split, edit):
    """A copy of the source whose `split` annotations are changed by edit(data)."""
    import shutil

    copy = tmp_path / "bad"
    shutil.copytree(src, copy)
    path = copy / "annotations" / f"instances_{split}2017.json"
    data = json.loads(path.read_text())
    edit(data, copy)
    path.write_text(json.dumps(data))
    return copy


def failure(src, out):
    result = prepare(src, out)
    assert result.exit_code != 0 and isinstance(result.exception, DatasetError), result.output
    message = str(result.exception)
    assert "\n" not in message
    assert not (out / "manifest.json").exists()
    return message


def test_a_box_outside_its_image_names_the_annotation_and_file(src, tmp_path):
    def edit(data, _):
        data["annotations"][1]["bbox"] = [30, 5, 32, 25]  # a.jpg is 60 wide: 62 > 60 + 1
    message = failure(broken(src, tmp_path, "train", edit), tmp_path / "o")
    assert "annotation 101" in message and "train2017/a.jpg" in message and "outside the 60x40 image" in message


def test_a_box_within_one_pixel_is_clipped(src, tmp_path):
    def edit(data, _):
        data["annotations"][1]["bbox"] = [30, 5, 30.8, 25]  # 60.8: rounding, clipped to 60
    result = prepare(broken(src, tmp_path, "train", edit), tmp_path / "o")
    assert result.exit_code == 0, result.output
    row = samples(tmp_path / "o", "train")[0]
    assert row["boxes"][1][2] == pytest.approx(S)


def test_an_unknown_category_is_named(src, tmp_path):
    def edit(data, _):
        data["annotations"][0]["category_id"] = 7
    message = failure(broken(src, tmp_path, "val", edit), tmp_path / "o")
    assert "category_id 7" in message and "annotation 105" in message and "instances_val2017.json" in message


def test_a_missing_image_file_is_named(src, tmp_path):
    def edit(data, copy):
        (copy / "val2017" / "e.jpg").unlink()
    bad = broken(src, tmp_path, "val", edit)
    message = failure(bad, tmp_path / "o")
    assert str(bad / "val2017" / "e.jpg") in message and "image file missing" in message


def test_missing_and_corrupt_annotation_files_are_named(src, tmp_path):
    def remove(data, copy):
        (copy / "annotations" / "instances_train2017.json").rename(copy / "elsewhere.json")
    bad = broken(src, tmp_path, "val", remove)
    message = failure(bad, tmp_path / "o")
    assert str(bad / "annotations" / "instances_train2017.json") in message and "missing" in message
    (bad / "annotations" / "instances_train2017.json").write_text('{"images": [')
    message = failure(bad, tmp_path / "o")
    assert "instances_train2017.json: not valid JSON" in message


@pytest.mark.timeout(240)
def test_two_ranks_make_the_same_coco_dataset(src, tmp_path, mpirun):
    code = ("import sys; from hvdbench.families.detection.coco import prepare_coco; "
            "from hvdbench.data.parallel import PrepareOptions; "
            "prepare_coco(sys.argv[1], sys.argv[2], image_size=32, samples_per_shard=1, "
            "options=PrepareOptions(workers=1, command='t'))")
    run([sys.executable, "-c", code, src, tmp_path / "one"])
    run([mpirun, "-np", "2", "--oversubscribe", sys.executable, "-c", code, src, tmp_path / "two"])
    one = json.loads((tmp_path / "one" / "manifest.json").read_text())
    two = json.loads((tmp_path / "two" / "manifest.json").read_text())
    assert one["splits"] == two["splits"] and one["mask_bytes"] == two["mask_bytes"]
    assert len(two["splits"]["train"]["shards"]) == 3  # one image a shard: both ranks wrote some
