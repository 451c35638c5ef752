"""How far each layout's compute was from the hardware (the report's compute table): model TFLOP/s
per GPU, MFU against the datasheet peak and against `bench compute`'s measured peak, peak memory per
rank beside train/memory.py's estimate, energy per sample, and the per-GPU rate as a share of MLPerf's
published one for the run's accelerator and benchmark (the record's published_share and published_ref,
hvdbench.published; "no published rate for <accelerator>/<benchmark>" where there is none, and
"no published share: ..." where the record is not what ran: a GPU the sweep's hardware record does
not hold, FLOPs per sample not the flavor's network's); and the same MFU for published MLPerf logs.

    rows = compute_rows(runs, peaks)       # one row per scaling group and layout (runs.csv's columns)
    markdown(rows); write(rows, out, formats)  # compute.csv, compute.png, a summary.md section

A run's figures come from its own record (hvdbench.train.compute_window: FLOPs per sample counted on the
meta device, peaks from hvdbench.peaks). Published logs (hvdbench.results.mllog) carry no FLOPs:
theirs are hvdbench's own count of the benchmark's network at the reference's size (the model spec's
`published_flops`, from `hvdbench bench flops`; a unit test holds the two equal), their samples/s per accelerator what the
log trained over its training time, and the peak the bf16 one of the systems JSON's accelerator. A
submission trained in fp8 or fp4 can exceed the bf16 peak: the table says which peak it assumed.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from hvdbench.contracts import get_spec, model_names, specs
from hvdbench.peaks import device_entry, mfu, model_tflops, peak_tflops
from hvdbench.published import compare
from hvdbench.results.records.rows import SCALING_GROUP, ReportRow, ScalingGroup, beside
from hvdbench.results.render.tables import markdown_table, write_table
from hvdbench.results.stats.aggregate import device_word, on_cpus, placement, scaling_key

PUBLISHED_PRECISION = "bf16"  # the peak published MFU is taken against


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def _max(values) -> float | None:
    values = [v for v in values if v is not None]
    return max(values) if values else None


def _published(run) -> tuple[float | None, float | None, float | None, str]:
    """(FLOPs per sample, samples/s per accelerator, bf16 peak, note) of a published log's run: the
    model whose spec names the log's benchmark gives the FLOPs (ModelSpec.published_flops)."""
    spec = next((s for s in specs() if s.mlperf_benchmark == run.model and s.published_flops), None)
    if spec is None:
        return None, None, None, f"no FLOPs count for benchmark {run.model!r}"
    ref = spec.published_flops
    trained, unit, train_s = run.trained, run.trained_unit, run.train_s
    samples = (trained * ref.epoch_samples if unit == "epochs" and ref.epoch_samples else
               trained if unit == "samples" else None) if trained else None
    rate = samples / train_s / run.world_size if samples and train_s and run.world_size else run.throughput_per_gpu
    accelerator = run.accelerator
    peak = peak_tflops(accelerator, PUBLISHED_PRECISION)
    note = f"{spec.name}/{ref.flavor} per {ref.sample}; peak: {PUBLISHED_PRECISION}" + (
        "" if peak else f"; no datasheet peak for {accelerator or 'an unnamed accelerator'}")
    return ref.per_sample, rate, peak, note


def _beside_published(mine, device: str) -> tuple[float | None, str]:
    """(the runs' mean share of MLPerf's published per-GPU rate, where that rate comes from): the
    records' own, else (a record from before schema 7) hvdbench.published's for their rate; else
    (None, "no published rate for <accelerator>/<benchmark>")."""
    first = mine[0]
    benchmark = get_spec(first.model).benchmark if first.model in model_names() else first.model
    doubt = _not_as_recorded(mine, device)
    if doubt:
        return None, f"no published share: {doubt}"
    share, ref = _mean(r.published_share for r in mine), first.published_ref
    if share is None:
        share, ref = compare(device, benchmark, first.flavor, _mean(r.throughput_per_gpu for r in mine),
                             _mean(r.mlperf_samples_per_row for r in mine))
    if share is None:
        entry = device_entry(device)
        default = get_spec(first.model).default_flavor if first.model in model_names() else first.flavor
        flavor = f" ({first.flavor} flavor)" if first.flavor and first.flavor != default else ""
        accelerator = entry.name if entry else device or "an unnamed device"
        return None, f"no published rate for {accelerator}/{benchmark}{flavor}"
    return share, ref


# How far a run's FLOPs per sample may be from its flavor's count (spec.published_flops) and still be that
# network: the same network counts the same (a unit test holds them equal); a debug network is 100x off.
FLOPS_TOLERANCE = 1.25


