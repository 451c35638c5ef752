"""Time to train of layouts not run, for sweeps and published MLPerf results alike.

    hvdbench predict results/r50 --layouts 2x2,8x8                   # the sweep's time-to-accuracy runs too
    hvdbench predict --mllog training_results_v5.1/Nebius --fit-on 1x8,2x8 --layouts 4x8,8x8 --out OUT
    hvdbench report --mllog training_results_v5.1/Nebius --predict 8x8,16x8

    fits, rows = predictions(runs, parts, [Layout(4, 8)], fit_on={Layout(1, 8), Layout(2, 8)})  # ttt.layout_parts

A layout's time to train is S(B) / T + E + O (hvdbench.results.analyses.ttt), each part predicted from the
fitted layouts (--fit-on, default: every measured one) of its group (system, model, ...):

- S(B), what the layout trains before it reaches the target, at its global batch B: McCandlish's
  S_min (1 + B / B_crit) (hvdbench.results.analyses.convergence). For published MLPerf logs, where the
  benchmark's RCP table (many batch sizes, 10-20 runs each) covers B, the table's own mean there
  (interpolated in logs between its two nearest batches), else its line (B_crit from the table); either
  scaled so it passes through the fitted layouts on average (a submission converges in its own number
  of samples). The row's `samples_from` says which. Otherwise both come from the fitted layouts.
  One fitted batch size and no RCP: only layouts at that batch are predicted.
- T, the training rate. For a sweep whose throughput runs have a step breakdown: the throughput
  predictor's rate at the layout (hvdbench.results.predict.throughput), times the ratio of the time-to-accuracy
  runs' own rate to it at the fitted layouts (real data, evaluation pauses). Otherwise (published
  logs): each GPU's time per sample is x = c + d / b, b the per-GPU batch B / GPUs: c the work of a
  sample, d a step's fixed cost (communication, latency) that a smaller per-GPU batch shares among
  fewer samples; c, d >= 0 by least squares over the fitted layouts (two at least; with one per-GPU
  batch among them, the per-GPU rate is held). Two fitted layouts cannot tell a fixed d from
  communication that grows with the GPUs: the same layouts read as x = c' + e comm_shape(n) / b
  (comm_shape: the throughput predictor's allreduce, its bandwidth term 2(n - 1)/n and a tree's
  log2 n latency) give another rate past them. Published logs feed that reading their systems JSONs'
  links (`group_links`): across nodes the bandwidth term is slower by a GPU's link inside its node
  (accelerator_interconnect) over its share of the node's fabric (host_networking), so a jump the
  fitted layouts show where they cross the fabric is read as the fabric's, not as communication
  that goes on growing (and a fall across it rules the reading out). The point stays the fixed
  reading's (the midpoint of the two, or the communication reading, scored worse on MLPerf
  v4.0-v5.1, with the links or without); half the log-gap between them widens the interval
  (`rate_unidentified`), which calibrated out of sample narrowed the median interval from 81 % to
  66 % at the same coverage, and to 57 % (85 % inside) once read over the links. Three or more
  fitted layouts can tell them apart: x = c + (d + e comm) / b by least squares, which where c, d
  and e all come out positive is the rate's one reading, nothing left unidentified
  (`_full_rate_model`); where the third layout zeroes d or e, the fixed reading stays the point.
  Past the fitted layouts' most GPUs the published corpus shapes the rate (`predictions(prior=...)`,
  on by default: predict.prior.USE_PRIOR says why): other submitters' systems of the same accelerator
  and benchmark among the loaded logs say how their per-GPU rate fell over those GPUs, and the rate
  moves three quarters of the way (in logs: prior.PRIOR_WEIGHT) towards that fall from the fitted
  layouts' largest; the row's `rate_prior`
  says the slope and from which systems (TttFit.prior_rate).
- E, evaluation: where the fitted layouts' logs count their evaluations (eval_start/eval_stop), the
  number of evaluations times the cost of one. The number is what is trained over the benchmark's
  cadence (`eval_interval`: MLPerf fixes it in samples or epochs, whatever the batch, except BERT's,
  which grows with the batch), scaled so it passes through the fitted layouts' counts; one evaluation
  costs A x GPUs^-g seconds, g in [0, 1] fitted (1: it shrinks with the GPUs that evaluate; less: part
  of it does not, its floor; one fitted GPU count: 1). Two fitted GPU counts cannot tell that power
  law from a fixed part plus one that shrinks, a + b / GPUs (Amdahl's reading: COCO's scoring on one
  host, a step's latency); far past them the first keeps shrinking, the second stops at a. One
  evaluation's cost is the midpoint of the two in logs: on the 46 layouts of MLPerf v4.0-v5.1 predicted
  past their fitted ones the power law alone was 15 % under the measured cost at the median, Amdahl's
  6 % over, the midpoint 6 % under, with the least mean |log error| (0.27 against 0.35 and 0.35).
  Without counts: per unit trained, A x GPUs^-g.
  O, the rest: the same form in seconds, or its mean where a fitted layout's is not positive.

The global batch of a layout: the published (or run) one where it was measured; else --global-batch;
else `choose_batch`: the fitted layouts' global batches interpolated in logs against the GPUs (past
them, their trend: batch ~ GPUs^s, s in [0, 1] from the two outermost; one batch at both is held), at
least one sample per data-parallel replica, within the benchmark's RCP table (its smallest batch a
floor, its largest a cap: a submission outside fails the RCP check). The row's global_batch_from says
which and why.

Every number has an interval meant to hold 80 % of measurements (predict.fitting.COVERAGE; columns
*_low/*_high beside it, a band in the plot, `interval_from` in words): the log-spread sigma of what the
fit cannot explain (the fitted layouts' samples and rates against the fitted curves, their repeats'
spread of time to train, a floor), in quadrature with a spread per doubling past the fitted GPUs,
per-GPU batch and global batch, and the rate the fitted layouts cannot identify (`spread_terms`,
`ttt_sigma`, fitting.TTT_PER_DOUBLING); the time to train's interval is value x exp(q sigma), q the
measured quantiles of past errors per sigma (fitting.TTT_QUANTILES), and its width grades it
(`grade`: tight, usable, indicative, each with its promise: fitting.PROMISES, GradeRules), capped at
indicative where the fit is weak (`evidence`, `weak_reasons`: the fitted layouts' speed-up far from
their GPU ratio, the layout far past them, its global batch far from theirs, its batch per GPU half
theirs or less, a model-parallel degree only bounded), the row's weak_fit saying why. Those constants
are fitted, and scored on a round (and on a submitter) each fit never saw, by
benchmarks/bench_predict_published.py.

Where a prediction cannot be honest the row says why and has no number (`flags`, `note`):
- model-parallel: the least model-parallel degree (GPUs x accumulation / B, rounded up: at most B /
  accumulation data-parallel replicas; accumulation the log's gradient_accumulation_steps) differs
  between fitted layouts (a vendor's Llama 2 70B LoRA at B = 8: at least 4 on 8 GPUs, 8 on 16), or a
  measured layout's from theirs, or the layout's global batch is smaller than its GPUs by more than any
  fitted layout's (University of Florida's Llama 3.1 8B: B = 16 on 32 GPUs after 16 on 8): model
  parallelism changed, which these fits cannot see; a change of accumulation alone is not one. Where
  only some fitted layouts need a degree above 1 (the others' 1 is a lower bound), predicted, indicative;
- mixed-hardware: published fitted layouts of different GPUs per node (one submitter's two systems);
- batch-capped: the batch chosen for a layout not run is the RCP table's largest and still leaves a
  data-parallel replica (of the fitted layouts' size) without a sample;
- too-few-fitted: fewer fitted layouts than the rate model needs;
- convergence-unknown: one fitted batch size, no RCP, and another batch asked.
Flags on a printed number: extrapolated (more than 4x the largest fitted GPUs or global batch, or
under a quarter of the smallest fitted per-GPU batch), beyond-rcp (a global batch above the RCP
table's largest), fitted (the layout was fitted on), baseline (the fitted baseline's own row); and,
where the rate is the throughput predictor's, its caveats at that layout (CARRIED: oversubscribed,
more-gpus-than-runs, faster-than-link), so that one sweep's two predictions never disagree silently.
"""

from __future__ import annotations

import math
import re
import statistics
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from hvdbench.contracts import eval_interval as contract_eval_interval
from hvdbench.errors import ConfigError
from hvdbench.files import atomic_write_png
from hvdbench.linkrate import link_rate, node_link_rate
from hvdbench.results.analyses.convergence import CriticalBatch, fit, rcp_for
from hvdbench.results.analyses.ttt import Decomposition, LayoutParts, decompose, group_values
from hvdbench.results.predict.fitting import (
    COVERAGE,
    EXTRAPOLATION,
    GRADES,
    promise,
    PER_DOUBLING,
    TTT_PER_DOUBLING,
    TTT_QUANTILES,
    TTT_SIGMA_FLOOR,
    doublings_past,
    grade,
    interval,
    least_squares,
    normal_equations,
    quadrature,
    rms,
)
from hvdbench.results.predict.prior import (PRIOR_WEIGHT, USE_PRIOR, ScalingPair, ScalingPrior, batch_of, corpus_for,
                                            per_gpu_rate, prior_at, scaling_pairs, shaped)
from hvdbench.results.predict.throughput import FLAGS as THROUGHPUT_FLAGS
from hvdbench.results.predict.throughput import PredictionFitRow, PredictionRow, predict
from hvdbench.results.records.rows import TttGroup, beside
from hvdbench.results.render.tables import markdown_table, pages
from hvdbench.topology import Layout

