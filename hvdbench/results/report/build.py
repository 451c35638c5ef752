"""The report's sections, in order, each fed by the ones before it: its rows, its Markdown and its
files. A new section is one module in hvdbench/results/analyses/ plus one entry in SECTIONS.

    report = build(load(["results/demo"]), Options(baseline=Layout(1, 1), predict_layouts=[Layout(2, 2)]))
    print(report.text)                            # summary.md's text (SUMMARY: the order it reads in)
    write(report, Path("results/demo/report"))    # hvdbench.results.report.folder
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hvdbench.errors import ConfigError
from hvdbench.results.analyses import (bench_tables, convergence, cost, efficiency, engines, failures, findings,
                                       links, stragglers, study_tables, ttt, verdict, waterfall)
from hvdbench.results.predict import throughput as predict_throughput
from hvdbench.results.predict import time_to_train as predict_ttt
from hvdbench.results.render import tables as tab
from hvdbench.results.report.load import Loaded
from hvdbench.results.stats import aggregate
from hvdbench.results.stats.versions import torch_header
from hvdbench.topology import Layout

Files = Callable[[Path, tuple[str, ...]], list[Path]]


def _none(out: Path, formats: tuple[str, ...]) -> list[Path]:
    return []


@dataclass
class Section:
    """One section: its rows (what the sections after it read; frozen, typed: no section writes into
    another's), its Markdown (called once every section is built) and its files (`files(out,
    formats)` -> the paths written)."""

    rows: Any = None
    markdown: Callable[[], str] = lambda: ""
    files: Files = _none


@dataclass
class Options:
    baseline: Layout | None = None  # the layout speed-up is measured against (--baseline)
    predict_layouts: list[Layout] | None = None  # --predict
    fit_on: list[Layout] | None = None  # predict's --fit-on
    machines: str = "auto"  # predict's --machines
    layout_benches: bool = True  # predict's --layout-benches
    global_batch: int | None = None  # predict's --global-batch (time to train of the layouts not run)
    criteria: dict | None = None  # the verdict's checks (verdict.load_criteria: --criteria); None: the defaults
    gpu_hour_price: float | None = None  # --gpu-hour-price: cost.csv's money


@dataclass
class Report:
    loaded: Loaded
    options: Options
    sections: dict[str, Section] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # said in the tables' Markdown
    said: list[str] = field(default_factory=list)  # printed after the text (a plot not drawn, and why)

    @property
    def nothing_succeeded(self) -> str:
        """The one line a report over runs none of which succeeded ends with (exit status 1); '' when one did."""
        return failures.nothing_succeeded(self.loaded.runs)

    @property
    def text(self) -> str:
        """summary.md: its title and header (the tables section's, up to its first table), the findings
        and the verdict, then the sections in SUMMARY's order, then the footnotes once (what each flag
        means, the inputs read, the rules: render/tables.footnotes)."""
        parts = [part for part in (self.sections[name].markdown() for name in SUMMARY if name in self.sections) if part]
        said = "\n".join(part for part in (self.sections[name].markdown() for name in ("findings", "verdict")
                                            if name in self.sections) if part)
        if said and parts and "\n## " in parts[0]:
            head, _, rest = parts[0].partition("\n## ")
            parts[0] = f"{head}\n{said}\n## {rest}"
        elif said:
            parts.insert(0, said)
        if "tables" in self.sections:
            parts.append(tab.footnotes(self.sections["tables"].rows, self.notes))
        return "\n".join(parts)


def _tables(r: Report) -> Section:
    tables = aggregate.build_tables(r.loaded.runs, r.options.baseline)
    header = torch_header(r.loaded.runs)  # the PyTorch of the runs, and a warning per table that mixes releases
    return Section(tables, lambda: tab.body(tables, r.loaded.sources, header),
                   lambda out, formats: tab.write_csvs(tables, out) if "csv" in formats else [])


def _failures(r: Report) -> Section:
    """The runs that did not succeed, grouped by status and recorded error."""
    groups = failures.failure_groups(r.loaded.runs)
    return Section(groups, lambda: failures.markdown(groups, r.loaded.runs))


def _benches(r: Report) -> Section:
    """Interconnect and storage figures (hvdbench bench) beside the training numbers, when present."""
    bench = bench_tables.build(r.loaded.runs, r.loaded.allreduce, r.loaded.io)
    return Section(bench, lambda: bench_tables.markdown(bench),
                   lambda out, formats: bench_tables.write_csvs(bench, out) if "csv" in formats else [])


def _waterfall(r: Report) -> Section:
    """Why each layout lost what it lost; each row names its compute part's MFU (the compute section's)."""
    falls = waterfall.waterfall_rows(r.loaded.runs, r.sections["tables"].rows.scaling, r.loaded.twins,
                                     r.sections["compute"].rows)
    return Section(falls, lambda: waterfall.markdown(falls),
                   lambda out, formats: waterfall.write(falls, out, formats) if falls else [])


def _stragglers(r: Report) -> Section:
    """Which rank or host held each multi-rank layout back (the runs' RUN/ranks.csv)."""
    found = stragglers.stragglers(r.loaded.runs)
    return Section(found, lambda: stragglers.markdown(found), lambda out, formats: stragglers.write(found, out, formats))


def _links(r: Report) -> Section:
    """Each pair's link (the sweeps' bench_links.csv): its table, the slow pairs and the host they share."""
    rows = r.loaded.links
    # The inter-node link the sweeps name (sweep.json: --link, the emulated cluster's shaping).
    link = " | ".join(dict.fromkeys(run.link for run in r.loaded.runs if run.link))
    return Section(rows, lambda: links.markdown(rows, link), lambda out, formats: links.write(rows, out, formats, link))


def _engines(r: Report) -> Section:
    rows = engines.engine_rows(r.loaded.runs, r.sections["tables"].rows.scaling)
    return Section(rows, lambda: engines.markdown(rows), lambda out, formats: engines.write(rows, out, formats))


def _compute(r: Report) -> Section:
    rows = efficiency.compute_rows(r.loaded.runs, r.loaded.peaks)
    return Section(rows, lambda: efficiency.markdown(rows), lambda out, formats: efficiency.write(rows, out, formats))


def _time_to_train(r: Report) -> Section:
    """Time to train in parts: a waterfall per layout (its rows: the parts and the waterfall)."""
    time_to_train = r.sections["tables"].rows.time_to_train
    parts, lacking = ttt.layout_parts(r.loaded.runs, time_to_train)
    r.notes += [f"{len(lacking)} time-to-train row(s) without parts, e.g. {lacking[0]}"] if lacking else []
    falls = ttt.waterfall_rows(parts, time_to_train, r.sections["waterfall"].rows)
    return Section((parts, falls), lambda: ttt.markdown(falls),
                   lambda out, formats: ttt.write(falls, out, formats) if falls else [])


def _convergence(r: Report) -> Section:
    """Samples to target against the global batch."""
    rows = convergence.rows(r.sections["time_to_train"].rows[0], r.loaded.runs)
    return Section(rows, lambda: convergence.markdown(rows),
                   lambda out, formats: convergence.write(rows, out, formats) if rows else [])


def _studies(r: Report) -> Section:
    """A study's speed-up across models; with several studies each in OUT/<study name>/ (a plain
    name: records/store.read_study_record holds it to one)."""
    tables, studies = r.sections["tables"].rows, r.loaded.studies
    rows = {name: study_tables.speedup_rows(tables, record.get("published")) for name, record in studies.items()}

    def files(out: Path, formats: tuple[str, ...]) -> list[Path]:
        return [path for name, mine in rows.items()
                for path in study_tables.write(mine, out if len(studies) == 1 else out / name, name, formats)]
    return Section(rows, lambda: "\n".join(study_tables.markdown(rows[name], name, record.get("reproduces", ""))
                                           for name, record in studies.items()), files)


@dataclass
class Predictions:
    fits: list = field(default_factory=list)  # throughput fits (predict/throughput.py)
    rows: list[predict_throughput.PredictionRow] = field(default_factory=list)
    ttt_fits: list = field(default_factory=list)  # time-to-train fits (predict/time_to_train.py)
    ttt_rows: list[predict_ttt.TttPredictionRow] = field(default_factory=list)

    def markdown(self) -> str:
        return "\n".join(part for part in (predict_throughput.markdown(self.rows, self.fits) if self.fits else "",
                                           predict_ttt.markdown(self.ttt_rows, self.ttt_fits)) if part)

    def files(self, out: Path, formats: tuple[str, ...] = ("csv", "png")) -> list[Path]:
        if not self.fits and not self.ttt_rows:
            return []
        return [*predict_throughput.write(self.rows, self.fits, out, formats, self.ttt_rows),
                *predict_ttt.write_figure(self.ttt_rows, self.ttt_fits, out, formats)]


def layout_parts(loaded: Loaded) -> list:
    """Each time-to-train row's parts (ttt.LayoutParts), as `predict` fits them: the time-to-train
    section's without the report's other sections."""
    return ttt.layout_parts(loaded.runs, aggregate.time_to_train_rows(loaded.runs))[0]


def predictions(loaded: Loaded, options: Options, parts=None) -> Predictions:
    """The throughput and time to train of options.predict_layouts, fitted on the loaded runs (on
    options.fit_on's layouts only, where given): the one path of `predict` and `report --predict`.
    `parts`: the time-to-train section's (ttt.layout_parts), else found here."""
    runs, fit_on = loaded.runs, options.fit_on
    parts = layout_parts(loaded) if parts is None else parts
    wanted = set(fit_on) if fit_on else None
    if wanted:  # a layout no run has is a typo, not "nothing to fit on"
        have = sorted({Layout(r.nodes, r.gpus_per_node) for r in runs if r.nodes and r.gpus_per_node})
        missing = [str(layout) for layout in fit_on if layout not in have]
        if missing:
            where = ", ".join(map(str, loaded.sweeps)) or "the --mllog logs"
            raise ConfigError(f"--fit-on {','.join(missing)}: no run of {where} has "
                              f"{'that layout' if len(missing) == 1 else 'these layouts'} (its runs have "
                              f"{', '.join(map(str, have)) or 'no layout'})")
    shared = None if options.machines == "auto" else options.machines == "shared"
    fits = predict_throughput.fit_groups(runs, loaded.allreduce, shared, wanted, options.layout_benches)
    layouts = options.predict_layouts or []
    ttt_fits, ttt_rows = predict_ttt.predictions(runs, parts, layouts, wanted, fits, options.global_batch)
    return Predictions(fits, predict_throughput.prediction_rows(fits, layouts), ttt_fits, ttt_rows)


def _predictions(r: Report) -> Section:
    if not r.options.predict_layouts:
        return Section(Predictions())
    found = predictions(r.loaded, r.options, r.sections["time_to_train"].rows[0])
    if not found.fits and not found.ttt_fits:
        r.notes.append("--predict: no successful throughput run with a step-time breakdown, and no converged "
                       "time-to-accuracy run with its parts, to fit on")
    return Section(found, found.markdown, found.files)


def _plots(r: Report) -> Section:
    def files(out: Path, formats: tuple[str, ...]) -> list[Path]:
        if "png" not in formats:
            return []
        from hvdbench.results.render import plots  # matplotlib: only when a PNG is written

        pngs, skipped = plots.write_plots(r.sections["tables"].rows, out)
        r.said += skipped
        return pngs
    return Section(files=files)


def _cost(r: Report) -> Section:
    """Per group and layout, measured and predicted: speed-up, time to train, GPU-hours, energy, money."""
    tables = r.sections["tables"].rows
    rows = cost.cost_rows(r.loaded.runs, tables.scaling, tables.time_to_train,
                          r.sections["predictions"].rows.ttt_rows, r.options.gpu_hour_price)
    return Section(rows, lambda: cost.markdown(rows), lambda out, formats: cost.write(rows, out, formats))


def _verdict(r: Report) -> Section:
    """Each acceptance check against its threshold (the criteria), from the rows of the sections above."""
    criteria = r.options.criteria if r.options.criteria is not None else verdict.load_criteria()
    rows = verdict.checks(criteria, r.loaded.runs, r.loaded.allreduce, links.pair_rows(r.loaded.links),
                          r.sections["compute"].rows, r.sections["stragglers"].rows, r.sections["tables"].rows)
    return Section(rows, lambda: verdict.markdown(rows), lambda out, formats: verdict.write(rows, out, formats))


def _findings(r: Report) -> Section:
    """summary.md's first lines, read off the rows of every section above."""
    lines = findings.findings(r.sections["tables"].rows.scaling, r.sections["waterfall"].rows,
                              r.sections["stragglers"].rows, links.verdicts(links.pair_rows(r.loaded.links)),
                              r.loaded.runs)
    return Section(lines, lambda: findings.markdown(lines))


# Built in this order (each reads the rows of those above it: the waterfall the compute section's), and
# their files written in it.
SECTIONS: dict[str, Callable[[Report], Section]] = {
    "tables": _tables, "failures": _failures, "benches": _benches, "compute": _compute, "waterfall": _waterfall,
    "stragglers": _stragglers, "links": _links, "engines": _engines,
    "time_to_train": _time_to_train, "convergence": _convergence, "studies": _studies,
    "predictions": _predictions, "plots": _plots, "cost": _cost, "verdict": _verdict, "findings": _findings}
# summary.md's order (the findings and the verdict open it, after the title, and the footnotes end it:
# Report.text).
SUMMARY = ("tables", "failures", "waterfall", "stragglers", "links", "time_to_train", "convergence", "engines",
           "compute", "studies", "predictions", "cost", "benches")


def build(loaded: Loaded, options: Options | None = None) -> Report:
    """Every section of the report of `loaded`, nothing written yet."""
    report = Report(loaded, options or Options(), notes=list(loaded.notes))
    for name, make in SECTIONS.items():
        report.sections[name] = make(report)
    return report