def _not_as_recorded(mine, device: str) -> str:
    """Why the runs' record cannot be what ran, for the published share ('' when it can): a GPU the
    sweep's hardware record (sweep.json) does not hold, or FLOPs per sample that are not the flavor's
    network's (a share of the benchmark's published rate by a run of another network, or on CPUs,
    is no share of anything)."""
    first, said = mine[0], []
    entry = device_entry(device)
    if entry is not None and first.host_gpus is not None:
        held = [device_entry(name) for name in first.host_gpus.split(" | ") if name]
        if entry not in held:
            said.append(f"runs.csv names {device}, but sweep.json's hardware record has "
                        + (f"{first.host_gpus}" if held else "no GPU"))
    spec = get_spec(first.model) if first.model in model_names() else None
    counted = spec.published_flops if spec else None
    flops = _mean(r.flops_per_sample for r in mine)
    if counted and counted.flavor == first.flavor and flops and \
            not 1 / FLOPS_TOLERANCE <= flops / counted.flops_per_row <= FLOPS_TOLERANCE:
        said.append(f"its FLOPs per sample ({flops:.3g}) are not the {first.flavor} flavor's "
                    f"({counted.flops_per_row:.3g}): another network ran")
    return "; ".join(said)


@dataclass(frozen=True, kw_only=True)
class EfficiencyRow(ScalingGroup, ReportRow):
    """compute.csv: how far one group's layout was from the hardware. mfu against the datasheet peak,
    mfu_measured against `bench compute`'s; energy_to_train_j: time-to-accuracy runs' GPUs, run_start ->
    run_stop."""

    layout: str
    gpus: int
    runs: int
    throughput_per_gpu: float | None
    # training FLOPs per sample (forward + backward, counted on hvdbench's network), the runs' mean
    flops_per_sample: float | None
    model_tflops_per_gpu: float | None  # flops_per_sample x samples/s per GPU / 1e12
    peak_tflops: float | None  # the device's dense datasheet peak in the run's precision (published logs: bf16)
    mfu: float | None  # model_tflops_per_gpu / peak_tflops
    # bench compute's measured matrix-product peak at this layout, device and precision
    measured_peak_tflops: float | None
    mfu_measured: float | None  # model_tflops_per_gpu / measured_peak_tflops
    # GPUs: the most memory torch allocated on one rank over the timed window, the runs' largest
    mem_allocated_gb: float | None
    mem_reserved_gb: float | None  # GPUs: the most memory torch's allocator reserved on one rank, the runs' largest
    # CPUs: the largest resident set of one rank (ru_maxrss, the process's life), the runs' largest
    mem_resident_gb: float | None
    mem_estimate_gb: float | None  # hvdbench's estimate of one rank's memory (train/memory.py), the runs' mean
    energy_j_per_sample: float | None  # NVIDIA GPUs: NVML's energy of all the GPUs per sample trained, the runs' mean
    power_w_per_gpu: float | None  # NVIDIA GPUs: NVML's mean power per GPU, the runs' mean
    # time-to-accuracy runs: NVML's energy of all GPUs run_start -> run_stop, the runs' mean
    energy_to_train_j: float | None
    # MLPerf's samples a row held on average (packed BERT: its sequences); empty where one
    mlperf_samples_per_row: float | None
    # throughput_per_gpu / MLPerf's published per-GPU rate of the accelerator and benchmark
    published_share: float | None
    published_ref: str  # the published rate's round, system and precision, or why there is none
    note: str
    # where it ran: the plot's subtitle (plots.context), not compute.csv's columns
    nodes: int = beside(0)
    hosts: str = beside("")
    link: str = beside("")
    intra_link: str = beside("")
    cpu_model: str = beside("")