FLAGS = {
    "batch-capped": "the batch hvdbench chose for a layout not run is capped at the RCP table's largest, which "
                    "leaves some data-parallel replica without a sample at the fitted layouts' model parallelism; "
                    "not predicted (give --global-batch)",
    "model-parallel": "the least model-parallel degree (GPUs x accumulation / global batch, rounded up) differs "
                      "between the fitted layouts, or between them and this layout: model parallelism changed, "
                      "which the fits cannot see; not predicted",
    "mixed-hardware": "the fitted layouts are different hardware (GPUs per node): one system's fit cannot "
                      "be read across another's; not predicted",
    "too-few-fitted": "fewer fitted layouts than the rate model needs; not predicted",
    "convergence-unknown": "one fitted global batch and no RCP table: the samples at another batch are unknown; "
                           "not predicted",
    "extrapolated": f"more than {EXTRAPOLATION:g}x past the fitted GPUs, global batch or per-GPU batch: the "
                    "further out, the less the fitted costs hold",
    "beyond-rcp": "a global batch above the RCP table's largest: MLPerf's RCP check fails such a submission",
    "fitted": "a fitted layout: how well the fit reproduces it",
    "baseline": "the fitted baseline's own row",
}
# The throughput predictor's caveats a time to train on its rate carries (issue 50 item 7: 4 ranks on
# 2 cores flagged in one table and not in the other).
CARRIED = ("oversubscribed", "more-gpus-than-runs", "faster-than-link")
FLAGS.update({flag: THROUGHPUT_FLAGS[flag] + " (the training rate is the throughput predictor's)"
              for flag in CARRIED})
REFUSED = ("batch-capped", "model-parallel", "mixed-hardware", "too-few-fitted", "convergence-unknown")


class Links(NamedTuple):
    """What a ring across nodes runs on (TttFit.link_slowdown), from a group's systems JSONs."""

    intra: float | None = None  # bytes/s of a GPU's link inside its node (accelerator_interconnect)
    node: float | None = None  # bytes/s of one node's fabric to the others (host_networking)
    domain: int = 0  # GPUs one NVLink domain joins across nodes (a GB200 NVL72: 72), 0: one node's


_DOMAIN = re.compile(r"\bNVL(\d+)\b")  # NVIDIA's rack-scale systems name their NVLink domain: GB200 NVL72


@dataclass
class TttFit:
    """What `predict_layout` needs for one time-to-train group."""

    group: TttGroup
    parts: list[LayoutParts]  # every measured layout (and batch) of the group with parts
    fitted: list[LayoutParts]
    base: LayoutParts | None  # the smallest fitted layout: the waterfall's baseline
    unit: str = ""
    published: bool = False
    convergence: CriticalBatch | None = None
    s_scale: float = 1.0  # S_min's scale against the RCP table's line (published logs)
    convergence_from: str = ""
    # The RCP table's (batch, mean samples): its own mean where it covers the batch (samples_and_source).
    rcp_points: list = field(default_factory=list)
    # What the fit cannot explain, as log-spreads (the interval, `spread`): the fitted layouts' samples
    # and rates against the fitted curves, and their repeats' relative spread of time to train.
    samples_residual: float = 0.0
    rate_residual: float = 0.0
    repeat_cv: float = 0.0
    repeat_runs: float = 1.0
    rate: tuple[float, float] | None = None  # (c, d): GPU-seconds per unit trained = c + d / per-GPU batch
    # The same fitted layouts read as communication instead of a fixed step cost: c + e x comm_shape / b.
    rate_comm: tuple[float, float] | None = None
    # Three or more fitted layouts that tell the three apart: c + (d + e x comm) / b, the rate's one reading.
    rate_full: tuple[float, float, float] | None = None
    links: Links = Links()  # what a ring across nodes runs on (link_slowdown)
    throughput_fit: object = None  # throughput.Fit, with `calibration` below
    calibration: float = 1.0
    rate_from: str = ""
    eval_law: tuple[float, float] = (0.0, 1.0)  # (A, g): E per unit trained = A x GPUs^-g (no cadence)
    # E = evaluations x cost of one: evaluations = eval_per_interval x trained / eval_interval(batch),
    # one evaluation's seconds = A x GPUs^-g, eval_cost = (A, g) (None: no evaluation counted).
    eval_per_interval: float = 0.0
    eval_cost: tuple[float, float] | None = None
    # The other reading of one evaluation's seconds, a + b / GPUs (None: one fitted GPU count), whose
    # midpoint in logs with eval_cost's is the cost (eval_one).
    eval_amdahl: tuple[float, float] | None = None
    other_law: tuple[float, float] | None = (0.0, 1.0)  # (A, g): O = A x GPUs^-g; None: other_mean
    other_mean: float = 0.0
    eval_from: str = ""
    most_per_replica: float = 1.0  # the most GPUs per data-parallel replica (GPUs x accumulation / B) fitted
    rcp_smallest: float | None = None
    rcp_largest: float | None = None
    refused: str = ""  # a reason no layout of the group can be predicted
    refused_flag: str = "too-few-fitted"  # the flag its rows carry (REFUSED)
    # The least model-parallel degree every fitted layout needs (LayoutParts.least_model_parallel; 1: none
    # needs any), and why it is only a lower bound where some fitted layouts need it and others need none.
    model_parallel: int = 1
    model_parallel_bound: str = ""
    # The fitted layouts' speed-up from their fewest GPUs to their most over the GPU ratio (1: linear), in words.
    efficiency: float | None = None
    efficiency_from: str = ""
    # Other submitters' systems of the same accelerator and benchmark (predict.prior): how their per-GPU
    # rate fell with the GPUs shapes the rate past the fitted layouts (`prior_rate`); () where none.
    prior_pairs: tuple[ScalingPair, ...] = ()
    prior_weight: float = PRIOR_WEIGHT  # how far the prior moves the rate (predict.prior.shaped)
    notes: list[str] = field(default_factory=list)

    @property
    def fitted_on(self) -> str:
        return " ".join(dict.fromkeys(p.layout for p in self.fitted))

    @property
    def per_gpu_batches(self) -> list[float]:
        """The fitted layouts' global batch per GPU (the batch a GPU's step cost was fitted at)."""
        return [p.global_batch / p.gpus for p in self.fitted]

    def samples(self, batch: float) -> float | None:
        return self.samples_and_source(batch)[0]

    def samples_and_source(self, batch: float) -> tuple[float | None, str]:
        """(samples to target at `batch`, where from): the RCP table's own mean where the table covers
        the batch (between two of its batches: interpolated in logs), else the fitted line; both x s_scale."""
        s, said = self._unscaled(batch)
        return (None, "") if s is None else (self.s_scale * s, said)

    def _unscaled(self, batch: float) -> tuple[float | None, str]:
        points = sorted(self.rcp_points)
        if len(points) >= 2 and points[0][0] <= batch <= points[-1][0]:
            for (b0, s0), (b1, s1) in zip(points, points[1:]):
                if b0 <= batch <= b1:
                    w = 0.0 if b1 == b0 else math.log(batch / b0) / math.log(b1 / b0)
                    at = f"at {b0:g}" if w == 0 else f"at {b1:g}" if w == 1 else f"between {b0:g} and {b1:g}"
                    return math.exp((1 - w) * math.log(s0) + w * math.log(s1)), f"the RCP table's mean ({at})"
        if self.convergence is None:
            return None, ""
        s = self.convergence.samples(batch)
        return s, "the critical-batch line" if s is not None else ""

    def training_rate(self, nodes: int, gpus_per_node: int, batch: float) -> float | None:
        n = nodes * gpus_per_node
        if self.throughput_fit is not None:
            try:
                return self.calibration * predict(self.throughput_fit, nodes, gpus_per_node).predicted_throughput
            except ConfigError:
                pass  # a link kind the throughput runs never measured: the rate model below, if fitted
        rates = self.rate_readings(nodes, gpus_per_node, batch)
        return rates[0] if rates else None

    def prior_rate(self, nodes: int, gpus_per_node: int, batch: float,
                   rate: float) -> tuple[float, ScalingPrior | None]:
        """(the rate at NxG shaped by the prior, the prior) past the fitted layouts' most GPUs, where
        other systems' pairs cover the way there (predict.prior); (rate, None) elsewhere, and where the
        rate is the throughput predictor's (fitted on the sweep's own layouts)."""
        n = nodes * gpus_per_node
        most = max((p.gpus for p in self.fitted), default=0)
        if not self.prior_pairs or self.throughput_fit is not None or not most or n <= most:
            return rate, None
        anchor = [p for p in self.fitted if p.gpus == most and p.throughput > 0]
        prior = prior_at(self.prior_pairs, most, n, batch_of(anchor), batch, self.prior_weight) if anchor else None
        return (shaped(rate, per_gpu_rate(anchor), most, n, prior), prior) if prior else (rate, None)

    def link_slowdown(self, nodes: int, gpus_per_node: int) -> float:
        """How many times longer a ring's bandwidth term takes across `nodes` nodes than inside one: a
        GPU's link within its node over its share of the node's fabric (`links`), at least 1; 1 on one
        node, inside one NVLink domain, or where the systems JSON gives either rate no number."""
        intra, inter, domain = self.links
        if nodes <= 1 or nodes * gpus_per_node <= domain or not intra or not inter:
            return 1.0
        return max(1.0, intra * gpus_per_node / inter)

    def comm(self, nodes: int, gpus_per_node: int) -> float:
        """comm_shape at NxG, the bandwidth term slowed by the link across nodes (link_slowdown)."""
        return comm_shape(nodes * gpus_per_node, self.link_slowdown(nodes, gpus_per_node))

    def rate_readings(self, nodes: int, gpus_per_node: int, batch: float) -> list[float]:
        """The rate at NxG GPUs and global batch `batch` under each reading of the fitted layouts' step
        cost: [as a fixed cost] or [as a fixed cost, as communication growing with comm_shape] where
        both are fitted; [fixed and communication together] where the fitted layouts identify both
        (rate_full); [] where none is."""
        out, n = [], nodes * gpus_per_node
        if self.rate_full is not None:
            c, d, e = self.rate_full
            per_gpu = c + (d + e * self.comm(nodes, gpus_per_node)) * n / batch
            return [n / per_gpu] if per_gpu > 0 else []
        for model, shape in ((self.rate, 1.0), (self.rate_comm, self.comm(nodes, gpus_per_node))):
            per_gpu = model[0] + model[1] * shape * n / batch if model is not None else 0.0
            if per_gpu > 0:
                out.append(n / per_gpu)
        return out

    def rate_unidentified(self, nodes: int, gpus_per_node: int, batch: float) -> float:
        """Half the log-gap between the two readings' rates at NxG: what the fitted layouts cannot
        tell apart, which widens the interval (spread_terms) and leaves the point alone. 0 where the
        rate is the throughput predictor's (its communication is fitted from the allreduce bench)."""
        rates = self.rate_readings(nodes, gpus_per_node, batch) if self.throughput_fit is None else []
        return abs(math.log(rates[1] / rates[0])) / 2 if len(rates) == 2 else 0.0

    def evals(self, trained: float, batch: float) -> float:
        """How many evaluations a run makes that trains `trained` at global batch `batch` (module docstring)."""
        return self.eval_per_interval * trained / eval_interval(self.group.model, batch, self.published)

    def eval_one(self, n: int) -> float:
        """One evaluation's seconds at n GPUs: eval_cost's power law, or its midpoint in logs with
        eval_amdahl's fixed part plus a shrinking one where that is fitted (module docstring)."""
        a, g = self.eval_cost
        power = a * n ** -g
        if self.eval_amdahl is None:
            return power
        fixed, shrinking = self.eval_amdahl
        return math.sqrt(power * (fixed + shrinking / n))

    def eval_s(self, n: int, trained: float, batch: float) -> float:
        if self.eval_cost is not None:
            return self.evals(trained, batch) * self.eval_one(n)
        a, g = self.eval_law
        return a * n ** -g * trained

    def other_s(self, n: int) -> float:
        if self.other_law is None:
            return self.other_mean
        a, g = self.other_law
        return a * n ** -g


