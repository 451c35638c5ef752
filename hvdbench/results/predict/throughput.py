"""Throughput of layouts not run, predicted from the runs that were: the 8x8 and 16x8 a team is
about to buy, from a 1x1, a 1x2 and a 2x1 measured here.

    hvdbench predict results/demo --layouts 2x2,4x1,8x8
    hvdbench report results/demo --predict 8x8,16x8

    fits = fit_groups(runs, allreduce_rows)           # one Fit per scaling group (model, batch, ...)
    rows = [predict(fit, 8, 8) for fit in fits]        # PredictionRow each

The model of one training step on N nodes x G GPUs (n = N·G ranks), each part fitted from what the
runs recorded (the step-time breakdown of every PyTorch run: data, compute, comm, update, other):

    step(N, G) = work(r) + exposed(N, G)
    work(r)    = t1 · max(1, r / C)                      the step without communication
    exposed    = exposure[kind] · allreduce(kind, B, n)  what backward did not hide
    allreduce  = latency · 2(n - 1) + 2(n - 1)/n · B / busbw      a ring over the n ranks

- t1: the baseline's step without communication (data + compute + update + other), one rank alone.
- r: ranks that share one machine's CPUs, memory bandwidth and PCIe: G on a real cluster, N·G on an
  emulated one (`hvdbench cluster`: every node is a namespace of the same machine). C, the ranks a
  machine holds before each one's work slows, is fitted from the runs with r > 1 (a GPU node: no
  slow-down, C = infinity; 4 ranks on a 2-core machine: C = 2).
- B: the gradient bytes of each step (the run's `parameters` x 4: fp32 gradients).
- kind: the inter-node link when N > 1 (a ring over all ranks crosses it), else the intra-node one.
  latency and busbw per kind are fitted from `bench allreduce` rows of layouts of that kind
  (`sweep --allreduce-bench`, Horovod's fp32 curve, least squares over its message sizes). Without
  them, from the runs' own exposed communication (busbw only, exposure 1): the fit then says so.
  With --fit-on, only the bench rows of those layouts are used, as only their runs are.
- exposure, per link kind: the measured exposed communication of the runs of that kind over the
  allreduce time its link predicts (least squares). Below 1, backward hid the rest (an overlap of
  1 - exposure); above 1, a step's allreduces cost more than the bench's (they compete for the
  cores with compute, or are split over several cycles).
- calibration: the measured throughput against n·batch / rank 0's step time, over the fitted runs
  (the slowest rank sets the pace; ~1 when ranks are even).

Predicted throughput = calibration · n · batch_per_gpu · accum_steps / step(N, G); speed-up and
efficiency against the group's baseline as the scaling table computes them. A prediction for a
layout that was measured carries the measured throughput and predicted / measured beside it.

Time to train of layouts not run (time-to-accuracy runs, published MLPerf logs): time_to_train.py, whose
rows follow these in prediction.csv; it takes this module's rate where a sweep has a throughput fit.

Caveats (prediction.csv `flags`, and `note` in words; FLAGS): a layout not run that puts more ranks
on one machine than it has cores (CPU runs; the runs do not record cores, so os.cpu_count() when
they ran on this machine or on an emulated cluster of it, else unchecked) or more GPUs on a node
than any run had; communication from an inter-node busbw above the rate of the link the sweep
recorded (`link_rate` of its text); a fitted layout the model misses by more than POOR_FIT (its own
calibration against the median's, when that is why); and the baseline's own row, whose speed-up is
predicted / measured, not a speed-up.
"""

from __future__ import annotations

import math
import statistics
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from hvdbench.errors import ConfigError
from hvdbench.files import atomic_write_png, atomic_write_text
from hvdbench.linkrate import link_rate
from hvdbench.results.analyses.bench_tables import GRADIENT_BYTES_PER_PARAMETER, interpolate, parameters_of
from hvdbench.results.analyses.waterfall import mean_parts
from hvdbench.results.predict.fitting import (
    COVERAGE,
    PER_DOUBLING,
    doublings_past,
    interval,
    least_squares,
    quadrature,
    rms,
)
from hvdbench.results.records.rows import ReportRow, ScalingGroup, beside
from hvdbench.results.render.tables import markdown_table, to_csv
from hvdbench.results.stats.aggregate import Where, group_title, scaling_key
from hvdbench.topology import Layout


@dataclass(frozen=True)
class Link:
    """A ring allreduce's cost on one kind of link: `latency_s` per ring step (2(n-1) of them) and
    the bus bandwidth in bytes/s (nccl-tests' busbw: independent of n for a ring)."""

    kind: str  # intra | inter
    latency_s: float
    busbw_b_s: float
    source: str  # where the figures come from, in words

    def allreduce_s(self, nbytes: float, n: int) -> float:
        if n <= 1:
            return 0.0
        return self.latency_s * 2 * (n - 1) + 2 * (n - 1) / n * nbytes / self.busbw_b_s


