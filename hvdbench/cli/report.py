"""`hvdbench report`: scaling, layout and time-to-train tables and plots from sweeps and MLPerf logs."""

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import click

from hvdbench.files import atomic_write_text

from hvdbench.cli.predict import layouts_option

FORMATS = ("csv", "md", "png")


def _formats(ctx, param, value: str) -> tuple[str, ...]:
    chosen = tuple(f.strip() for f in value.split(",") if f.strip())
    unknown = [f for f in chosen if f not in FORMATS]
    if unknown or not chosen:
        raise click.BadParameter(f"{','.join(unknown) or repr(value)}: choose from {','.join(FORMATS)}")
    return chosen


def _ruleset(ctx, param, value):
    import re

    if value is not None and not re.fullmatch(r"\d+\.\d+\.\d+", value):
        raise click.BadParameter(f"{value!r}: a training ruleset such as 4.0.0")
    return value


def _default_out(sweeps) -> Path:
    """FIRST_SWEEP/report (beside its runs.csv), or ./report when there is no sweep."""
    if not sweeps:
        return Path("report")
    from hvdbench.results.records.store import sweep_folder

    return sweep_folder(sweeps[0]) / "report"


def _expand_studies(paths) -> tuple[list[Path], dict[str, dict]]:
    """Each study folder (`hvdbench study run --out DIR`: DIR/study.json) becomes its sweep folders;
    returns the sweep folders and each study's record (name -> study.json), for the study tables."""
    from hvdbench.errors import ConfigError
    from hvdbench.study.run import read_study_record, study_sweep_dirs

    sweeps, studies = [], {}
    for path in map(Path, paths):
        record = read_study_record(path) if path.is_dir() else None
        if record is None:
            sweeps.append(path)
            continue
        found = study_sweep_dirs(path)
        if not found:
            raise ConfigError(f"{path}: a study folder with no runs yet (no <model>/<mode>/runs.csv)")
        sweeps += found
        studies[record["study"]] = record
    return sweeps, studies


# OUT's record of the files the last report into it wrote, and the lock two reports into one folder take.
REPORT_RECORD = ".hvdbench-report.json"
REPORT_LOCK = ".hvdbench-report.lock"


@contextmanager
def owned_folder(out: Path) -> Iterator[list]:
    """A report owns its --out folder: `with owned_folder(out) as written:` writes under OUT's lock
    (a second report into it at the same time is refused), then deletes what the last report there
    wrote (REPORT_RECORD) and this one did not, and records this one's: a folder never holds two
    reports' files (A's waterfall beside B's summary.md). Files no report wrote are left alone."""
    from filelock import FileLock, Timeout

    from hvdbench.errors import OutputError

    out.mkdir(parents=True, exist_ok=True)
    lock = FileLock(out / REPORT_LOCK)
    try:
        lock.acquire(blocking=False)
    except Timeout:
        raise OutputError(f"--out {out}: another report is writing into this folder now; give another --out") from None
    try:
        written: list = []
        yield written
        root = out.resolve()
        now = {os.path.relpath(Path(p).resolve(), root) for p in written}
        try:
            before = json.loads((out / REPORT_RECORD).read_text())["wrote"]
        except (OSError, ValueError, KeyError, TypeError):
            before = []
        for rel in before if isinstance(before, list) else []:
            path = root / str(rel)
            # Only a file of the record inside OUT (a hand-edited record names nothing outside it).
            if rel not in now and path.resolve().parent.is_relative_to(root) and path.is_file():
                path.unlink()
        atomic_write_text(out / REPORT_RECORD, json.dumps({"wrote": sorted(now)}, indent=1) + "\n")
    finally:
        lock.release()


@click.command()
@click.argument("sweeps", nargs=-1, metavar="[SWEEP_DIR]...", type=click.Path(path_type=Path))
@click.option("--mllog", "mllogs", multiple=True, type=click.Path(path_type=Path),
              help="Folder of MLPerf logs, searched recursively: every text file with :::MLLOG lines "
              "(result_N.txt, mllog.txt, *.log, slurm-*.out, with or without srun -l rank prefixes). Repeatable.")
