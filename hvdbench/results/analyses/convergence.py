"""Samples to the target as a function of the global batch: the critical batch size.

    hvdbench report results/r50-tta                  # convergence.csv, convergence.png, a summary.md section
    hvdbench report --mllog training_results_v5.1    # each system's submissions, and the benchmarks' RCPs
    fit([(16, 159744), (32, 172032), (64, 208896)])  # -> CriticalBatch(s_min=..., b_crit=..., r2=...)
    rcp_points("llama31_8b", "5.1.0")                # ("5.1.0", [(16, S), (32, S), ...], "samples")

McCandlish et al., "An Empirical Model of Large-Batch Training" (arXiv 1812.06162): with B_crit the
critical batch size, the samples (or epochs) a run needs to reach its target grow with the global
batch B as

    S(B) = S_min x (1 + B / B_crit)

linear in B: S_min is what an infinitely small batch would need, and past B_crit doubling the batch
no longer halves the steps. `fit` is least squares of S = a + b B (S_min = a, B_crit = a / b) on the
relative residuals (each point weighted 1 / S^2: run-to-run spread grows with S) over one point per
layout and batch (the mean over the runs its MLPerf score keeps, ttt.LayoutParts),
or per batch size of an RCP table (the olympic mean of its runs, as the RCP checker averages them).
What the data cannot support is said instead of a number:
- one batch size: no fit; S falls with B, or its slope is within two standard errors of 0: B_crit is
  not bounded (the runs are in the perfect-scaling regime, S = S_min); S_min <= 0: S grows faster than
  linearly, the form does not hold;
- two batch sizes: the line goes through both; its quality is untested.
Quality: R^2, and the largest and root-mean-square relative residuals.

RCP tables: mlperf-logging's rcp_checker/training_<ruleset>/rcps_<benchmark>.json, read as the
checker reads them: samples for sample-counted benchmarks, epochs for the others. Each MLPerf
benchmark among the runs is fitted from the ruleset its logs belong to (the latest one before it with
a table for it, else the latest one with one); hvdbench's own runs, from the latest.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from hvdbench.results.mllog.mlperf import counts_samples
from hvdbench.results.records.rows import ReportRow, TttGroup, beside
from hvdbench.results.render.tables import markdown_table, pages, write_table

FIT, TWO_POINTS, ONE_BATCH, UNBOUNDED, NOT_LINEAR = "fit", "two points", "one batch size", "unbounded", "not linear"


@dataclass
class CriticalBatch:
    """S(B) = s_min (1 + B / b_crit); b_crit None: not bounded (S = s_min at every B)."""

    s_min: float | None
    b_crit: float | None
    status: str  # FIT | TWO_POINTS | ONE_BATCH | UNBOUNDED | NOT_LINEAR
    note: str = ""
    r2: float | None = None
    max_rel: float | None = None
    rms_rel: float | None = None
    points: list[tuple[float, float]] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        """Whether it gives S at another batch size (a line, or a flat one the data do not reject)."""
        return self.status in (FIT, TWO_POINTS, UNBOUNDED)

    def samples(self, batch: float) -> float | None:
        if not self.usable or self.s_min is None:
            return None
        return self.s_min if self.b_crit is None else self.s_min * (1 + batch / self.b_crit)


def fit(points, relative: bool = True) -> CriticalBatch:
    """S_min and B_crit from (global batch, samples) points by least squares of the relative residuals
    (`relative=False`: of the residuals themselves, as SUITE.md's table was fitted) (module docstring)."""
    points = sorted((float(b), float(s)) for b, s in points if b and s and math.isfinite(s))
    batches = sorted({b for b, _ in points})
    if not points:
        return CriticalBatch(None, None, ONE_BATCH, "no converged run", points=points)
    mean_s = statistics.fmean(s for _, s in points)
    if len(batches) < 2:
        return CriticalBatch(None, None, ONE_BATCH, f"every run has a global batch of {batches[0]:g}: no slope "
                             "to fit", points=points)
    xs, ys = [b for b, _ in points], [s for _, s in points]
    # Relative least squares (weights 1 / S^2): the runs' spread grows with S (an RCP's standard
    # deviation is a few % of its mean at every batch), so a residual counts by its share of S.
    w = [1 / y ** 2 if relative else 1.0 for y in ys]
    mx = sum(wi * x for wi, x in zip(w, xs)) / sum(w)
    my = sum(wi * y for wi, y in zip(w, ys)) / sum(w)
    sxx = sum(wi * (x - mx) ** 2 for wi, x in zip(w, xs))
    slope = sum(wi * (x - mx) * (y - my) for wi, x, y in zip(w, xs, ys)) / sxx
    a = my - slope * mx
    residuals = [y - (a + slope * x) for x, y in zip(xs, ys)]
    ss_tot = sum((y - mean_s) ** 2 for y in ys)
    r2 = 1 - sum(e * e for e in residuals) / ss_tot if ss_tot > 0 else None
    rel = [abs(e) / y for e, y in zip(residuals, ys)]
    quality = {"r2": r2, "max_rel": max(rel), "rms_rel": math.sqrt(statistics.fmean(r * r for r in rel))}
    n = len(points)
    # The slope's standard error (n - 2 degrees of freedom): a slope within 2 of them of 0 bounds no B_crit.
    se = math.sqrt(sum(wi * e * e for wi, e in zip(w, residuals)) / (n - 2) / sxx) if n > 2 else 0.0
    if slope <= 0 or (n > 2 and slope <= 2 * se):
        flat = [abs(y / mean_s - 1) for y in ys]
        why = ("S falls as the batch grows" if slope <= 0 else
               f"S's growth with the batch ({slope:.3g} per unit of batch) is within two standard errors "
               f"({2 * se:.3g}) of 0")
        return CriticalBatch(mean_s, None, UNBOUNDED, f"{why}: B_crit is not bounded by these batch sizes; S is "
                             "taken as flat (their mean)", r2=None, max_rel=max(flat),
                             rms_rel=math.sqrt(statistics.fmean(f * f for f in flat)), points=points)
    if a <= 0:
        return CriticalBatch(None, None, NOT_LINEAR, f"the line crosses S = 0 at a batch of {-a / slope:.3g} (S_min "
                             f"{a:.3g} <= 0): S grows faster than linearly over these batch sizes", points=points,
                             **quality)
    if len(batches) == 2:
        return CriticalBatch(a, a / slope, TWO_POINTS, "the line goes through both, its quality untested",
                             points=points, **quality)
    return CriticalBatch(a, a / slope, FIT, "", points=points, **quality)


# --- the RCP tables ------------------------------------------------------------------------------

def _rcp_root() -> Path:
    from mlperf_logging import rcp_checker

    return Path(rcp_checker.__file__).parent


def _version(name: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in name.split("_", 1)[1].split("."))
    except (IndexError, ValueError):
        return ()


def rcp_points(benchmark: str, ruleset: str | None = None,
               strict: bool = False) -> tuple[str, list[tuple[float, float]], int] | None:
    """(ruleset read, [(batch, olympic mean samples or epochs to converge)], runs per point at the
    least) of a benchmark's RCP table: the ruleset's own, else the latest earlier one with a table for
    it, else (not `strict`) the latest one; None when no ruleset has one."""
    root = _rcp_root()
    tables = sorted(((_version(d.name), d) for d in root.glob("training_*")
                     if (d / f"rcps_{benchmark}.json").is_file()), key=lambda vd: vd[0])
    if not tables:
        return None
    want = _version(f"training_{ruleset}") if ruleset else ()
    earlier = [vd for vd in tables if want and vd[0] <= want]
    if strict and not earlier:
        return None
    version, folder = (earlier or tables)[-1]
    try:
        data = json.loads((folder / f"rcps_{benchmark}.json").read_text())
    except (OSError, ValueError):
        return None
    points, least = [], None
    for entry in data.values() if isinstance(data, dict) else ():
        runs = sorted(entry.get("Epochs to converge") or entry.get("samples to converge") or [])
        if not runs or not entry.get("BS"):
            continue
        kept = runs[1:-1] if len(runs) > 2 else runs  # olympic: the checker drops the min and the max
        points.append((float(entry["BS"]), statistics.fmean(kept)))
        least = len(runs) if least is None else min(least, len(runs))
    return ".".join(map(str, version)), sorted(points), least or 0


def rcp_for(model: str, ruleset: str | None = None) -> tuple[str, str, list[tuple[float, float]], int] | None:
    """(benchmark, ruleset read, points, runs per point) of a model's RCP table: under the model's own
    name (a published log's submission_benchmark: RetinaNet is `retinanet` from 5.0 on), else under its
    registry spec's MLPerf name (hvdbench's retinanet is MLPerf's `ssd` of 4.x)."""
    names = dict.fromkeys((model, benchmark_of(model)))
    for strict in (True, False):  # a name with a table of that ruleset or before it first
        for name in names:
            table = rcp_points(name, ruleset, strict=strict and bool(ruleset))
            if table is not None:
                return (name, *table)
    return None


def benchmark_of(model: str) -> str:
    """The MLPerf benchmark a run's model is: its registry spec's name for hvdbench's models, the
    model's own name for published logs (their `submission_benchmark`)."""
    from hvdbench.contracts import get_spec, model_names

    return get_spec(model).benchmark if model in model_names() else model


# --- the table ----------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ConvergenceRow(TttGroup, ReportRow):
    """convergence.csv: one row per source (a model group's runs, or an RCP table); trained: the
    samples (or epochs) to the target at each of batch_sizes."""

    source: str
    ruleset: str  # the RCP table's training ruleset (RCP rows); empty for the runs' rows
    unit: str  # what trained and s_min count: samples | epochs
    points: int  # the (global batch, trained) points fitted
    batch_sizes: str  # the global batches fitted, space-separated
    trained: str  # the points' samples (epochs) to the target, space-separated, in batch order
    s_min: float | None  # S_min of S(B) = S_min (1 + B / B_crit): what an infinitely small batch would need
    # the critical global batch B_crit: past it doubling the batch no longer halves the steps; empty: not bounded
    b_crit: float | None
    r2: float | None  # the fit's R²; empty where there is no fit
    max_rel_residual: float | None  # the largest |residual| / S over the points
    rms_rel_residual: float | None  # the root mean square of |residual| / S over the points
    status: str  # fit, two points, one batch size, unbounded, not linear, or no RCP (note says why)
    note: str
    fit: CriticalBatch = beside(None)  # the line and its points: the figure


def rows(parts, runs=()) -> list[ConvergenceRow]:
    """One row per model group's layouts (ttt.LayoutParts) fitted, then each MLPerf benchmark among
    them from its RCP table (in the ruleset of its logs, `runs`: MllogRun.ruleset)."""
    groups: dict[tuple, list] = {}
    for p in parts:
        groups.setdefault(p.key, []).append(p)
    out = []
    for key, ps in groups.items():
        cb = fit((p.global_batch, p.trained) for p in ps)
        units = {p.unit for p in ps}
        out.append(_row(TttGroup(*key), "runs", "", " | ".join(sorted(units)), cb,
                        _note(cb, sum(p.runs_used for p in ps))))
    rulesets: dict[str, set[str]] = {}
    for key in groups:
        rulesets.setdefault(TttGroup(*key).model, set())
    for r in runs:
        if r.model in rulesets and r.ruleset:
            rulesets[r.model].add(r.ruleset)
    for model, wanted in sorted(rulesets.items()):
        for ruleset in sorted(wanted) or [None]:
            table = rcp_for(model, ruleset)
            if table is None:
                if ruleset:  # a published benchmark: say so, rather than leave its RCP row out unseen
                    out.append(_row(TttGroup(model=model), "RCP: none", ruleset, "", fit([]),
                                    f"mlperf-logging has no RCP table for {model!r} in training {ruleset} or "
                                    "before: nothing to compare its runs with", status="no RCP"))
                continue
            benchmark, used, points, least = table
            cb = fit(points)
            out.append(_row(TttGroup(model=model), f"RCP {benchmark} (training {used})", used,
                            "samples" if counts_samples(benchmark) else "epochs", cb, _note(cb, least, least_runs=True)))
    return _dedupe(out)


def _dedupe(rows_: list[ConvergenceRow]) -> list[ConvergenceRow]:
    """One RCP row per table (two rulesets falling back to the same table read it once)."""
    seen, out = set(), []
    for r in rows_:
        key = (r.source, r.model) if r.source.startswith("RCP") else id(r)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def _note(cb: CriticalBatch, runs: int, least_runs: bool = False) -> str:
    """The fit's note and the runs behind it: `runs` in all, or (`least_runs`, an RCP table's) at least
    that many per batch size."""
    if least_runs and runs:
        return (cb.note + "; " if cb.note else "") + f"{runs}+ runs per batch size (olympic means)"
    if runs:
        return (cb.note + "; " if cb.note else "") + f"{runs} runs in all (the ones each layout's score keeps)"
    return cb.note


def _row(group: TttGroup, source: str, ruleset: str, unit: str, cb: CriticalBatch, note: str,
         status: str = "") -> ConvergenceRow:
    """A source's row; `status`: where the source has no table (default: the fit's)."""
    return ConvergenceRow(
        **vars(group), source=source, ruleset=ruleset, unit=unit, points=len(cb.points),
        batch_sizes=" ".join(f"{b:g}" for b in sorted({b for b, _ in cb.points})),
        trained=" ".join(f"{s:.6g}" for _, s in cb.points), s_min=cb.s_min, b_crit=cb.b_crit, r2=cb.r2,
        max_rel_residual=cb.max_rel, rms_rel_residual=cb.rms_rel, status=status or cb.status, note=note, fit=cb)


# --- Markdown, plot, files ----------------------------------------------------------------------

def source_label(row: ConvergenceRow, rows_: list[ConvergenceRow]) -> str:
    """A row's source as the table and the figure name it: 'runs', and the group's words after it where
    another runs row of the same model and system differs in them (a ddp,fsdp sweep: 'runs (ddp)')."""
    if row.source != "runs":
        return row.source

    def words(r: ConvergenceRow) -> tuple:  # flavor, framework, engine, precision, levers
        return r.ttt_key[2:]
    twins = [r for r in rows_ if r.source == "runs" and (r.model, r.system) == (row.model, row.system)]
    differ = [i for i in range(len(words(row))) if len({words(r)[i] for r in twins}) > 1]
    return "runs" + (f" ({' · '.join(str(words(row)[i]) for i in differ if words(row)[i])})" if differ else "")


def markdown(rows_: list[ConvergenceRow]) -> str:
    if not rows_:
        return ""

    def num(v, fmt="{:,.4g}"):
        return "–" if v is None else fmt.format(v)

    lines = [[r.model, r.system or "–", source_label(r, rows_), r.unit, r.batch_sizes or "–",
              num(r.s_min), "∞ (not bounded)" if r.status == UNBOUNDED else num(r.b_crit),
              num(r.r2, "{:.3f}"), num(None if r.max_rel_residual is None else 100 * r.max_rel_residual,
                                          "{:.1f} %"),
              r.status + (f": {r.note}" if r.note else "")] for r in rows_]
    return "\n".join([
        "## Convergence against the global batch (critical batch size)\n",
        "S(B) = S_min × (1 + B / B_crit) (McCandlish et al. 2018), least squares over one point per layout and "
        "batch (the mean of the runs its score keeps), and over each batch size of mlperf-logging's RCP tables "
        "(olympic means). Past B_crit, doubling the batch no longer halves the steps.\n",
        markdown_table(["model", "system", "source", "unit", "global batches", "S_min", "B_crit", "R²",
                        "largest residual", "status"], lines) + "\n"])


def panels(rows_: list[ConvergenceRow]) -> list[tuple]:
    """The figure's panels: (model, unit) of each row with points (a log's samples and an RCP's epochs
    do not share an axis)."""
    return list(dict.fromkeys((r.model, r.unit) for r in rows_ if r.fit.points))


# Systems whose runs' points are drawn and named one by one; past it, the points of systems with no
# curve share one grey mark and one legend line (a published round has 25 systems on a benchmark: 25
# colours and legend lines covered the panel, and the title listing them ran into the next one).
NAMED_SYSTEMS = 4


def figure(rows_: list[ConvergenceRow], shown: list[tuple] | None = None):
    """One panel per model and unit of `shown` (default: all, `panels`): each source's points (S
    against the global batch) and its fitted line (from three batch sizes: through two, the points
    alone), the title naming the machines the runs ran on (up to NAMED_SYSTEMS; past it their number,
    convergence.csv naming each), the legend under the panel."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from hvdbench.results.render.plots import legend_below, wrapped

    shown = panels(rows_) if shown is None else shown
    cols = min(2, len(shown))
    nrows = math.ceil(len(shown) / cols)
    fig = Figure(figsize=(6.4 * cols, 4.6 * nrows), layout="constrained")
    FigureCanvasAgg(fig)

    def curved(r: ConvergenceRow) -> bool:  # a curve of two parameters is drawn from three batch sizes
        return r.fit.usable and r.fit.status != TWO_POINTS

    for i, (model, unit) in enumerate(shown):
        ax = fig.add_subplot(nrows, cols, i + 1)
        mine = [r for r in rows_ if (r.model, r.unit) == (model, unit) and r.fit.points]
        pool = len({r.system for r in mine if r.source == "runs"}) > NAMED_SYSTEMS

        def pooled(r: ConvergenceRow) -> bool:
            return pool and r.source == "runs" and not curved(r)

        bare = [r for r in mine if pooled(r)]
        if bare:
            xs = [b for r in bare for b, _ in r.fit.points]
            ax.plot(xs, [s for r in bare for _, s in r.fit.points], "o", color="0.6",
                    label=f"runs of {len({r.system for r in bare})} systems without a curve (convergence.csv)")
        for r in (r for r in mine if not pooled(r)):
            cb: CriticalBatch = r.fit
            label = source_label(r, rows_) + (f": {r.system}" if r.source == "runs" else "")
            xs = [b for b, _ in cb.points]
            line = ax.plot(xs, [s for _, s in cb.points], "o" if r.source == "runs" else "s", label=label)[0]
            # a curve of two parameters through two points says nothing the points do not: drawn from three
            if curved(r):
                lo, hi = min(xs), max(xs)
                grid = [lo + (hi - lo) * j / 40 for j in range(41)]
                ax.plot(grid, [cb.samples(b) for b in grid], "-", color=line.get_color(), alpha=0.7,
                        label="  S_min {:,.4g}, B_crit {}".format(
                            cb.s_min, "∞" if cb.b_crit is None else f"{cb.b_crit:,.4g}"))
        ax.set_xscale("log", base=2)
        ax.set_xlabel("global batch")
        ax.set_ylabel(f"{unit or 'samples'} to the target")
        ran = sorted({r.system for r in mine if r.source == "runs" and r.system})
        names = ["CPUs (no GPU)" if s.lower() == "cpu" else s for s in ran]
        where = (", ".join(names) if len(names) <= NAMED_SYSTEMS
                 else f"{len(names)} systems (convergence.csv names each)")
        two = any(r.fit.status == TWO_POINTS for r in mine)
        ax.set_title(wrapped(f"{model}: S(B) = S_min (1 + B / B_crit)" + (f"\nruns on {where}" if ran else "")
                             + ("\ntwo batch sizes: points only, no curve" if two else "")), fontsize=10)
        ax.grid(True, alpha=0.3)
        legend_below(ax)
    return fig


def write(rows_: list[ConvergenceRow], out, formats=("csv", "png")) -> list[Path]:
    drawn = any(r.fit.points for r in rows_)
    return write_table(out, "convergence", rows_, ConvergenceRow.columns(), formats,
                       (lambda: pages("convergence", panels(rows_), lambda chunk: figure(rows_, chunk)))
                       if drawn else None)