@dataclass
class Fit:
    """Everything `predict` needs for one scaling group (`group`)."""

    group: ScalingGroup
    baseline: Layout  # the layout speed-ups are measured against
    base_gpus: int
    base_throughput: float
    samples_per_gpu_step: int  # batch_per_gpu x accum_steps
    t1: float  # seconds: a step's work without communication, one rank alone
    ranks_per_machine_limit: float  # C (math.inf: more ranks never slowed one's work)
    shared_machine: bool  # all nodes are one machine (an emulated cluster)
    gradient_bytes: int
    links: dict[str, Link] = field(default_factory=dict)
    exposure: dict[str, float] = field(default_factory=dict)  # link kind -> exposed / allreduce
    calibration: float = 1.0
    # layout -> its own measured / (n x batch / step): the fitted layouts' spread around `calibration`
    # (a layout far from the median is one the model cannot pass through: POOR_FIT)
    layout_calibration: dict[Layout, float] = field(default_factory=dict)
    measured: dict[Layout, float] = field(default_factory=dict)  # layout -> mean throughput
    fitted_on: tuple[Layout, ...] = ()  # in Layout's order (GPUs, then nodes)
    notes: list[str] = field(default_factory=list)  # layouts asked for that these runs cannot predict
    # layout -> seconds of one allreduce of the gradients, read off that layout's own bench curve
    # (`sweep --allreduce-bench` measures layouts cheaply, training runs or not); the link model
    # serves the layouts without one.
    measured_allreduce: dict[Layout, float] = field(default_factory=dict)
    # Where the fitted runs ran (the plot's subtitle, the caveats): aggregate.Where per layout
    # (system, layout, nodes, hosts, link, runs), the machine's cores or GPUs as far as they are
    # known, and the inter-node link the sweep recorded, with its rate where its text gives one.
    where: list[Where] = field(default_factory=list)
    on_cpus: bool = False
    cores: int | None = None  # cores of one machine the runs ran on (None: not known)
    cores_from: str = ""  # how `cores` was chosen, in words
    most_gpus_per_node: int = 0  # the most devices any run put on one node
    link_text: str = ""
    link_rate_b_s: float | None = None  # bytes/s the recorded link carries each way, from link_text
    # What the fit cannot explain at its own layouts (every prediction's interval, `predict`): the rms of
    # log(predicted / measured) over the fitted layouts, and their GPUs (doublings past them widen it).
    residual: float = 0.0
    fitted_gpus: tuple[int, ...] = ()

    def allreduce_s(self, nodes: int, gpus_per_node: int) -> tuple[float, str]:
        """(seconds, where from) of the step's allreduce on NxG: its own bench, else the link model."""
        n, layout = nodes * gpus_per_node, Layout(nodes, gpus_per_node)
        if n <= 1:
            return 0.0, ""
        if layout in self.measured_allreduce:
            return self.measured_allreduce[layout], "bench of this layout"
        link = self.link(nodes)
        return (link.allreduce_s(self.gradient_bytes, n), "link model") if link else (math.nan, "")

    def ranks_per_machine(self, nodes: int, gpus_per_node: int) -> int:
        return nodes * gpus_per_node if self.shared_machine else gpus_per_node

    def work_s(self, nodes: int, gpus_per_node: int) -> float:
        r = self.ranks_per_machine(nodes, gpus_per_node)
        return self.t1 * max(1.0, r / self.ranks_per_machine_limit)

    def link(self, nodes: int) -> Link | None:
        return self.links.get("inter" if nodes > 1 else "intra")


def link_kind(nodes: int) -> str:
    return "inter" if nodes > 1 else "intra"


# --- caveats: what a prediction cannot see ---------------------------------------------------------

def _this_machine() -> set[str]:
    import socket

    name = socket.gethostname()
    return {"localhost", "127.0.0.1", "::1", name, name.split(".")[0], socket.getfqdn()}


def machine_cores(runs, on_cpus: bool, shared_machine: bool) -> tuple[int | None, str]:
    """(cores of one machine the runs ran on, how that was chosen): the logical CPUs their sweep's
    hardware record (sweep.json, LoadedRun.host_cpus) gives their hosts. Where it has none (an older
    sweep, a runs.csv alone): os.cpu_count() when every host they ran on is this machine (localhost,
    this hostname) or their nodes were an emulated cluster's namespaces, which share the machine that
    runs them, taken to be this one; otherwise unknown; and said so. GPU runs: not needed (None)."""
    if not on_cpus:
        return None, ""
    import os

    hosts = sorted({h for r in runs for h in (r.hosts or "").split(";") if h})
    recorded = {r.host_cpus for r in runs}
    if recorded and None not in recorded:
        return min(recorded), f"{min(recorded)} logical CPUs per host, from the sweep's hardware record (sweep.json)"
    cores, unrecorded = os.cpu_count(), " (the sweep's sweep.json records no hosts' CPUs)"
    if hosts and set(hosts) <= _this_machine():
        return cores, f"os.cpu_count() of this machine ({', '.join(hosts)}), where the runs ran" + unrecorded
    if shared_machine:
        return cores, ("os.cpu_count() of this machine: the runs' nodes (" + ", ".join(hosts)
                       + ") are an emulated cluster's namespaces, taken to be this machine's" + unrecorded)
    return None, ("not known: the runs do not record their machines' cores, and they ran on "
                  + (", ".join(hosts) or "unnamed hosts") + ", not this machine")


