"""`hvdbench predict`: the throughput of layouts not run, from the sweeps that were (see
hvdbench/results/predict.py for the model and what each parameter is fitted from)."""

from pathlib import Path

import click

MACHINES = ("auto", "shared", "separate")


def _layouts(ctx, param, value):
    """NxG,... -> [(N, G), ...], each held to the hostfiles' bounds (hvdbench.results.aggregate.
    parse_layout); click names the option given (--layouts, --fit-on, --predict), not --baseline."""
    from hvdbench.errors import ConfigError
    from hvdbench.results.predict import parse_layouts

    if value is None:
        return None
    try:
        return parse_layouts(value, option="")
    except ConfigError as e:
        raise click.BadParameter(str(e)) from None


# Defined once: `hvdbench predict --layouts` and `hvdbench report --predict` take the same list.
def layouts_option(*names, **kwargs):
    return click.option(*names, metavar="NxG,...", callback=_layouts, **kwargs)


FIT_ON = click.option("--fit-on", metavar="NxG,...", callback=_layouts,
                      help="Fit only on these measured layouts (the others are compared with their "
                           "prediction) [default: every measured layout].")
MACHINES_OPTION = click.option(
    "--machines", type=click.Choice(MACHINES), default="auto", show_default=True,
    help="Whether all nodes are one machine whose cores every rank shares (an emulated cluster) or "
         "separate machines; auto: shared when the sweep ran on `hvdbench cluster`.")


def fits_and_rows(runs, sweeps, layouts, fit_on=None, machines="auto", layout_benches=True):
    """(fits, prediction rows) for the runs of `sweeps`: the one path of `predict` and `report`."""
    from hvdbench.results import bench_tables
    from hvdbench.results.predict import fit_groups, prediction_rows

    allreduce, _ = bench_tables.load(sweeps)
    shared = None if machines == "auto" else machines == "shared"
    wanted = {f"{n}x{g}" for n, g in fit_on} if fit_on else None
    if wanted:  # a layout no run has is a typo, not "nothing to fit on"
        have = sorted({(r.nodes, r.gpus_per_node) for r in runs if r.nodes and r.gpus_per_node})
        missing = [f"{n}x{g}" for n, g in fit_on if (n, g) not in have]
        if missing:
            from hvdbench.errors import ConfigError

            raise ConfigError(f"--fit-on {','.join(missing)}: no run of {', '.join(map(str, sweeps))} has "
                              f"{'that layout' if len(missing) == 1 else 'these layouts'} (its runs have "
                              f"{', '.join(f'{n}x{g}' for n, g in have) or 'no layout'})")
    fits = fit_groups(runs, allreduce, shared, wanted, layout_benches)
    return fits, prediction_rows(fits, layouts or [])


@click.command()
@click.argument("sweeps", nargs=-1, required=True, metavar="SWEEP_DIR...", type=click.Path(path_type=Path))
@layouts_option("--layouts", required=True, help="Layouts to predict, NODESxGPUS, comma-separated.")
@FIT_ON
@MACHINES_OPTION
@click.option("--layout-benches/--link-model-only", default=True, show_default=True,
              help="Take a layout's allreduce time from its own `bench allreduce` rows where the sweep "
                   "has them (--allreduce-bench), or predict every layout's from the link model fitted "
                   "on the --fit-on layouts (to test the model).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Folder for prediction.csv and prediction.png [default: FIRST_SWEEP/report].")
def predict(sweeps, layouts, fit_on, machines, layout_benches, out):
    """Predicted throughput, speed-up and efficiency of layouts not run, for each model and batch
    the sweeps measured with a step-time breakdown (PyTorch runs): one rank's step without
    communication, how many ranks a machine holds before each slows, the gradient bytes, each
    link's allreduce latency and bus bandwidth (from `sweep --allreduce-bench` rows when present)
    and the overlap of communication with backward, fitted on the measured layouts.

    \b
    Example:
      hvdbench predict results/demo --layouts 2x2,4x1,8x8,16x8
      hvdbench predict results/demo --layouts 2x2 --fit-on 1x1,1x2,2x1
    """
    from hvdbench.errors import ConfigError
    from hvdbench.files import check_writable_dir
    from hvdbench.results import store
    from hvdbench.results.predict import markdown, write

    out = check_writable_dir(out or store.sweep_folder(sweeps[0]) / "report", "--out")
    runs, _ = store.current_runs(store.load_sweeps(sweeps))
    fits, rows = fits_and_rows(runs, sweeps, layouts, fit_on, machines, layout_benches)
    if not fits:
        raise ConfigError(f"{', '.join(map(str, sweeps))}: no successful throughput run with a step-time "
                          "breakdown to fit on (PyTorch runs record one; --no-breakdown turns it off)")
    click.echo(markdown(rows, fits))
    for path in write(rows, fits, out):
        click.echo(f"wrote {path}")