# --- fitting ----------------------------------------------------------------------------------------

def eval_interval(model: str, batch: float, published: bool) -> float:
    """What a run trains between two evaluations, relative to other batches of the same benchmark:
    MLPerf's training rules fix it in samples or epochs (ResNet-50 every 4 epochs, Llama 2 70B LoRA every
    384 samples, Stable Diffusion every 512,000 images, DLRM every 0.05 epochs, ...) whatever the batch,
    except where they make it grow with the batch (BERT's: contracts.eval_interval, from the model's
    spec). A sweep's own cadence (its runs' eval_every) does not change with the batch either: 1."""
    return (contract_eval_interval(model, batch) if published else None) or 1.0


def _eval_model(fitted: list[LayoutParts], published: bool) \
        -> tuple[float, tuple[float, float], tuple[float, float] | None] | None:
    """(evaluations per unit of eval_interval trained, (A, g): one evaluation's seconds A x GPUs^-g, g in
    [0, 1], (a, b): the same as a + b / GPUs, a, b >= 0) from the fitted layouts' counted evaluations;
    None where none counted one. g < 1 is the part of an evaluation that does not shrink with the GPUs
    that evaluate; at one GPU count, g = 1 and no (a, b). Either reading alone scored worse on MLPerf
    v4.0-v5.1 than their midpoint (TttFit.eval_one): the power law under-predicts a floor far past the
    fitted layouts (RetinaNet on 512 GB200s: 2.9 s an evaluation against 6.4 measured), a + b / GPUs
    puts too much in it where two nearby layouts fix it (Llama 2 70B LoRA on 512: 1.1 s against 0.4)."""
    counted = [p for p in fitted if p.evals > 0 and p.eval_s > 0 and p.trained > 0]
    if not counted:
        return None
    model = counted[0].group.model
    per = statistics.fmean(p.evals * eval_interval(model, p.global_batch, published) / p.trained for p in counted)
    each = [(p.gpus, p.eval_s / p.evals) for p in counted]
    amdahl = least_squares([(1.0, 1.0 / n) for n, _ in each], [y for _, y in each]) \
        if len({n for n, _ in each}) > 1 else None
    return per, _power_law(each), amdahl if amdahl and amdahl[0] + amdahl[1] > 0 else None


def _power_law(points: list[tuple[int, float]]) -> tuple[float, float] | None:
    """(A, g) of y = A n^-g through positive points, g in [0, 1] (least squares in logs); one point
    or one n: g = 1 (scales with the ranks). None when a y is not positive."""
    if not points or any(y <= 0 for _, y in points):
        return None
    ns = {n for n, _ in points}
    g = 1.0
    if len(ns) > 1:
        lx = [math.log(n) for n, _ in points]
        ly = [math.log(y) for _, y in points]
        mx, my = statistics.fmean(lx), statistics.fmean(ly)
        slope = sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)
        g = min(1.0, max(0.0, -slope))
    a = math.exp(statistics.fmean(math.log(y * n ** g) for n, y in points))
    return a, g


def comm_shape(n: int, slow: float = 1.0) -> float:
    """A step's communication at n GPUs, in units the fit scales: the throughput predictor's allreduce
    (throughput.Link.allreduce) with its bandwidth term 2(n - 1)/n, `slow` times longer on a slower
    link (TttFit.link_slowdown: across nodes), and its latency over a tree's log2 n hops (NCCL's at
    scale) rather than a ring's 2(n - 1), each in units of itself inside a node. No communication on
    one GPU."""
    return 2 * (n - 1) / n * slow + math.log2(n) if n > 1 else 0.0


def _comm_model(tf: TttFit) -> tuple[float, float] | None:
    """(c, e) of x = c + e x comm / b (TttFit.comm: comm_shape with the systems JSON's links), b the
    per-GPU batch, by least squares over the fitted layouts (c, e >= 0); None where they cannot tell e
    (one value of comm / b among them) or rule communication out (e = 0)."""
    fitted = tf.fitted
    x = [p.gpus / p.throughput for p in fitted]
    v = [tf.comm(p.nodes, p.gpus_per_node) * p.gpus / p.global_batch for p in fitted]
    if len(fitted) < 2 or max(v) - min(v) <= 1e-12 * max(v):
        return None
    c, e = least_squares([(1.0, u) for u in v], x)
    # e = 0: the fitted layouts' per-GPU time fell where this reading's communication grew (a fabric
    # crossed at no cost): they rule it out, and leave nothing unidentified.
    return (c, e) if e > 0 else None


def _full_rate_model(tf: TttFit) -> tuple[float, float, float] | None:
    """(c, d, e) of x = c + (d + e x comm) / b (TttFit.comm) by least squares over the fitted layouts
    where they identify all three: three or more layouts whose 1 / b and comm / b are not on one line
    (the issue's fitted layouts "where a study has more than two"), and c, d, e all > 0. None where
    not: where the third layout zeroes d or e, the point stays the fixed reading and the interval
    spans both (taking the reading the third layout supports as the point scored worse on MLPerf
    v4.0-v5.1: benchmarks/bench_predict_published.py)."""
    rows = [[1.0, p.gpus / p.global_batch, tf.comm(p.nodes, p.gpus_per_node) * p.gpus / p.global_batch]
            for p in tf.fitted]
    solved = normal_equations(rows, [p.gpus / p.throughput for p in tf.fitted]) if len(rows) >= 3 else None
    return tuple(solved) if solved is not None and min(solved) > 0 else None


def _rate_model(fitted: list[LayoutParts]) -> tuple[tuple[float, float] | None, str]:
    """(c, d) of a GPU's time per unit trained x = c + d / b from the fitted layouts (module docstring)."""
    if len(fitted) < 2:
        return None, ""
    x = [p.gpus / p.throughput for p in fitted]
    inv_b = [p.gpus / p.global_batch for p in fitted]
    if max(inv_b) - min(inv_b) <= 1e-12 * max(inv_b):
        c = statistics.fmean(x)
        per_gpu = fitted[0].global_batch / fitted[0].gpus
        return (c, 0.0), f"per-GPU rate held ({len(fitted)} fitted layouts, all at {per_gpu:g} per GPU)"
    c, d = least_squares([(1.0, v) for v in inv_b], x)
    return (c, d), (f"a GPU's time per unit trained = {c:.4g} s + {d:.4g} s / per-GPU batch (least squares over "
                    f"{len(fitted)} layouts)")


def _matching_throughput_fit(fits, fitted: list[LayoutParts]):
    """The throughput predictor's fit of the same model group: at the fitted layouts' per-GPU batch
    where there is one, else at the batch nearest theirs (its shape across layouts, ranks past a
    machine's cores included, is what the time-to-accuracy runs' own rate is calibrated against: issue 50
    item 7, where 4 ranks on 2 cores got a 0.39x speed-up from one and finished fastest in the other)."""
    same = [f for f in fits or () if f.group.ttt_key == fitted[0].group.ttt_key]
    for f in same:
        if all(abs(f.samples_per_gpu_step * p.gpus - p.global_batch) < 1e-9 for p in fitted):
            return f
    per_gpu = statistics.fmean(math.log(p.global_batch / p.gpus) for p in fitted)
    return min(same, key=lambda f: abs(math.log(f.samples_per_gpu_step) - per_gpu), default=None)