# A fitted layout predicted this far off (predicted / measured outside 1 / (1 + POOR_FIT) .. 1 + POOR_FIT)
# is flagged `poor-fit`: 0.59x on ResNet-50's 1x1 of a 2-core sweep went unsaid before.
POOR_FIT = 0.25
# Why a prediction may not mean what it seems (prediction.csv `flags`; `note` says it of the row).
FLAGS = {
    "oversubscribed": "more ranks on one machine than it has cores (CPU runs): past them ranks preempt each "
                      "other, which a fit on fewer ranks per core cannot see; treat the figure as optimistic",
    "more-gpus-than-runs": "more GPUs per node than any run had: the runs do not record how many GPUs a "
                           "machine has, so check that it has them",
    "faster-than-link": "the fitted inter-node bus bandwidth is above the link the runs were measured on (the "
                        "runs' exposed communication hid part of the transfer behind backward, or the link "
                        "text is wrong): communication this link model predicts is optimistic",
    "poor-fit": f"a fitted layout the model misses by more than {100 * POOR_FIT:.0f} %: one step model with one "
                "calibration (the median over the fitted layouts) cannot pass through it; the layouts near it are "
                "as uncertain",
    "baseline": "the baseline's own prediction: its speed-up is predicted / measured of the baseline, how "
                "well the fit reproduces it, not a speed-up",
}

# --- fitting ---------------------------------------------------------------------------------------

def fit_link(rows, kind: str) -> Link | None:
    """Latency and busbw of one link kind from `bench allreduce` rows (AllreduceRow) of layouts of
    that kind: Horovod's fp32 times, time = latency·2(n-1) + (2(n-1)/n)·bytes/busbw, least squares."""
    usable = [r for r in rows if r.impl == "horovod" and r.dtype == "fp32" and r.time_mean_s
              and r.world_size > 1 and link_kind(r.nodes) == kind]
    if not usable:
        return None
    x = [(2.0 * (r.world_size - 1), 2.0 * (r.world_size - 1) / r.world_size * r.bytes) for r in usable]
    latency, inverse_bw = least_squares(x, [r.time_mean_s for r in usable])
    if inverse_bw <= 0:
        return None
    layouts = sorted({r.layout for r in usable})
    return Link(kind, latency, 1.0 / inverse_bw,
                f"bench allreduce on {', '.join(layouts)} (Horovod fp32, {len(usable)} sizes)")


def layout_allreduce(rows, nbytes: int) -> dict[str, float]:
    """Per layout, the seconds of one allreduce of `nbytes`, read off its bench's Horovod fp32 curve
    (log-log between the two nearest sizes; none outside the measured range)."""
    curves: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        if r.impl == "horovod" and r.dtype == "fp32" and r.time_mean_s and r.world_size > 1:
            curves.setdefault(Layout(r.nodes, r.gpus_per_node), []).append((r.bytes, r.time_mean_s))
    out = {}
    for layout, points in curves.items():
        t = interpolate(points, nbytes)
        if t is not None:
            out[layout] = t
    return out


