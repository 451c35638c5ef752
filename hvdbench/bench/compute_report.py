"""`hvdbench bench compute`'s framework-free half: its rows, terminal table, CSV and plot (the timing
is hvdbench.frameworks.torch.bench_compute).

    rows = [row(run_id, started, rank, host, device, {"op": "matmul", "dtype": "bf16", ...}, layout)]
    print(render_table(rows)); write_outputs(rows, "results/demo")   # bench_compute.csv, bench_compute.png
"""

from __future__ import annotations

import os
from pathlib import Path

from hvdbench.bench.rows import render
from hvdbench.files import atomic_write_png
from hvdbench.results.records.schema import ComputeRow
from hvdbench.results.records.store import COMPUTE_CSV, append_or_rescue

CSV_NAME = COMPUTE_CSV


def row(run_id: str, started: str, rank: int, host: str, device: str, figures: dict, layout: dict) -> ComputeRow:
    """One rank's figures of one op as a bench_compute.csv row, with vs_peak where both are known."""
    r = ComputeRow(run_id=run_id, started_at=started, rank=rank, host=host, device=device, **figures, **layout)
    if r.tflops is not None and r.peak_tflops:
        r.vs_peak = r.tflops / r.peak_tflops
    return r


def table(rows: list[ComputeRow]):
    from rich.box import ASCII2  # ASCII: mpirun's output forwarding may split a line mid-character
    from rich.table import Table

    r0 = rows[0]
    t = Table(title=f"compute: {r0.world_size} rank(s) ({r0.layout}), per rank",
              caption="matmul: 2 n^3 FLOPs per n x n x n product; copy: bytes read + written; "
                      "peak: the datasheet's dense peak (hvdbench.peaks)", caption_justify="left", box=ASCII2)
    for name in ("rank", "device", "op", "dtype", "size", "TFLOP/s", "GB/s", "peak", "of peak", "note"):
        t.add_column(name, justify="left" if name in ("device", "op", "dtype", "note") else "right")
    for r in rows:
        t.add_row(str(r.rank), r.device, r.op, r.dtype, f"{r.size:,}",
                  f"{r.tflops:,.3g}" if r.tflops is not None else "",
                  f"{r.gb_s:,.1f}" if r.gb_s is not None else "",
                  f"{r.peak_tflops:g}" if r.peak_tflops else "",
                  f"{100 * r.vs_peak:.0f} %" if r.vs_peak is not None else "", r.note)
    return t


def render_table(rows: list[ComputeRow]) -> str:
    return render(table(rows))


def plot(rows: list[ComputeRow], path: Path) -> Path:
    """TFLOP/s per precision, one bar per rank, with the datasheet peak as a marker where known."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mm = [r for r in rows if r.op == "matmul" and r.tflops is not None]
    dtypes = list(dict.fromkeys(r.dtype for r in mm))
    ranks = sorted({r.rank for r in mm})
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / max(1, len(ranks))
    for k, rank in enumerate(ranks):
        mine = {r.dtype: r for r in mm if r.rank == rank}
        xs = [i + k * width for i, d in enumerate(dtypes) if d in mine]
        ax.bar(xs, [mine[d].tflops for d in dtypes if d in mine], width, label=f"rank {rank}")
        peaks = [(i + k * width, mine[d].peak_tflops) for i, d in enumerate(dtypes) if d in mine and mine[d].peak_tflops]
        if peaks:
            ax.scatter(*zip(*peaks), marker="_", s=300, color="black", label="datasheet peak" if k == 0 else None)
    ax.set_xticks([i + width * (len(ranks) - 1) / 2 for i in range(len(dtypes))], dtypes)
    ax.set_ylabel("TFLOP/s per rank")
    devices = ", ".join(dict.fromkeys(r.device for r in rows))
    ax.set_title(f"bench compute: {devices} ({rows[0].layout})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    atomic_write_png(fig, path)
    plt.close(fig)
    return path


def write_outputs(rows: list[ComputeRow], out: str | os.PathLike) -> list[Path]:
    """Append to OUT/bench_compute.csv (saved elsewhere, and said where, if it cannot be written)
    and draw OUT/bench_compute_<layout>.png."""
    written = [append_or_rescue(Path(out) / CSV_NAME, rows)]
    if any(r.tflops is not None for r in rows):
        written.append(plot(rows, Path(out) / f"bench_compute_{rows[0].layout}.png"))
    return written
