"""Images and captions -> the `flux_latents` kind, with frozen encoders the user provides as local
folders (MLPerf's flux1 reference precomputes the same encodings: torchtitan's
scripts/preprocess_flux_dataset.py).

    hvdbench prepare flux-latents --images cc12m/ --captions cc12m.tsv \\
        --val-images coco/ --val-captions val2014_30k.tsv \\
        --t5 models/t5-v1_1-xxl --clip models/clip-vit-large-patch14 --vae models/flux-vae --out data/flux
    mpirun -np 8 hvdbench prepare flux-latents ... --device cuda       # shards split over the ranks

Captions: a tab-separated file with a header row naming at least `file_name` (the image's path
inside the images folder) and `caption`; a `timestep` column (0..7, the reference's val2014_30k.tsv
has one) sets the validation timestep index, else it is the line's position mod 8. Every image in
the folder needs a caption and every caption an image (a one-line error names the first that lacks
one). Without --val-images, a seeded --val-fraction of the pairs is held out.

Encoders (loaded with local_files_only=True; nothing is ever downloaded):
- --t5: transformers' T5EncoderModel and its tokenizer (T5-v1.1-XXL: 4096-d states); captions are
  padded or cut to --t5-len tokens (the reference's 256), the states are its last hidden states;
- --clip: transformers' CLIPTextModel and its tokenizer (CLIP ViT-L/14's text tower), 77 tokens,
  its pooled output (768);
- --vae: diffusers' AutoencoderKL (FLUX's AE: 16 latent channels, 8x down, shift 0.1159, scale
  0.3611): images, shorter side resized to --size with bicubic filtering and centre-cropped, in
  [-1, 1]; its latent distribution is stored shifted and scaled (see data.py).
A folder may hold the tokenizer elsewhere: --t5-tokenizer / --clip-tokenizer.

Beside the shards: `empty_caption.npz`, the encoders' output for "" (the caption the reference puts
in place of a dropped one), named with its sha256 in the manifest, and the manifest's `encoders`:
each folder's path, class, config sha256 and sizes. A rerun of the same command keeps every finished
shard (their source hashes cover the options, the encoders' configs and weight files' sizes and
times, and the images' paths, sizes and times).
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hvdbench.data import manifest as mf
from hvdbench.data.parallel import PrepareOptions, ShardJob, World, finish, run_jobs, start
from hvdbench.data.shards import shard_name, write_shard
from hvdbench.errors import DatasetError
from hvdbench.families.images.prepare import IMAGE_SUFFIXES
from hvdbench.files import atomic_open, file_sha256
from hvdbench.models.flux1.data import FLUX_LATENTS, TIMESTEPS

CLIP_LEN = 77  # CLIP's context, what the reference's tokenizer pads to
EMPTY_FILE = "empty_caption.npz"
FLOAT16_MAX = 65504.0
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")
ENCODERS = {  # option -> (library, class, what it is)
    "t5": ("transformers", "T5EncoderModel", "T5 encoder (e.g. google/t5-v1_1-xxl)"),
    "clip": ("transformers", "CLIPTextModel", "CLIP text model (e.g. openai/clip-vit-large-patch14)"),
    "vae": ("diffusers", "AutoencoderKL", "AutoencoderKL (e.g. FLUX.1-schnell's vae folder)"),
}


@dataclass(frozen=True)
class EncoderFolders:
    """The encoders' local folders (`ENCODERS`: loaded with local_files_only, nothing is downloaded),
    and a tokenizer folder for T5 or CLIP when it is not in the model's own folder.
    `hvdbench prepare flux-latents ... --t5 models/t5 --clip models/clip --vae models/vae`."""

    t5: Path
    clip: Path
    vae: Path
    t5_tokenizer: Path | None = None
    clip_tokenizer: Path | None = None


@dataclass(frozen=True)
class LatentOptions:
    """The knobs of `prepare_flux_latents` beyond its inputs: the share held out without val images,
    the image side, T5 tokens per caption, images encoded at once, shard size, where the encoders run
    (`resolve_device`) and the seed. `hvdbench prepare flux-latents ... --size 256 --t5-len 256 --batch 8`."""

    val_fraction: float = 0.05
    size: int = 256
    t5_len: int = 256
    batch: int = 8
    samples_per_shard: int = 64
    device: str | None = None
    seed: int = 0


# --- inputs ----------------------------------------------------------------------------------------

def read_captions(path: Path) -> list[tuple[str, str, int | None]]:
    """[(file_name, caption, timestep or None)] in file order; one-line DatasetError naming file:line."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"captions file {path} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetError(f"{path}: unreadable captions file ({type(e).__name__})") from None
    rows = csv.reader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE)
    header = next(rows, None)
    if not header or "file_name" not in header or "caption" not in header:
        raise DatasetError(f"{path}:1: the header must name the columns file_name and caption "
                           f"(tab-separated; timestep optional), got {header!r}")
    col = {name: header.index(name) for name in ("file_name", "caption", "timestep") if name in header}
    out, seen = [], set()
    for number, row in enumerate(rows, start=2):
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise DatasetError(f"{path}:{number}: {len(row)} tab-separated fields, the header has {len(header)}")
        name, caption = row[col["file_name"]].strip(), row[col["caption"]].strip()
        if not name:
            raise DatasetError(f"{path}:{number}: empty file_name")
        if name in seen:
            raise DatasetError(f"{path}:{number}: {name} has a second caption (one caption per image)")
        seen.add(name)
        if not caption:
            raise DatasetError(f"{path}:{number}: empty caption for {name}")
        timestep = None
        if "timestep" in col:
            cell = row[col["timestep"]].strip()
            if not cell.isdigit() or int(cell) >= TIMESTEPS:
                raise DatasetError(f"{path}:{number}: timestep {cell!r} is not one of 0..{TIMESTEPS - 1}")
            timestep = int(cell)
        out.append((name, caption, timestep))
    if not out:
        raise DatasetError(f"{path}: no captions")
    return out


