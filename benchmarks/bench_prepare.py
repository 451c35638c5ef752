"""Prepare and reader benchmarks: every figure is printed beside a baseline measured in the same run.

    .venv/bin/python benchmarks/bench_prepare.py              # about 3 minutes on 2 cores
    .venv/bin/python benchmarks/bench_prepare.py --images 800 --workdir /scratch/bench

1. Image prepare: `prepare images` at 224 px on one worker, in images/s per core, against the plain
   Pillow loop (open, convert to RGB, resize to 224x224) over the same JPEG files, and against the
   same loop using prepare's own decoder (so the ratio shows what sharding, HDF5 writing and the
   checksums cost). The files are 500x375 JPEGs (quality 90, ImageNet's typical size): real digits
   scaled up, under a colour gradient and sensor-like noise, so they decode like photographs.
2. Reader: one shuffled epoch of `open_dataset(...).loader(...)` against a raw contiguous h5py read
   of the same fields of the same shards, in 4 MB slices (h5py's fastest: the slice is reused from
   the CPU cache) and in slices of the loader's batch size (what an unshuffled reader hands over); images
   224 px and BERT at 512 tokens. Four page-cache states: warm after prepare wrote the files (best
   of 5 interleaved rounds, wall clock and CPU time), the first epoch of a new reader on cached
   files, from disk (our files evicted from the page cache with posix_fadvise before each read), and
   warm again after those reads from disk (best of 3 each).
3. Packing: efficiency (tokens / (packs x length)) of SPFHP and NNLSHP against the bound no packing
   can beat (max of ceil(tokens / length) and ceil(sequences / 3) packs), (a) at 512 tokens on a
   Wikipedia-like length histogram and (b) at 128 tokens on the built-in corpus (CPython's docs);
   and the time SPFHP takes on a histogram of 1M sequences.

   The Wikipedia-like histogram is made by this project's own BERT instance generator
   (hvdbench.models.bert.prepare.document_pairs, the published algorithm) run on synthetic documents whose
   sizes follow a log-normal model of English Wikipedia articles: sentences per article log-normal
   with median 12 (sigma 1.0), WordPiece tokens per sentence log-normal with median 26 (sigma 0.5).
   Many articles are shorter than 512 tokens, which is why the real dataset has so many short
   sequences; Krell et al. (2021) report about half of all tokens being padding at 512.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np


def best_of(rounds: int, fn) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


# --- 1. image prepare -------------------------------------------------------------------------------

def make_photos(root: Path, count: int) -> list[Path]:
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:375, 0:500]
    paths = []
    for i in range(count):
        digit = np.asarray(Image.fromarray((digits.images[i] * 15).astype(np.uint8)).resize((500, 375),
                                                                                             Image.BICUBIC), float)
        colour = rng.uniform(0, 1, 3)
        gradient = (xx / 500.0)[..., None] * colour * 120 + (yy / 375.0)[..., None] * (1 - colour) * 80
        img = np.clip(digit[..., None] * 0.6 + gradient + rng.normal(0, 8, (375, 500, 3)), 0, 255).astype(np.uint8)
        path = root / "train" / str(digits.target[i]) / f"img{i:05d}.JPEG"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(img).save(path, quality=90)
        paths.append(path)
    return paths


def bench_image_prepare(work: Path, count: int) -> dict:
    from PIL import Image

    from hvdbench.data.parallel import PrepareOptions
    from hvdbench.families.images.prepare import decode_image, prepare_images

    files = make_photos(work / "photos", count)
    size = 224

    def plain_pillow():
        for p in files:
            with Image.open(p) as im:
                np.asarray(im.convert("RGB").resize((size, size), Image.BILINEAR))

    def same_decoder():
        for p in files:
            decode_image(p, size)

    def prepare(workers):
        shutil.rmtree(work / "prepared", ignore_errors=True)
        prepare_images(work / "photos", work / "prepared", size=size, samples_per_shard=100,
                       val_fraction=0, options=PrepareOptions(workers=workers, command="bench"))

    rounds = 3
    t_plain = best_of(rounds, plain_pillow)
    t_same = best_of(rounds, same_decoder)
    t_prep = best_of(rounds, lambda: prepare(1))
    cores = len(os.sched_getaffinity(0))
    t_all = best_of(rounds, lambda: prepare(cores))
    return {"images": count, "file_mb": sum(p.stat().st_size for p in files) / 1e6,
            "plain_pillow_per_s": count / t_plain, "prepare_decoder_loop_per_s": count / t_same,
            "prepare_1_worker_per_s": count / t_prep, "prepare_all_cores_per_s_per_core": count / t_all / cores,
            "cores": cores, "ratio_vs_plain_pillow": t_plain / t_prep, "ratio_vs_same_decoder": t_same / t_prep}


# --- 2. reader --------------------------------------------------------------------------------------

def raw_read(path: Path, rows: int | None = None) -> int:
    """Every field of every train shard in contiguous slices of `rows` samples (default: 4 MB a
    slice, h5py's fastest); returns the bytes read."""
    manifest = json.loads((path / "manifest.json").read_text())
    total = 0
    for shard in manifest["splits"]["train"]["shards"]:
        with h5py.File(path / shard["file"], "r") as f:
            for name in manifest["fields"]:
                d = f[name]
                step = rows or max(1, (4 << 20) // max(1, d.dtype.itemsize * int(np.prod(d.shape[1:]))))
                for lo in range(0, d.shape[0], step):
                    total += d[lo:lo + step].nbytes
    return total


def loader_epoch(loader, epoch: int = 0) -> int:
    loader.set_epoch(epoch)
    return sum(sum(a.nbytes for a in b.values()) for b in loader)


def evict(path: Path) -> None:
    """Drop this dataset's files (ours only) from the page cache, so the next read comes from disk."""
    _each_file(path, lambda fd: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED))


def flush(path: Path) -> None:
    """Write this dataset's files to disk now: the kernel's write-back could otherwise take a core
    (of 2 here) at random moments of the first timed rounds."""
    _each_file(path, os.fsync)


def _each_file(path: Path, fn) -> None:
    for f in path.glob("*.h5"):
        fd = os.open(f, os.O_RDONLY)
        try:
            fn(fd)
        finally:
            os.close(fd)


def bench_reader(work: Path, like: str, samples: int, batch: int, **kw) -> dict:
    """The loader against raw h5py in four page-cache states. The state matters to both: the kernel
    copies out of large page-cache folios (left by writing the files) about twice as fast as out of
    the small ones a read from disk leaves, while the loader's mapped pages cost nothing to reach
    after its first epoch, whose page faults (mapping every page once) are its main cost."""
    import gc

    from hvdbench.data.parallel import PrepareOptions
    from hvdbench.data.readers import open_dataset
    from hvdbench.data.synthetic import prepare_synthetic

    path = work / f"reader-{like}"
    prepare_synthetic(like, samples, path, val_fraction=0, options=PrepareOptions(command="bench"), **kw)
    flush(path)
    n = json.loads((path / "manifest.json").read_text())["splits"]["train"]["samples"]
    nbytes = raw_read(path)

    def new_loader():
        return open_dataset(path).loader("train", batch, drop_last=False)

    # 1. Files just written, in the page cache; one reader across epochs (as a training job has):
    # its first epoch maps the shards, the timed ones after it do not fault.
    loader = new_loader()
    assert loader_epoch(loader) == nbytes
    warm = _interleaved(5, {"raw": lambda r: raw_read(path), "raw_batch": lambda r: raw_read(path, batch),
                            "loader": lambda r: loader_epoch(loader, r + 1)})
    # 2. The first epoch of a new reader (a new training process) on files in the page cache. Opening
    # the dataset is timed; unmapping it afterwards (a process pays that when it exits) is not.
    opened = []  # the new reader of the round, kept until the next round

    def first_epoch(r):
        opened.append(new_loader())
        return loader_epoch(opened[-1], r)

    def drop_readers():
        opened.clear()
        gc.collect()

    first = _interleaved(3, {"raw": lambda r: raw_read(path), "loader": first_epoch}, before=drop_readers)
    loader = None  # drop the maps: mapped pages would stay in the page cache
    # 3. From disk: the files evicted from the page cache before every read; a new reader each time.
    cold = _interleaved(3, {"raw": lambda r: raw_read(path), "loader": first_epoch},
                        before=lambda: (drop_readers(), evict(path)))
    drop_readers()
    # 4. Cached again, by those reads from disk (small folios), one reader across epochs.
    loader = new_loader()
    loader_epoch(loader)
    reread = _interleaved(3, {"raw": lambda r: raw_read(path), "loader": lambda r: loader_epoch(loader, r + 1)})
    w, c = ({key: min(v) for key, v in d.items()} for d in warm)
    mb = nbytes / 1e6
    return {"kind": like, "samples": n, "batch": batch, "mb": mb,
            "raw_samples_per_s": n / w["raw"], "raw_mb_per_s": mb / w["raw"],
            "loader_samples_per_s": n / w["loader"], "loader_mb_per_s": mb / w["loader"],
            "ratio": w["raw"] / w["loader"], "cpu_ratio": c["raw"] / c["loader"],
            "raw_batch_mb_per_s": mb / w["raw_batch"], "ratio_batch": w["raw_batch"] / w["loader"],
            "cpu_ratio_batch": c["raw_batch"] / c["loader"],
            **{f"{state}_{k}": v for state, d in (("first", first), ("cold", cold), ("reread", reread))
               for k, v in _state(d[0], mb).items()}}


def _interleaved(rounds: int, fns: dict, before=None) -> tuple[dict, dict]:
    """Wall-clock and CPU seconds of each function over rounds, interleaved so that load from
    elsewhere hits all alike. Each function is given the round number."""
    wall: dict = {k: [] for k in fns}
    cpu: dict = {k: [] for k in fns}
    for r in range(rounds):
        for name, fn in fns.items():
            if before:
                before()
            t, c = time.perf_counter(), time.process_time()
            fn(r)
            wall[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
    return wall, cpu


def _state(times: dict, mb: float) -> dict:
    raw, loader = min(times["raw"]), min(times["loader"])
    return {"raw_mb_per_s": mb / raw, "loader_mb_per_s": mb / loader, "ratio": raw / loader}


# --- 3. packing -------------------------------------------------------------------------------------

def wikipedia_like_lengths(articles: int, max_len: int = 512, seed: int = 0) -> np.ndarray:
    from hvdbench.models.bert.prepare import BertOptions, document_pairs

    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(articles):
        n_sent = max(1, int(rng.lognormal(np.log(12), 1.0)))
        lengths = np.maximum(1, rng.lognormal(np.log(26), 0.5, n_sent).astype(np.int64))
        docs.append((np.zeros(int(lengths.sum()), np.int32), np.concatenate([[0], np.cumsum(lengths)])))
    opts = BertOptions(max_seq_len=max_len)
    pyrng = random.Random(seed)
    return np.asarray([len(a) + len(b) + 3 for i in range(len(docs)) for a, b, _ in document_pairs(docs, i, opts, pyrng)])


def bench_packing(work: Path) -> dict:
    from hvdbench.data.parallel import PrepareOptions
    from hvdbench.models.bert.prepare import BertOptions, prepare_bert
    from hvdbench.models.bert.packing import histogram, nnlshp, spfhp, stats
    from hvdbench.data.readers import open_dataset

    results = {}
    lengths = wikipedia_like_lengths(20000)
    hist512 = histogram(lengths, 512)
    path = work / "pydoc128"
    prepare_bert(["builtin:pydoc"], path, vocab_size=4000, opts=BertOptions(max_seq_len=128, dupe_factor=5),
                 options=PrepareOptions(command="bench"))
    pydoc = np.concatenate([b["input_mask"].sum(1) for b in open_dataset(path).loader("train", 4096, drop_last=False)])
    for name, hist, max_len in (("wikipedia-like@512", hist512, 512), ("pydoc@128", histogram(pydoc, 128), 128)):
        row = {}
        for strategy, fn in (("spfhp", spfhp), ("nnlshp", nnlshp)):
            t = time.perf_counter()
            packs = sum(c for c, _ in fn(hist, max_len, 3))
            s = stats(hist, packs, max_len, 3)
            row[strategy] = {**s, "seconds": time.perf_counter() - t}
        results[name] = row
    million = np.round(hist512 * (1_000_000 / hist512.sum())).astype(np.int64)
    t = best_of(3, lambda: spfhp(million, 512, 3))
    results["spfhp_1M_sequences_seconds"] = t
    results["spfhp_1M_sequences"] = int(million.sum())
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=400, help="JPEG files for the image prepare benchmark")
    parser.add_argument("--workdir", type=Path, default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="hvdbench-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        figures = {"image_prepare": bench_image_prepare(work, args.images),
                   "reader": [bench_reader(work, "images", 2048, 64, samples_per_shard=512,
                                           info={"image_size": 224, "num_classes": 1000}),
                              bench_reader(work, "bert", 65536, 256, samples_per_shard=16384,
                                           info={"max_seq_len": 512, "max_predictions": 76, "vocab_size": 30522})],
                   "packing": bench_packing(work)}
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    report(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


def report(f: dict) -> None:
    ip = f["image_prepare"]
    print(f"\n== image prepare: {ip['images']} JPEGs 500x375 ({ip['file_mb']:.1f} MB) -> 224x224 ==")
    print(f"plain Pillow open+RGB+resize loop      {ip['plain_pillow_per_s']:8.1f} images/s (1 core)")
    print(f"prepare's decoder in a plain loop      {ip['prepare_decoder_loop_per_s']:8.1f} images/s (1 core)")
    print(f"prepare images --workers 1             {ip['prepare_1_worker_per_s']:8.1f} images/s per core")
    print(f"prepare images --workers {ip['cores']}             {ip['prepare_all_cores_per_s_per_core']:8.1f} images/s per core")
    print(f"ratio prepare / plain Pillow           {ip['ratio_vs_plain_pillow']:8.2f}")
    print(f"ratio prepare / same decoder loop      {ip['ratio_vs_same_decoder']:8.2f}")
    print("\n== reader: one shuffled epoch vs a raw contiguous h5py read of the same bytes ==")
    for r in f["reader"]:
        print(f"{r['kind']:7s} {r['samples']:6d} samples ({r['mb']:.0f} MB), batch {r['batch']}:")
        print(f"  warm, files just written: loader {r['loader_samples_per_s']:9.0f}/s {r['loader_mb_per_s']:6.0f} MB/s")
        print(f"    vs raw, 4 MB slices:         {r['raw_samples_per_s']:9.0f}/s {r['raw_mb_per_s']:6.0f} MB/s"
              f" | ratio {r['ratio']:.2f} (CPU time ratio {r['cpu_ratio']:.2f})")
        print(f"    vs raw, batch-sized slices:            {r['raw_batch_mb_per_s']:6.0f} MB/s"
              f" | ratio {r['ratio_batch']:.2f} (CPU time ratio {r['cpu_ratio_batch']:.2f})")
        for state, label in (("first", "first epoch of a new reader, files cached"),
                             ("cold", "from disk (evicted before each read)"),
                             ("reread", "warm again, cached by those reads")):
            print(f"  {label + ':':42s} raw {r[state + '_raw_mb_per_s']:6.0f} MB/s | loader "
                  f"{r[state + '_loader_mb_per_s']:6.0f} MB/s | ratio {r[state + '_ratio']:.2f}")
    print("\n== packing (max 3 sequences per pack) ==")
    for name in ("wikipedia-like@512", "pydoc@128"):
        row = f["packing"][name]
        s = row["spfhp"]
        print(f"{name}: {s['sequences']} sequences, padding without packing {s['padding_before']:.1%}, "
              f"efficiency bound {s['efficiency_bound']:.4f}")
        for strategy in ("spfhp", "nnlshp"):
            s = row[strategy]
            print(f"  {strategy:6s}: {s['packs']:7d} packs, efficiency {s['efficiency']:.4f} "
                  f"({s['efficiency'] / s['efficiency_bound']:.2%} of bound), padding {s['padding_after']:.2%}, "
                  f"speed-up {s['speedup']:.3f}x, {s['seconds']:.3f} s")
    print(f"SPFHP on a histogram of {f['packing']['spfhp_1M_sequences']} sequences at 512: "
          f"{f['packing']['spfhp_1M_sequences_seconds'] * 1000:.1f} ms")


if __name__ == "__main__":
    main()
