"""From run records to the report's tables: grouping, mean / sample standard deviation / two-sigma,
speed-up and scaling efficiency, scale-up vs scale-out deltas, and MLPerf's olympic time-to-train.

    hvdbench report results/demo --mllog training_results_v4.0/Oracle --baseline 1x1
    runs = load_sweeps(["results/demo"]) + read_mllog_dir("training_results_v4.0/Oracle")   # store, mllog
    tables = build_tables(runs, baseline=None)      # Tables(scaling, layouts, time_to_train, epochs)

Each table's row is a frozen dataclass declared here (ScalingRow, LayoutsRow, TimeToTrainRow,
EpochRow: records/rows.py's ReportRow), its fields the columns of its CSV in order, None where
undefined; render/tables.py writes them.
Rules (also printed in the report's notes, `NOTES`):
- std is the sample standard deviation (ddof=1); two-sigma = 2 x std; with one run both are empty.
- Only successful runs with a throughput feed throughput statistics; every row still counts its
  failed, aborted and timed-out runs.
- speed-up = throughput(N) / throughput(baseline); efficiency = (throughput(N)/N) /
  (throughput(baseline)/baseline GPUs). Baseline: `--baseline NxG`, else the smallest GPU count
  with data in the group; at equal GPU count the layout with the fewest nodes (scale-up).
- Time to train is MLPerf's score (`olympic_score`), as the official result summarizer computes
  it; for closed-division MLPerf logs also after the summarizer's RCP rescale, computed by
  mlperf-logging's own RCP checker (`hvdbench.results.mllog.rcp_check`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from hvdbench.errors import ConfigError
from hvdbench.results.mllog import rcp_check
from hvdbench.results.mllog.mlperf import counts_samples
from hvdbench.results.mllog.summary import INCOMPLETE
from hvdbench.results.records.rows import ReportRow, ScalingGroup, TttGroup, beside
from hvdbench.results.records.schema import BUSY_CPUS, RunResult
from hvdbench.topology import Layout

# MLPerf drops the fastest and slowest run; we do so from this many runs on (MLPerf itself asks
# 5 runs for vision models and 10 for BERT; 3 is the least that leaves a run after dropping two).
OLYMPIC_MIN_RUNS = 3
# Runs dropped from each end, by MLPerf benchmark: the summarizer's max_dropped_scores (1 for the others).
# A fact of MLPerf's rules about a benchmark hvdbench has no model for, so not the registry's.
OLYMPIC_DROP = {"unet3d": 4}
SWEEP_SOURCE = "hvdbench sweep"  # the layout source of runs.csv rows (the sweep's own plan)

NOTES = [
    "std: sample standard deviation (ddof=1) over repeated runs; 2σ = 2 × std; empty with one run.",
    "Throughput statistics use successful runs only; every row counts all runs "
    "(ok / failed / aborted / timeout), none is dropped.",
    "speed-up = throughput(N) / throughput(baseline); efficiency = (throughput(N)/N) / "
    "(throughput(baseline)/baseline GPUs); the baseline is the smallest GPU count with data "
    "(or --baseline), the single-node layout where several share that count. efficiency ± 2σ: the two "
    "means' relative spreads added in quadrature (the baseline's point: its own spread).",
    "Scale-up vs scale-out: each layout against the layout with the fewest nodes at the same "
    "GPU count; the difference is within noise iff |Δ| ≤ 2·sqrt(σa² + σb²) (both need ≥ 2 runs).",
    f"Time to train (MLPerf): run_start → run_stop. With ≥ {OLYMPIC_MIN_RUNS} runs the fastest "
    "and slowest are dropped (olympic mean); one run that did not converge (aborted, failed, "
    "timeout) counts as the slowest; with more than one, or with fewer runs and any, the score "
    "is DNF (MLPerf UNet3D: 4 dropped from each end, up to 4 non-converged). mean ± 2σ is over "
    "converged runs. Time-to-train speed-up = TTT(baseline)/TTT(N).",
    "RCP (closed-division MLPerf logs): mlperf-logging's RCP checker, called as the official result "
    "summarizer calls it, compares the runs' olympic mean epochs (samples) to converge with the "
    "reference convergence point for their global batch; faster than the RCP mean but within its "
    "allowed speed-up, the score is multiplied by RCP mean / runs' mean (the summarizer's "
    "scaling.json); faster than that, the check fails. RCP-normalised = raw × factor.",
    "Sample-based logs (BERT and others that evaluate every N samples) give samples to target and "
    "minutes per 1M samples; their epochs are known only when the log gives the training set size, and "
    "are not shown for sample-counted benchmarks (LLMs, BERT, UNet3D), whose runs train a sliver of an epoch.",
]


# --- statistics ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Stats:
    n: int
    mean: float | None
    std: float | None  # sample standard deviation (ddof=1); None with fewer than 2 values

    @property
    def two_sigma(self) -> float | None:
        return None if self.std is None else 2 * self.std


def stats(values) -> Stats:
    values = [float(v) for v in values if v is not None and not math.isnan(v)]
    return Stats(len(values), statistics.fmean(values) if values else None,
                 statistics.stdev(values) if len(values) >= 2 else None)


@dataclass(frozen=True)
class Score:
    minutes: float | None  # None: not defined (DNF or no runs)
    rule: str


def olympic_score(minutes: list[float], not_converged: int, drop: int = 1, incomplete: int = 0) -> Score:
    """MLPerf's time-to-train score from the converged runs' minutes and the count of runs that
    did not converge (each counts as infinitely slow): `drop` runs dropped from each end, at most
    `drop` non-converged (the summarizer's max_dropped_scores). `incomplete` of the non-converged
    are logs that end before run_stop, and are called so."""
    n = len(minutes) + not_converged
    if n == 0:
        return Score(None, "no runs")
    missed = ("incomplete (no run_stop: the log ends early)" if incomplete and incomplete == not_converged else
              f"did not converge ({incomplete} incomplete: no run_stop)" if incomplete else "did not converge")
    if not_converged > drop:
        return Score(None, f"DNF: {not_converged} of {n} runs {missed}")
    if n < max(OLYMPIC_MIN_RUNS, 2 * drop + 1):
        if not_converged:
            return Score(None, f"DNF: {not_converged} of {n} runs {missed} "
                               f"(< {max(OLYMPIC_MIN_RUNS, 2 * drop + 1)} runs, none dropped)")
        return Score(statistics.fmean(minutes), f"mean of {n}")
    ordered = sorted(minutes) + [math.inf] * not_converged
    kept = ordered[drop:-drop]
    each = "" if drop == 1 else f"{drop} "
    which = ("incomplete" if incomplete == not_converged else "non-converged (or incomplete)") if incomplete \
        else "non-converged"
    dropped = (f"{each}fastest and the {which} run{'s' if not_converged > 1 else ''}"
               + (f" and {drop - not_converged} slowest" if 0 < not_converged < drop else "")
               if not_converged else f"{each}fastest and {each}slowest")
    return Score(statistics.fmean(kept), f"olympic mean of {len(kept)} of {n} (dropped {dropped})")


# --- grouping ----------------------------------------------------------------------------------

def system_of(run: RunResult) -> str:
    """The hardware a run ran on: hvdbench's device names, or a published log's system name."""
    return run.devices


class Placed(Protocol):
    """What `where_ran` and the plots' subtitles read of a row: where its runs ran. Every table row
    built from runs has these (as columns, or `beside` them), and so has `Where`."""

    system: str
    nodes: int
    hosts: str
    link: str
    intra_link: str
    cpu_model: str


@dataclass(frozen=True)
class Where:
    """Where a layout's runs ran, for a figure or footer of something that is not a table row (a
    bench's plot, a fit's layouts, the stragglers' panels): as a row would say it (`Placed`)."""

    system: str = ""
    nodes: int = 0
    hosts: str = ""
    link: str = ""
    intra_link: str = ""
    cpu_model: str = ""
    layout: str = ""
    runs: int = 0


@dataclass(frozen=True)
class Counts:
    """A layout's runs by status (every table counts all of them, none dropped)."""

    runs: int
    ok: int
    failed: int
    aborted: int
    timeout: int


def _counts(runs: list[RunResult]) -> Counts:
    return Counts(len(runs), sum(r.status == "success" for r in runs), sum(r.status == "failed" for r in runs),
                  sum(r.status == "aborted" for r in runs), sum(r.status == "timeout" for r in runs))


@dataclass(frozen=True)
class Placement:
    """A layout's columns, from its runs: the layout itself, the hosts it ran on, and the link
    between them (one-node layouts have none); the intra-node link and CPU model beside them."""

    layout: str
    nodes: int
    gpus_per_node: int
    gpus: int
    scale: str
    hosts: str
    link: str
    intra_link: str
    cpu_model: str


def placement(runs: list[RunResult]) -> Placement:
    """Where a layout's runs ran (the tables' layout columns, and what a plot's subtitle needs:
    render/plots.context, for rows built outside these tables too, the compute table's)."""
    run = runs[0]
    hosts = dict.fromkeys(h for r in runs for h in (r.hosts or "").split(";") if h)
    return Placement(run.layout, run.nodes, run.gpus_per_node, run.world_size,
                     run.scale or ("" if not run.nodes else "up" if run.nodes == 1 else "out"), ";".join(hosts),
                     "" if run.nodes == 1 else _one(r.link for r in runs) or "",
                     _one(r.intra_link for r in runs) or "", _one(r.cpu_model for r in runs) or "")


def layout_source(runs: list[RunResult]) -> str:
    """Where the runs' layout came from: an MLPerf log's source (systems JSON, an NxGxBxA name,
    the platform text, see hvdbench.results.mllog), or the sweep's plan for runs.csv rows."""
    return _one(r.layout_source or SWEEP_SOURCE for r in runs) or ""


def on_cpus(row) -> bool:
    """hvdbench's own CPU runs record their device as "cpu": their "GPUs" are CPU processes (ranks).
    `row`: anything with the `system` of a group (a row, a group, `Where`)."""
    return str(row.system or "").lower() == "cpu"


def device_word(row, plural: bool = False) -> str:
    """What a report calls one device of a row: 'rank' on CPUs, 'GPU' otherwise."""
    word = "rank" if on_cpus(row) else "GPU"
    return word + "s" if plural else word


def group_title(group: TttGroup) -> str:
    """'resnet50 · debug · torch · ddp · fp32 · throughput · batch 32/GPU — <system>' from a group (a
    ScalingGroup with its mode and batch; a TttGroup without): how the report titles a table, its plots
    and every warning naming it."""
    parts = [group.model, group.flavor, group.framework, group.engine, group.precision, group.levers]
    if isinstance(group, ScalingGroup):
        parts.append(group.mode)
        if group.batch_per_gpu:
            accum = group.accum_steps or 1
            parts.append(f"batch {group.batch_per_gpu}/{device_word(group)}"
                         + (f" × {accum} accum" if accum > 1 else ""))
    title = " · ".join(str(p) for p in parts if p)
    return title + (f" — {group.system}" if group.system else "")


def where_ran(rows: Sequence[Placed], most: int = 4) -> str:
    """'hosts: hvd-node1, hvd-node2 · intra-node link: NVLink (NV18) between 8 GPUs · inter-node link:
    emulated veth bridge, 100mbit' for a group of report rows (the plots' subtitle and the Markdown
    tables' footer); multi-node layouts whose sweep named and read no link say so."""
    hosts = list(dict.fromkeys(h for r in rows for h in (r.hosts or "").split(";") if h))
    parts = []
    cpus = list(dict.fromkeys(r.cpu_model for r in rows if on_cpus(r) and r.cpu_model))
    if cpus:  # a CPU run's device is its host's CPU (the hardware record's model)
        parts.append("CPU: " + " | ".join(cpus))
    if hosts:
        shown = ", ".join(hosts[:most]) + (f" +{len(hosts) - most} more" if len(hosts) > most else "")
        parts.append(f"host{'s' if len(hosts) > 1 else ''}: {shown}")
    intra = list(dict.fromkeys(r.intra_link for r in rows if r.intra_link))
    if intra:  # read off the hosts (sweep.json's hardware records)
        parts.append("intra-node link: " + " | ".join(intra))
    multi = [r for r in rows if (r.nodes or 0) > 1]
    if multi:
        links = list(dict.fromkeys(r.link for r in multi if r.link))
        parts.append("inter-node link: " + (" | ".join(links) if links else "not recorded (sweep --link)"))
    return " · ".join(parts)


def _group_by(runs, key) -> dict[tuple, list[RunResult]]:
    groups: dict[tuple, list[RunResult]] = {}
    for r in runs:
        groups.setdefault(key(r), []).append(r)
    return groups


def _order(row) -> tuple:
    return (row.gpus, row.nodes)


def _pick_baseline(rows: list, value, baseline: Layout | None):
    """The row speed-ups are measured against (see the module docstring); `value(row)` its figure."""
    usable = [r for r in rows if value(r) is not None and r.gpus]  # a layout is known
    if baseline is not None:
        usable = [r for r in usable if Layout(r.nodes, r.gpus_per_node) == baseline]
    return min(usable, key=_order, default=None)


# --- tables --------------------------------------------------------------------------------

def scaling_key(r: RunResult) -> tuple:
    """A run's SCALING_GROUP values: the scaling table's group (and the waterfall's)."""
    return (system_of(r), r.model, r.flavor, r.framework, r.engine, r.precision, r.levers, r.mode, r.batch_per_gpu,
            r.accum_steps)


@dataclass(frozen=True, kw_only=True)
class ScalingRow(ScalingGroup, ReportRow):
    """scaling.csv: one row per group and layout. Throughput is samples/s over all GPUs."""

    layout: str
    nodes: int
    gpus_per_node: int
    gpus: int
    scale: str
    runs: int
    ok: int
    failed: int
    aborted: int
    timeout: int
    n_throughput: int
    throughput_mean: float | None
    throughput_std: float | None
    throughput_2sigma: float | None
    throughput_per_gpu: float | None
    baseline: str  # the layout speed-up and efficiency are measured against
    speedup: float | None
    efficiency: float | None
    efficiency_2sigma: float | None
    layout_source: str
    hosts: str  # where the layout ran: its hosts (';'-joined) and the inter-node link (empty for one node)
    link: str
    cv: float | None  # std / mean of the runs' throughput
    step_cv: float | None  # the most one run's own step times spread (std / mean)
    other_cpus: float | None  # the most cores' worth of other processes beside a run
    other_gpu_procs: int | None
    # CPU math threads per rank (runs.csv threads; '2|4' when a layout's runs differ)
    threads: int | str | None
    steps: int | None
    warmup_steps: int | None
    flags: str  # the checks the row failed (FLAGS), ';'-joined: summary.md's Flags says what each means
    intra_link: str = beside("")
    cpu_model: str = beside("")


@dataclass(frozen=True)
class _Measured:
    """One layout's runs of a scaling group as measured, before the group's baseline is chosen: what
    its speed-up, efficiency and flags are computed from."""

    runs: list
    where: Placement
    throughput: Stats
    step_cv: float | None
    other_cpus: float | None
    other_gpu_procs: int | None
    threads: int | str | None
    steps: int | None
    warmup_steps: int | None

    @property
    def gpus(self) -> int:
        return self.where.gpus

    @property
    def nodes(self) -> int:
        return self.where.nodes

    @property
    def gpus_per_node(self) -> int:
        return self.where.gpus_per_node

    @property
    def mean(self) -> float | None:
        return self.throughput.mean

    @property
    def cv(self) -> float | None:
        std, mean = self.throughput.std, self.throughput.mean
        return None if std is None or not mean else std / mean


def _measured(runs: list[RunResult]) -> _Measured:
    """The layout's successful runs: their throughput, the worst spread of one run's step times (std /
    mean) and the most cores' worth of other processes beside one (runs.csv `other_cpus`); the math
    threads per rank (runs.csv `threads`; None in sweeps older than schema 4), and the timed and
    warm-up steps of each run (the smallest count, the one a noisy figure is explained by)."""
    ok = [r for r in runs if r.status == "success"]
    cvs = [r.step_time_std_s / r.step_time_mean_s for r in ok if r.step_time_std_s is not None
           and r.step_time_mean_s]
    busy = [r.other_cpus for r in ok if r.other_cpus is not None]
    gpu = [r.other_gpu_procs for r in ok if r.other_gpu_procs is not None]
    timed = ok or runs
    steps = [r.steps for r in timed if r.steps]
    warm = [r.warmup_steps for r in timed if r.warmup_steps is not None and r.steps]
    return _Measured(runs, placement(runs), stats(r.throughput for r in ok), max(cvs, default=None),
                     max(busy, default=None), max(gpu, default=None), _one(r.threads for r in timed),
                     min(steps, default=None), min(warm, default=None))


def scaling_rows(runs: list[RunResult], baseline: Layout | None = None) -> list[ScalingRow]:
    """One row per group and layout. Throughput-mode runs, and time-to-accuracy groups where runs
    recorded a throughput (published MLPerf logs have none: they are in the time-to-train table)."""
    out = []
    for key, group in sorted(_group_by(runs, scaling_key).items()):
        if group[0].mode != "throughput" and not any(r.throughput is not None for r in group):
            continue
        measured = [_measured(layout_runs) for layout_runs in
                    _group_by(group, lambda r: (r.nodes, r.gpus_per_node, r.layout)).values()]
        base = _pick_baseline(measured, lambda m: m.mean, baseline)
        for m in sorted(measured, key=_order):
            fewer = [o for o in measured if o.mean is not None and o.gpus and o.gpus < (m.gpus or 0)
                     and o.nodes <= m.nodes]
            out.append(_scaling_row(ScalingGroup(*key), m, base, fewer))
    return out


def _scaling_row(group: ScalingGroup, m: _Measured, base: _Measured | None, fewer: list[_Measured]) -> ScalingRow:
    st, where, counts = m.throughput, m.where, _counts(m.runs)
    speedup = efficiency = efficiency_2sigma = None
    if base and st.mean is not None and m.gpus:
        speedup = st.mean / base.mean
        efficiency = (st.mean / m.gpus) / (base.mean / base.gpus)
        efficiency_2sigma = _efficiency_2sigma(m, base, efficiency)
    return ScalingRow(
        **vars(group), layout=where.layout, nodes=where.nodes, gpus_per_node=where.gpus_per_node, gpus=where.gpus,
        scale=where.scale, **vars(counts), n_throughput=st.n, throughput_mean=st.mean, throughput_std=st.std,
        throughput_2sigma=st.two_sigma, throughput_per_gpu=st.mean / m.gpus if st.mean is not None and m.gpus else None,
        baseline=base.where.layout if base else "", speedup=speedup, efficiency=efficiency,
        efficiency_2sigma=efficiency_2sigma, layout_source=layout_source(m.runs), hosts=where.hosts, link=where.link,
        cv=m.cv, step_cv=m.step_cv, other_cpus=m.other_cpus, other_gpu_procs=m.other_gpu_procs, threads=m.threads,
        steps=m.steps, warmup_steps=m.warmup_steps, flags=";".join(_flags(m, efficiency, base, fewer)),
        intra_link=where.intra_link, cpu_model=where.cpu_model)


def _efficiency_2sigma(m: _Measured, base: _Measured, efficiency: float) -> float | None:
    """Two sigma of the efficiency, from both means' spread (relative errors add in quadrature: it
    is a ratio of two means). The baseline's own point carries its own spread: every other point
    is measured against it. None when a spread is unknown (a single run)."""
    if m is base:
        return None if base.cv is None else 2 * base.cv * efficiency
    if m.cv is None or base.cv is None:
        return None
    return 2 * efficiency * math.hypot(m.cv, base.cv)



# A row whose runs spread more than this (std / mean) is flagged: its mean, and every speed-up
# measured against it, is not a stable figure (on a shared machine, a neighbour is the usual cause).
NOISY_CV = 0.10
# A run whose own step times spread more than this: 660 +- 860 ms steps (a lone CPU rank whose
# math threads a neighbour kept preempting) are 130 %; an undisturbed run's are a few %.
UNSTEADY_CV = 0.5
FLAGS = {
    "superlinear": "efficiency above 100 %: more than linear speed-up; check the baseline, a slow or "
                   "disturbed baseline run is the usual cause",
    "inverse-scaling": "throughput below that of a layout with fewer GPUs (on no more nodes): adding them made the "
                       "run slower (communication, a slow link or input pipeline outgrowing the work per "
                       "GPU); its efficiency is not a scaling figure",
    "noisy": f"runs spread more than {NOISY_CV:.0%} (coefficient of variation): the mean is not a stable "
             "figure; why is said beside it (a busy machine, a cold start, too few timed steps)",
    "noisy-baseline": "the baseline's runs spread more than "
                      f"{NOISY_CV:.0%}: every speed-up and efficiency of this group inherits that",
    "busy": f"other processes used {BUSY_CPUS:g} cores or more on average while a run was timed "
            "(runs.csv other_cpus; or other processes on its GPUs): its numbers are not this layout's alone; "
            "rerun on an idle machine (sweep --require-idle)",
    "unsteady": f"a run's step times spread more than {UNSTEADY_CV:.0%} (std / mean of its steps): something "
                "stalled it now and then (a neighbour, swapping, a straggler rank)",
    "unfair-baseline": "this layout's ranks ran with other CPU math threads per rank than the baseline's "
                       "(runs.csv threads): its speed-up mixes more ranks with another thread count",
}


def noise_cause(row: ScalingRow) -> str:
    """Why a `noisy` row's repeats spread, from what its runs recorded: a busy machine (other_cpus at
    or above BUSY_CPUS, other processes on its GPUs), or, on an idle machine, a cold start or too
    few timed steps (the steps and warm-up steps the runs recorded); unknown when nothing was
    recorded (sweeps older than the interference measure)."""
    cpus, gpus = row.other_cpus, row.other_gpu_procs
    steps, warm = row.steps, row.warmup_steps
    timed = (f"each run timed {steps} step{'s' if steps != 1 else ''}"
             + (f" after {warm} warm-up step{'s' if warm != 1 else ''}" if warm is not None else "")
             if steps else "")
    more = (f"time more steps (--steps, e.g. {max(50, 5 * steps)})" if steps else "time more steps (--steps)") + \
        " or let the warm-up run until step times settle (--warmup-max-steps)"
    if (cpus or 0) >= BUSY_CPUS or (gpus or 0) > 0:
        return ("the machine was busy (other processes used up to " + (f"{cpus:.2g} cores" if cpus else "its GPUs")
                + " while the runs were timed): a neighbour's work is the likely cause; rerun on an idle "
                "machine (sweep --require-idle)")
    if cpus is not None:
        return (f"the machine was idle (other processes used at most {cpus:.2g} cores), so not a neighbour: "
                "a cold start or too few timed steps" + (f" ({timed})" if timed else "") + f"; {more}")
    return ("the runs recorded no measure of other processes: a busy machine, a cold start or too few "
            "timed steps" + (f" ({timed})" if timed else "") + f"; rerun on an idle machine, or {more}")


def thread_note(rows: list[ScalingRow]) -> str:
    """A group's math threads per rank, in words: 'CPU math threads per rank: 1 in every layout.', or
    the unfair baseline ('the 1x1 rank had 2 threads, the 1x2 ranks 1 each'); '' when the runs
    recorded none (sweeps older than runs.csv schema 4)."""
    known = [r for r in rows if r.threads not in (None, "")]
    if not known:
        return ""
    distinct = list(dict.fromkeys(str(r.threads) for r in known))
    if len(distinct) == 1 and "|" not in distinct[0]:
        every = "every layout" if len(known) == len(rows) else ", ".join(r.layout for r in known)
        return f"CPU math threads per rank: {distinct[0]} in {every} (runs.csv threads)."

    def had(rs):
        threads = str(rs[0].threads).replace("|", " or ")
        names = [r.layout for r in rs]
        names = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        if len(rs) == 1 and rs[0].gpus == 1:
            return f"the {names} rank had {threads} thread{'s' if threads != '1' else ''}"
        return f"the {names} ranks {threads} each"
    base = next((r for r in known if r.layout == r.baseline), known[0])
    alike: dict[str, list[ScalingRow]] = {str(base.threads): [base]}
    for r in known:
        if r is not base:
            alike.setdefault(str(r.threads), []).append(r)
    return ("**unfair baseline**: " + ", ".join(had(rs) for rs in alike.values())
            + " (CPU math threads per rank, runs.csv threads): speed-ups mix more ranks with another thread "
            "count. A sweep gives every layout the same threads per rank (--thread-share); these did not.")


def _slower_beyond_noise(m: _Measured, other: _Measured) -> bool:
    """`m`'s mean throughput is below `other`'s by more than their two-sigma noise."""
    noise = 2 * math.hypot(m.throughput.std or 0.0, other.throughput.std or 0.0)
    return other.mean - m.mean > noise


def _flags(m: _Measured, efficiency: float | None, base: _Measured | None, fewer: list[_Measured] = ()) -> list[str]:
    """Why a row's numbers may not mean what they seem (FLAGS), so a report never prints an
    efficiency of 700 % without a warning. `fewer`: the group's layouts of fewer GPUs on no more
    nodes that have a throughput: one faster than this layout by more than the two layouts' noise
    (2 sqrt(sa^2 + sb^2), the layouts table's rule; means alone for single runs) is inverse scaling
    (at one GPU count, layouts are compared in the layouts table instead)."""
    flags = []
    if efficiency is not None and efficiency > 1.0 + 1e-9:
        flags.append("superlinear")
    if m.mean is not None and any(_slower_beyond_noise(m, o) for o in fewer):
        flags.append("inverse-scaling")
    if (m.cv or 0) > NOISY_CV:
        flags.append("noisy")
    if base is not None and base is not m and (base.cv or 0) > NOISY_CV:
        flags.append("noisy-baseline")
    if (m.other_cpus or 0) >= BUSY_CPUS or (m.other_gpu_procs or 0) > 0:
        flags.append("busy")
    if (m.step_cv or 0) > UNSTEADY_CV:
        flags.append("unsteady")
    if (base is not None and base is not m and m.threads not in (None, "")
            and base.threads not in (None, "") and str(m.threads) != str(base.threads)):
        flags.append("unfair-baseline")
    return flags


@dataclass(frozen=True, kw_only=True)
class LayoutsRow(ScalingGroup, ReportRow):
    """layouts.csv: at one group and GPU count, each layout against the one with the fewest nodes."""

    gpus: int
    layout: str
    nodes: int
    gpus_per_node: int
    scale: str
    reference: str  # the layout with the fewest nodes at this GPU count
    runs: int
    ok: int
    failed: int
    aborted: int
    timeout: int
    throughput_mean: float | None
    throughput_2sigma: float | None
    relative: float | None  # throughput / the reference's
    delta_pct: float | None  # throughput_mean - the reference's, in % of the reference's
    # 2·sqrt(std² + the reference's std²) of the runs' throughput, in % of the reference's: the two-sigma band of the
    # difference (empty for the reference itself, and unless both layouts have 2 runs or more)
    noise_2sigma_pct: float | None
    within_noise: bool | None  # yes where |delta| <= that band: these runs do not tell the two layouts apart
    hosts: str
    link: str
    intra_link: str = beside("")  # not said under the layouts table (its footer names hosts and link)
    cpu_model: str = beside("")


def layout_rows(scaling: list[ScalingRow]) -> list[LayoutsRow]:
    """For each group and GPU count run with more than one layout: every layout against the one
    with the fewest nodes (the single-node, scale-up layout where there is one).
    Within noise iff |Δ| ≤ 2·sqrt(σa² + σb²): the two-sigma band of the difference of two runs
    drawn from each layout's spread. Undefined (None) unless both layouts have ≥ 2 runs."""
    out = []
    groups = _group_by(scaling, lambda row: row.scaling_key + (row.gpus,))
    for _, rows in sorted(groups.items(), key=lambda kv: kv[0]):
        if len(rows) < 2:
            continue
        rows = sorted(rows, key=_order)
        ref = rows[0]
        for row in rows:
            delta = noise = within = relative = None
            if row.throughput_mean is not None and ref.throughput_mean:
                relative = row.throughput_mean / ref.throughput_mean
                delta = row.throughput_mean - ref.throughput_mean
                if row is not ref and row.throughput_std is not None and ref.throughput_std is not None:
                    noise = 2 * math.hypot(row.throughput_std, ref.throughput_std)
                    within = abs(delta) <= noise
            pct = (lambda x: None if x is None else 100 * x / ref.throughput_mean)
            out.append(LayoutsRow(
                **vars(row.scaling_group()), gpus=row.gpus, layout=row.layout, nodes=row.nodes,
                gpus_per_node=row.gpus_per_node, scale=row.scale, reference=ref.layout, runs=row.runs, ok=row.ok,
                failed=row.failed, aborted=row.aborted, timeout=row.timeout, throughput_mean=row.throughput_mean,
                throughput_2sigma=row.throughput_2sigma, relative=relative, delta_pct=pct(delta),
                noise_2sigma_pct=pct(noise), within_noise=within, hosts=row.hosts, link=row.link))
    return out


def _ttt_key(r: RunResult) -> tuple:
    return (system_of(r), r.model, r.flavor, r.framework, r.engine, r.precision, r.levers)


@dataclass(frozen=True)
class Rcp:
    """The RCP columns of a time-to-train row (closed-division MLPerf logs; empty for other runs)."""

    ttt_rcp_min: float | None = None
    rcp_factor: float | None = None
    rcp_check: str | None = None
    rcp_note: str | None = None
    ruleset: str | None = None
    rcp_mean: float | None = None
    rcp_min: float | None = None
    converge_mean: float | None = None


@dataclass(frozen=True, kw_only=True)
class TimeToTrainRow(TttGroup, ReportRow):
    """time_to_train.csv: one row per group, layout and global batch of time-to-accuracy runs. *_min:
    minutes. ttt_min: MLPerf's score (olympic mean); ttt_rcp_min: the same after the official
    summarizer's RCP rescale (x rcp_factor; closed-division MLPerf logs, see mllog.rcp_check);
    samples_*: sample-based logs (BERT), whose epochs are often unknown; result: a published run's
    systems file (one row each, as the summarizer scores them; mllog.groups)."""

    layout: str
    nodes: int
    gpus_per_node: int
    gpus: int
    scale: str
    global_batch: int
    result: str
    runs: int
    converged: int
    failed: int
    aborted: int
    timeout: int
    epochs_mean: float | None
    time_per_epoch_min: float | None
    samples_to_target_mean: float | None
    time_per_1m_samples_min: float | None
    ttt_min: float | None
    ttt_rcp_min: float | None  # ttt_min x rcp_factor: the score after the official summarizer's RCP rescale
    # the summarizer's RCP rescale (its scaling.json; 1 where it rescales nothing or checked nothing); empty
    # for runs that are not MLPerf logs
    rcp_factor: float | None
    # mlperf-logging's RCP check of the runs: Pass, Fail, Interp. Fail, Missing, No RCP or not checked
    rcp_check: str | None
    scoring: str  # how ttt_min was scored: 'olympic mean of K of N (dropped ...)', 'mean of N', or 'DNF: ...' and why
    ttt_mean_min: float | None  # plain mean of the converged runs' time to train (run_start -> run_stop)
    # sample standard deviation (ddof=1) of the converged runs' time to train; empty with one run
    ttt_std_min: float | None
    ttt_2sigma_min: float | None  # 2 x ttt_std_min
    # the evaluation cadence and the time it spans: the target was crossed up to that much earlier
    eval_every_epochs: float | str | None
    # eval_every_epochs x a converged run's time per epoch, their mean; empty where not known
    ttt_resolution_s: float | None
    metric: str | None
    target: float | str | None
    final_metric_mean: float | None  # mean of the converged runs' last evaluated metric
    baseline: str
    speedup: float | None
    efficiency: float | None
    speedup_rcp: float | None  # the baseline's ttt_rcp_min / this row's
    layout_source: str
    ruleset: str | None  # the MLPerf training ruleset of the logs (their round's, e.g. 4.0.0); empty for a sweep's runs
    rcp_note: str | None  # the RCP checker's message, or why it did not check
    # the RCP's mean epochs to converge at the runs' global batch (samples for sample-counted benchmarks)
    rcp_mean: float | None
    # rcp_mean / the RCP's largest allowed speed-up: the fewest epochs (samples) to converge that pass
    rcp_min: float | None
    converge_mean: float | None  # the runs' olympic mean epochs (samples) to converge, as the RCP checker counts them
    hosts: str
    link: str
    intra_link: str = beside("")
    cpu_model: str = beside("")


@dataclass(frozen=True)
class _TttMeasured:
    """One layout's (and batch's) time-to-accuracy runs as measured, before the group's baseline is
    chosen: the row's columns but the speed-ups (`columns`), and what the baseline is chosen by."""

    gpus: int
    nodes: int
    gpus_per_node: int
    global_batch: int
    result: str
    ttt_min: float | None
    ttt_rcp_min: float | None
    where: Placement
    columns: dict = field(compare=False)


def time_to_train_rows(runs: list[RunResult], baseline: Layout | None = None) -> list[TimeToTrainRow]:
    """One row per model group, layout and global batch of time-to-accuracy runs."""
    out = []
    tta = [r for r in runs if r.mode == "time_to_accuracy"]
    for key, group in sorted(_group_by(tta, _ttt_key).items()):
        measured = [_ttt_measured(key, global_batch, result, layout_runs) for (_, _, _, global_batch, result), layout_runs
                    in _group_by(group, _batch_key(group)).items()]
        base = _pick_baseline(measured, lambda m: m.ttt_min, baseline)
        for m in sorted(measured, key=lambda m: (m.gpus, m.nodes, m.global_batch, m.result)):
            speedup = efficiency = speedup_rcp = None
            if base and m.ttt_min and m.gpus and base.gpus:
                speedup = base.ttt_min / m.ttt_min
                efficiency = speedup / (m.gpus / base.gpus)
            if base and m.ttt_rcp_min and base.ttt_rcp_min:
                speedup_rcp = base.ttt_rcp_min / m.ttt_rcp_min
            out.append(TimeToTrainRow(**m.columns, baseline=base.where.layout if base else "", speedup=speedup,
                                      efficiency=efficiency, speedup_rcp=speedup_rcp))
    return out


def _ttt_measured(key: tuple, global_batch: int, result: str, layout_runs: list[RunResult]) -> _TttMeasured:
    done = [r for r in layout_runs if r.status == "success" and r.time_to_train_s is not None]
    missed = len(layout_runs) - len(done)
    minutes = [r.time_to_train_s / 60 for r in done]
    cut = sum(r.error == INCOMPLETE for r in layout_runs)
    score, st = olympic_score(minutes, missed, OLYMPIC_DROP.get(key[1], 1), cut), stats(minutes)
    samples = [(r.time_to_train_s / 60, r.samples_to_target) for r in done]
    samples = [(m, n) for m, n in samples if n]
    epochs = stats(r.epochs_to_target if r.epochs_to_target is not None else r.epochs for r in done)
    per_epoch = stats(r.time_per_epoch_s / 60 for r in layout_runs
                      if r.time_per_epoch_s is not None and r.status in ("success", "aborted"))
    samples_mean = stats(n for _, n in samples).mean
    if samples_mean is not None and counts_samples(key[1]):
        # A sample-counted benchmark (LLMs, BERT, UNet3D: counts_samples) trains a sliver of an
        # epoch of its corpus: 0.0002 epochs at 900,000 min each say nothing; its samples do.
        epochs = per_epoch = Stats(0, None, None)
    counts, where, rcp = _counts(layout_runs), placement(layout_runs), _rcp(rcp_check(layout_runs), score.minutes)
    every, resolution = _cadence(done)
    columns = dict(
        **vars(TttGroup(*key)), layout=where.layout, nodes=where.nodes, gpus_per_node=where.gpus_per_node,
        gpus=where.gpus, scale=where.scale, global_batch=global_batch, result=result, runs=counts.runs,
        converged=counts.ok, failed=counts.failed, aborted=counts.aborted, timeout=counts.timeout,
        epochs_mean=epochs.mean, time_per_epoch_min=per_epoch.mean, samples_to_target_mean=samples_mean,
        time_per_1m_samples_min=stats(m / n * 1e6 for m, n in samples).mean, ttt_min=score.minutes,
        scoring=score.rule, ttt_mean_min=st.mean, ttt_std_min=st.std, ttt_2sigma_min=st.two_sigma,
        eval_every_epochs=every, ttt_resolution_s=resolution, metric=_one(r.metric_name for r in layout_runs),
        target=_one(r.target for r in layout_runs), final_metric_mean=stats(r.final_metric for r in done).mean,
        layout_source=layout_source(layout_runs), **vars(rcp), hosts=where.hosts, link=where.link,
        intra_link=where.intra_link, cpu_model=where.cpu_model)
    return _TttMeasured(where.gpus, where.nodes, where.gpus_per_node, global_batch, result, score.minutes,
                        rcp.ttt_rcp_min, where, columns)


def _cadence(done: list[RunResult]) -> tuple:
    """(eval_every_epochs, ttt_resolution_s): how finely the converged runs' time to train is
    resolved. A run stops at the first evaluation that reaches the target, so the target was crossed
    up to one evaluation interval earlier than its time says. The interval is eval_every epochs x the
    run's time per epoch (the run's resolved config: hvdbench.results.report.load); None where it is
    not known (no config beside the run, published logs, evaluation counted in samples)."""
    timed = [(r.eval_every, r) for r in done
             if r.eval_unit == "epochs" and r.eval_every]
    seconds = [every * r.time_per_epoch_s for every, r in timed if r.time_per_epoch_s]
    return _one(every for every, _ in timed), stats(seconds).mean


def _batch_key(group: list[RunResult]):
    """The time-to-train row key of a run: layout, global batch and result (a published run's systems
    file, mllog.groups.assign_studies: two results at one layout are two rows, as the summarizer scores
    them; '' for a sweep's runs). A run that died before logging its batch (global_batch 0) joins its
    layout's row when the layout ran one batch."""
    batches: dict[tuple, set] = {}
    for r in group:
        if r.global_batch:
            batches.setdefault((r.nodes, r.gpus_per_node, r.layout), set()).add(r.global_batch)

    def key(r: RunResult) -> tuple:
        layout = (r.nodes, r.gpus_per_node, r.layout)
        known = batches.get(layout, set())
        return (*layout, r.global_batch or (next(iter(known)) if len(known) == 1 else 0), r.result)
    return key


def _rcp(rcp, minutes: float | None) -> Rcp:
    """The RCP columns of a time-to-train row; empty for runs that are not MLPerf logs."""
    if rcp is None:
        return Rcp()
    return Rcp(None if minutes is None or rcp.factor is None else minutes * rcp.factor, rcp.factor, rcp.check,
               rcp.note, rcp.ruleset, rcp.rcp_mean, rcp.rcp_min, rcp.converge_mean)


def _one(values):
    """The value every run agrees on; several distinct ones joined with '|' (a table must show that)."""
    distinct = list(dict.fromkeys(v for v in values if v not in (None, "")))
    return distinct[0] if len(distinct) == 1 else "|".join(map(str, distinct)) or None


@dataclass(frozen=True, kw_only=True)
class EpochRow(ReportRow):
    """epochs.csv: the per-model synopsis the published studies print (GPUs, batch, time per epoch,
    epochs); samples_*: sample-counted benchmarks (LLMs, BERT), whose epoch columns are empty."""

    system: str
    model: str
    flavor: str
    framework: str
    engine: str
    levers: str
    gpus: int
    layout: str
    global_batch: int
    time_per_epoch_min: float | None
    epochs_mean: float | None
    samples_to_target_mean: float | None
    time_per_1m_samples_min: float | None
    precision: str
    runs: int
    converged: int

    @property
    def title_group(self) -> TttGroup:
        """The heading of its Markdown section: the time-to-train group but its precision (a column here)."""
        return TttGroup(self.system, self.model, self.flavor, self.framework, self.engine)


def epoch_rows(ttt: list[TimeToTrainRow]) -> list[EpochRow]:
    """The per-model synopsis the published studies print (GPUs, batch, time per epoch, epochs);
    sample-counted benchmarks' rows give samples to target and minutes per 1M samples instead."""
    return [EpochRow(system=r.system, model=r.model, flavor=r.flavor, framework=r.framework, engine=r.engine,
                     levers=r.levers, gpus=r.gpus, layout=r.layout, global_batch=r.global_batch,
                     time_per_epoch_min=r.time_per_epoch_min, epochs_mean=r.epochs_mean,
                     samples_to_target_mean=r.samples_to_target_mean, time_per_1m_samples_min=r.time_per_1m_samples_min,
                     precision=r.precision, runs=r.runs, converged=r.converged) for r in ttt]


@dataclass
class Tables:
    scaling: list[ScalingRow] = field(default_factory=list)
    layouts: list[LayoutsRow] = field(default_factory=list)
    time_to_train: list[TimeToTrainRow] = field(default_factory=list)
    epochs: list[EpochRow] = field(default_factory=list)
    runs: int = 0

    # The four tables' CSVs, in the order they are written (render/tables.write_csvs).
    FILES = (("scaling", ScalingRow), ("layouts", LayoutsRow), ("time_to_train", TimeToTrainRow),
             ("epochs", EpochRow))


def build_tables(runs: list[RunResult], baseline: Layout | None = None) -> Tables:
    """All four tables. `baseline` (report --baseline) must be the layout of some run."""
    if baseline and not any(Layout(r.nodes, r.gpus_per_node) == baseline for r in runs):
        raise ConfigError(f"baseline {baseline}: no run has that layout")
    scaling = scaling_rows(runs, baseline)
    ttt = time_to_train_rows(runs, baseline)
    return Tables(scaling, layout_rows(scaling), ttt, epoch_rows(ttt), len(runs))