def group_links(runs) -> dict[tuple, Links]:
    """Per time-to-train group (ttt.group_values), its Links: a GPU's link inside its node
    (LoadedRun.intra_link, the accelerator_interconnect: throughput.link_rate; a figure 'aggregated'
    over the node's GPUs shared among them), one node's fabric (LoadedRun.link, the host_networking of
    multi-node runs: node_link_rate), each the most common among the group's runs that give a number
    (a one-node systems JSON may name no fabric); and the NVLink domain its system's name gives."""
    found: dict[tuple, tuple[list, list, list]] = {}
    for r in runs:
        intra, inter, domain = found.setdefault(group_values(r), ([], [], []))
        rate = link_rate(r.intra_link)
        shared = rate and "aggregat" in r.intra_link.lower() and r.gpus_per_node
        intra.append(rate / r.gpus_per_node if shared else rate)
        inter.append(node_link_rate(r.link) if (r.nodes or 0) > 1 else None)
        named = _DOMAIN.search(r.devices or "")
        domain.append(int(named.group(1)) if named else None)

    def most_common(values):
        values = [v for v in values if v]
        return max(set(values), key=values.count) if values else None
    return {key: Links(most_common(intra), most_common(inter), most_common(domain) or 0)
            for key, (intra, inter, domain) in found.items()}


def fit_group(parts: list[LayoutParts], fit_on: set[Layout] | None = None, ruleset: str | None = None,
              published: bool = False, throughput_fits=(),
              links: Links = Links(), prior_pairs: tuple[ScalingPair, ...] = (),
              prior_weight: float = PRIOR_WEIGHT) -> TttFit:
    """A TttFit from one group's layouts (ttt.LayoutParts), fitted on those named in `fit_on` (all
    when None). `published`: MLPerf logs, whose benchmark's RCP table gives B_crit (of `ruleset`);
    `links`: what its rings across nodes run on (group_links); `prior_pairs`: other submitters' systems
    of its accelerator and benchmark (prior.corpus_for), whose scaling shapes the rate past the fitted layouts,
    `prior_weight` of the way (prior.shaped)."""
    fitted = [p for p in parts if fit_on is None or p.place in fit_on]
    fitted.sort(key=lambda p: (p.gpus, p.nodes, p.global_batch))
    tf = TttFit(group=parts[0].group, parts=parts, fitted=fitted, base=fitted[0] if fitted else None,
                unit=parts[0].unit, published=published, links=links, prior_pairs=tuple(prior_pairs),
                prior_weight=prior_weight)
    if not fitted:
        tf.refused = "no fitted layout with a time to train and its parts (--fit-on names none of this group's)"
        return tf
    if len({p.unit for p in fitted}) > 1:
        tf.refused = "the fitted layouts count progress in samples and in epochs"
        return tf
    tf.most_per_replica = max(p.gpus_per_replica for p in fitted)
    if published and len({p.gpus_per_node for p in fitted}) > 1:
        # One submitter's 8-GPU and 4-GPU nodes are two systems (issue 57 case 13): a published group
        # that holds both (no systems JSON to tell them apart, or --group-by submitter) is not one fit.
        tf.refused, tf.refused_flag = ("the fitted layouts are different hardware: " + ", ".join(
            dict.fromkeys(f"{p.layout} has {p.gpus_per_node} GPUs per node" for p in fitted))
            + "; fit on one system's layouts (--fit-on)"), "mixed-hardware"
        return tf
    degrees = {p.layout: p.least_model_parallel for p in fitted}
    needed = sorted(set(degrees.values()) - {1})
    said = ", ".join(f"{layout} at least {d}" for layout, d in degrees.items())
    if len(needed) > 1:
        tf.refused, tf.refused_flag = (f"the fitted layouts need different model parallelism ({said}: GPUs x "
                                       "accumulation / global batch): the fit would span a change it cannot "
                                       "see; fit on layouts of one degree"), "model-parallel"
        return tf
    tf.model_parallel = needed[0] if needed else 1
    if needed and len(set(degrees.values())) > 1:
        tf.model_parallel_bound = (f"model parallelism only bounded ({said}): the fit may span a change of it")

    # Convergence: the RCP table's B_crit, S_min scaled to the fitted layouts (published), else their own fit.
    table = rcp_for(tf.group.model, ruleset) if published else None
    rcp = fit(table[2]) if table else None
    if table:
        tf.rcp_smallest, tf.rcp_largest = min(b for b, _ in table[2]), max(b for b, _ in table[2])
    if rcp is not None and rcp.usable and rcp.b_crit is not None:
        tf.convergence = rcp
        tf.rcp_points = [(b, s) for b, s in table[2] if b > 0 and s > 0]
        tf.s_scale = statistics.fmean(p.trained / tf._unscaled(p.global_batch)[0] for p in fitted)
        tf.convergence_from = (f"RCP {table[0]} (training {table[1]}): its mean where the table covers the batch "
                               f"({min(b for b, _ in tf.rcp_points):g}-{tf.rcp_largest:g}), else B_crit "
                               f"{rcp.b_crit:,.4g}, S_min {rcp.s_min:,.4g}; x {tf.s_scale:.3f} (the fitted layouts' "
                               "samples against it)")
    else:
        own = fit((p.global_batch, p.trained) for p in fitted)
        tf.convergence = own
        tf.convergence_from = (f"the fitted layouts: S_min {own.s_min:,.4g}, B_crit "
                               + ("not bounded (flat)" if own.b_crit is None else f"{own.b_crit:,.4g}")
                               + f" ({own.status})" if own.usable else f"the fitted layouts: {own.note}")
        if rcp is not None and table:
            tf.convergence_from += f"; the RCP table (training {table[1]}) gives no line: {rcp.note}"

    # The training rate: the throughput predictor where the sweep has one for this group, else c + d / b.
    tput = _matching_throughput_fit(throughput_fits, fitted)
    ratios = []
    if tput is not None:
        for p in fitted:
            try:
                ratios.append(p.throughput / predict(tput, p.nodes, p.gpus_per_node).predicted_throughput)
            except ConfigError:
                continue
    if ratios:
        tf.throughput_fit, tf.calibration = tput, statistics.fmean(ratios)
        tf.rate_from = (f"the throughput predictor (fitted on {' '.join(map(str, tput.fitted_on))}, "
                        f"{tput.samples_per_gpu_step:g} per GPU) x {tf.calibration:.3f}, "
                        "the time-to-accuracy runs' own rate against it")
    tf.rate, said = _rate_model(fitted)
    tf.rate_comm = _comm_model(tf) if tf.rate is not None else None
    tf.rate_full = _full_rate_model(tf) if tf.rate is not None else None
    if tf.rate_full is not None:
        c, d, e = tf.rate_full
        said = (f"a GPU's time per unit trained = {c:.4g} s + ({d:.4g} s + {e:.4g} s x comm) / per-GPU batch "
                f"(least squares over {len(fitted)} layouts, which tell a fixed step cost from communication)")
    if not ratios:
        tf.rate_from = said
        if tf.rate is None:
            tf.refused = (f"fitted on {len(fitted)} layout ({fitted[0].layout}): the rate model needs two "
                          "(different GPU counts or per-GPU batches)")

    tf.efficiency, tf.efficiency_from = _efficiency(fitted)

    # Evaluation: counted evaluations x the cost of one where the logs count them, else per unit
    # trained against the GPUs; the rest against the GPUs.
    evals = _power_law([(p.gpus, p.eval_s / p.trained) for p in fitted if p.eval_s > 0])
    tf.eval_law = evals or (0.0, 1.0)
    cadence = _eval_model(fitted, published)
    if cadence is not None:
        tf.eval_per_interval, tf.eval_cost, tf.eval_amdahl = cadence
    others = [(p.gpus, p.other_s) for p in fitted]
    tf.other_law = _power_law(others) if any(o > 0 for _, o in others) else (0.0, 1.0)
    tf.other_mean = statistics.fmean(o for _, o in others)
    _residuals(tf)
    tf.eval_from = _eval_words(tf, evals, published) + (
        f"; the rest {tf.other_law[0]:.3g} s x GPUs^-{tf.other_law[1]:.2f}" if tf.other_law is not None
        else f"; the rest {tf.other_mean:.3g} s (mean)")
    return tf


def _efficiency(fitted: list[LayoutParts]) -> tuple[float | None, str]:
    """(speed-up over GPU ratio, in words) from the fitted layouts' fewest GPUs to their most (each
    count's mean rate): 1 is linear; (None, '') at one GPU count."""
    rates: dict[int, list[float]] = {}
    for p in fitted:
        if p.throughput > 0:
            rates.setdefault(p.gpus, []).append(p.throughput)
    if len(rates) < 2:
        return None, ""
    lo, hi = min(rates), max(rates)
    speedup = statistics.fmean(rates[hi]) / statistics.fmean(rates[lo])
    names = {p.gpus: p.layout for p in fitted}
    return speedup / (hi / lo), (f"the fitted {names[lo]} -> {names[hi]} sped up {speedup:.2f}x on {hi / lo:g}x "
                                 f"the GPUs ({100 * speedup / (hi / lo):.0f} % of linear)")


