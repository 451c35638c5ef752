"""What `report` and `predict` both read and where both write, declared once: the SWEEP_DIR
arguments, the --mllog folders, and --out with its default (the first sweep's report/, or ./report
with only --mllog), checked before anything is read.

    @SWEEPS
    @MLLOGS
    @out_option("Folder for prediction.csv and its plots")
    def predict(sweeps, mllogs, out): out = report_folder(sweeps, mllogs, out)
"""

from __future__ import annotations

from pathlib import Path

import click

SWEEPS = click.argument("sweeps", nargs=-1, metavar="[SWEEP_DIR]...", type=click.Path(path_type=Path))
MLLOGS = click.option("--mllog", "mllogs", multiple=True, type=click.Path(path_type=Path),
                      help="Folder of MLPerf logs, searched recursively: every text file with :::MLLOG lines "
                           "(result_N.txt, mllog.txt, *.log, slurm-*.out, with or without srun -l rank prefixes). "
                           "Repeatable.")


def out_option(what: str):
    """--out, described for one command: `what` goes there."""
    return click.option("--out", type=click.Path(file_okay=False, path_type=Path),
                        help=f"{what} [default: FIRST_SWEEP/report, or ./report with only --mllog].")


def report_folder(sweeps, mllogs, out: Path | None) -> Path:
    """The --out folder, checked writable before anything is read; a usage error without input."""
    # Here, not at the top: `hvdbench --help` loads no results code.
    from hvdbench.files import check_writable_dir
    from hvdbench.results.records.store import default_report_folder

    if not sweeps and not mllogs:
        raise click.UsageError("give at least one SWEEP_DIR or --mllog DIR")
    return check_writable_dir(out or default_report_folder(sweeps), "--out")
