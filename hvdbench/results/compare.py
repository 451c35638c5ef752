"""Two sweeps (or two studies) side by side: what changed between BEFORE and AFTER (a driver, NCCL or BIOS
update), each figure judged against both sides' noise, the environment's differences listed first.

    hvdbench compare results/before results/after --out cmp     # cmp/compare.csv, compare.md, compare.html

Per group (model, flavor, framework, engine, precision, levers, mode, batch) and layout: throughput, time to
train, MFU and the allreduce's busbw. A change is "faster" or "slower" only past the noise of the
difference of the two means (2 sigma: both sides' run-to-run spread over their repeats); with a single run
on a side the noise is not known and the change is "not judged". Different models or precisions are
different groups: never compared as one. The hardware a side ran on is not part of the group (a new GPU
is a change to measure): it is listed among the environment's differences.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from html import escape
from pathlib import Path

from hvdbench.errors import ConfigError
from hvdbench.files import atomic_write_text
from hvdbench.results.records.rows import ReportRow
from hvdbench.results.records.store import read_sweep_record
from hvdbench.results.render import html
from hvdbench.results.render.tables import to_csv
from hvdbench.results.report import Loaded, owned_folder

FASTER, SLOWER, WITHIN, NOT_JUDGED = "faster", "slower", "within noise", "not judged"
# A group without the hardware: what ran, how (ScalingGroup's columns but `system`).
GROUP = ("model", "flavor", "framework", "engine", "precision", "levers", "mode", "batch_per_gpu", "accum_steps")


@dataclass(frozen=True, kw_only=True)
class CompareRow(ReportRow):
    """compare.csv: one row per group, layout and figure measured on both sides. change: after / before - 1;
    noise: 2 sigma of that change (both sides' spread of the mean; empty with one run on a side);
    higher_is_better: throughput, MFU, busbw yes, time to train no; verdict: faster | slower | within
    noise | not judged (one run on a side)."""

    model: str  # the model; allreduce for the bench's busbw rows
    flavor: str  # the model's size; busbw rows: the allreduce implementation (horovod | mpi)
    framework: str  # torch or tensorflow; empty for busbw rows
    engine: str  # the distributed engine (horovod, ddp, fsdp); empty for busbw rows
    precision: str  # the training precision; busbw rows: the bench's dtype
    levers: str
    mode: str  # throughput | time_to_accuracy; bench for busbw rows
    batch_per_gpu: int  # samples per GPU (per CPU rank) per step; 0 for busbw rows
    accum_steps: int  # gradient accumulation steps per update; 1 for busbw rows
    layout: str
    figure: str  # throughput | mfu | time_to_train | busbw (the allreduce bench's, at its largest message)
    unit: str  # the figure's unit: samples/s, fraction of peak, min, GB/s
    before: float  # BEFORE's mean of the figure over its successful runs (bench rows), in `unit`
    before_runs: int  # the runs (bench rows) behind BEFORE's mean
    before_2sigma: float | None  # 2σ of BEFORE's mean (2 x std / sqrt(runs)), in `unit`; empty with one run
    after: float  # AFTER's mean of the figure, in `unit`
    after_runs: int  # the runs (bench rows) behind AFTER's mean
    after_2sigma: float | None  # 2σ of AFTER's mean, in `unit`; empty with one run
    change: float  # after / before - 1
    noise: float | None  # 2σ of the change: both sides' 2σ in quadrature, over before; empty with one run on a side
    higher_is_better: bool  # yes for throughput, MFU and busbw; no for time to train
    verdict: str  # faster or slower (past the noise), within noise, or not judged (one run on a side)


@dataclass(frozen=True)
class EnvRow(ReportRow):
    """compare_environment.csv (and the first block of compare.md and compare.html): what differs
    between the two sides' environments (versions, devices, hosts, links, drivers, CPUs)."""

    what: str  # what differs: devices, hosts, a link, the CPU, the GPU driver, or a package's version
    before: str  # BEFORE's values of it, ' | '-joined (empty: none recorded)
    after: str  # AFTER's values of it


@dataclass(frozen=True)
class Side:
    """One side's figures: (group, layout, figure) -> (mean, 2 sigma of the mean or None, runs)."""

    figures: dict
    env: dict  # what -> its values, ' | '-joined


def _mean(values: list[float]) -> tuple[float, float | None, int]:
    mean = statistics.fmean(values)
    two_sigma = 2 * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
    return mean, two_sigma, len(values)


def _group(r) -> tuple:
    return tuple(getattr(r, k) for k in GROUP)


def _environment(loaded: Loaded) -> dict[str, str]:
    values: dict[str, set] = {}

    def add(what, value):
        if value not in (None, ""):
            values.setdefault(what, set()).add(str(value))
    for r in loaded.runs:
        add("devices", r.devices)
        add("hosts", r.hosts.replace(";", ", ") if r.hosts else "")
        add("inter-node link", r.link)
        add("intra-node link", r.intra_link)
        add("CPU", r.cpu_model)
        for part in (r.versions or "").split(";"):
            name, _, version = part.partition("=")
            add(name.strip(), version.strip())
    for sweep in loaded.sweeps:
        record = Path(sweep) / "sweep.json" if Path(sweep).is_dir() else Path(sweep).parent / "sweep.json"
        try:
            hosts = read_sweep_record(record).get("hardware") or {} if record.is_file() else {}
        except ConfigError:
            hosts = {}
        for host in (h for h in (hosts.values() if isinstance(hosts, dict) else []) if isinstance(h, dict)):
            add("GPU driver", host.get("driver"))
    return {what: " | ".join(sorted(v)) for what, v in values.items()}


def side(loaded: Loaded) -> Side:
    figures: dict[tuple, list[float]] = {}
    ok = [r for r in loaded.runs if r.status == "success" and not r.result]
    for r in ok:
        key = (_group(r), r.layout)
        if r.mode == "throughput" and r.throughput:
            figures.setdefault((*key, "throughput"), []).append(r.throughput)
        if r.mode == "throughput" and r.mfu is not None:
            figures.setdefault((*key, "mfu"), []).append(r.mfu)
        if r.mode == "time_to_accuracy" and r.time_to_train_s:
            figures.setdefault((*key, "time_to_train"), []).append(r.time_to_train_s / 60)
    largest = max((a.bytes for a in loaded.allreduce if a.busbw_gb_s), default=None)
    for a in loaded.allreduce:
        if a.busbw_gb_s and a.bytes == largest and not a.wrong:
            figures.setdefault(((a.impl, a.dtype), a.layout, "busbw"), []).append(a.busbw_gb_s)
    return Side({k: _mean(v) for k, v in figures.items()}, _environment(loaded))


UNITS = {"throughput": ("samples/s", True), "mfu": ("fraction of peak", True), "time_to_train": ("min", False),
         "busbw": ("GB/s", True)}


def _judge(before, after, higher: bool) -> tuple[float, float | None, str]:
    (b, b2, _), (a, a2, _) = before, after
    change = a / b - 1 if b else math.nan
    if b2 is None or a2 is None or not b:
        return change, None, NOT_JUDGED
    noise = math.hypot(b2, a2) / b  # 2 sigma of the difference of the means, as a share of BEFORE
    if abs(change) <= noise:
        return change, noise, WITHIN
    better = change > 0 if higher else change < 0
    return change, noise, FASTER if better else SLOWER


def compare_rows(before: Side, after: Side) -> tuple[list[CompareRow], list[str]]:
    """The rows of every figure both sides measured, and one line per group or layout only one side has."""
    rows, alone = [], []
    for key in sorted(set(before.figures) | set(after.figures), key=str):
        group, layout, figure = key
        if key not in before.figures or key not in after.figures:
            alone.append(f"{figure} of {' '.join(map(str, group))} {layout}: only "
                         f"{'AFTER' if key in after.figures else 'BEFORE'} measured it")
            continue
        unit, higher = UNITS[figure]
        change, noise, said = _judge(before.figures[key], after.figures[key], higher)
        names = dict(zip(GROUP, group)) if figure != "busbw" else dict(
            zip(GROUP, ("allreduce", group[0], "", "", group[1], "", "bench", 0, 1)))
        (b, b2, bn), (a, a2, an) = before.figures[key], after.figures[key]
        rows.append(CompareRow(**names, layout=layout, figure=figure, unit=unit, before=b, before_runs=bn,
                               before_2sigma=b2, after=a, after_runs=an, after_2sigma=a2, change=change,
                               noise=noise, higher_is_better=higher, verdict=said))
    return rows, alone


def environment_rows(before: Side, after: Side) -> list[EnvRow]:
    return [EnvRow(what, before.env.get(what, ""), after.env.get(what, ""))
            for what in sorted(set(before.env) | set(after.env)) if before.env.get(what) != after.env.get(what)]


def _pct(x: float | None) -> str:
    return "" if x is None or math.isnan(x) else f"{100 * x:+.1f} %"


def _noise(x: float | None) -> str:
    return "one run: not known" if x is None else f"± {100 * x:.1f} %"


def markdown(env: list[EnvRow], rows: list[CompareRow], alone: list[str], names: tuple[str, str]) -> str:
    lines = [f"# hvdbench compare: {names[0]} -> {names[1]}", "", "## What differs in the environment", ""]
    lines += ([f"- {e.what}: {e.before or '(none)'} -> {e.after or '(none)'}" for e in env]
              or ["- nothing recorded differs"])
    lines += ["", "## Changes, judged against both sides' noise", "",
              "| group | layout | figure | before | after | change | noise (2σ) | verdict |",
              "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.model}/{r.flavor} {r.engine} {r.precision} {r.mode} b{r.batch_per_gpu} | {r.layout} | "
                     f"{r.figure} ({r.unit}) | {r.before:.4g} (n={r.before_runs}) | {r.after:.4g} (n={r.after_runs}) | "
                     f"{_pct(r.change)} | {_noise(r.noise)} | {r.verdict} |")
    if alone:
        lines += ["", "Measured on one side only (not compared):", *[f"- {a}" for a in alone]]
    return "\n".join(lines) + "\n"


def page(env: list[EnvRow], rows: list[CompareRow], alone: list[str], names: tuple[str, str]) -> str:
    counts = {v: sum(r.verdict == v for r in rows) for v in (SLOWER, FASTER, WITHIN, NOT_JUDGED)}
    said = ", ".join(f"{n} {v}" for v, n in counts.items() if n) or "nothing measured on both sides"
    body = [f"<header><h1>hvdbench compare: {escape(names[0])} &rarr; {escape(names[1])}</h1>"
            f"<p class=\"meta\">{escape(said)}</p></header>",
            "<section id=\"environment\"><h2>What differs in the environment</h2>",
            html.table(["what", "before", "after"], [[e.what, e.before, e.after] for e in env]) if env
            else "<p class=\"meta\">Nothing recorded differs.</p>", "</section>",
            "<section id=\"changes\"><h2>Changes, judged against both sides' noise</h2>"]
    lines = [[escape(f"{r.model}/{r.flavor} {r.engine} {r.precision} {r.mode} b{r.batch_per_gpu}"), escape(r.layout),
              escape(f"{r.figure} ({r.unit})"), f"{r.before:.4g} <small>n={r.before_runs}</small>",
              f"{r.after:.4g} <small>n={r.after_runs}</small>", escape(_pct(r.change)),
              escape(_noise(r.noise)), html.state(r.verdict)] for r in rows]
    body.append(html.table(["group", "layout", "figure", "before", "after", "change", "noise (2σ)", "verdict"],
                           lines, cls="compare", raw=True)
                if rows else "<p class=\"meta\">No figure on both sides.</p>")
    body.append("</section>")
    if alone:
        body.append("<section id=\"alone\"><h2>Measured on one side only</h2><ul>"
                    + "".join(f"<li>{escape(a)}</li>" for a in alone) + "</ul></section>")
    return html.page("hvdbench compare", body)


def write(before: Loaded, after: Loaded, out: Path, names: tuple[str, str]) -> list[Path]:
    """compare.csv (the figures), compare_environment.csv (what differs), compare.md and compare.html
    into OUT (owned as a report's folder: its record, its lock)."""
    one, two = side(before), side(after)
    env = environment_rows(one, two)
    rows, alone = compare_rows(one, two)
    if not rows and not alone:
        raise ConfigError(f"{names[0]} and {names[1]}: no successful run or bench on either side to compare")
    with owned_folder(out, "compare", ("csv", "md", "html")) as folder:
        for name, text in (("compare.csv", to_csv(rows, CompareRow.columns())),
                           ("compare_environment.csv", to_csv(env, EnvRow.columns())),
                           ("compare.md", markdown(env, rows, alone, names)),
                           ("compare.html", page(env, rows, alone, names))):
            atomic_write_text(folder.stage / name, text)
            folder.staged.append(folder.stage / name)
    return folder.written