def _eval_words(tf: TttFit, evals: tuple[float, float] | None, published: bool) -> str:
    """The evaluation model of fit_group in words (`eval_from`): counted evaluations x the cost of
    one, or per unit trained against the GPUs, or none."""
    if evals is None:
        return "no evaluation in the fitted layouts"
    per_unit = tf.unit[:-1] if tf.unit.endswith("s") else tf.unit
    if tf.eval_cost is None:
        return f"evaluation per {per_unit} trained {evals[0]:.3g} x GPUs^-{evals[1]:.2f}"
    each = f", each {tf.eval_cost[0]:.3g} s x GPUs^-{tf.eval_cost[1]:.2f}"
    if tf.eval_amdahl is not None:
        each = (f", each the midpoint in logs of {tf.eval_cost[0]:.3g} s x GPUs^-{tf.eval_cost[1]:.2f} and "
                f"{tf.eval_amdahl[0]:.3g} s + {tf.eval_amdahl[1]:.3g} s / GPUs")
    if eval_interval(tf.group.model, 1, published) != 1:  # an interval that grows with the batch
        return f"evaluations = {tf.eval_per_interval:.3g} x {tf.unit} trained / MLPerf's BERT interval at the batch" + each
    return f"evaluations = {tf.eval_per_interval:.3g} per {per_unit} trained (a cadence the batch leaves alone)" + each


def _residuals(tf: TttFit) -> None:
    """What the fit cannot explain at its own layouts (log-spreads): samples and rate against the fitted
    curves, and the spread of each fitted layout's repeats (LayoutParts.repeat_cv)."""
    logs = [math.log(tf.samples(p.global_batch) / p.trained) for p in tf.fitted
            if p.trained > 0 and (tf.samples(p.global_batch) or 0) > 0]
    tf.samples_residual = rms(logs)
    rates = [math.log(tf.training_rate(p.nodes, p.gpus_per_node, p.global_batch) / p.throughput) for p in tf.fitted
             if p.throughput > 0 and (tf.training_rate(p.nodes, p.gpus_per_node, p.global_batch) or 0) > 0]
    tf.rate_residual = rms(rates)
    cvs, runs = [], []
    for p in tf.fitted:
        if p.repeat_cv:
            cvs.append(p.repeat_cv)
            runs.append(max(1, p.runs_used))
    tf.repeat_cv = statistics.fmean(cvs) if cvs else 0.0
    tf.repeat_runs = statistics.fmean(runs) if runs else 1.0


def spread_terms(tf: TttFit, nodes: int, gpus_per_node: int, batch: float, rcp_mean: bool) -> dict[str, float]:
    """What a time to train's interval is made of at n GPUs and global batch `batch`: the fit's own
    log-spreads (residuals of samples and rate, the repeats), the doublings past the fitted GPUs,
    per-GPU batch and global batch (`global_batch_rcp` instead where the RCP table's own mean at that
    batch is used), and the rate the fitted layouts cannot identify (`rate_unidentified`, a log-spread)."""
    n = nodes * gpus_per_node
    past_batch = doublings_past(batch, [p.global_batch for p in tf.fitted])
    return {"samples_residual": tf.samples_residual, "rate_residual": tf.rate_residual,
            # The score is an olympic mean of repeats: the fitted ones' and this layout's each miss by cv / sqrt(runs).
            "repeats": tf.repeat_cv * math.sqrt(2 / tf.repeat_runs),
            "rate_unidentified": tf.rate_unidentified(nodes, gpus_per_node, batch),
            "gpus": doublings_past(n, [p.gpus for p in tf.fitted]),
            "per_gpu_batch": doublings_past(batch / n, tf.per_gpu_batches),
            "global_batch": 0.0 if rcp_mean else past_batch, "global_batch_rcp": past_batch if rcp_mean else 0.0}


def ttt_sigma(terms: dict[str, float], per_doubling: dict[str, float] = TTT_PER_DOUBLING,
              floor: float = TTT_SIGMA_FLOOR) -> float:
    """The time to train's log-spread: the floor, the residuals and repeats in quadrature with the
    doublings past the fitted range, each x its `per_doubling` spread (added up, as a systematic error is)."""
    far = sum(per_doubling[k] * terms[k] for k in per_doubling)
    return quadrature(floor, terms["samples_residual"], terms["rate_residual"], terms["repeats"], far)


def spread(tf: TttFit, nodes: int, gpus_per_node: int, batch: float, rcp_mean: bool) -> tuple[float, float, str]:
    """(log-spread of the training rate, of the time to train, in words) at n GPUs and global batch
    `batch` (spread_terms, ttt_sigma)."""
    terms = spread_terms(tf, nodes, gpus_per_node, batch, rcp_mean)
    slow = tf.link_slowdown(nodes, gpus_per_node)
    rate = quadrature(tf.rate_residual, PER_DOUBLING["gpus"] * terms["gpus"]
                      + PER_DOUBLING["per_gpu_batch"] * terms["per_gpu_batch"] + terms["rate_unidentified"])
    ttt = ttt_sigma(terms)
    low, high = (100 * (math.exp(q * ttt) - 1) for q in TTT_QUANTILES)
    said = (f"{low:+.0f} % to {high:+.0f} % (sigma {100 * ttt:.1f} %, the {100 * COVERAGE:.0f} % quantiles of past "
            f"errors per sigma): fit residuals samples {100 * tf.samples_residual:.1f} %, rate "
            f"{100 * tf.rate_residual:.1f} %; repeats {100 * terms['repeats']:.1f} %; past the fitted range "
            f"{terms['gpus']:.1f} doublings of GPUs, {terms['per_gpu_batch']:.1f} of per-GPU batch, "
            f"{terms['global_batch'] + terms['global_batch_rcp']:.1f} of global batch"
            + (f"; the fitted layouts cannot tell a fixed step cost from communication growing with the GPUs: "
               f"{100 * terms['rate_unidentified']:.1f} % (half the gap between the two readings' rates"
               + (f"; across nodes the bandwidth term x {slow:.3g}, the systems JSON's links" if slow > 1 else "")
               + ")" if terms["rate_unidentified"] >= 5e-4 else ""))  # a fitted layout's is rounding: not said
    return rate, ttt, said


# --- predicting -------------------------------------------------------------------------------------

def choose_batch(tf: TttFit, nodes: int, gpus_per_node: int) -> tuple[int, str]:
    """(global batch, where from) of a layout not measured (module docstring): the fitted layouts'
    global batch interpolated against the GPUs in logs (between the two fitted GPU counts around it;
    outside them, the nearest one's per-GPU batch), then held inside the RCP table's batches (published
    logs: a submission below its smallest or above its largest fails the RCP check)."""
    n = nodes * gpus_per_node
    points: dict[int, list[float]] = {}
    for p in tf.fitted:
        points.setdefault(p.gpus, []).append(math.log(p.global_batch))
    line = sorted((g, statistics.fmean(v)) for g, v in points.items())
    names = {p.gpus: p.layout for p in tf.fitted}
    if len(line) == 1:
        g, lb = line[0]
        batch = math.exp(lb) / g * n
        said = f"{names[g]}'s {math.exp(lb) / g:g} per GPU x {n} GPUs"
    elif n <= line[0][0] or n >= line[-1][0]:
        # Past the fitted GPUs the fitted layouts' own trend goes on: global batch ~ GPUs^s, s between
        # their two outermost counts, held in [0, 1] (a submitter scales the batch with the GPUs at most;
        # at one batch for both, the batch is held: strong scaling).
        (g0, b0), (g1, b1) = line[:2] if n <= line[0][0] else line[-2:]
        s = min(1.0, max(0.0, (b1 - b0) / math.log(g1 / g0)))
        g, lb = (g0, b0) if n <= g0 else (g1, b1)
        batch = math.exp(lb) * (n / g) ** s
        said = (f"{names[g]}'s {math.exp(lb):g} x ({n} / {g} GPUs)^{s:.2f}, the fitted layouts' trend "
                f"({names[g0]} {math.exp(b0):g}, {names[g1]} {math.exp(b1):g})")
    else:
        (g0, b0), (g1, b1) = next(((a, b) for a, b in zip(line, line[1:]) if a[0] <= n <= b[0]))
        w = math.log(n / g0) / math.log(g1 / g0)
        batch = math.exp((1 - w) * b0 + w * b1)
        said = (f"interpolated in logs between {names[g0]} ({math.exp(b0):g}) and {names[g1]} ({math.exp(b1):g}) "
                f"at {n} GPUs")
    # Strong scaling has a limit: a per-GPU batch under a quarter of the fitted ones' smallest is further
    # than their trend can tell (EXTRAPOLATION); submitters grow the batch there (ResNet-50 on Eos: 3,200 at
    # 8 and 64 GPUs, 40,448 at 2,528).
    least = min(tf.per_gpu_batches) / EXTRAPOLATION
    if batch < least * n:
        batch = least * n
        said += f", raised to {least:g} per GPU (a quarter of the fitted layouts' smallest per-GPU batch)"
    fewest = math.ceil(n / tf.most_per_replica - 1e-9)  # one sample per replica at the fitted model parallelism
    if batch < fewest:
        batch = fewest
        said += (f", raised to {fewest}: one sample per data-parallel replica of {tf.most_per_replica:g} "
                 f"GPU{'s' if tf.most_per_replica != 1 else ''} "
                 "(the fitted layouts' model parallelism)")
    batch = max(1, round(batch))
    if tf.published and tf.rcp_largest:
        smallest, largest = tf.rcp_smallest, tf.rcp_largest
        if batch < smallest:
            batch = int(smallest)
            said += f", raised to the RCP table's smallest batch ({batch})"
        elif batch > largest:
            batch = int(largest)
            said += f", capped at the RCP table's largest batch ({batch})"
    return batch, said