def fit_group(runs, allreduce_rows=(), shared_machine: bool | None = None,
              fit_layouts: set[Layout] | None = None, layout_benches: bool = True) -> Fit | None:
    """A Fit from one scaling group's successful throughput runs that recorded a breakdown (None when
    the group has none, e.g. TensorFlow runs or published logs). `fit_layouts` limits the layouts the
    parameters are fitted on (the others are only compared with). `shared_machine`: None = an
    emulated cluster's runs (their link says `emulated`) share one machine. `layout_benches`: a
    layout's own allreduce bench, where there is one, gives its allreduce time (False: the link
    model predicts every layout's, to test the model)."""
    ok = [r for r in runs if r.status == "success" and r.mode == "throughput" and r.throughput]
    by_layout: dict[Layout, list] = {}
    for r in ok:
        by_layout.setdefault(Layout(r.nodes, r.gpus_per_node), []).append(r)
    measured = {layout: statistics.fmean(r.throughput for r in rs) for layout, rs in by_layout.items()}
    fit_on = {layout: rs for layout, rs in by_layout.items()
              if (fit_layouts is None or layout in fit_layouts) and mean_parts(rs)}
    if not fit_on:
        return None
    first = next(iter(fit_on.values()))[0]
    base_layout = min(fit_on)  # the fewest GPUs, on the fewest nodes
    base_runs = fit_on[base_layout]
    base = base_runs[0]
    if shared_machine is None:
        shared_machine = any(r.link.startswith("emulated") for r in ok)
    parts = {layout: mean_parts(rs) for layout, rs in fit_on.items()}
    work = {layout: p["data_s"] + p["compute_s"] + p["update_s"] + p["other_s"] for layout, p in parts.items()}
    samples = base.batch_per_gpu * max(base.accum_steps, 1)
    grad = (parameters_of(first) or 0) * GRADIENT_BYTES_PER_PARAMETER
    if not grad:
        raise ConfigError(f"{first.model} {first.flavor}: the runs recorded no parameter count "
                          "(runs.csv `parameters`), so the gradient bytes are unknown")

    # t1 and C: the work of one rank alone, and how many ranks a machine holds before it slows.
    per_rank = {}
    for layout, rs in fit_on.items():
        nodes, gpus = rs[0].nodes, rs[0].gpus_per_node
        r = nodes * gpus if shared_machine else gpus
        per_rank.setdefault(r, []).append(work[layout])
    # One rank alone where such a run exists, else the fewest ranks per machine measured.
    t1 = statistics.fmean(per_rank[min(per_rank)])
    limits = [r * t1 / statistics.fmean(w) for r, w in per_rank.items()
              if r > 1 and statistics.fmean(w) > t1 * 1.05]
    unslowed = [r for r, w in per_rank.items() if r > 1 and statistics.fmean(w) <= t1 * 1.05]
    # A machine that held r ranks without slowing holds at least r: the limit is never below it.
    limit = max([statistics.median(limits)] + unslowed) if limits else math.inf
    fit = Fit(group=ScalingGroup(*scaling_key(base)), baseline=base_layout,
              base_gpus=base.world_size, base_throughput=measured[base_layout], samples_per_gpu_step=samples,
              t1=t1, ranks_per_machine_limit=limit, shared_machine=shared_machine, gradient_bytes=grad,
              measured=measured, fitted_on=tuple(sorted(fit_on)))
    fitted_runs = [r for rs in fit_on.values() for r in rs]
    fit.on_cpus = str(base.devices or "").lower() == "cpu"
    fit.cores, fit.cores_from = machine_cores(fitted_runs, fit.on_cpus, shared_machine)
    fit.most_gpus_per_node = max(r.gpus_per_node for r in ok)
    fit.link_text = next((str(r.link) for r in ok if r.nodes > 1 and r.link), "")
    fit.link_rate_b_s = link_rate(fit.link_text)
    fit.where = [Where(system=rs[0].devices, layout=str(layout), nodes=rs[0].nodes, runs=len(rs),
                       hosts=";".join(dict.fromkeys(h for r in rs for h in (r.hosts or "").split(";") if h)),
                       link=rs[0].link if rs[0].nodes > 1 else "")
                 for layout, rs in sorted(fit_on.items())]

    if layout_benches:
        fit.measured_allreduce = layout_allreduce(allreduce_rows, grad)
    # Links: from the allreduce bench where there is one (of the fitted layouts only), else from
    # the runs' exposed communication.
    bench = [r for r in allreduce_rows if fit_layouts is None or Layout(r.nodes, r.gpus_per_node) in fit_layouts]
    multi = [(layout, rs) for layout, rs in fit_on.items() if rs[0].world_size > 1]
    for kind in ("intra", "inter"):
        link = fit_link(bench, kind)
        if link is None:
            rates = [2 * (rs[0].world_size - 1) / rs[0].world_size * grad / parts[layout]["comm_s"]
                     for layout, rs in multi if link_kind(rs[0].nodes) == kind and parts[layout]["comm_s"] > 0]
            if rates:
                link = Link(kind, 0.0, statistics.fmean(rates),
                            "from the runs' exposed communication: no bench allreduce rows")
        if link is None:
            continue
        fit.links[kind] = link
        # Exposure: exposed = exposure x allreduce, least squares over this kind's multi-rank runs.
        pairs = [(parts[layout]["comm_s"], fit.allreduce_s(rs[0].nodes, rs[0].gpus_per_node)[0])
                 for layout, rs in multi if link_kind(rs[0].nodes) == kind]
        pairs = [(m, a) for m, a in pairs if a > 0]
        fit.exposure[kind] = sum(m * a for m, a in pairs) / sum(a * a for _, a in pairs) if pairs else 1.0
    # Calibration: measured throughput against n x batch / rank 0's step (the slowest rank sets it).
    for layout, rs in fit_on.items():
        step = sum(parts[layout].values())
        fit.layout_calibration[layout] = measured[layout] * step / (rs[0].world_size * samples)
    fit.calibration = statistics.median(fit.layout_calibration.values())
    _residual(fit)
    return fit


def _residual(fit: Fit) -> None:
    """The fitted layouts' residual (predicted / measured, in logs) and GPUs: what every prediction's
    interval is made of (`predict`)."""
    points = []
    for layout in fit.fitted_on:
        try:
            points.append(_point(fit, layout.nodes, layout.gpus_per_node))
        except ConfigError:  # a fitted layout of a link kind no run measured: not predicted
            continue
    fit.residual = rms(math.log(p.vs_measured) for p in points if (p.vs_measured or 0) > 0)
    fit.fitted_gpus = tuple(p.nodes * p.gpus_per_node for p in points)


def fit_groups(runs, allreduce_rows=(), shared_machine: bool | None = None,
               fit_layouts: set[Layout] | None = None, layout_benches: bool = True) -> list[Fit]:
    groups: dict[tuple, list] = {}
    for r in runs:
        groups.setdefault(scaling_key(r), []).append(r)
    fits = []
    for _, group in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        fit = fit_group(group, allreduce_rows, shared_machine, fit_layouts, layout_benches)
        if fit is not None:
            fits.append(fit)
    return fits


# --- predicting ------------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class PredictionFitRow(ScalingGroup, ReportRow):
    """prediction_fit.csv's throughput rows: how the fit reached each prediction.csv row, under the same
    group, layout, global batch and result (the step the model gives, the link it read, what it fitted)."""

    layout: str
    # samples per optimizer step over all GPUs: a throughput row's at its group's batch per GPU, a time-to-train
    # row's the one it is predicted at (prediction_fit.csv's global_batch_from says why)
    global_batch: int | None = None
    result: str | None = None  # the published row's systems file (time-to-train rows of MLPerf logs; mllog.groups)
    step_ms: float | None = None  # the predicted step: work_ms + exposed_comm_ms
    # the predicted step without communication: one rank's alone x max(1, ranks per machine / C)
    work_ms: float | None = None
    # the step's gradient allreduce: the bench's at this layout, else the fitted link's ring (allreduce_from)
    allreduce_ms: float | None = None
    exposed_comm_ms: float | None = None  # exposure x allreduce_ms: the communication backward does not hide
    # the interval's parts in words: the fitted layouts' residual, the doublings past the fitted GPUs, ...
    interval_from: str | None = None
    link_kind: str | None = None  # the link the ring crosses: inter (several nodes) | intra (one); empty for one rank
    busbw_gb_s: float | None = None  # the fitted bus bandwidth of that link
    latency_us: float | None = None  # the fitted latency of that link, per step of the ring
    allreduce_from: str | None = None  # where allreduce_ms comes from: bench of this layout | link model
    # the fitted exposed communication / allreduce of that link kind: below 1 backward hid the rest
    exposure: float | None = None
    # C, the ranks a machine holds before each one's work slows; empty where none slowed
    ranks_per_machine_limit: float | None = None