@click.option("--group-by", default="submitter+system", show_default=True, metavar="KEYS",
              help="How --mllog runs are grouped into systems (one table and one speed-up each): '+'-joined "
              "keys of submitter, system (systems JSON system_name, else the results/<system> folder), "
              "platform (the log's submission_platform), folder, accelerator; sizes are removed.")
@click.option("--ruleset", metavar="X.Y.Z", callback=_ruleset, help="MLPerf training ruleset whose RCPs closed-division --mllog "
              "runs are checked against [default: from a training_results_vX.Y folder in the path, else 4.0.0].")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Where the report goes [default: FIRST_SWEEP/report, or ./report with only --mllog].")
@click.option("--format", "formats", default="csv,md,png", show_default=True, callback=_formats,
              help="Comma-separated files to write: csv, md (summary.md), png.")
@click.option("--baseline", metavar="NxG", help="Layout (NODESxGPUS) that speed-up and efficiency are "
              "measured against [default: the smallest GPU count present, single-node first].")
@layouts_option("--predict", "predict_layouts",
                help="Also predict these layouts (NODESxGPUS, comma-separated) from the sweeps' runs and the "
                     "--mllog logs (time to train): prediction.csv/.png and a section of summary.md (see "
                     "`hvdbench predict`).")
def report(sweeps, mllogs, out, formats, baseline, group_by, ruleset, predict_layouts):
    """Speed-up, scaling efficiency, scale-up vs scale-out and MLPerf time-to-train (olympic mean,
    mean ± 2σ) from SWEEP_DIR/runs.csv files, study folders (`hvdbench study run --out DIR`: its
    sweeps, plus the speed-up across models, study_speedup.csv/.png) and published MLPerf logs. Writes scaling.csv,
    layouts.csv, time_to_train.csv, epochs.csv, summary.md and PNG plots; prints the tables.
    With `hvdbench bench` results in a sweep folder, comm_vs_training.csv and io_vs_training.csv
    put them beside the training throughput of the same layout. Sweeps run under several engines
    (`sweep --engines`) get engines.csv/.png: each engine's throughput, its ratio to Horovod's and
    where its step went. compute.csv/.png: each layout's model TFLOP/s per GPU, MFU (against the
    datasheet peak, and `bench compute`'s where the sweep ran it), memory per rank and energy per
    sample; published logs' MFU too. Time-to-accuracy runs and published logs get ttt_waterfall.csv/.png (each
    layout's time to train from the ideal: convergence, throughput, evaluation, the rest) and
    convergence.csv/.png (samples to target against the global batch: S_min and B_crit, with the
    benchmark's RCP table's); --predict predicts their time to train too (prediction.csv).

    \b
    Example:
      hvdbench report results/demo
      hvdbench report results/demo-study
      hvdbench report results/a100 results/h100 --baseline 1x1 --out reports/cmp
      hvdbench report --mllog training_results_v4.0/Oracle --format csv,md
      hvdbench report --mllog vendor-logs --group-by submitter+platform --ruleset 4.0.0
      hvdbench report results/demo --predict 2x2,8x8
      hvdbench report --mllog training_results_v5.1/University-of-Florida --predict 64x8
    """
    from rich.progress import track

    from hvdbench.results import mllog
    from hvdbench.results.analyses import bench_tables, compute, convergence, engines, study_tables, ttt, waterfall
    from hvdbench.results.predict import time_to_train as predict_ttt
    from hvdbench.results.records import store
    from hvdbench.results.render import tables as tab
    from hvdbench.results.stats import aggregate
    from hvdbench.results.stats.versions import torch_header

    if not sweeps and not mllogs:
        raise click.UsageError("give at least one SWEEP_DIR or --mllog DIR")
    keys = mllog.parse_group_by(group_by)
    from hvdbench.files import check_writable_dir

    out = check_writable_dir(out or _default_out(sweeps), "--out")  # before reading anything
    sweeps, studies = _expand_studies(sweeps)
    # Read and compute everything before writing anything: bad input leaves the old report intact.
    loaded = []
    for folder in sweeps:  # each time-to-accuracy run's evaluation cadence from its resolved config
        rows = store.load_sweeps([folder])
        aggregate.read_eval_cadence(rows, store.sweep_folder(folder))
        ttt.read_parts(rows, store.sweep_folder(folder))  # time to train in parts, from each run's mllog.txt
        loaded += rows
    runs, superseded = store.current_runs(loaded)
    notes = [f"{superseded} earlier attempt(s) of retried runs are kept in runs.csv and superseded "
             "by their retry in these tables"] if superseded else []
    for root in mllogs:
        more, said = mllog.load(root, lambda files: track(files, description=f"reading {root}",
                                                          transient=True, disable=len(files) < 50),
                                keys, ruleset)
        runs, notes = runs + more, notes + said
    tables = aggregate.build_tables(runs, baseline)
    sources = [str(p) for p in (*sweeps, *mllogs)]
    # Interconnect and storage figures (hvdbench bench) beside the training numbers, when present.
    bench = bench_tables.build(sweeps, runs)
    falls = waterfall.waterfall_rows(runs, tables.scaling, waterfall.twin_runs(sweeps))
    engine_rows = engines.engine_rows(runs, tables.scaling)
    compute_rows = compute.compute_rows(runs, sweeps)
    for fall in falls:  # the waterfall names its compute part's MFU
        fall["compute_mfu"] = compute.mfu_of(compute_rows, fall, fall["layout"])
    # Time to train in parts (a waterfall per layout) and samples to target against the global batch.
    parts, lacking = ttt.layout_parts(runs, tables.time_to_train)
    notes += [f"{len(lacking)} time-to-train row(s) without parts, e.g. {lacking[0]}"] if lacking else []
    ttt_falls, conv = ttt.waterfall_rows(parts, tables.time_to_train, falls), convergence.rows(parts, runs)
    study_rows = {name: study_tables.speedup_rows(tables, record.get("published")) for name, record in studies.items()}
    study_md = [study_tables.markdown(study_rows[name], name, record.get("reproduces", ""))
                for name, record in studies.items()]
    fits, predicted, ttt_fits, ttt_predicted = [], [], [], []
    if predict_layouts:
        from hvdbench.cli.predict import fits_and_rows
        from hvdbench.results.predict import throughput as predict

        fits, predicted = fits_and_rows(runs, sweeps, predict_layouts)
        ttt_fits, ttt_predicted = predict_ttt.predictions(runs, parts, predict_layouts, None, fits)
        if not fits and not ttt_fits:
            notes.append("--predict: no successful throughput run with a step-time breakdown, and no converged "
                         "time-to-accuracy run with its parts, to fit on")
    header = torch_header(runs)  # the PyTorch of the runs, and a warning per table that mixes releases
    text = "\n".join(part for part in (tab.markdown(tables, sources, notes, header), waterfall.markdown(falls),
                                       ttt.markdown(ttt_falls), convergence.markdown(conv),
                                       engines.markdown(engine_rows), compute.markdown(compute_rows), *study_md,
                                       predict.markdown(predicted, fits) if fits else "",
                                       predict_ttt.markdown(ttt_predicted, ttt_fits),
                                       bench_tables.markdown(bench)) if part)
    notes = []  # in the text above

    with owned_folder(out) as written:  # what an earlier report wrote here and this one does not goes
        if "csv" in formats:
            written += tab.write_csvs(tables, out)
            written += bench_tables.write_csvs(bench, out)
        if "md" in formats:
            written.append(tab.write_markdown(text, out))
        if falls:
            written += waterfall.write(falls, out, formats)
        written += engines.write(engine_rows, out, formats)
        written += compute.write(compute_rows, out, formats)
        if ttt_falls:
            written += ttt.write(ttt_falls, out, formats)
        if conv:
            written += convergence.write(conv, out, formats)
        if fits or ttt_predicted:
            written += predict.write(predicted, fits, out, formats, ttt_predicted)
            written += predict_ttt.write_figure(ttt_predicted, ttt_fits, out, formats)
        for name, rows in study_rows.items():
            written += study_tables.write(rows, out if len(studies) == 1 else out / name, name, formats)
        if "png" in formats:
            from hvdbench.results.render import plots
            pngs, skipped = plots.write_plots(tables, out)
            written += pngs
            notes += skipped

    click.echo(text)
    for note in notes:
        click.echo(note)
    for path in written:
        click.echo(f"wrote {path}")