@dataclass(frozen=True, kw_only=True)
class TttPredictionFitRow(PredictionFitRow):
    """prediction_fit.csv's time-to-train rows: the throughput fit's columns (the key: group, layout, global
    batch and result; interval_from; the step and link columns are the throughput rows', empty here), then
    how the time to train was reached: what the layout trains to the target and the rate it trains at, the waterfall's parts against
    the fitted baseline (*_min: minutes), and each part's fit in words."""

    # where global_batch comes from: published | run (measured), --global-batch, or how it was chosen
    global_batch_from: str = ""
    trained_unit: str = ""  # what the trained figures and the training rate count: samples | epochs
    predicted_trained: float | None = None  # what the layout would train to the target at its global batch (S(B))
    # what it trained to the target where measured (the mean over the runs its score keeps)
    measured_trained: float | None = None
    # where predicted_trained comes from: the RCP table's mean (at or between its batches), the critical-batch
    # line, or the fitted layouts at this batch
    samples_from: str | None = None
    training_rate: float | None = None  # the predicted rate while training (T), trained_unit per second
    training_rate_low: float | None = None  # the interval's low end
    training_rate_high: float | None = None  # the interval's high end
    measured_training_rate: float | None = None  # the measured rate while training, where the layout ran
    ttt_baseline: str = ""  # the fitted baseline layout the waterfall's parts are against
    ideal_ttt_min: float | None = None  # the baseline's time to train / the GPU ratio
    convergence_min: float | None = None
    throughput_min: float | None = None
    eval_min: float | None = None
    other_min: float | None = None
    rate_from: str = ""  # how the training rate was fitted, in words
    convergence_from: str = ""  # how the samples (epochs) to the target were fitted, in words
    eval_from: str = ""  # how the evaluation time was fitted, in words
    # the least model-parallel degree the layout needs at its batch: GPUs x accumulation / batch, up
    least_model_parallel: int | None = None
    # the fitted layouts' speed-up from their fewest GPUs to their most, over the GPU ratio (1: linear)
    fitted_efficiency: float | None = None
    # Issue 59 item 3: the prior that shaped the rate past the fitted layouts (predict.prior), in words:
    # its slope, weight and the other submitters' systems (and rounds) it came from, how many pairs; '' none.
    rate_prior: str = ""


@dataclass(frozen=True, kw_only=True)
class TttPredictionRow(PredictionRow):
    """prediction.csv's time-to-train rows: the throughput predictor's columns (its group, layout, global
    batch and result, flags, note; the interval's where a figure has one: the rate while training, in
    samples/s), then the time to train predicted, its interval, grade and why, and the measured one
    (*_min: minutes). How the fit reached it is its prediction_fit.csv row (`fit`)."""

    # the predicted time to train: ideal + convergence + throughput + evaluation + other (prediction_fit.csv)
    predicted_ttt_min: float | None = None
    predicted_ttt_low_min: float | None = None  # the interval's low end
    predicted_ttt_high_min: float | None = None  # the interval's high end
    # tight, usable or indicative: from the interval's width (high / low - 1), indicative where weak_fit says why
    grade: str | None = None
    grade_promise: str = ""  # what the grade promises, in words (fitting.PROMISES)
    # why the prediction is weak, its grade capped at indicative (or indicative for its width alone); '' none
    weak_fit: str = ""
    # the measured time to train, where the layout ran (the mean over the runs its score keeps)
    measured_ttt_min: float | None = None
    ttt_predicted_vs_measured: float | None = None  # predicted_ttt_min / measured_ttt_min
    fit: TttPredictionFitRow = beside(None)  # its prediction_fit.csv row: the fit's figures behind it


class Evidence(NamedTuple):
    """What decides whether a prediction is weak (fitting.GradeRules caps its grade at indicative):
    the fitted layouts' speed-up over their GPU ratio, the doublings of GPUs past them, a model-parallel
    degree that is only a lower bound (why, in words; '' where none), a batch beyond the RCP table, the
    doublings of global batch past the fitted layouts' (and in words), the batch per GPU as a share of
    the fitted layouts' smallest (1 where it is not smaller; and in words)."""

    efficiency: float | None
    efficiency_from: str
    doublings: float
    past: str
    bound: str
    beyond_rcp: bool
    batch_doublings: float = 0.0
    batch_past: str = ""
    per_gpu_share: float = 1.0
    per_gpu_under: str = ""


def evidence(tf: TttFit, nodes: int, gpus_per_node: int, batch: int, measured: LayoutParts | None) -> Evidence:
    """The Evidence of NxG at `batch` against `tf`'s fitted layouts."""
    n = nodes * gpus_per_node
    fitted_n = [p.gpus for p in tf.fitted]
    far = doublings_past(n, fitted_n)
    past = (f"{n} GPUs, {2 ** far:.3g}x past the fitted {max(fitted_n) if n > max(fitted_n) else min(fitted_n)}"
            if far > 0 else "")
    bound = tf.model_parallel_bound
    if (not bound and tf.model_parallel > 1 and measured is not None and measured.global_batch == batch
            and measured.least_model_parallel == 1):
        bound = (f"model parallelism only bounded: {measured.layout} at batch {batch} may run with none, the fitted "
                 f"layouts need at least {tf.model_parallel}")
    beyond = bool(tf.published and tf.rcp_largest and batch > tf.rcp_largest)
    batches = [p.global_batch for p in tf.fitted]
    batch_far, batch_past = doublings_past(batch, batches), ""
    if batch_far > 0:
        side = f"past the fitted {max(batches)}" if batch > max(batches) else f"under the fitted {min(batches)}"
        batch_past = f"global batch {batch}, {2 ** batch_far:.3g}x {side}"
    # No guards: predict_layout's extrapolation check, just before, divided and compared the same batches.
    least, share, under = min(tf.per_gpu_batches), 1.0, ""
    if batch / n < least:
        share = batch / n / least
        under = f"batch per GPU {_count(batch / n)}, {1 / share:.3g}x under the fitted {_count(least)}"
    return Evidence(tf.efficiency, tf.efficiency_from, far, past, bound, beyond, batch_far, batch_past, share, under)


def _count(x: float) -> str:
    """A batch in words: 2,112 and 8 whole, 0.188 to three figures."""
    return f"{x:,.0f}" if x >= 100 or x == int(x) else f"{x:.3g}"


def weak_reasons(ev: Evidence, rules=GRADES) -> list[str]:
    """Why a prediction with Evidence `ev` is weak under `rules` (fitting.GradeRules), each in a few words."""
    out = []
    if rules.weak_efficiency(ev.efficiency):
        out.append(ev.efficiency_from)
    if ev.doublings > rules.most_doublings:
        out.append(ev.past)
    if ev.bound:
        out.append(ev.bound)
    if ev.beyond_rcp and rules.cap_beyond_rcp:
        out.append("a global batch beyond the RCP table's largest")
    if ev.batch_doublings > rules.most_batch_doublings:
        out.append(ev.batch_past)
    if ev.per_gpu_share <= rules.least_per_gpu_share * (1 + 1e-9):  # 8 of 16 a GPU is half, whatever the rounding
        out.append(ev.per_gpu_under)
    return out


@dataclass(frozen=True)
class _Predicted:
    """What predict_layout predicts of a layout it does not refuse: the parts of its time to train and
    the intervals around the rate and the time."""

    trained: float
    samples_from: str
    rate: float
    rate_interval: tuple[float, float]
    parts: Decomposition
    ttt_interval: tuple[float, float]
    interval_from: str
    evidence: Evidence  # what decides whether it is weak (weak_reasons: its grade capped at indicative)
    prior: ScalingPrior | None = None  # other systems' scaling that shaped the rate (predict.prior)


def predict_layout(tf: TttFit, nodes: int, gpus_per_node: int, batch: int | None = None,
                   batch_from: str = "", measured: LayoutParts | None = None) -> TttPredictionRow:
    """One prediction.csv row of NxG at `batch` (None: `choose_batch`): its prediction, or why it has none."""
    n, layout = nodes * gpus_per_node, str(Layout(nodes, gpus_per_node))
    if batch is None and tf.fitted:
        batch, batch_from = choose_batch(tf, nodes, gpus_per_node)
    flags, note = _refusals(tf, n, batch, batch_from, measured)
    trained, samples_from = tf.samples_and_source(batch) if batch else (None, "")
    if trained is None and not flags:
        same = [p for p in tf.fitted if p.global_batch == batch]
        if same:
            trained = statistics.fmean(p.trained for p in same)
            samples_from = "the fitted layouts at this batch"
        else:
            flags.append("convergence-unknown")
            note.append(f"Samples to the target at a global batch of {batch} are unknown: {tf.convergence_from}.")
    rate = None if flags else tf.training_rate(nodes, gpus_per_node, batch)
    prior = None
    if rate is not None:
        rate, prior = tf.prior_rate(nodes, gpus_per_node, batch, rate)
    if rate is None and not flags:
        flags.append("too-few-fitted")
        note.append(f"No training rate for {layout}: {tf.rate_from or 'no rate model'}.")
    if flags:
        return _row(tf, nodes, gpus_per_node, batch, batch_from, measured, (flags, note))
    if tf.throughput_fit is not None and measured is None:
        # The rate is the throughput predictor's: what it warns of at this layout holds here too.
        try:
            said = predict(tf.throughput_fit, nodes, gpus_per_node)
            carried = [f for f in said.flags.split(";") if f in CARRIED]
        except ConfigError:
            carried = []
        flags += carried
        note += [said.note] if carried else []
    e_s, o_s = tf.eval_s(n, trained, batch), tf.other_s(n)
    predicted = LayoutParts(group=tf.group, layout=layout, nodes=nodes, gpus_per_node=gpus_per_node, gpus=n,
                            global_batch=batch, runs_used=0, unit=tf.unit, trained=trained,
                            train_s=trained / rate, eval_s=e_s, other_s=o_s, ttt_s=trained / rate + e_s + o_s)
    parts = decompose(tf.base, predicted)
    rate_sigma, ttt_sigma, interval_from = spread(tf, nodes, gpus_per_node, batch, samples_from.startswith("the RCP"))
    fitted_n = [p.gpus for p in tf.fitted]
    fitted_b = [p.global_batch for p in tf.fitted]
    fitted_per_gpu = tf.per_gpu_batches
    if (n > EXTRAPOLATION * max(fitted_n) or batch > EXTRAPOLATION * max(fitted_b)
            or batch / n < min(fitted_per_gpu) / EXTRAPOLATION):
        flags.append("extrapolated")
        note.append(f"Beyond {EXTRAPOLATION:g}x the fitted range (GPUs {min(fitted_n)}-{max(fitted_n)}, global batch "
                    f"{min(fitted_b)}-{max(fitted_b)}, per GPU {min(fitted_per_gpu):g}-{max(fitted_per_gpu):g}).")
    if tf.published and tf.rcp_largest and batch > tf.rcp_largest:
        flags.append("beyond-rcp")
        note.append(f"A global batch of {batch} is above the RCP table's largest ({tf.rcp_largest:g}).")
    if measured is not None and measured in tf.fitted:
        flags.append("fitted")
    if measured is not None and tf.base is not None and measured is tf.base:
        flags.append("baseline")
    return _row(tf, nodes, gpus_per_node, batch, batch_from, measured, (flags, note), _Predicted(
        trained, samples_from, rate, interval(rate, rate_sigma), parts,
        interval(parts.measured_min, ttt_sigma, TTT_QUANTILES), interval_from,
        evidence(tf, nodes, gpus_per_node, batch, measured), prior))


