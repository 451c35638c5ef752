"""`hvdbench prepare`: datasets into self-describing HDF5 shard directories (thin: options -> hvdbench.data)."""

from __future__ import annotations

from pathlib import Path

import click

from hvdbench.cli.lists import FiniteRange
from hvdbench.cli.writable import writable_out

# Options every prepare command shares (the model folders' cli.py use them too).
WORKERS = click.option("--workers", type=click.IntRange(min=1), default=None,
                       help="Worker processes per rank (default: all cores, shared among local MPI ranks).")
OVERWRITE = click.option("--overwrite", is_flag=True,
                         help="Replace a different dataset already in --out (default: refuse).")
OUT = click.option("--out", required=True, type=click.Path(path_type=Path, file_okay=False),
                   callback=writable_out,  # a read-only --out fails before any shard is made
                   help="Dataset directory to write (created; a rerun of the same command resumes).")


class PrepareGroup(click.Group):
    """`prepare`'s own commands (synthetic, verify) plus those each model folder lists in its
    spec's `prepare_commands` ("module:attribute" of a click command), loaded on demand so
    `hvdbench prepare --help` imports no framework."""

    def _model_commands(self) -> dict[str, str]:
        from hvdbench.contracts import specs

        # The command's name is its attribute's, with '-' for '_' (`cli:lm_base` is `prepare lm-base`).
        return {ref.rsplit(":", 1)[1].replace("_", "-"): ref for spec in specs() for ref in spec.prepare_commands}

    def list_commands(self, ctx):
        return sorted({*super().list_commands(ctx), *self._model_commands()})

    def get_command(self, ctx, name):
        found = super().get_command(ctx, name)
        if found is not None:
            return found
        ref = self._model_commands().get(name)
        if ref is None:
            return None
        import importlib

        module, attr = ref.rsplit(":", 1)
        return getattr(importlib.import_module(module), attr)


class SyntheticCommand(click.Command):
    """`prepare synthetic`, with the shorthand options the registered dataset kinds declare
    (`DatasetKind.synthetic_flags`: images' `--size N` is `--info image_size=N`), added when the
    command is parsed or its help shown: the core names no kind's option."""

    def get_params(self, ctx):
        if not getattr(self, "_shorthands_added", False):
            at = next(i for i, p in enumerate(self.params) if p.name == "info_pairs")
            self.params[at:at] = shorthand_options({o for p in self.params for o in p.opts})
            self._shorthands_added = True
        return super().get_params(ctx)


SHORTHAND = "flag_"  # the shorthand options' parameter names: `--num-classes` -> flag_num_classes


def shorthand_options(taken: set[str]) -> list[click.Option]:
    """One option per shorthand the kinds declare, its help naming the kinds and the key it sets."""
    from hvdbench.contracts import get_kind
    from hvdbench.data.synthetic import shorthand_flags
    from hvdbench.errors import ConfigError

    options = []
    for flag, kinds in shorthand_flags().items():
        if f"--{flag}" in taken:
            raise ConfigError(f"dataset kind {next(iter(kinds))!r}: synthetic_flags {flag!r} is one of "
                              f"`prepare synthetic`'s own options")
        defaults: dict[str, list[str]] = {}  # info key -> "kind default" of the kinds it is set for
        for kind, key in kinds.items():
            defaults.setdefault(key, []).append(f"{kind} {get_kind(kind).synthetic_defaults.get(key, '-')}")
        said = "; ".join(f"--info {key}=N (default: {', '.join(d)})" for key, d in defaults.items())
        options.append(click.Option([f"--{flag}", SHORTHAND + flag.replace("-", "_")],
                                    type=click.IntRange(min=1), help=f"Shorthand for {said}."))
    return options


@click.group(cls=PrepareGroup)
def prepare():
    """Prepare datasets into HDF5 shards with a manifest (images, BERT text, packed BERT, synthetic).

    Every command is resumable (rerun it after an interruption) and runs MPI-parallel under mpirun.

    \b
    Example:
      hvdbench prepare digits --out data/digits
      hvdbench prepare bert --src builtin:pydoc --vocab-size 4000 --out data/pydoc
      hvdbench prepare pack --src data/pydoc --out data/pydoc-packed
      hvdbench prepare verify data/pydoc-packed
    """


@prepare.command(cls=SyntheticCommand)
@click.option("--like", required=True, metavar="KIND",
              help="Dataset kind to imitate: images, bert, or any registered model's kind.")
