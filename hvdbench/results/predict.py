"""Throughput of layouts not run, predicted from the runs that were: the 8x8 and 16x8 a team is
about to buy, from a 1x1, a 1x2 and a 2x1 measured here.

    hvdbench predict results/demo --layouts 2x2,4x1,8x8
    hvdbench report results/demo --predict 8x8,16x8

    fits = fit_groups(runs, allreduce_rows)           # one Fit per scaling group (model, batch, ...)
    rows = [predict(fit, 8, 8) for fit in fits]        # PREDICTION_COLUMNS

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
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from hvdbench.errors import ConfigError
from hvdbench.results.aggregate import parse_layout, scaling_key
from hvdbench.results.bench_tables import GRADIENT_BYTES_PER_PARAMETER, interpolate, parameters_of
from hvdbench.results.schema import SCALING_GROUP
from hvdbench.results.waterfall import mean_parts


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
    """Everything `predict` needs for one scaling group (SCALING_GROUP values in `group`)."""

    group: dict
    baseline: str  # the layout speed-ups are measured against
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
    measured: dict[str, float] = field(default_factory=dict)  # layout -> mean throughput
    fitted_on: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)  # layouts asked for that these runs cannot predict
    # layout -> seconds of one allreduce of the gradients, read off that layout's own bench curve
    # (`sweep --allreduce-bench` measures layouts cheaply, training runs or not); the link model
    # serves the layouts without one.
    measured_allreduce: dict[str, float] = field(default_factory=dict)

    def allreduce_s(self, nodes: int, gpus_per_node: int) -> tuple[float, str]:
        """(seconds, where from) of the step's allreduce on NxG: its own bench, else the link model."""
        n, layout = nodes * gpus_per_node, f"{nodes}x{gpus_per_node}"
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


# --- fitting ---------------------------------------------------------------------------------------

def _least_squares(x: list[tuple[float, float]], y: list[float]) -> tuple[float, float]:
    """(a, b) minimising sum (a x0 + b x1 - y)^2, both kept >= 0 (a cost cannot be negative): the
    2x2 normal equations, and the one-unknown fit when the other comes out negative."""
    s00 = sum(u * u for u, _ in x)
    s01 = sum(u * v for u, v in x)
    s11 = sum(v * v for _, v in x)
    t0 = sum(u * w for (u, _), w in zip(x, y))
    t1 = sum(v * w for (_, v), w in zip(x, y))
    det = s00 * s11 - s01 * s01
    if det > 0:
        a, b = (t0 * s11 - t1 * s01) / det, (t1 * s00 - t0 * s01) / det
        if a >= 0 and b >= 0:
            return a, b
    only_b = (0.0, max(t1 / s11, 0.0)) if s11 > 0 else (0.0, 0.0)
    only_a = (max(t0 / s00, 0.0), 0.0) if s00 > 0 else (0.0, 0.0)

    def err(ab):
        return sum((ab[0] * u + ab[1] * v - w) ** 2 for (u, v), w in zip(x, y))
    return min(only_b, only_a, key=err)


def fit_link(rows, kind: str) -> Link | None:
    """Latency and busbw of one link kind from `bench allreduce` rows (AllreduceRow) of layouts of
    that kind: Horovod's fp32 times, time = latency·2(n-1) + (2(n-1)/n)·bytes/busbw, least squares."""
    usable = [r for r in rows if r.impl == "horovod" and r.dtype == "fp32" and r.time_mean_s
              and r.world_size > 1 and link_kind(r.nodes) == kind]
    if not usable:
        return None
    x = [(2.0 * (r.world_size - 1), 2.0 * (r.world_size - 1) / r.world_size * r.bytes) for r in usable]
    latency, inverse_bw = _least_squares(x, [r.time_mean_s for r in usable])
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
            curves.setdefault(r.layout, []).append((r.bytes, r.time_mean_s))
    out = {}
    for layout, points in curves.items():
        t = interpolate(points, nbytes)
        if t is not None:
            out[layout] = t
    return out


