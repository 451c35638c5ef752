"""A study's speed-up across models: the table the published suites print (speed-up at each GPU
count against one GPU, one row per model), beside the published figures the study file gives.

    rows = speedup_rows(tables, published={"speedup": {"resnet50": {"4": 4.76}}})
    write(rows, Path("report"), study="dgx1-mlperf-v05-suite")   # study_speedup.csv, .png; -> Markdown

Per model and GPU count the layout with the fewest nodes is taken (the scale-up layout; the layout
table compares it with the scale-out ones). The basis is time to train (MLPerf's score, as the
published suites measure speed-up) where the model has time-to-train rows, else throughput. Speed-up
is against the model's baseline layout (the smallest GPU count run, see hvdbench.results.stats.aggregate).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hvdbench.results.records.rows import ReportRow, beside
from hvdbench.results.render.tables import markdown_table, write_table
from hvdbench.results.stats.aggregate import ScalingRow, Tables, TimeToTrainRow

TTT_BASIS, THROUGHPUT_BASIS = "time to train", "throughput"


def _published(published: dict, kind: str, model: str, gpus: int):
    figures = (published or {}).get(kind, {}).get(model, {})
    value = figures.get(str(gpus), figures.get(gpus))
    return None if value is None else float(value)


@dataclass(frozen=True, kw_only=True)
class StudySpeedupRow(ReportRow):
    """study_speedup.csv: one row per model group and GPU count, the fewest-node layout of that count,
    from time to train where the model has it, else throughput."""

    system: str
    model: str
    flavor: str
    framework: str
    precision: str
    basis: str  # TTT_BASIS | THROUGHPUT_BASIS
    gpus: int
    layout: str
    baseline: str
    speedup: float | None
    efficiency: float | None
    published_speedup: float | None  # the study file's published speed-up at this GPU count
    vs_published: float | None  # speedup / published_speedup
    ttt_min: float | None
    published_ttt_min: float | None  # the study file's published time to train at this GPU count
    throughput_mean: float | None
    throughput_2sigma: float | None
    hosts: str
    link: str
    # the scaling table's flags of the same point (FLAGS; ';'-joined: the Markdown's, scaling.csv has them)
    flags: str = beside("")
    # for the plot's subtitle (plots.context), not study_speedup.csv's columns
    nodes: int = beside(0)
    runs: int = beside(0)
    intra_link: str = beside("")
    cpu_model: str = beside("")


def speedup_rows(tables: Tables, published: dict | None = None) -> list[StudySpeedupRow]:
    """One row per model group and GPU count (see the module docstring)."""
    out = []
    groups: dict[tuple, tuple[str, list]] = {}
    for basis, rows in ((TTT_BASIS, tables.time_to_train), (THROUGHPUT_BASIS, tables.scaling)):
        for row in rows:
            value = row.ttt_min if basis == TTT_BASIS else row.throughput_mean
            # Time to train wins over throughput: a model with both is on the time-to-train basis.
            if row.gpus and value is not None and groups.get(row.ttt_key, (basis,))[0] == basis:
                groups.setdefault(row.ttt_key, (basis, []))[1].append(row)
    for key, (basis, rows) in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        best: dict[int, ScalingRow | TimeToTrainRow] = {}
        for row in sorted((r for r in rows if r.gpus), key=lambda r: (r.gpus, r.nodes)):
            best.setdefault(row.gpus, row)
        for gpus, row in sorted(best.items()):
            model = row.model
            pub = _published(published, "speedup", model, gpus)
            throughput = row if isinstance(row, ScalingRow) else None  # a time-to-train row has no throughput
            out.append(StudySpeedupRow(
                system=row.system, model=model, flavor=row.flavor, framework=row.framework, precision=row.precision,
                basis=basis, gpus=gpus, layout=row.layout, baseline=row.baseline or "", speedup=row.speedup,
                efficiency=row.efficiency, published_speedup=pub,
                vs_published=row.speedup / pub if pub and row.speedup is not None else None,
                ttt_min=None if throughput else row.ttt_min,
                published_ttt_min=_published(published, "time_to_train_min", model, gpus),
                throughput_mean=throughput.throughput_mean if throughput else None,
                throughput_2sigma=throughput.throughput_2sigma if throughput else None,
                hosts=row.hosts or "", link=row.link or "", flags=throughput.flags if throughput else "",
                nodes=row.nodes, runs=row.runs))
    return out


def markdown(rows: list[StudySpeedupRow], study: str, reproduces: str = "") -> str:
    """The cross-model table: a row per model, a column per GPU count ('3.9× (published 4.76×)')."""
    if not rows:
        return ""
    counts = sorted({r.gpus for r in rows})
    models: dict[tuple, dict[int, StudySpeedupRow]] = {}
    for r in rows:
        models.setdefault((r.model, r.flavor, r.framework, r.precision, r.basis, r.baseline),
                          {})[r.gpus] = r

    def cell(r):
        if r is None:
            return "–"
        text = "–" if r.speedup is None else f"{r.speedup:.2f}× ({r.layout})"
        # the scaling table's check of the same point: a noisy 2.40x is no 2.40x
        text += f" · check: {', '.join(r.flags.split(';'))}" if r.flags else ""
        return text + (f" · published {r.published_speedup:.2f}×" if r.published_speedup else "")

    lines = [[m, " · ".join(str(x) for x in (flavor, framework, precision) if x), basis, baseline or "–",
              *(cell(by_gpus.get(g)) for g in counts)]
             for (m, flavor, framework, precision, basis, baseline), by_gpus in models.items()]
    unit = "CPU rank" if any(str(r.system or "").lower() == "cpu" for r in rows) else "GPU"
    header = ["model", "run", "speed-up from", "vs", *(f"{g} {unit}{'s' if g > 1 else ''}" for g in counts)]
    intro = f"Study `{study}`" + (f" — {reproduces}" if reproduces else "") + "."
    return (f"## Speed-up across models\n\n{intro} Per GPU count the layout with the fewest nodes "
            "(in brackets); speed-up against the model's smallest layout (`vs`); `check`: the scaling table's "
            "flags of the same point (their meaning under Flags).\n\n"
            + markdown_table(header, lines) + "\n")


def figure(rows: list[StudySpeedupRow], study: str):
    """Speed-up vs GPUs, a line per model, the ideal, and published figures as open markers."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    from hvdbench.results.render.plots import context

    fig = Figure(figsize=(7.5, 5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    models: dict[str, list[StudySpeedupRow]] = {}
    for r in rows:
        models.setdefault(f"{r.model} ({r.basis})", []).append(r)
    xs = sorted({r.gpus for r in rows})
    for label, rs in models.items():
        rs = [r for r in rs if r.speedup is not None]
        line, = ax.plot([r.gpus for r in rs], [r.speedup for r in rs], marker="o", label=label)
        pub = [r for r in rs if r.published_speedup]
        if pub:
            ax.plot([r.gpus for r in pub], [r.published_speedup for r in pub], linestyle=":", marker="o",
                    markerfacecolor="none", color=line.get_color(), label=f"{label.split(' (')[0]}, published")
    base = min(xs) if xs else 1
    ax.plot(xs, [x / base for x in xs], "k--", linewidth=1, label="ideal (linear)")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(xs))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())
    cpus = any(str(r.system or "").lower() == "cpu" for r in rows)
    ax.set_xlabel("CPU ranks (processes; no GPU)" if cpus else "GPUs")
    ax.set_ylabel("speed-up (against each model's smallest layout)")
    below = context(rows)  # devices, runs per point, hosts, link: as under every plot
    ax.set_title(f"study {study}: speed-up across models" + (f"\n{below}" if below else ""), fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def write(rows: list[StudySpeedupRow], out: Path, study: str, formats=("csv", "png")) -> list[Path]:
    drawn = any(r.speedup is not None for r in rows)
    return write_table(out, "study_speedup", rows, StudySpeedupRow.columns(), formats,
                       (lambda: figure(rows, study)) if drawn else None)
