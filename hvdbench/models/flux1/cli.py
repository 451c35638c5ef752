"""`hvdbench prepare flux-latents`: flux1's writer on the command line (listed in the SPEC's
prepare_commands)."""

from pathlib import Path

import click

from hvdbench.cli.lists import FiniteRange
from hvdbench.cli.prepare import OUT, OVERWRITE, summary

FOLDER = click.Path(path_type=Path, file_okay=False)
FILE = click.Path(path_type=Path, dir_okay=False)


@click.command("flux-latents")
@click.option("--images", required=True, type=FOLDER, help="Folder of training images (any depth).")
@click.option("--captions", required=True, type=FILE,
              help="Tab-separated captions of --images with a header naming file_name and caption "
                   "(timestep optional): one line per image.")
@click.option("--t5", required=True, type=FOLDER,
              help="Local folder of transformers' T5EncoderModel and its tokenizer (T5-v1.1-XXL).")
@click.option("--clip", required=True, type=FOLDER,
              help="Local folder of transformers' CLIPTextModel and its tokenizer (CLIP ViT-L/14).")
@click.option("--vae", required=True, type=FOLDER,
              help="Local folder of diffusers' AutoencoderKL (FLUX's AE: 16 channels, shift and scale in its config).")
@OUT
@click.option("--t5-tokenizer", type=FOLDER, help="The T5 tokenizer's folder when it is not --t5.")
@click.option("--clip-tokenizer", type=FOLDER, help="The CLIP tokenizer's folder when it is not --clip.")
@click.option("--val-images", type=FOLDER, help="Validation images (MLPerf: the COCO-2014 subset).")
@click.option("--val-captions", type=FILE, help="Their captions, as --captions (a timestep column is used).")
@click.option("--val-fraction", type=FiniteRange(0, 1, min_open=True, max_open=True), default=0.05, show_default=True,
              help="Seeded share of the pairs held out for validation when no --val-images is given.")
@click.option("--size", type=click.IntRange(min=8), default=256, show_default=True,
              help="Images are resized (shorter side, bicubic) and centre-cropped to SIZE x SIZE (MLPerf: 256).")
@click.option("--t5-len", type=click.IntRange(min=1), default=256, show_default=True,
              help="T5 tokens per caption, padded or cut (MLPerf: 256).")
@click.option("--batch", type=click.IntRange(min=1), default=8, show_default=True,
              help="Images encoded at once.")
@click.option("--samples-per-shard", type=click.IntRange(min=1), default=64, show_default=True)
@click.option("--device", default=None,
              help="Where the encoders run: cpu, cuda (this rank's GPU), cuda:N [default: cuda if there is "
                   "a GPU, else cpu].")
@click.option("--seed", type=int, default=0, show_default=True)
@OVERWRITE
def flux_latents(images, captions, t5, clip, vae, out, t5_tokenizer, clip_tokenizer, val_images, val_captions,
                 val_fraction, size, t5_len, batch, samples_per_shard, device, seed, overwrite):
    """Images + captions -> T5/CLIP encodings and VAE latents in HDF5 (flux1's full flavor).

    The encoders are yours, as local folders (loaded with local_files_only: nothing is downloaded).
    A rerun of the same command resumes; under mpirun the ranks share the shards.

    \b
    Example:
      hvdbench prepare flux-latents --images cc12m/ --captions cc12m.tsv \\
          --val-images coco/ --val-captions val2014_30k.tsv \\
          --t5 models/t5 --clip models/clip --vae models/vae --out data/flux
    """
    from hvdbench.data.parallel import PrepareOptions
    from hvdbench.models.flux1.prepare import EncoderFolders, LatentOptions, prepare_flux_latents

    encoders = EncoderFolders(t5=t5, clip=clip, vae=vae, t5_tokenizer=t5_tokenizer, clip_tokenizer=clip_tokenizer)
    opts = LatentOptions(val_fraction=val_fraction, size=size, t5_len=t5_len, batch=batch,
                         samples_per_shard=samples_per_shard, device=device, seed=seed)
    manifest = prepare_flux_latents(images, captions, out, encoders=encoders, val_images=val_images,
                                    val_captions=val_captions, opts=opts, options=PrepareOptions(overwrite=overwrite))
    summary(manifest, out)