@dataclass(frozen=True, kw_only=True)
class PredictionRow(ScalingGroup, ReportRow):
    """prediction.csv's throughput rows: one per group and layout, measured or not: what a reader needs
    (the prediction, its interval, the measurement beside it, why it may not mean what it seems, what it
    was fitted on); how the fit reached it is its prediction_fit.csv row (`fit`).
    predicted_throughput_low/_high: the interval meant to hold `interval` (the share, fitting.COVERAGE)
    of measurements."""

    layout: str
    nodes: int
    gpus_per_node: int
    gpus: int
    # samples per optimizer step over all GPUs: a throughput row's at its group's batch per GPU, a time-to-train
    # row's the one it is predicted at (prediction_fit.csv's global_batch_from says why)
    global_batch: int | None = None
    result: str | None = None  # the published row's systems file (time-to-train rows of MLPerf logs; mllog.groups)
    baseline: str
    # calibration x GPUs x batch x accumulation / step (time-to-train rows: the training rate, where it counts samples)
    predicted_throughput: float | None = None
    predicted_throughput_low: float | None = None  # the interval's low end
    predicted_throughput_high: float | None = None  # the interval's high end
    interval: float | None = None  # the share of measurements the interval is meant to hold (fitting.COVERAGE)
    speedup: float | None = None
    efficiency: float | None = None
    # the layout's measured throughput where it ran (time-to-train rows: its training rate, samples)
    measured_throughput: float | None = None
    predicted_vs_measured: float | None = None  # predicted_throughput / measured_throughput
    fitted: bool  # yes where the fit was made on this layout
    fitted_on: str  # the layouts the fit was made on, space-separated
    flags: str  # why a prediction may not mean what it seems (FLAGS), ';'-joined
    note: str  # the same, in words
    fit: PredictionFitRow = beside(None)  # its prediction_fit.csv row: the fit's figures behind it


@dataclass(frozen=True)
class _Point:
    """One layout's predicted step and throughput (what `predict` puts in its row, and the fit's
    residual is made of)."""

    nodes: int
    gpus_per_node: int
    work_s: float
    allreduce_s: float
    allreduce_from: str
    exposed_s: float
    throughput: float
    measured: float | None

    @property
    def vs_measured(self) -> float | None:
        return self.throughput / self.measured if self.measured else None


def _point(fit: Fit, nodes: int, gpus_per_node: int) -> _Point:
    if nodes < 1 or gpus_per_node < 1:
        raise ConfigError(f"a layout of {nodes} nodes x {gpus_per_node} GPUs: nodes and GPUs per node must be >= 1")
    n = nodes * gpus_per_node
    layout = Layout(nodes, gpus_per_node)
    link = fit.link(nodes)
    if n > 1 and link is None and layout not in fit.measured_allreduce:
        raise ConfigError(f"{fit.group.model}: no {link_kind(nodes)}-node link was measured (run a "
                          f"{'2x1' if nodes > 1 else '1x2'} layout, or `sweep --allreduce-bench`) to predict {layout}")
    work = fit.work_s(nodes, gpus_per_node)
    allreduce, allreduce_from = fit.allreduce_s(nodes, gpus_per_node)
    exposed = fit.exposure.get(link_kind(nodes), 1.0) * allreduce
    throughput = fit.calibration * n * fit.samples_per_gpu_step / (work + exposed)
    return _Point(nodes, gpus_per_node, work, allreduce, allreduce_from, exposed, throughput, fit.measured.get(layout))


def predict(fit: Fit, nodes: int, gpus_per_node: int) -> PredictionRow:
    """NxG's prediction: its step, throughput, speed-up and efficiency, and its interval (the fitted
    layouts' residuals, fit.residual, in quadrature with PER_DOUBLING["gpus"] for each doubling past the
    fitted GPUs: fitting.interval)."""
    p = _point(fit, nodes, gpus_per_node)
    n, layout, link = nodes * gpus_per_node, Layout(nodes, gpus_per_node), fit.link(nodes)
    step = p.work_s + p.exposed_s
    speedup = p.throughput / fit.base_throughput
    flags, note = caveats(fit, nodes, gpus_per_node, p.allreduce_from, p.vs_measured)
    past = doublings_past(n, list(fit.fitted_gpus))
    sigma = quadrature(fit.residual, PER_DOUBLING["gpus"] * past)
    low, high = interval(p.throughput, sigma)
    global_batch = n * fit.samples_per_gpu_step
    diagnostics = PredictionFitRow(
        **vars(fit.group), layout=str(layout), global_batch=global_batch,
        step_ms=1e3 * step, work_ms=1e3 * p.work_s, allreduce_ms=1e3 * p.allreduce_s, exposed_comm_ms=1e3 * p.exposed_s,
        interval_from=(f"±{100 * (math.exp(sigma) - 1):.0f} % (1 sigma): fitted layouts' residual "
                       f"{100 * fit.residual:.1f} %, {past:.1f} doublings past the fitted GPUs"),
        link_kind=link_kind(nodes) if n > 1 else "", busbw_gb_s=link.busbw_b_s / 1e9 if link else None,
        latency_us=1e6 * link.latency_s if link else None, allreduce_from=p.allreduce_from,
        exposure=fit.exposure.get(link_kind(nodes)) if n > 1 else None,
        ranks_per_machine_limit=None if math.isinf(fit.ranks_per_machine_limit) else fit.ranks_per_machine_limit)
    return PredictionRow(
        **vars(fit.group), layout=str(layout), nodes=nodes, gpus_per_node=gpus_per_node, gpus=n,
        global_batch=global_batch, baseline=str(fit.baseline),
        predicted_throughput=p.throughput, predicted_throughput_low=low, predicted_throughput_high=high,
        interval=COVERAGE, speedup=speedup, efficiency=speedup / (n / fit.base_gpus), measured_throughput=p.measured,
        predicted_vs_measured=p.vs_measured, fitted=layout in fit.fitted_on,
        fitted_on=" ".join(map(str, fit.fitted_on)), flags=";".join(flags), note=" ".join(note), fit=diagnostics)