def fit_group(runs, allreduce_rows=(), shared_machine: bool | None = None,
              fit_layouts: set[str] | None = None, layout_benches: bool = True) -> Fit | None:
    """A Fit from one scaling group's successful throughput runs that recorded a breakdown (None when
    the group has none, e.g. TensorFlow runs or published logs). `fit_layouts` limits the layouts the
    parameters are fitted on (the others are only compared with). `shared_machine`: None = an
    emulated cluster's runs (their link says `emulated`) share one machine. `layout_benches`: a
    layout's own allreduce bench, where there is one, gives its allreduce time (False: the link
    model predicts every layout's, to test the model)."""
    ok = [r for r in runs if r.status == "success" and r.mode == "throughput" and r.throughput]
    by_layout: dict[str, list] = {}
    for r in ok:
        by_layout.setdefault(r.layout, []).append(r)
    measured = {layout: statistics.fmean(r.throughput for r in rs) for layout, rs in by_layout.items()}
    fit_on = {layout: rs for layout, rs in by_layout.items()
              if (fit_layouts is None or layout in fit_layouts) and mean_parts(rs)}
    if not fit_on:
        return None
    first = next(iter(fit_on.values()))[0]
    base_layout = min(fit_on, key=lambda la: (by_layout[la][0].world_size, by_layout[la][0].nodes))
    base_runs = fit_on[base_layout]
    base = base_runs[0]
    if shared_machine is None:
        shared_machine = any(str(getattr(r, "link", "")).startswith("emulated") for r in ok)
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
    fit = Fit(group=dict(zip(SCALING_GROUP, scaling_key(base))), baseline=base_layout,
              base_gpus=base.world_size, base_throughput=measured[base_layout], samples_per_gpu_step=samples,
              t1=t1, ranks_per_machine_limit=limit, shared_machine=shared_machine, gradient_bytes=grad,
              measured=measured, fitted_on=tuple(sorted(fit_on, key=parse_layout)))

    if layout_benches:
        fit.measured_allreduce = layout_allreduce(allreduce_rows, grad)
    # Links: from the allreduce bench where there is one (of the fitted layouts only), else from
    # the runs' exposed communication.
    bench = [r for r in allreduce_rows if fit_layouts is None or r.layout in fit_layouts]
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
    ratios = []
    for layout, rs in fit_on.items():
        step = sum(parts[layout].values())
        ratios.append(measured[layout] * step / (rs[0].world_size * samples))
    fit.calibration = statistics.median(ratios)
    return fit


def fit_groups(runs, allreduce_rows=(), shared_machine: bool | None = None,
               fit_layouts: set[str] | None = None, layout_benches: bool = True) -> list[Fit]:
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

def predict(fit: Fit, nodes: int, gpus_per_node: int) -> dict:
    """One PREDICTION_COLUMNS row: the predicted step, throughput, speed-up and efficiency of NxG."""
    if nodes < 1 or gpus_per_node < 1:
        raise ConfigError(f"layout {nodes}x{gpus_per_node}: nodes and GPUs per node must be >= 1")
    n = nodes * gpus_per_node
    layout = f"{nodes}x{gpus_per_node}"
    link = fit.link(nodes)
    if n > 1 and link is None and layout not in fit.measured_allreduce:
        raise ConfigError(f"{fit.group['model']}: no {link_kind(nodes)}-node link was measured (run a "
                          f"{'2x1' if nodes > 1 else '1x2'} layout, or `sweep --allreduce-bench`) to predict {layout}")
    work = fit.work_s(nodes, gpus_per_node)
    allreduce, allreduce_from = fit.allreduce_s(nodes, gpus_per_node)
    exposed = fit.exposure.get(link_kind(nodes), 1.0) * allreduce
    step = work + exposed
    throughput = fit.calibration * n * fit.samples_per_gpu_step / step
    speedup = throughput / fit.base_throughput
    measured = fit.measured.get(layout)
    return {**fit.group, "layout": layout, "nodes": nodes, "gpus_per_node": gpus_per_node, "gpus": n,
            "baseline": fit.baseline, "step_ms": 1e3 * step, "work_ms": 1e3 * work,
            "allreduce_ms": 1e3 * allreduce, "exposed_comm_ms": 1e3 * exposed,
            "predicted_throughput": throughput, "speedup": speedup,
            "efficiency": speedup / (n / fit.base_gpus),
            "measured_throughput": measured,
            "predicted_vs_measured": throughput / measured if measured else None,
            "fitted": layout in fit.fitted_on,
            "link_kind": link_kind(nodes) if n > 1 else "", "busbw_gb_s": link.busbw_b_s / 1e9 if link else None,
            "latency_us": 1e6 * link.latency_s if link else None, "allreduce_from": allreduce_from,
            "exposure": fit.exposure.get(link_kind(nodes)) if n > 1 else None,
            "ranks_per_machine_limit": None if math.isinf(fit.ranks_per_machine_limit) else fit.ranks_per_machine_limit,
            "fitted_on": " ".join(fit.fitted_on)}


def parse_layouts(text: str) -> list[tuple[int, int]]:
    """'2x2,4x1, 8x8' -> [(2, 2), (4, 1), (8, 8)]; ConfigError naming a malformed one."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if part:
            out.append(parse_layout(part))
    if not out:
        raise ConfigError(f"{text!r}: give layouts as NxG, comma-separated (e.g. 2x2,8x8)")
    return out


def prediction_rows(fits: list[Fit], layouts: list[tuple[int, int]]) -> list[dict]:
    """Each fit's predictions for `layouts`, and for every layout it measured (to compare with). A
    layout these runs cannot predict (its link kind was never measured) goes to the fit's notes."""
    rows = []
    for fit in fits:
        wanted = list(dict.fromkeys([*map(parse_layout, fit.measured), *layouts]))
        for nodes, gpus in sorted(wanted, key=lambda ng: (ng[0] * ng[1], ng[0])):
            try:
                rows.append(predict(fit, nodes, gpus))
            except ConfigError as e:
                fit.notes.append(str(e))
    return rows


