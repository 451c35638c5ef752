"""`hvdbench compare BEFORE AFTER`: two sweeps (or two studies) side by side (the options; the comparison
itself is hvdbench.results.compare)."""

from pathlib import Path

import click


@click.command()
@click.argument("before", type=click.Path(path_type=Path))
@click.argument("after", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Where compare.csv, compare_environment.csv, compare.md and compare.html go "
                   "[default: AFTER/compare].")
def compare(before, after, out):
    """What changed from the sweep (or study) BEFORE to AFTER (a driver, CUDA, NCCL, BIOS or hardware
    change): the differences of environment first (versions, devices, hosts, links, GPU driver), then
    per group (model, flavor, engine, precision, levers, mode, batch) and layout the change in throughput,
    time to train, MFU and the allreduce bench's busbw, each judged against both sides' run-to-run noise:
    faster, slower, within noise, or not judged (one run on a side). Different models or precisions are
    never compared as one; a group or layout only one side ran is listed apart.

    \b
    Example:
      hvdbench compare results/before results/after
      hvdbench compare results/nccl-2.21 results/nccl-2.23 --out reports/nccl
    """
    from hvdbench.files import check_writable_dir
    from hvdbench.results import compare as library
    from hvdbench.results import report

    if before.resolve() == after.resolve():
        raise click.UsageError(f"BEFORE and AFTER are the same folder ({before})")
    out = check_writable_dir(out or (after / "compare"), "--out")  # before reading anything
    loaded = (report.load([before]), report.load([after]))
    for path in library.write(*loaded, out, (str(before), str(after))):
        click.echo(f"wrote {path}")
