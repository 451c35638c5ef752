"""`hvdbench bundle write SWEEP` and `hvdbench bundle verify ARCHIVE`: a sweep's evidence archive with a
sha256 manifest, and its check (the options; the bundle itself is hvdbench.results.bundle)."""

from pathlib import Path

import click


@click.group()
def bundle():
    """A sweep's evidence archive for review and sign-off (runs.csv, every run's record, config, MLPerf
    log, per-rank times and hardware record, sweep.json, the benches and the report with report.html)
    with a sha256 manifest, and the check that names any file changed or missing since.

    \b
    Example:
      hvdbench bundle write results/demo --out demo-evidence.tar.gz
      hvdbench bundle verify demo-evidence.tar.gz --sweep results/demo
    """


@bundle.command("write")
@click.argument("sweep", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="The archive to write (.tar.gz; refused where it exists) [default: SWEEP-evidence.tar.gz "
                   "beside SWEEP].")
def write(sweep, out):
    """Archive SWEEP (a sweep folder) with MANIFEST.sha256. Without SWEEP/report/report.html the report
    is built for the archive (in a temporary folder, removed after), never written into SWEEP.

    \b
    Example:
      hvdbench bundle write results/demo --out demo-evidence.tar.gz
    """
    from hvdbench.files import check_writable_dir
    from hvdbench.results import bundle as library

    sweep_dir = sweep.parent if sweep.suffix == ".csv" else sweep
    out = out or sweep_dir.resolve().with_name(sweep_dir.resolve().name + "-evidence.tar.gz")
    check_writable_dir(out.parent if str(out.parent) else Path("."), "--out's folder")
    written = library.write(sweep, out)
    for text in written.left_out:
        click.echo(f"warning: {text}", err=True)
    click.echo(f"wrote {written.archive}: {written.files} files and {library.MANIFEST}"
               + (" (the report built for it)" if written.report_built else ""))


@bundle.command("verify")
@click.argument("archive", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--sweep", type=click.Path(path_type=Path),
              help="Also check the sweep folder the archive was written from: its files changed, missing "
                   "or added since.")
def verify(archive, sweep):
    """Check ARCHIVE's files against its MANIFEST.sha256 (and, with --sweep, the sweep folder): one line
    per file changed, missing or added; exit 1 when any.

    \b
    Example:
      hvdbench bundle verify demo-evidence.tar.gz --sweep results/demo
    """
    from hvdbench.errors import ConfigError
    from hvdbench.results import bundle as library

    said = library.verify(archive, sweep)
    for text in said:
        click.echo(text)
    if said:
        raise ConfigError(f"{archive}: {len(said)} file(s) changed, missing or added since the bundle was written")
    click.echo(f"{archive}: every file matches its manifest" + (f", and {sweep} too" if sweep else ""))