@click.option("--samples", required=True, type=click.IntRange(min=1), help="Total samples (train + val).")
@OUT
# (here: the kinds' shorthand options, e.g. --size; see SyntheticCommand)
@click.option("--info", "info_pairs", multiple=True, metavar="KEY=VALUE",
              help="Any size of the kind (its manifest keys), e.g. --info features=8; overrides a shorthand.")
@click.option("--samples-per-shard", type=click.IntRange(min=1), default=None,
              help="Default: the kind's (1024 images, 32768 bert).")
@click.option("--val-fraction", type=FiniteRange(0, 1, max_open=True), default=0.05, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@WORKERS
@OVERWRITE
def synthetic(like, samples, out, info_pairs, samples_per_shard, val_fraction, seed, workers, overwrite,
              **shorthands):
    """Seeded random data in any dataset kind's format, any size (storage tests at scale).

    \b
    Example:
      hvdbench prepare synthetic --like images --samples 100000 --out /scratch/synth
      hvdbench prepare synthetic --like bert --samples 1000000 --max-seq-len 512 \\
          --max-predictions 76 --out /scratch/synth-bert
      hvdbench prepare synthetic --like bert_packed --samples 500000 --out /scratch/synth-packed  # MLPerf's rows
    """
    import yaml

    from hvdbench.data.parallel import PrepareOptions
    from hvdbench.data.synthetic import prepare_synthetic, shorthand_flags, shorthand_info

    flag_of = {SHORTHAND + flag.replace("-", "_"): flag for flag in shorthand_flags()}
    info = shorthand_info(like, {flag_of[name]: value for name, value in shorthands.items()})
    for pair in info_pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r}: expected KEY=VALUE", param_hint="--info")
        info[key] = yaml.safe_load(value)
    summary(prepare_synthetic(like, samples, out, info=info, samples_per_shard=samples_per_shard,
                               val_fraction=val_fraction, seed=seed,
                               options=PrepareOptions(workers=workers, overwrite=overwrite)), out)


@prepare.command()
@click.argument("directory", type=click.Path(path_type=Path))
def verify(directory):
    """Check every shard against the manifest (counts, shapes, dtypes, value ranges, checksums).

    Prints one row per shard; exits 1 naming the first bad shard and its problem.

    \b
    Example:
      hvdbench prepare verify data/digits
    """
    from rich.table import Table

    from hvdbench.data.verify import verify as run_verify
    from hvdbench.errors import DatasetError
    from hvdbench.output import console

    report = run_verify(directory)
    table = Table(title=f"{directory} ({report.kind})")
    for column in ("split", "file", "samples", "status"):
        table.add_column(column, justify="right" if column == "samples" else "left")
    for row in report.rows:
        table.add_row(row["split"], row["file"], str(row["samples"]), row["status"])
    console().print(table)
    if report.problems:
        raise DatasetError(f"{len(report.problems)} problem(s); first: {report.problems[0]}")
    click.echo(f"ok: {sum(r['samples'] for r in report.rows)} samples in {len(report.rows)} shards")


def summary(manifest: dict, out: Path) -> None:
    """What was made, on rank 0 only: samples per split, skipped inputs, the packing report."""
    from hvdbench.data.parallel import env_rank

    if env_rank() != 0:
        return
    from rich.table import Table

    from hvdbench.output import console

    out_console = console()
    table = Table(title=f"{out} ({manifest['kind']})")
    for column in ("split", "samples", "shards"):
        table.add_column(column, justify="right" if column != "split" else "left")
    for split, info in manifest["splits"].items():
        table.add_row(split, str(info["samples"]), str(len(info["shards"])))
    out_console.print(table)
    skipped = manifest.get("skipped", {})
    if skipped.get("count"):
        out_console.print(f"skipped {skipped['count']} unreadable or non-image file(s), e.g.: "
                      + ", ".join(skipped["first"]))
    packing = manifest.get("packing")
    if packing:
        report = Table(title=f"packing ({packing['strategy']})")
        columns = ("sequences", "packs", "padding_before", "padding_after", "speedup", "efficiency",
                   "efficiency_bound")
        report.add_column("split")
        for column in columns:
            report.add_column(column.replace("_", " "), justify="right")
        for split in manifest["splits"]:
            row = packing[split]
            report.add_row(split, *(f"{row[c]:.4f}" if isinstance(row[c], float) else str(row[c]) for c in columns))
        out_console.print(report)