def describe(fit: Fit) -> str:
    """The fitted parameters in one line, for the report and the terminal."""
    limit = "no slow-down" if math.isinf(fit.ranks_per_machine_limit) else f"{fit.ranks_per_machine_limit:.2f} ranks"
    links = "; ".join(f"{k}-node busbw {v.busbw_b_s / 1e9:.3g} GB/s, latency {1e6 * v.latency_s:.0f} µs "
                      f"({v.source})" for k, v in sorted(fit.links.items()))
    return (f"fitted on {', '.join(fit.fitted_on)}: one rank's step without communication "
            f"{1e3 * fit.t1:.1f} ms; a {'machine shared by all nodes' if fit.shared_machine else 'node'} "
            f"holds {limit} before each slows; gradients {fit.gradient_bytes / 2**20:.1f} MiB; {links or 'no link'}; "
            f"exposed / allreduce: " + (", ".join(f"{k} {v:.2f}" for k, v in sorted(fit.exposure.items())) or "-")
            + f"; calibration {fit.calibration:.3f}")


def markdown(rows: list[dict], fits: list[Fit]) -> str:
    from hvdbench.results.tables import markdown_table

    if not rows:
        return ""

    def num(v, fmt="{:,.1f}"):
        return "–" if v is None else fmt.format(v)

    parts = ["## Predicted layouts\n",
             "step = work × max(1, ranks per machine / C) + exposure × ring allreduce of the "
             "gradients; fitted on the runs named below (hvdbench/results/predict.py). A measured "
             "layout shows predicted / measured.\n"]
    for fit in fits:
        rs = [r for r in rows if all(r[k] == fit.group[k] for k in SCALING_GROUP)]
        g = fit.group
        parts.append(f"### {g['model']} · {g['flavor']} · {g['framework']} · batch {g['batch_per_gpu']}/GPU"
                     f" — {g['system']}\n")
        parts.append(describe(fit) + ".\n")
        parts += [f"Not predicted: {note}.\n" for note in fit.notes]
        parts.append(markdown_table(
            ["layout", "GPUs", "step ms", "work ms", "exposed comm ms", "predicted samples/s", "speed-up",
             "efficiency", "measured", "predicted / measured"],
            [[r["layout"] + (" (fit)" if r["fitted"] else ""), r["gpus"], num(r["step_ms"]), num(r["work_ms"]),
              num(r["exposed_comm_ms"]), num(r["predicted_throughput"]), num(r["speedup"], "{:.2f}×"),
              num(None if r["efficiency"] is None else 100 * r["efficiency"], "{:.0f} %"),
              num(r["measured_throughput"]), num(r["predicted_vs_measured"], "{:.3f}")] for r in rs]) + "\n")
    return "\n".join(parts)


def figure(rows: list[dict], fits: list[Fit]):
    """Predicted (line) and measured (dots) throughput against GPUs, one panel per group."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5 * min(len(fits), 3), 4.0 * math.ceil(len(fits) / 3)), layout="constrained")
    FigureCanvasAgg(fig)
    for i, fit in enumerate(fits):
        ax = fig.add_subplot(math.ceil(len(fits) / 3), min(len(fits), 3), i + 1)
        rs = [r for r in rows if all(r[k] == fit.group[k] for k in SCALING_GROUP)]
        for nodes_one, style in ((True, "o-"), (False, "s--")):
            sel = sorted((r for r in rs if (r["nodes"] == 1) == nodes_one), key=lambda r: r["gpus"])
            if sel:
                ax.plot([r["gpus"] for r in sel], [r["predicted_throughput"] for r in sel], style, alpha=0.7,
                        label="predicted, one node" if nodes_one else "predicted, several nodes")
                # Layouts with one prediction (2x2 and 4x1 on an emulated cluster) share one label.
                points: dict[tuple, list[str]] = {}
                for r in sel:
                    points.setdefault((r["gpus"], round(r["predicted_throughput"], 6)), []).append(r["layout"])
                for (gpus, value), names in points.items():
                    ax.annotate(", ".join(names), (gpus, value), fontsize=7, textcoords="offset points",
                                xytext=(3, 3))
        meas = [r for r in rs if r["measured_throughput"] is not None]
        ax.plot([r["gpus"] for r in meas], [r["measured_throughput"] for r in meas], "k*", markersize=9,
                label="measured")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("GPUs (ranks)")
        ax.set_ylabel("samples/s")
        ax.set_title(f"{fit.group['model']} ({fit.group['flavor']}, batch {fit.group['batch_per_gpu']}/GPU)",
                     fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    return fig


def write(rows: list[dict], fits: list[Fit], out, formats=("csv", "png")) -> list:
    import os
    from pathlib import Path

    from hvdbench.results.schema import PREDICTION_COLUMNS, atomic_write_text
    from hvdbench.results.tables import to_csv

    written = []
    out = Path(out)
    if "csv" in formats:
        path = out / "prediction.csv"
        atomic_write_text(path, to_csv(rows, PREDICTION_COLUMNS))
        written.append(path)
    if "png" in formats and rows:
        path = out / "prediction.png"
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        figure(rows, fits).savefig(tmp, format="png", dpi=100)
        os.replace(tmp, path)
        written.append(path)
    return written