def _refusals(tf: TttFit, n: int, batch: int | None, batch_from: str,
              measured: LayoutParts | None) -> tuple[list[str], list[str]]:
    """(flags, sentences) of a layout the fit cannot predict whatever it trains: too few fitted layouts,
    a batch the RCP table caps, or model parallelism the fitted layouts did not have."""
    flags, note = [], []
    # A measured layout's own accumulation tells it from model parallelism; a layout not run has none.
    per_replica = (measured.gpus_per_replica if measured is not None and measured.global_batch == batch
                   else max(1.0, n / batch) if batch else math.inf)
    # A measured layout at its own batch needs its own least degree; a layout not run can be run at the
    # fitted layouts' degree whatever its batch, so long as the batch leaves each replica a sample.
    degree = math.ceil(per_replica - 1e-9) if math.isfinite(per_replica) else 0
    own = measured is not None and measured.global_batch == batch
    if tf.refused:
        flags.append(tf.refused_flag)
        note.append(tf.refused + ".")
    elif own and tf.model_parallel > 1 and 1 < degree != tf.model_parallel:
        flags.append("model-parallel")
        note.append(f"A global batch of {batch} on {n} GPUs (accumulation {measured.accumulation}) needs a model-parallel "
                    f"degree of at least {degree}, the fitted layouts {tf.model_parallel}: model parallelism "
                    "changed between layouts, which these fits cannot see.")
    elif per_replica > tf.most_per_replica * (1 + 1e-9) and "capped at the RCP" in batch_from:
        flags.append("batch-capped")
        note.append(f"The RCP table's largest global batch, {batch}, gives {n} GPUs fewer samples per step than "
                    f"one per data-parallel replica of the fitted layouts ({tf.most_per_replica:g} "
                    f"GPU{'s' if tf.most_per_replica != 1 else ''} each): "
                    "this layout needs more model parallelism (or accumulation) than any fitted one; give "
                    "--global-batch, or fit on a layout with more GPUs per replica.")
    elif per_replica > tf.most_per_replica * (1 + 1e-9):
        flags.append("model-parallel")
        changed = ("model parallelism changed between layouts, which these fits cannot see" if measured is not None
                   else f"the layout would need model parallelism ({batch_from}), which these fits cannot see")
        note.append(f"A global batch of {batch} on {n} GPUs puts at least {per_replica:g} GPUs on each data-parallel "
                    f"replica, more than any fitted layout ({tf.most_per_replica:g}): {changed}.")
    return flags, note