def faster_than_link(fit: Fit) -> bool:
    """The fitted inter-node bus bandwidth is above the rate of the link the runs were measured on
    (5 % of slack: a bench's least squares, a link shaped to its nominal rate)."""
    link = fit.links.get("inter")
    return bool(link and fit.link_rate_b_s and link.busbw_b_s > 1.05 * fit.link_rate_b_s)


def caveats(fit: Fit, nodes: int, gpus_per_node: int, allreduce_from: str,
            vs_measured: float | None = None) -> tuple[list[str], list[str]]:
    """(flags, sentences) of one layout (see FLAGS). A measured layout's own run saw what it ran on:
    only the baseline's remark applies to it."""
    flags, note = [], []
    layout, ranks = Layout(nodes, gpus_per_node), fit.ranks_per_machine(nodes, gpus_per_node)
    predicted_only = layout not in fit.measured
    if predicted_only and fit.on_cpus and fit.cores and ranks > fit.cores:
        flags.append("oversubscribed")
        note.append(f"{ranks} ranks on one machine of {fit.cores} cores ({fit.cores_from}): past its cores ranks "
                    "preempt each other, which a fit on fewer ranks per core cannot see; optimistic.")
    elif predicted_only and not fit.on_cpus and gpus_per_node > fit.most_gpus_per_node:
        flags.append("more-gpus-than-runs")
        note.append(f"{gpus_per_node} GPUs per node, more than any run had ({fit.most_gpus_per_node}): the runs "
                    "do not record how many GPUs a machine has; check that it has them.")
    if predicted_only and nodes > 1 and allreduce_from == "link model" and faster_than_link(fit):
        flags.append("faster-than-link")
        note.append(f"Its communication comes from an inter-node bus bandwidth of "
                    f"{fit.links['inter'].busbw_b_s / 1e9:.3g} GB/s, above the {fit.link_rate_b_s / 1e9:.3g} GB/s "
                    f"link the runs were measured on ({fit.link_text}); optimistic.")
    own = fit.layout_calibration.get(layout)
    if (vs_measured is not None and layout in fit.fitted_on
            and not 1 / (1 + POOR_FIT) <= vs_measured <= 1 + POOR_FIT):
        flags.append("poor-fit")
        why = (f"its own measured / (ranks x batch / step) is {own:.3f} against the calibration {fit.calibration:.3f} "
               "(the median of the fitted layouts'): its ranks ran unevenly or its step breakdown does not add up "
               "to its throughput" if own is not None and abs(own / fit.calibration - 1) > POOR_FIT / 2 else
               "its step (work and exposed communication) is not what the model fitted on the other layouts gives")
        note.append(f"A fitted layout predicted at {vs_measured:.2f}x its measured throughput: {why}.")
    if layout == fit.baseline:
        flags.append("baseline")
        note.append("The baseline's own fit: its speed-up is predicted / measured"
                    + (f" ({vs_measured:.3f})" if vs_measured is not None else "")
                    + ", how well the fit reproduces the baseline, not a speed-up.")
    return flags, note


def prediction_rows(fits: list[Fit], layouts: list[Layout]) -> list[PredictionRow]:
    """Each fit's predictions for `layouts`, and for every layout it measured (to compare with), in
    Layout's order. A layout these runs cannot predict (its link kind was never measured) goes to the
    fit's notes."""
    rows = []
    for fit in fits:
        for layout in sorted({*fit.measured, *layouts}):
            try:
                rows.append(predict(fit, layout.nodes, layout.gpus_per_node))
            except ConfigError as e:
                fit.notes.append(str(e))
    return rows


def describe(fit: Fit) -> str:
    """The fitted parameters in one line, for the report and the terminal."""
    machine = "a machine shared by all nodes" if fit.shared_machine else "a node"
    holds = (f"{machine} never slowed its ranks' work in these runs" if math.isinf(fit.ranks_per_machine_limit)
             else f"{machine} holds {fit.ranks_per_machine_limit:.2f} ranks before each one's work slows")
    links = "; ".join(f"{k}-node busbw {v.busbw_b_s / 1e9:.3g} GB/s, latency {1e6 * v.latency_s:.0f} µs "
                      f"({v.source})" for k, v in sorted(fit.links.items()))
    return (f"fitted on {', '.join(map(str, fit.fitted_on))}: one rank's step without communication "
            f"{1e3 * fit.t1:.1f} ms; {holds}; gradients {fit.gradient_bytes / 2**20:.1f} MiB; {links or 'no link'}; "
            f"exposed / allreduce: " + (", ".join(f"{k} {v:.2f}" for k, v in sorted(fit.exposure.items())) or "-")
            + f"; calibration {fit.calibration:.3f}")


