"""`hvdbench predict`: the throughput of layouts not run, from the sweeps that were (see
hvdbench/results/predict/throughput.py for the model and what each parameter is fitted from)."""

import click

from hvdbench.cli.lists import layout_pairs, layouts_option
from hvdbench.cli.report_inputs import MLLOGS, SWEEPS, out_option, report_folder

MACHINES = ("auto", "shared", "separate")


FIT_ON = click.option("--fit-on", metavar="NxG,...", callback=layout_pairs,
                      help="Fit only on these measured layouts (the others are compared with their "
                           "prediction) [default: every measured layout].")
MACHINES_OPTION = click.option(
    "--machines", type=click.Choice(MACHINES), default="auto", show_default=True,
    help="Whether all nodes are one machine whose cores every rank shares (an emulated cluster) or "
         "separate machines; auto: shared when the sweep ran on `hvdbench cluster`.")


@click.command()
@SWEEPS
@MLLOGS
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
@out_option("Folder for prediction.csv and its plots")
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
    from hvdbench.results import report as library

    out = report_folder(sweeps, mllogs, out)
    loaded = library.load(sweeps, mllogs)
    found = library.predictions(loaded, library.Options(predict_layouts=layouts, fit_on=fit_on, machines=machines,
                                                        layout_benches=layout_benches, global_batch=global_batch))
    # a bad systems JSON or number drops what it held: said, as `report --mllog` says it; before a
    # refusal too: they may be its cause
    for warning in (note for note in loaded.notes if note.startswith("warning: ")):
        click.echo(warning)
    if not found.fits and not found.ttt_fits:
        raise ConfigError(f"{', '.join(loaded.sources)}: no successful throughput run with a step-time "
                          "breakdown (PyTorch runs record one; --no-breakdown turns it off) and no converged "
                          "time-to-accuracy run with its event log to fit on")
    click.echo(found.markdown())
    with library.owned_folder(out, by="predict") as folder:  # beside a report's files, never deleting them
        folder.staged += found.files(folder.stage)
    for text in folder.warnings:
        click.echo(text, err=True)
    for path in folder.written:
        click.echo(f"wrote {path}")