def scan_images(images: Path) -> dict[str, tuple[int, int]]:
    """{path inside the folder: (size, mtime_ns)} of every image file (by suffix), hidden ones left out."""
    images = Path(images)
    if not images.is_dir():
        raise DatasetError(f"images folder {images} does not exist")
    found = {}
    for root, dirs, files in os.walk(images):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith(".") or Path(name).suffix.lower() not in IMAGE_SUFFIXES:
                continue
            p = Path(root) / name
            st = p.stat()
            found[p.relative_to(images).as_posix()] = (st.st_size, st.st_mtime_ns)
    if not found:
        raise DatasetError(f"{images}: no image files ({', '.join(sorted(IMAGE_SUFFIXES))})")
    return found


def pair_up(images: Path, captions: Path) -> list[tuple]:
    """[(file_name, caption, timestep, size, mtime_ns)] in caption order: every image with a caption,
    every caption with an image (a one-line DatasetError names the first missing one)."""
    files = scan_images(images)
    rows = read_captions(captions)
    named = {name for name, _, _ in rows}
    lacking = [name for name in files if name not in named]
    if lacking:
        more = f" (and {len(lacking) - 1} more)" if len(lacking) > 1 else ""
        raise DatasetError(f"{Path(images) / lacking[0]}: no caption in {captions}{more} "
                           f"(every image needs a line file_name<TAB>caption)")
    for name, _, _ in rows:
        if name not in files:
            raise DatasetError(f"{captions}: {name} has a caption but is not an image in {images}")
    return [(name, caption, timestep, *files[name]) for name, caption, timestep in rows]


def encoder_facts(option: str, folder: Path, tokenizer: Path | None) -> dict:
    """What the manifest and the source hashes say of one encoder folder, read from its config alone
    (no weights loaded); one-line DatasetError for a missing or foreign folder."""
    library, cls, what = ENCODERS[option]
    folder = Path(folder)
    if not folder.is_dir():
        raise DatasetError(f"--{option} {folder}: no such folder (a local {what} saved with save_pretrained)")
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise DatasetError(f"--{option} {folder}: no config.json (a local {what} saved with save_pretrained)")
    try:
        config = json.loads(config_path.read_text())
    except (OSError, ValueError) as e:
        raise DatasetError(f"{config_path}: unreadable ({type(e).__name__})") from None
    weights = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()
                     if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))
    if not weights:
        raise DatasetError(f"--{option} {folder}: no weight files ({', '.join(WEIGHT_SUFFIXES)})")
    facts = {"path": str(folder.resolve()), "library": library, "class": cls,
             "config_sha256": file_sha256(config_path), "weights": weights}
    if option == "t5":
        if "d_model" not in config:
            raise DatasetError(f"{config_path}: not a T5 config (no d_model)")
        facts["hidden_size"] = int(config["d_model"])
    elif option == "clip":
        hidden = config.get("hidden_size", config.get("text_config", {}).get("hidden_size"))
        if hidden is None:
            raise DatasetError(f"{config_path}: not a CLIP text config (no hidden_size)")
        facts["hidden_size"] = int(hidden)
    else:
        if "latent_channels" not in config or "block_out_channels" not in config:
            raise DatasetError(f"{config_path}: not an AutoencoderKL config (no latent_channels)")
        facts.update(latent_channels=int(config["latent_channels"]),
                     downsample=2 ** (len(config["block_out_channels"]) - 1),
                     scaling_factor=float(config.get("scaling_factor") or 1.0),
                     shift_factor=float(config.get("shift_factor") or 0.0))
    if option != "vae":
        facts["tokenizer"] = str(Path(tokenizer or folder).resolve())
        if not Path(facts["tokenizer"]).is_dir():
            raise DatasetError(f"--{option}-tokenizer {tokenizer}: no such folder")
    return facts