def machine_line(fit: Fit) -> str:
    """What the caveats were checked against: the machine's cores (CPU runs) or the GPUs per node the
    runs had, and the inter-node link's rate."""
    if fit.on_cpus:
        parts = [f"Cores per machine: {fit.cores} ({fit.cores_from})" if fit.cores
                 else f"Cores per machine: {fit.cores_from}; no layout is checked for oversubscription"]
    else:
        parts = [f"GPUs per node: at most {fit.most_gpus_per_node} in these runs (a machine's count is not recorded)"]
    if fit.link_text:
        rate = (f" = {fit.link_rate_b_s / 1e9:.3g} GB/s each way" if fit.link_rate_b_s
                else " (no rate in its text: not checked)")
        parts.append(f"inter-node link: {fit.link_text}{rate}")
        if faster_than_link(fit):
            parts.append(f"the fitted inter-node busbw, {fit.links['inter'].busbw_b_s / 1e9:.3g} GB/s, is above it "
                         "(**faster-than-link**)")
    return "; ".join(parts) + "."


def markdown(rows: list[PredictionRow], fits: list[Fit]) -> str:
    if not rows:
        return ""

    def num(v, fmt="{:,.1f}"):
        return "–" if v is None else fmt.format(v)

    parts = ["## Predicted layouts\n",
             "step = work × max(1, ranks per machine / C) + exposure × ring allreduce of the "
             "gradients; fitted on the runs named below (hvdbench/results/predict/throughput.py). A measured "
             "layout shows predicted / measured.\n"]
    for fit in fits:
        rs = [r for r in rows if r.scaling_key == fit.group.scaling_key]
        parts.append(f"### {group_title(fit.group)}\n")  # as the scaling tables title the same group
        parts.append(describe(fit) + ".\n")
        parts.append(machine_line(fit) + "\n")
        parts += [f"Not predicted: {note}.\n" for note in fit.notes]
        unit = "CPU ranks" if fit.on_cpus else "GPUs"
        parts.append(markdown_table(
            ["layout", unit, "step ms", "work ms", "exposed comm ms", "predicted samples/s",
             f"{100 * COVERAGE:.0f} % interval", "speed-up",
             "efficiency", "measured", "predicted / measured", "check"],
            [[r.layout + (" (fit)" if r.fitted else ""), r.gpus, num(r.fit.step_ms), num(r.fit.work_ms),
              num(r.fit.exposed_comm_ms), num(r.predicted_throughput),
              f"{num(r.predicted_throughput_low)}-{num(r.predicted_throughput_high)}",
              num(r.speedup, "{:.2f}×") + (" (predicted / measured)" if "baseline" in r.flags.split(";") else ""),
              num(None if r.efficiency is None else 100 * r.efficiency, "{:.0f} %"),
              num(r.measured_throughput), num(r.predicted_vs_measured, "{:.3f}"),
              ", ".join(f for f in r.flags.split(";") if f)] for r in rs]) + "\n")
        said = flag_lines(fit, rs)
        if said:
            parts.append("\n".join(said) + "\n")
    return "\n".join(parts)


def flag_lines(fit: Fit, rows: list[PredictionRow]) -> list[str]:
    """Under a group's prediction table: each flag once, with the layouts it marks (each row's own
    sentence is in prediction.csv `note`)."""
    lines = []
    for flag, meaning in FLAGS.items():
        marked = [r for r in rows if flag in r.flags.split(";")]
        if not marked:
            continue
        if flag == "oversubscribed":
            which = ", ".join(f"{r.layout}: {fit.ranks_per_machine(r.nodes, r.gpus_per_node)} ranks"
                              for r in marked) + f" on one machine of {fit.cores} cores"
        elif flag == "faster-than-link":
            which = (", ".join(r.layout for r in marked) + f": busbw {fit.links['inter'].busbw_b_s / 1e9:.3g} "
                     f"GB/s against the link's {fit.link_rate_b_s / 1e9:.3g} GB/s")
        elif flag in ("baseline", "poor-fit"):
            which = ", ".join(r.layout + ("" if r.predicted_vs_measured is None
                                             else f": predicted / measured {r.predicted_vs_measured:.3f}")
                              for r in marked)
        else:
            which = ", ".join(r.layout for r in marked)
        lines.append(f"- **{flag}** ({which}): {meaning}.")
    return lines


FLAGGED = "check (flags in prediction.csv)"


