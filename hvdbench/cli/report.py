"""`hvdbench report`: scaling, layout and time-to-train tables and plots from sweeps and MLPerf logs
(the options; the report itself is hvdbench.results.report: load, build, write)."""

import re
from pathlib import Path

import click

from hvdbench.cli.lists import FiniteRange, layouts_option, one_layout
from hvdbench.cli.report_inputs import MLLOGS, SWEEPS, out_option, report_folder

FORMATS = ("csv", "md", "png", "html")


def _formats(ctx, param, value: str) -> tuple[str, ...]:
    chosen = tuple(f.strip() for f in value.split(",") if f.strip())
    unknown = [f for f in chosen if f not in FORMATS]
    if unknown or not chosen:
        raise click.BadParameter(f"{','.join(unknown) or repr(value)}: choose from {','.join(FORMATS)}")
    return chosen


def _ruleset(ctx, param, value):
    if value is not None and not re.fullmatch(r"\d+\.\d+\.\d+", value):
        raise click.BadParameter(f"{value!r}: a training ruleset such as 4.0.0")
    return value


@click.command()
@SWEEPS
@MLLOGS
@click.option("--group-by", default="submitter+system", show_default=True, metavar="KEYS",
              help="How --mllog runs are grouped into systems (one table and one speed-up each): '+'-joined "
              "keys of submitter, system (systems JSON system_name, else the results/<system> folder), "
              "platform (the log's submission_platform), folder, accelerator; sizes are removed.")
@click.option("--ruleset", metavar="X.Y.Z", callback=_ruleset, help="MLPerf training ruleset whose RCPs closed-division --mllog "
              "runs are checked against [default: from a training_results_vX.Y folder in the path, else 4.0.0].")
@out_option("Where the report goes")
@click.option("--format", "formats", default="csv,md,png,html", show_default=True, callback=_formats,
              help="Comma-separated files to write: csv, md (summary.md), png, html (report.html: the verdict "
              "first, then the sections' tables and plots inline, one file that works offline; the tables are those of csv "
              "and the plots those of png, so --format html alone gives the verdict, the costs and the text).")
@click.option("--criteria", type=click.Path(dir_okay=False, path_type=Path),
              help="YAML file of acceptance checks' thresholds: extends hvdbench's defaults "
              "(hvdbench/criteria/default.yaml), or replaces them with `replace: true` (verdict.csv).")
@click.option("--gpu-hour-price", type=FiniteRange(min=0, min_open=True), metavar="PRICE",
              help="Price of one GPU-hour: cost.csv and the verdict give each layout's runs and time to train in "
              "money too.")
@click.option("--baseline", metavar="NxG", callback=one_layout,
              help="Layout (NODESxGPUS) that speed-up and efficiency are measured against [default: the smallest "
                   "GPU count present, single-node first].")
@layouts_option("--predict", "predict_layouts",
                help="Also predict these layouts (NODESxGPUS, comma-separated) from the sweeps' runs and the "
                     "--mllog logs (time to train): prediction.csv/.png and a section of summary.md (see "
                     "`hvdbench predict`).")
def report(sweeps, mllogs, out, formats, baseline, group_by, ruleset, predict_layouts, criteria,
           gpu_hour_price):
    """Speed-up, scaling efficiency, scale-up vs scale-out and MLPerf time-to-train (olympic mean,
    mean ± 2σ) from SWEEP_DIR/runs.csv files, study folders (`hvdbench study run --out DIR`: its
    sweeps, plus the speed-up across models, study_speedup.csv/.png) and published MLPerf logs. Writes scaling.csv,
    layouts.csv, time_to_train.csv, epochs.csv, summary.md and PNG plots; prints the tables.
    With `hvdbench bench` results in a sweep folder, comm_vs_training.csv and io_vs_training.csv
    put them beside the training throughput of the same layout. Sweeps run under several engines
    (`sweep --engines`) get engines.csv/.png: each engine's throughput, its ratio to Horovod's and
    where its step went. Multi-rank runs with per-rank times (RUN/ranks.csv) get stragglers.csv/.png and
    stragglers_hosts.csv: each rank's and host's own compute against the others', the slow ones named
    (and the waterfall's imbalance: waiting for the slowest rank). A sweep with `bench links` rows
    (`sweep --links-bench`) gets links.csv/.png: each pair's latency and bandwidth, a bandwidth matrix,
    the slow pairs and the host they share named. compute.csv/.png: each layout's model TFLOP/s per GPU,
    MFU (against the
    datasheet peak, and `bench compute`'s where the sweep ran it), memory per rank and energy per
    sample; published logs' MFU too. Time-to-accuracy runs and published logs get ttt_waterfall.csv/.png (each
    layout's time to train from the ideal: convergence, throughput, evaluation, the rest) and
    convergence.csv/.png (samples to target against the global batch: S_min and B_crit, with the
    benchmark's RCP table's); --predict predicts their time to train too (prediction.csv).
    verdict.csv: each acceptance check (per-GPU rate against MLPerf's, busbw against the link, link
    pairs, stragglers, scaling efficiency, run-to-run spread, failed runs, time to train against the
    RCPs) pass / warn / fail / not measured against --criteria's thresholds; cost.csv: per layout,
    measured and predicted, GPU-hours (and money with --gpu-hour-price); report.html: all of it on one
    page that opens with the verdict.

    \b
    Example:
      hvdbench report results/demo
      hvdbench report results/demo-study
      hvdbench report results/a100 results/h100 --baseline 1x1 --out reports/cmp
      hvdbench report --mllog training_results_v4.0/Oracle --format csv,md
      hvdbench report --mllog vendor-logs --group-by submitter+platform --ruleset 4.0.0
      hvdbench report results/demo --predict 2x2,8x8
      hvdbench report results/demo --criteria mine.yaml --gpu-hour-price 2.50
      hvdbench report --mllog training_results_v5.1/University-of-Florida --predict 64x8
    """
    from rich.progress import track

    from hvdbench.errors import ConfigError
    from hvdbench.results import mllog, report as library
    from hvdbench.results.analyses.verdict import load_criteria

    out = report_folder(sweeps, mllogs, out)  # before reading anything
    keys = mllog.parse_group_by(group_by)
    checks = load_criteria(criteria)  # a bad criteria file is refused before anything is read
    # Read and compute everything before writing anything: bad input leaves the old report intact.
    loaded = library.load(sweeps, mllogs, keys, ruleset, lambda root: lambda files: track(
        files, description=f"reading {root}", transient=True, disable=len(files) < 50))
    built = library.build(loaded, library.Options(baseline, predict_layouts, criteria=checks,
                                                      gpu_hour_price=gpu_hour_price))
    written = library.write(built, out, formats)
    click.echo(built.text)
    for note in built.said:
        click.echo(note)
    for path in written:
        click.echo(f"wrote {path}")
    if built.nothing_succeeded:  # the tables are written; a script chaining `sweep && report` sees it
        raise ConfigError(built.nothing_succeeded)