# --- the encoders ------------------------------------------------------------------------------

def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__


@functools.lru_cache(maxsize=2)
def load_encoders(t5: str, t5_tok: str, clip: str, clip_tok: str, vae: str, device: str, dtype: str):
    """(t5 model, t5 tokenizer, clip model, clip tokenizer, vae), frozen, in eval mode, on `device`;
    loaded once per process. One-line DatasetError naming the folder that does not load."""
    import torch

    from hvdbench.frameworks.torch import vision

    vision.ensure_torchvision()  # transformers and diffusers import torchvision when it is installed
    from diffusers import AutoencoderKL
    from transformers import AutoTokenizer, CLIPTextModel, T5EncoderModel

    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]

    def load(option, fn, path):
        try:
            return fn(path)
        except Exception as e:  # noqa: BLE001 - any loading failure: a folder that is not that model
            raise DatasetError(f"--{option} {path}: cannot load it ({_first_line(e)})") from None

    def model(cls, path):
        return cls.from_pretrained(path, local_files_only=True, torch_dtype=torch_dtype).to(device).eval()

    out = (load("t5", functools.partial(model, T5EncoderModel), t5),
           load("t5-tokenizer", lambda p: AutoTokenizer.from_pretrained(p, local_files_only=True), t5_tok),
           load("clip", functools.partial(model, CLIPTextModel), clip),
           load("clip-tokenizer", lambda p: AutoTokenizer.from_pretrained(p, local_files_only=True), clip_tok),
           load("vae", functools.partial(model, AutoencoderKL), vae))
    for m in (out[0], out[2], out[4]):
        m.requires_grad_(False)
    return out


def encode_text(encoders, captions: list[str], t5_len: int, device: str) -> tuple[np.ndarray, np.ndarray]:
    """(T5 last hidden states (n, t5_len, d), CLIP pooled (n, d')) as float32 numpy."""
    import torch

    t5, t5_tok, clip, clip_tok, _ = encoders
    with torch.no_grad():
        ids = t5_tok(captions, padding="max_length", max_length=t5_len, truncation=True,
                     return_tensors="pt")["input_ids"].to(device)
        states = t5(input_ids=ids).last_hidden_state
        ids = clip_tok(captions, padding="max_length", max_length=CLIP_LEN, truncation=True,
                       return_tensors="pt")["input_ids"].to(device)
        pooled = clip(input_ids=ids).pooler_output
    return states.float().cpu().numpy(), pooled.float().cpu().numpy()


def decode_image(path: Path, size: int) -> np.ndarray:
    """(3, size, size) float32 in [-1, 1]: shorter side resized to `size` (bicubic), centre crop."""
    from PIL import Image, ImageOps

    with Image.open(path) as im:
        rgb = im.convert("RGB")
    pixels = np.asarray(ImageOps.fit(rgb, (size, size), Image.Resampling.BICUBIC), dtype=np.float32)
    return pixels.transpose(2, 0, 1) / 127.5 - 1.0


def encode_images(vae, images: np.ndarray, shift: float, scale: float, device: str) -> tuple[np.ndarray, np.ndarray]:
    """The VAE's latent distribution of (n, 3, H, W) images in [-1, 1], shifted and scaled as the
    transformer trains on it: ((mean - shift) x scale, logvar + 2 ln scale), float32 numpy."""
    import torch

    with torch.no_grad():
        x = torch.from_numpy(images).to(device=device, dtype=next(vae.parameters()).dtype)
        dist = vae.encode(x).latent_dist
        mean, logvar = dist.mean.float(), dist.logvar.float()
    return ((mean - shift) * scale).cpu().numpy(), (logvar + 2.0 * math.log(scale)).cpu().numpy()