def figure(rows: list[PredictionRow], fits: list[Fit]):
    """Predicted (lines) and measured (stars) throughput against the device count, one panel per
    group, flagged predictions ringed; under each title the devices, runs, hosts and link."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    from hvdbench.results.render.plots import context, device_axis, log_axis

    cols = min(len(fits), 3)
    fig = Figure(figsize=(6.0 * cols, 4.8 * math.ceil(len(fits) / 3)), layout="constrained")
    FigureCanvasAgg(fig)
    for i, fit in enumerate(fits):
        ax = fig.add_subplot(math.ceil(len(fits) / 3), cols, i + 1)
        rs = [r for r in rows if r.scaling_key == fit.group.scaling_key]
        for nodes_one, style in ((True, "o-"), (False, "s--")):
            sel = sorted((r for r in rs if (r.nodes == 1) == nodes_one), key=lambda r: r.gpus)
            if sel:
                ax.plot([r.gpus for r in sel], [r.predicted_throughput for r in sel], style, alpha=0.7,
                        label="predicted, one node" if nodes_one else "predicted, several nodes")
                band = [r for r in sel if r.predicted_throughput_low is not None]
                if band:
                    ax.fill_between([r.gpus for r in band], [r.predicted_throughput_low for r in band],
                                    [r.predicted_throughput_high for r in band], alpha=0.12, lw=0,
                                    color=ax.lines[-1].get_color(),
                                    label=f"{100 * COVERAGE:.0f} % interval" if nodes_one else None)
                # Layouts with one prediction (2x2 and 4x1 on an emulated cluster) share one label, red
                # when flagged; one-node names above their points, several-node ones below (a
                # scale-out layout is usually the slower at its count: the names stay apart).
                points: dict[tuple, list[dict]] = {}
                for r in sel:
                    points.setdefault((r.gpus, round(r.predicted_throughput, 6)), []).append(r)
                last = max(r.gpus for r in rs)
                for (gpus, value), named in points.items():
                    flagged = any(set(r.flags.split(";")) - {"", "baseline"} for r in named)
                    right = gpus == last and gpus > 1  # the last point's name goes to its left
                    label = ax.annotate(", ".join(r.layout for r in named), (gpus, value), fontsize=7,
                                        textcoords="offset points", xytext=(-9 if right else 6, 5 if nodes_one else -5),
                                        ha="right" if right else "left", va="bottom" if nodes_one else "top",
                                        color="red" if flagged else "0.15")
                    label.set_in_layout(False)  # a name must not squeeze the panel
        meas = [r for r in rs if r.measured_throughput is not None]
        ax.plot([r.gpus for r in meas], [r.measured_throughput for r in meas], "k*", markersize=9,
                label="measured")
        flagged = [r for r in rs if set(r.flags.split(";")) - {"", "baseline"}]
        if flagged:  # what the caveats warn about (prediction.csv flags), ringed where it is drawn
            ax.scatter([r.gpus for r in flagged], [r.predicted_throughput for r in flagged], s=180,
                       facecolors="none", edgecolors="red", linewidths=1.5, zorder=4, label=FLAGGED)
        xs = sorted({r.gpus for r in rs})
        ax.set_xscale("log", base=2)
        ax.set_xlim(xs[0] / 1.25, xs[-1] * 1.25)
        ax.xaxis.set_major_locator(FixedLocator(xs))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_locator(NullLocator())
        ax.margins(y=0.12)  # room for the names above and below the extreme points
        log_axis(ax)
        # Why each ringed point is ringed, under the axis (prediction.csv has the sentences).
        why: dict[str, list[str]] = {}
        for r in rs:
            flags = [f for f in r.flags.split(";") if f and f != "baseline"]
            if flags:
                why.setdefault(", ".join(flags), []).append(r.layout)
        ax.set_xlabel(device_axis(fit.group) + (" (ranks)" if not fit.on_cpus else "")
                      + "".join("\n" + textwrap.fill(f"ringed {', '.join(layouts)}: {flags}", 70)
                                for flags, layouts in why.items()))
        ax.set_ylabel("samples/s")
        fitted = ", ".join(f"{w.runs} run{'s' if w.runs != 1 else ''} of {w.layout}" for w in fit.where)
        below = context(fit.where, runs=f"fitted on {fitted}")
        ax.set_title(textwrap.fill(f"predicted and measured: {group_title(fit.group)}", 70)
                     + f"\n{below}", fontsize=9)
        ax.grid(True, alpha=0.3)
    # One legend for every panel, under them all: inside a panel it would sit on the layouts' names.
    entries = {label: handle for ax in fig.axes for handle, label in zip(*ax.get_legend_handles_labels())}
    fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncol=4, fontsize=7, frameon=False)
    return fig


def write(rows: list[PredictionRow], fits: list[Fit], out, formats=("csv", "png"), ttt_rows=()) -> list:
    """prediction.csv: the throughput rows, then the time-to-train ones (time_to_train.py's
    TttPredictionRow, a PredictionRow whose own columns follow these: a throughput-only prediction.csv
    keeps its columns); prediction_fit.csv: each row's fit (PredictionFitRow, TttPredictionFitRow) in the
    same order, under the same group and layout; and the throughput plot (prediction.png;
    time_to_train.write_figure draws prediction_ttt.png)."""
    written = []
    out = Path(out)
    if "csv" in formats:
        every = [*rows, *ttt_rows]
        wide = ttt_rows[0] if ttt_rows else None  # the time-to-train rows' wider columns, where there are any
        for path, table, columns in (
                (out / "prediction.csv", every, (type(wide) if wide else PredictionRow).columns()),
                (out / "prediction_fit.csv", [r.fit for r in every], (type(wide.fit) if wide else PredictionFitRow).columns())):
            atomic_write_text(path, to_csv(table, columns))
            written.append(path)
    if "png" in formats and rows:
        written.append(atomic_write_png(figure(rows, fits), out / "prediction.png"))
    return written