def _row(tf: TttFit, nodes: int, gpus_per_node: int, batch: int | None, batch_from: str,
         measured: LayoutParts | None, said: tuple[list[str], list[str]],
         p: _Predicted | None = None) -> TttPredictionRow:
    """The row of NxG: what `predict_layout` predicted (`p`; None: refused) and `said` (flags, sentences)."""
    n = nodes * gpus_per_node
    measured_ttt = measured.ttt_s / 60 if measured is not None else None
    samples = p is not None and tf.unit == "samples"  # samples/s while training: the throughput columns' unit
    low, high = p.ttt_interval if p else (None, None)
    weak = weak_reasons(p.evidence) if p else []
    graded = grade(high / low - 1 if low else None, bool(weak)) if p else None
    if p and graded == "indicative" and not weak:
        # Indicative for its width alone: what the buyer should know of the fit all the same.
        weak = [f"its interval {100 * (high / low - 1):.0f} % wide"] + [
            said for said in (p.evidence.efficiency_from, p.evidence.past) if said]
    group = dict(**vars(tf.group), mode="time_to_accuracy", accum_steps=None,
                 batch_per_gpu=batch // n if batch and batch % n == 0 else None)
    layout = str(Layout(nodes, gpus_per_node))
    result = measured.result if measured is not None else None
    diagnostics = TttPredictionFitRow(
        **group, layout=layout, global_batch=batch, result=result,
        interval_from=p.interval_from if p else None, global_batch_from=batch_from,
        trained_unit=tf.unit, predicted_trained=p.trained if p else None,
        measured_trained=measured.trained if measured is not None else None,
        samples_from=p.samples_from if p else None, training_rate=p.rate if p else None,
        training_rate_low=p.rate_interval[0] if p else None, training_rate_high=p.rate_interval[1] if p else None,
        measured_training_rate=measured.throughput if measured is not None else None,
        ttt_baseline=tf.base.layout if tf.base else "",
        ideal_ttt_min=p.parts.ideal_min if p else None, convergence_min=p.parts.convergence_min if p else None,
        throughput_min=p.parts.throughput_min if p else None, eval_min=p.parts.eval_min if p else None,
        other_min=p.parts.other_min if p else None,
        rate_from=tf.rate_from, convergence_from=tf.convergence_from, eval_from=tf.eval_from,
        least_model_parallel=(measured.least_model_parallel if measured is not None and measured.global_batch == batch
                              else max(tf.model_parallel, math.ceil(n / batch - 1e-9)) if batch else None),
        fitted_efficiency=tf.efficiency, rate_prior=p.prior.said if p and p.prior else "")
    return TttPredictionRow(
        **group, layout=layout, nodes=nodes, gpus_per_node=gpus_per_node, gpus=n, global_batch=batch, result=result,
        baseline=tf.base.layout if tf.base else "",
        predicted_throughput=p.rate if samples else None,
        predicted_throughput_low=p.rate_interval[0] if samples else None,
        predicted_throughput_high=p.rate_interval[1] if samples else None,
        interval=COVERAGE if p else None,
        measured_throughput=measured.throughput if samples and measured_ttt else None,
        fitted=measured is not None and measured in tf.fitted, fitted_on=tf.fitted_on,
        flags=";".join(said[0]), note=" ".join(said[1]),
        predicted_ttt_min=p.parts.measured_min if p else None,
        predicted_ttt_low_min=low, predicted_ttt_high_min=high, grade=graded,
        grade_promise=promise(graded) if graded else "", weak_fit="; ".join(weak),
        measured_ttt_min=measured_ttt,
        ttt_predicted_vs_measured=p.parts.measured_min / measured_ttt if p and measured_ttt else None,
        fit=diagnostics)


def group_rows(tf: TttFit, layouts: list[Layout], global_batch: int | None = None) -> list[TttPredictionRow]:
    """`tf`'s rows: every measured layout and batch (to compare with), then each of `layouts` not
    measured (at `global_batch` where given, else choose_batch's), in order of GPUs."""
    rows = []
    measured = {p.place for p in tf.parts}
    source = "published" if tf.published else "run"
    for p in tf.parts:
        rows.append(predict_layout(tf, p.nodes, p.gpus_per_node, p.global_batch, source, measured=p))
    for layout in dict.fromkeys(layouts):
        if layout not in measured:
            rows.append(predict_layout(tf, layout.nodes, layout.gpus_per_node, global_batch,
                                       "--global-batch" if global_batch else ""))
    rows.sort(key=lambda r: (r.gpus, r.nodes, r.global_batch or 0, r.result or ""))
    return rows


def predictions(runs, parts: list[LayoutParts], layouts: list[Layout], fit_on: set[Layout] | None = None,
                throughput_fits=(), global_batch: int | None = None,
                prior: bool = USE_PRIOR) -> tuple[list[TttFit], list[TttPredictionRow]]:
    """(one TttFit per time-to-train group with parts, their rows). `runs` say which groups are
    published MLPerf logs and of which ruleset (MllogRun.ruleset); `prior`: each group's rate past its
    fitted layouts shaped by the other submitters' groups of its accelerator and benchmark among `parts`."""
    rulesets: dict[tuple, str] = {}
    for r in runs:
        if r.ruleset:
            rulesets.setdefault(group_values(r), r.ruleset)
    groups: dict[tuple, list[LayoutParts]] = {}
    for p in parts:
        if p.gpus and p.global_batch:  # a layout or batch the logs do not give cannot be placed on the curves
            groups.setdefault(p.key, []).append(p)
    fits, rows, links = [], [], group_links(runs)
    pairs = scaling_pairs(parts) if prior else []
    for key, ps in groups.items():
        tf = fit_group(ps, fit_on, rulesets.get(key), key in rulesets, throughput_fits, links.get(key, Links()),
                       corpus_for(pairs, ps))
        fits.append(tf)
        rows += group_rows(tf, layouts, global_batch)
    return fits, rows


# --- Markdown, plot -----------------------------------------------------------------------------------

def markdown(rows: list[TttPredictionRow], fits: list[TttFit]) -> str:
    if not rows:
        return ""

    def num(v, fmt="{:,.2f}"):
        return "–" if v is None else fmt.format(v)

    parts = ["## Predicted time to train\n",
             "time to train = S(B) / T + evaluation + other (hvdbench/results/predict/time_to_train.py): S from the "
             "critical-batch fit, T from the rate model, each fitted on the layouts named below; the parts "
             "are the waterfall's against the fitted baseline (minutes). A measured layout shows predicted / "
             "measured; a row that cannot be predicted honestly says why instead of a number.\n"]
    for tf in fits:
        rs = [r for r in rows if r.ttt_key == tf.group.ttt_key]
        title = " · ".join(str(v) for v in tf.group.ttt_key[1:] if v)  # the group but its system
        parts.append(f"### {title} — {tf.group.system}\n")
        said = [f"Fitted on {tf.fitted_on or 'no layout of this group'}"]
        said += [f"{what}: {text}" for what, text in (("Rate", tf.rate_from), ("Convergence", tf.convergence_from))
                 if text]
        said += [tf.eval_from[0].upper() + tf.eval_from[1:]] if tf.eval_from else []
        parts.append(". ".join(said) + ".\n")
        parts.append(markdown_table(
            ["layout", "GPUs", "global batch", f"{tf.unit or 'trained'} predicted / measured", "ideal", "+ convergence",
             "+ throughput", "+ evaluation", "+ other", "= predicted (min)", f"{100 * COVERAGE:.0f} % interval (min)",
             "measured (min)", "predicted / measured", "check"],
            [[r.layout + (" (fit)" if r.fitted else "") + (f" [{r.result}]" if r.result else ""),
              r.gpus, r.global_batch or "–",
              f"{num(r.fit.predicted_trained, '{:,.4g}')} / {num(r.fit.measured_trained, '{:,.4g}')}",
              num(r.fit.ideal_ttt_min), num(r.fit.convergence_min, "{:+,.2f}"),
              num(r.fit.throughput_min, "{:+,.2f}"), num(r.fit.eval_min, "{:+,.2f}"),
              num(r.fit.other_min, "{:+,.2f}"),
              num(r.predicted_ttt_min) if r.predicted_ttt_min is not None else "not predicted",
              f"{num(r.predicted_ttt_low_min)}-{num(r.predicted_ttt_high_min)} ({r.grade})"
              if r.predicted_ttt_low_min is not None else "–",
              num(r.measured_ttt_min), num(r.ttt_predicted_vs_measured, "{:.3f}"),
              ", ".join(f for f in (r.flags or "").split(";") if f)] for r in rs]) + "\n")
        samples = dict.fromkeys(f"{r.layout}: {r.fit.samples_from}" for r in rs
                                if r.fit.samples_from and not r.fitted)
        if samples:
            parts.append("Samples to target from: " + "; ".join(samples) + ".\n")
        chosen = [f"{r.layout}: {r.global_batch} ({r.fit.global_batch_from})" for r in rs
                  if r.fit.global_batch_from not in ("published", "run", "")]
        if chosen:
            parts.append("Global batch of the layouts not measured: " + "; ".join(chosen) + ".\n")
        weak = [f"{r.layout}: {r.weak_fit}" for r in rs if r.weak_fit and not r.fitted]
        if weak:
            parts.append("Weak, so indicative whatever the interval: " + "; ".join(weak) + ".\n")
        shaped_by = [f"{r.layout}: {r.fit.rate_prior}" for r in rs if r.fit.rate_prior and not r.fitted]
        if shaped_by:
            parts.append("Rate past the fitted layouts shaped by other submitters' results (predict.prior): "
                         + "; ".join(shaped_by) + ".\n")
        tight = (f"tight <= {100 * GRADES.tight_width:.0f} % ({promise('tight')})" if GRADES.tight_width > 0
                 else f"tight ({promise('tight')}) not given: held out it kept its promise too seldom")
        parts.append(f"Grades from the {100 * COVERAGE:.0f} % interval's width (high / low - 1): {tight}, "
                     f"usable <= {100 * GRADES.usable_width:.0f} % "
                     f"({promise('usable')}), else indicative ({promise('indicative')}); each promise kept by "
                     "at least 80 % of the predictions given that grade held out on MLPerf Training v4.0-v5.1 "
                     "(benchmarks/bench_predict_published.py).\n")
        used = list(dict.fromkeys(f for r in rs for f in (r.flags or "").split(";") if f))
        parts += [f"- **{flag}** ({', '.join(r.layout for r in rs if flag in (r.flags or '').split(';'))})"
                  f": {FLAGS[flag]}." for flag in used if flag in FLAGS]
        parts.append("")
    return "\n".join(parts)


def figure(rows: list[TttPredictionRow], fits: list[TttFit]):
    """Predicted (circles; filled: fitted) and measured (stars) time to train against the GPUs, one
    panel per fit of `fits` (write_figure pages them); a layout not predicted is named where its
    measurement is."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    from hvdbench.results.render.plots import device_axis, log_axis
    from hvdbench.results.render.tables import figure_time_unit

    fits = [tf for tf in fits if any(r.ttt_key == tf.group.ttt_key for r in rows)]
    # time_to_train.png's unit for the same runs: seconds when every figure is under a minute
    unit, scale = figure_time_unit(m for r in rows for m in (r.predicted_ttt_min, r.measured_ttt_min) if m)

    def t(minutes):
        return None if minutes is None else minutes * scale

    cols = min(len(fits), 2) or 1
    nrows = math.ceil(max(len(fits), 1) / cols)
    fig = Figure(figsize=(6.4 * cols, 4.8 * nrows), layout="constrained")
    FigureCanvasAgg(fig)
    for i, tf in enumerate(fits):
        ax = fig.add_subplot(nrows, cols, i + 1)
        rs = [r for r in rows if r.ttt_key == tf.group.ttt_key]
        pred = [r for r in rs if r.predicted_ttt_min is not None]
        line = sorted(pred, key=lambda r: r.gpus)
        if line:
            ax.plot([r.gpus for r in line], [t(r.predicted_ttt_min) for r in line], "o-", alpha=0.7,
                    markerfacecolor="none", label="predicted")
            band = [r for r in line if r.predicted_ttt_low_min is not None]
            if band:
                ax.fill_between([r.gpus for r in band], [t(r.predicted_ttt_low_min) for r in band],
                                [t(r.predicted_ttt_high_min) for r in band], color="tab:blue", alpha=0.15, lw=0,
                                label=f"{100 * COVERAGE:.0f} % interval")
            fit_rows = [r for r in line if r.fitted]
            ax.plot([r.gpus for r in fit_rows], [t(r.predicted_ttt_min) for r in fit_rows], "o", color="tab:blue",
                    label="predicted, fitted layout")
        meas = [r for r in rs if r.measured_ttt_min]
        ax.plot([r.gpus for r in meas], [t(r.measured_ttt_min) for r in meas], "k*", markersize=9, label="measured")
        # one label a point: layouts of one GPU count and one figure (2x2 and 4x1) share it, not overprint
        at: dict[tuple, list[tuple[str, bool]]] = {}
        for r in rs:
            y = t(r.predicted_ttt_min or r.measured_ttt_min)
            if y is None:
                continue
            refused = set((r.flags or "").split(";")) & set(REFUSED)
            text = r.layout + (f" ({r.global_batch})" if r.global_batch else "")
            if refused:
                text += ": not predicted (" + ", ".join(sorted(refused)) + ")"
            at.setdefault((r.gpus, round(y, 9)), []).append((text, bool(refused)))
        xs = sorted({r.gpus for r in rs})
        for (gpus, y), said in at.items():
            # the most GPUs' label runs to the left of its point: to the right it would leave the panel
            last = gpus == xs[-1] and len(xs) > 1
            label = ax.annotate(", ".join(text for text, _ in said), (gpus, y), fontsize=6, textcoords="offset points",
                                xytext=(-5, 4) if last else (5, 4), ha="right" if last else "left",
                                color="red" if any(bad for _, bad in said) else "0.2")
            label.set_in_layout(False)
        ax.set_xscale("log", base=2)
        ax.set_xlim(xs[0] / 1.3, xs[-1] * 1.6)
        ax.xaxis.set_major_locator(FixedLocator(xs))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_locator(NullLocator())
        if ax.lines and any(len(line.get_xdata()) for line in ax.lines):
            ax.margins(y=0.15)
            log_axis(ax)
        ax.set_xlabel(f"{device_axis(tf.group)} (global batch)")
        ax.set_ylabel(f"time to train ({unit})")
        ax.set_title(f"{tf.group.model}: predicted and measured time to train\n"
                     + textwrap.fill(f"{tf.group.system} · fitted on {tf.fitted_on or 'nothing'}", 80), fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    return fig


def write_figure(rows: list[TttPredictionRow], fits: list[TttFit], out, formats=("png",)) -> list:
    """prediction_ttt.png when a row has a number (prediction.csv holds the rows: throughput.write)."""
    if "png" not in formats or not any(r.predicted_ttt_min is not None or r.measured_ttt_min
                                       for r in rows):
        return []
    drawn = [tf for tf in fits if any(r.ttt_key == tf.group.ttt_key for r in rows)]
    figs = pages("prediction_ttt", drawn, lambda chunk: figure(rows, chunk), per=8)  # 2 columns: 4 rows a page
    return [atomic_write_png(fig, Path(out) / ("prediction_ttt.png" if i == 0 else f"prediction_ttt-{i + 1}.png"))
            for i, fig in enumerate(figs)]