def compute_rows(runs, measured: dict | None = None) -> list[EfficiencyRow]:
    """One row per scaling group and layout with a compute figure (see the module's docstring);
    `measured`: (layout, device, dtype) -> `bench compute`'s TFLOP/s (hvdbench.results.report.load)."""
    measured = measured or {}
    groups: dict[tuple, list] = {}
    for r in runs:
        if r.status in ("success", "aborted"):
            groups.setdefault((scaling_key(r), r.layout), []).append(r)
    out = []
    for (key, layout), mine in groups.items():
        first = mine[0]
        published = first.sweep.startswith("mllog:")
        if published:
            figures = [_published(r) for r in mine]
            flops = figures[0][0]
            rate = _mean(f[1] for f in figures)
            peak, note = figures[0][2], figures[0][3]
            tflops = model_tflops(flops, rate)
        else:
            flops = _mean(r.flops_per_sample for r in mine)
            rate = _mean(r.throughput_per_gpu for r in mine)
            tflops = _mean(r.model_tflops_per_gpu for r in mine)
            peak, note = first.peak_tflops, ""
        device = first.devices.split(";")[0] if first.devices else ""
        share, ref = (None, "") if published else _beside_published(mine, device)
        per_row = None if published else _mean(r.mlperf_samples_per_row for r in mine)
        if per_row is not None and rate:  # rows holding several of MLPerf's samples (packed BERT)
            note = "; ".join(filter(None, (note, f"{per_row:.2f} sequences a row: {rate * per_row:,.1f} "
                                                 f"sequences/s per {'rank' if device == 'cpu' else 'GPU'}")))
        if flops is None and _max(r.mem_resident_gb for r in mine) is None:
            continue  # nothing of compute known (a log of a benchmark hvdbench does not count, rows before schema 6)
        bench_peak = measured.get((layout, device, first.precision))
        where = placement(mine)
        out.append(EfficiencyRow(
            **vars(ScalingGroup(*key)), layout=layout, gpus=first.world_size, runs=len(mine),
            throughput_per_gpu=rate, flops_per_sample=flops, model_tflops_per_gpu=tflops, peak_tflops=peak,
            mfu=mfu(tflops, peak), measured_peak_tflops=bench_peak, mfu_measured=mfu(tflops, bench_peak),
            mem_allocated_gb=_max(r.mem_allocated_gb for r in mine), mem_reserved_gb=_max(r.mem_reserved_gb for r in mine),
            mem_resident_gb=_max(r.mem_resident_gb for r in mine), mem_estimate_gb=_mean(r.mem_estimate_gb for r in mine),
            energy_j_per_sample=_mean(r.energy_j_per_sample for r in mine),
            power_w_per_gpu=_mean(r.power_w_per_gpu for r in mine),
            energy_to_train_j=_mean(r.energy_j for r in mine if r.mode == "time_to_accuracy"),
            mlperf_samples_per_row=per_row, published_share=share, published_ref=ref, note=note, nodes=where.nodes,
            hosts=where.hosts, link=where.link, intra_link=where.intra_link, cpu_model=where.cpu_model))
    return out


def mfu_of(rows: list[EfficiencyRow], group: ScalingGroup, layout: str) -> float | None:
    """The MFU of a scaling group's layout (the waterfall names its compute part's), or None."""
    for r in rows:
        if r.layout == layout and r.scaling_key == group.scaling_key:
            return r.mfu if r.mfu is not None else r.mfu_measured
    return None


def _fmt(value, spec: str, scale: float = 1.0) -> str:
    return "" if value is None else format(value * scale, spec)


def markdown(rows: list[EfficiencyRow]) -> str:
    if not rows:
        return ""
    unit = "rank" if all(on_cpus(r) for r in rows) else "GPU"  # a CPU run's "GPU" is a process
    # mode and batch: a model's throughput and time-to-accuracy runs, or two batches, read apart
    lines = [[r.system, r.model, r.flavor, r.engine, r.precision, _word("mode", r.mode) if r.mode else "",
              _batch(r), r.layout,
              _fmt(r.flops_per_sample, ".3g"), _fmt(r.model_tflops_per_gpu, ".3g"),
              _fmt(r.mfu, ".1f", 100), _fmt(r.mfu_measured, ".1f", 100),
              _fmt(r.mem_allocated_gb or r.mem_resident_gb, ".2f"), _fmt(r.mem_estimate_gb, ".2f"),
              _fmt(r.energy_j_per_sample, ".3g"), _fmt(r.power_w_per_gpu, ".0f"),
              _fmt(r.published_share, ".1f", 100), "; ".join(filter(None, (r.published_ref, r.note)))]
             for r in rows]
    return ("## Compute: how far from the hardware\n\nModel TFLOP/s per GPU (training FLOPs per sample, forward + "
            "backward as counted on hvdbench's network, x samples/s per GPU), MFU against the device's dense "
            "datasheet peak in the run's precision and against `bench compute`'s measured matrix-product peak, the "
            "most memory one rank held (GPU: allocated; CPU: resident) beside hvdbench's estimate, and (NVIDIA GPUs) "
            "energy per sample and mean power per GPU from NVML, and the rate per GPU as a share of MLPerf's published "
            "one for the accelerator and benchmark (its round, system and precision in the note). Empty: not "
            "measured.\n\n"
            + markdown_table(["system", "model", "flavor", "engine", "precision", "mode", f"batch/{unit}", "layout",
                              "FLOPs/sample",
                              f"TFLOP/s/{unit}", "MFU %", "MFU % (bench)", "memory GB", "estimate GB", "J/sample",
                              f"W/{unit}", "% of published", "note"], lines) + "\n")


