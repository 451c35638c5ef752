"""`hvdbench predict`: the throughput of layouts not run, from the sweeps that were (see
hvdbench/results/predict/throughput.py for the model and what each parameter is fitted from)."""

from pathlib import Path

import click

from hvdbench.cli.lists import entries, shown

MACHINES = ("auto", "shared", "separate")


def _layouts(ctx, param, value):
    """NxG,... -> [(N, G), ...], each held to the hostfiles' bounds (hvdbench.results.stats.aggregate.
    parse_layout); click names the option given (--layouts, --fit-on, --predict), not --baseline."""
    from hvdbench.errors import ConfigError
    from hvdbench.results.predict.throughput import parse_layouts

    if value is None:
        return None
    try:
        layouts = parse_layouts(",".join(entries(value)), option="")
    except ConfigError as e:
        raise click.BadParameter(str(e)) from None
    twice = next((f"{n}x{g}" for i, (n, g) in enumerate(layouts) if (n, g) in layouts[:i]), None)
    if twice:  # 1x8 and 01x8
        raise click.BadParameter(f"{shown(value)}: {twice} is given twice")
    return layouts


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
    from hvdbench.results.analyses import bench_tables
    from hvdbench.results.predict.throughput import fit_groups, prediction_rows

    allreduce, _ = bench_tables.load(sweeps)
    shared = None if machines == "auto" else machines == "shared"
    wanted = {f"{n}x{g}" for n, g in fit_on} if fit_on else None
    if wanted:  # a layout no run has is a typo, not "nothing to fit on"
        have = sorted({(r.nodes, r.gpus_per_node) for r in runs if r.nodes and r.gpus_per_node})
        missing = [f"{n}x{g}" for n, g in fit_on if (n, g) not in have]
        if missing:
            from hvdbench.errors import ConfigError

            where = ", ".join(map(str, sweeps)) or "the --mllog logs"
            raise ConfigError(f"--fit-on {','.join(missing)}: no run of {where} has "
                              f"{'that layout' if len(missing) == 1 else 'these layouts'} (its runs have "
                              f"{', '.join(f'{n}x{g}' for n, g in have) or 'no layout'})")
    fits = fit_groups(runs, allreduce, shared, wanted, layout_benches)
    return fits, prediction_rows(fits, layouts or [])


@click.command()
@click.argument("sweeps", nargs=-1, metavar="[SWEEP_DIR]...", type=click.Path(path_type=Path))
@click.option("--mllog", "mllogs", multiple=True, type=click.Path(path_type=Path),
              help="Folder of published MLPerf logs (as `report --mllog` reads them): predict each system's "
                   "time to train at other layouts. Repeatable.")
@layouts_option("--layouts", required=True, help="Layouts to predict, NODESxGPUS, comma-separated.")
@FIT_ON
@MACHINES_OPTION
@click.option("--layout-benches/--link-model-only", default=True, show_default=True,
              help="Take a layout's allreduce time from its own `bench allreduce` rows where the sweep "
                   "has them (--allreduce-bench), or predict every layout's from the link model fitted "
                   "on the --fit-on layouts (to test the model).")
@click.option("--global-batch", type=click.IntRange(min=1), default=None,
              help="The global batch of the --layouts not run, for their time to train [default: each one's "
                   "from the fitted layouts' batches, within the benchmark's RCP table; the table says which "
                   "and why].")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Folder for prediction.csv and its plots [default: FIRST_SWEEP/report, or ./report with only "
                   "--mllog].")
def predict(sweeps, mllogs, layouts, fit_on, machines, layout_benches, global_batch, out):
    """Predicted throughput, speed-up and efficiency of layouts not run, for each model and batch
    the sweeps measured with a step-time breakdown (PyTorch runs): one rank's step without
    communication, how many ranks a machine holds before each slows, the gradient bytes, each
    link's allreduce latency and bus bandwidth (from `sweep --allreduce-bench` rows when present)
    and the overlap of communication with backward, fitted on the measured layouts. Time-to-accuracy
    runs and published MLPerf logs (--mllog) get their time to train predicted too: samples to the
    target at the layout's global batch (critical batch size; for MLPerf logs the benchmark's RCP
    table), the training rate, evaluation and the rest (hvdbench/results/predict/time_to_train.py); a layout
    that cannot be predicted honestly (model parallelism changed, too few fitted layouts) says why.

    \b
    Example:
      hvdbench predict results/demo --layouts 2x2,4x1,8x8,16x8
      hvdbench predict results/demo --layouts 2x2 --fit-on 1x1,1x2,2x1
      hvdbench predict --mllog training_results_v5.1/Nebius --fit-on 1x8,2x8 --layouts 4x8,8x8,16x8 --out pred
      hvdbench predict --mllog training_results_v5.1/Nebius --layouts 16x8 --global-batch 256 --out pred
    """
    from hvdbench.errors import ConfigError
    from hvdbench.files import check_writable_dir
    from hvdbench.results import mllog
    from hvdbench.results.analyses import ttt
    from hvdbench.results.predict import time_to_train as predict_ttt
    from hvdbench.results.predict.throughput import markdown, write
    from hvdbench.results.records import store
    from hvdbench.results.stats.aggregate import time_to_train_rows

    if not sweeps and not mllogs:
        raise click.UsageError("give at least one SWEEP_DIR or --mllog DIR")
    out = check_writable_dir(out or (store.sweep_folder(sweeps[0]) / "report" if sweeps else Path("report")), "--out")
    loaded = []
    for folder in sweeps:  # each time-to-accuracy run's parts from its own mllog.txt
        rows = store.load_sweeps([folder])
        ttt.read_parts(rows, store.sweep_folder(folder))
        loaded += rows
    runs, _ = store.current_runs(loaded)
    warnings = []  # a bad systems JSON or number drops what it held: said, as `report --mllog` says it
    for root in mllogs:
        more, notes = mllog.load(root)
        runs += more
        warnings += [note for note in notes if note.startswith("warning: ")]
    fits, rows = fits_and_rows(runs, sweeps, layouts, fit_on, machines, layout_benches)
    parts, _ = ttt.layout_parts(runs, time_to_train_rows(runs))
    wanted = {f"{n}x{g}" for n, g in fit_on} if fit_on else None
    ttt_fits, ttt_rows = predict_ttt.predictions(runs, parts, layouts, wanted, fits, global_batch)
    for warning in warnings:  # before a refusal too: they may be its cause
        click.echo(warning)
    if not fits and not ttt_fits:
        raise ConfigError(f"{', '.join(map(str, (*sweeps, *mllogs)))}: no successful throughput run with a step-time "
                          "breakdown (PyTorch runs record one; --no-breakdown turns it off) and no converged "
                          "time-to-accuracy run with its event log to fit on")
    text = "\n".join(part for part in (markdown(rows, fits), predict_ttt.markdown(ttt_rows, ttt_fits)) if part)
    click.echo(text)
    for path in [*write(rows, fits, out, ttt_rows=ttt_rows), *predict_ttt.write_figure(ttt_rows, ttt_fits, out)]:
        click.echo(f"wrote {path}")