def as_float16(name: str, values: np.ndarray, where: str) -> np.ndarray:
    """float16 for the shards; a DatasetError when a value is not finite or beyond float16's range."""
    bad = ~np.isfinite(values) | (np.abs(values) > FLOAT16_MAX)
    if bad.any():
        raise DatasetError(f"{where}: {name} has a value float16 cannot hold ({values[bad].flat[0]!r})")
    return values.astype(np.float16)


# --- shards ------------------------------------------------------------------------------------

def _settings(work: dict) -> dict:
    return {k: work[k] for k in ("t5", "t5_tok", "clip", "clip_tok", "vae", "device", "dtype")}


def _make_shard(job: ShardJob, out: Path) -> dict:
    """Encode one shard's images and captions (the maker run_jobs calls)."""
    w = job.work
    encoders = load_encoders(**_settings(w))
    items, arrays = w["items"], {k: [] for k in ("t5", "clip", "latent_mean", "latent_logvar", "timestep")}
    for lo in range(0, len(items), w["batch"]):
        part = items[lo:lo + w["batch"]]
        where = f"{w['images']}/{part[0][0]}" + (f" .. {part[-1][0]}" if len(part) > 1 else "")
        images = []
        for name, _, _ in part:
            try:
                images.append(decode_image(Path(w["images"]) / name, w["size"]))
            except Exception as e:  # noqa: BLE001 - any decoder failure: an unreadable image
                raise DatasetError(f"{Path(w['images']) / name}: unreadable image ({_first_line(e)})") from None
        mean, logvar = encode_images(encoders[4], np.stack(images), w["shift"], w["scale"], w["device"])
        states, pooled = encode_text(encoders, [caption for _, caption, _ in part], w["t5_len"], w["device"])
        arrays["t5"].append(as_float16("T5 states", states, where))
        arrays["clip"].append(as_float16("CLIP pooled", pooled, where))
        arrays["latent_mean"].append(as_float16("latent mean", mean, where))
        arrays["latent_logvar"].append(as_float16("latent log-variance", logvar, where))
        arrays["timestep"].append(np.array([t for _, _, t in part], np.int64))
    return write_shard(out / job.file, {k: np.concatenate(v) for k, v in arrays.items()}, job.source)


def plan(splits: dict[str, list[tuple]], samples_per_shard: int, key: str, work: dict) -> list[ShardJob]:
    """Shards of `samples_per_shard` consecutive pairs per split; each pair's timestep is its own
    (the captions' column) or its position in the split mod 8."""
    jobs = []
    for split, pairs in splits.items():
        count = math.ceil(len(pairs) / samples_per_shard)
        for k in range(count):
            lo = k * samples_per_shard
            part = pairs[lo:lo + samples_per_shard]
            items = [(name, caption, (lo + i) % TIMESTEPS if t is None else t)
                     for i, (name, caption, t, *_) in enumerate(part)]
            source = hashlib.sha256(json.dumps([key, split, [list(p) for p in part]]).encode()).hexdigest()
            jobs.append(ShardJob.single(split, shard_name(split, k, count), source,
                                        {**work[split], "items": items}))
    return jobs


def write_empty_caption(out: Path, settings: dict, t5_len: int) -> str:
    """The encoders' output for "" as EMPTY_FILE (written atomically); its sha256."""
    encoders = load_encoders(**settings)
    states, pooled = encode_text(encoders, [""], t5_len, settings["device"])
    with atomic_open(out / EMPTY_FILE, "wb") as f:
        np.savez(f, t5=as_float16("T5 states", states[0], "the empty caption"),
                 clip=as_float16("CLIP pooled", pooled[0], "the empty caption"))
    return file_sha256(out / EMPTY_FILE)


def resolve_device(device: str | None) -> str:
    """--device: as given, except none (this rank's GPU when there is one, else the CPU) and a bare
    "cuda" (this rank's GPU: local rank mod the GPUs, so ranks on one node use different GPUs)."""
    import torch

    if device not in (None, "cuda"):
        return device
    if not torch.cuda.is_available():
        if device == "cuda":
            raise DatasetError("--device cuda: no CUDA GPU is visible to this process")
        return "cpu"
    local = next((int(os.environ[v]) for v in ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")
                  if os.environ.get(v, "").isdigit()), 0)
    return f"cuda:{local % torch.cuda.device_count()}"