def _batch(r: EfficiencyRow) -> str:
    """The batch per GPU (rank) of a row, with its gradient accumulation where there is one: '32', '32 x 4 accum'."""
    if not r.batch_per_gpu:
        return ""
    return f"{r.batch_per_gpu}" + (f" x {r.accum_steps} accum" if r.accum_steps and r.accum_steps > 1 else "")


def _word(key: str, value) -> str:
    """A group key's value as a bar's label says it ('time to accuracy', 'batch 32')."""
    if key == "mode":
        return str(value).replace("_", " ")
    return {"batch_per_gpu": "batch ", "accum_steps": "accum "}.get(key, "") + str(value)


def _share(r: EfficiencyRow) -> str:
    """The words beside a bar: MFU on GPUs (the datasheet's, else bench compute's peak); on CPUs, which
    have no datasheet peak here, the share of bench compute's measured one."""
    if on_cpus(r):
        return "" if r.mfu_measured is None else f"{100 * r.mfu_measured:.1f} % of bench peak"
    if r.mfu is not None:
        return f"MFU {100 * r.mfu:.1f} %"
    return "" if r.mfu_measured is None else f"MFU {100 * r.mfu_measured:.1f} % (bench peak)"


def figure(rows: list[EfficiencyRow]):
    """Model TFLOP/s per GPU (per rank on CPUs) of each group and layout as horizontal bars, one
    line of label each, MFU beside them; beside it, where any rank's memory was recorded, the memory
    per rank against the estimate. A label names only what differs between the bars (a throughput
    and a time-to-accuracy sweep of one model read apart), the title the rest and, under it, the
    devices, hosts and links (plots.context, as on every plot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from hvdbench.results.render.plots import context

    named = [list(zip(SCALING_GROUP, r.scaling_key)) for r in rows]  # (key, value) of each bar's group
    differ = [i for i in range(len(SCALING_GROUP)) if len({str(n[i][1]) for n in named}) > 1]
    labels = [" · ".join([*(_word(*n[i]) for i in differ if n[i][1] not in (None, "")), r.layout])
              for n, r in zip(named, rows)]
    same = [_word(k, v) for i, (k, v) in enumerate(named[0]) if i not in differ and k != "system"
            and v not in (None, "")]
    cpus = {on_cpus(r) for r in rows}
    unit = device_word(rows[0]) if len(cpus) == 1 else "GPU or CPU rank"
    held = [r.mem_allocated_gb or r.mem_resident_gb for r in rows]
    memory = any(h is not None for h in held)
    fig = Figure(figsize=(13 if memory else 8, 2.2 + 0.32 * len(rows)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2 if memory else 1, squeeze=False, sharey=True)[0]
    ys = list(range(len(rows)))[::-1]  # the first row on top, as in compute.csv
    left = axes[0]
    tflops = [r.model_tflops_per_gpu or 0 for r in rows]
    left.barh(ys, tflops, color="#4c72b0")
    for y, value, r in zip(ys, tflops, rows):
        if _share(r):
            left.annotate(_share(r), (value, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
    left.set_xlim(0, max(tflops + [1e-9]) * 1.35)  # room for the words beside the longest bar
    left.set_yticks(ys, labels, fontsize=7)
    beside = "" if not any(_share(r) for r in rows) else (
        " (MFU beside each bar)" if False in cpus else " (share of bench compute's peak beside each bar)")
    left.set_xlabel(f"model TFLOP/s per {unit}{beside}")
    if memory:
        right = axes[1]
        right.barh([y + 0.2 for y in ys], [h or 0 for h in held], 0.4, label="peak per rank", color="#55a868")
        right.barh([y - 0.2 for y in ys], [r.mem_estimate_gb or 0 for r in rows], 0.4, label="estimate",
                   color="#c4c4c4")
        right.set_xlabel("GB per rank (GPU: allocated; CPU: resident)")
        right.set_xlim(0, max([h or 0 for h in held] + [r.mem_estimate_gb or 0 for r in rows] + [1e-9]) * 1.45)
        right.legend(fontsize=8, loc="upper right")  # in the room right of the longest bar
    for ax in axes:
        ax.grid(True, axis="x", alpha=0.3)
    few, many = min(r.runs for r in rows), max(r.runs for r in rows)
    below = context(rows, runs=f"{few if few == many else f'{few}-{many}'} run(s) per bar")
    fig.suptitle(f"compute: {' · '.join(same)}" + (f"\n{below}" if below else ""), fontsize=9)
    return fig


def write(rows: list[EfficiencyRow], out: Path, formats=("csv", "png")) -> list[Path]:
    if not rows:
        return []
    return write_table(out, "compute", rows, EfficiencyRow.columns(), formats, lambda: figure(rows))