def prepare_flux_latents(images: Path, captions: Path, out: Path, *, encoders: EncoderFolders,
                         val_images: Path | None = None, val_captions: Path | None = None,
                         opts: LatentOptions = LatentOptions(), options: PrepareOptions = PrepareOptions()) -> dict:
    """Prepare a flux_latents dataset; returns the manifest (on every rank)."""
    out = Path(out)
    if (val_images is None) != (val_captions is None):
        raise DatasetError("--val-images and --val-captions go together (or neither: --val-fraction is held out)")
    if opts.size < 8 or opts.t5_len < 1 or opts.batch < 1 or opts.samples_per_shard < 1:
        raise DatasetError("--size must be at least 8; --t5-len, --batch and --samples-per-shard at least 1")
    if val_images is None and not 0 < opts.val_fraction < 1:
        raise DatasetError(f"--val-fraction must be between 0 and 1, got {opts.val_fraction}")
    world = World.detect()

    def check():
        found = {"t5": encoder_facts("t5", encoders.t5, encoders.t5_tokenizer),
                 "clip": encoder_facts("clip", encoders.clip, encoders.clip_tokenizer),
                 "vae": encoder_facts("vae", encoders.vae, None)}
        down = found["vae"]["downsample"]
        if opts.size % (2 * down):
            raise DatasetError(f"--size {opts.size}: must be a multiple of {2 * down} (the VAE downsamples "
                               f"{down}x, and Flux packs 2 x 2 latents into a token)")
        splits = {"train": pair_up(images, captions)}
        if val_images is not None:
            splits["val"] = pair_up(val_images, val_captions)
        else:
            from hvdbench.data.text import hold_out

            splits["train"], splits["val"] = hold_out(splits["train"], opts.val_fraction, opts.seed, str(captions),
                                                      "images")
        return found, splits

    found, splits = world.on_root(check)
    device = resolve_device(opts.device)
    dtype = "bfloat16" if device.startswith("cuda") else "float32"  # the reference encodes in bf16 on GPUs
    vae_facts = found["vae"]
    info = {"latent_channels": vae_facts["latent_channels"], "latent_size": opts.size // vae_facts["downsample"],
            "t5_len": opts.t5_len, "t5_dim": found["t5"]["hidden_size"], "clip_dim": found["clip"]["hidden_size"]}
    params = {"images": str(Path(images).resolve()), "captions": str(Path(captions).resolve()),
              "val_images": str(Path(val_images).resolve()) if val_images else None,
              "val_captions": str(Path(val_captions).resolve()) if val_captions else None,
              "val_fraction": None if val_images else opts.val_fraction, "size": opts.size, "t5_len": opts.t5_len,
              "samples_per_shard": opts.samples_per_shard, "seed": opts.seed,
              "encoders": {k: {f: v[f] for f in ("path", "config_sha256", "tokenizer") if f in v}
                           for k, v in found.items()}}
    key = json.dumps([mf.params_hash(params), {k: v["weights"] for k, v in found.items()}, dtype])
    settings = {"t5": found["t5"]["path"], "t5_tok": found["t5"]["tokenizer"], "clip": found["clip"]["path"],
                "clip_tok": found["clip"]["tokenizer"], "vae": vae_facts["path"], "device": device, "dtype": dtype}
    common = {**settings, "size": opts.size, "t5_len": opts.t5_len, "batch": opts.batch,
              "shift": vae_facts["shift_factor"],
              "scale": vae_facts["scaling_factor"]}
    work = {"train": {**common, "images": str(Path(images).resolve())},
            "val": {**common, "images": str(Path(val_images or images).resolve())}}
    start(out, FLUX_LATENTS.name, params, options.overwrite, world)
    jobs = plan(splits, opts.samples_per_shard, key, work)
    # One worker per rank: each holds the encoders once (T5-XXL alone is ~9.5 GB in bf16).
    records = run_jobs(out, jobs, _make_shard, world=world, workers=1, label="flux latents")
    empty_sha = world.on_root(lambda: write_empty_caption(out, settings, opts.t5_len))
    manifest = mf.new_manifest(
        FLUX_LATENTS.name, FLUX_LATENTS.fields(info), opts.seed, params, options.command, **info,
        image_size=opts.size,
        encoders={k: {**{f: v for f, v in facts.items() if f != "weights"},
                      "weight_files": [w[0] for w in facts["weights"]]} for k, facts in found.items()},
        encoder_dtype=dtype, clip_len=CLIP_LEN,
        latents=(f"VAE latent distribution stored shifted and scaled: (mean - {vae_facts['shift_factor']}) x "
                 f"{vae_facts['scaling_factor']}, logvar + 2 ln({vae_facts['scaling_factor']})"),
        timesteps=f"validation timestep index i (t = i / {TIMESTEPS}): the captions' timestep column, else the "
                  f"position in the split mod {TIMESTEPS}",
        empty_caption={"file": EMPTY_FILE, "sha256": empty_sha})
    return finish(out, jobs, records, manifest, world)
