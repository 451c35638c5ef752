"""`hvdbench bench allreduce`, framework-neutral part: the sweep over message sizes, the
Horovod/MPI comparison, the terminal table and the busbw plot. Its CSV row, `AllreduceRow`, is
declared in `hvdbench.results.records.schema` with every other CSV's columns (and importable from here).

    horovodrun -np 2 -H localhost:2 --mpi hvdbench bench allreduce --max-bytes 16777216 --out results/demo

The worker (`hvdbench.frameworks.torch.bench_allreduce`) supplies a *timer* per implementation,
`timer(dtype, nbytes, iters, warmup) -> (seconds per operation on this rank, wrong elements)`, and a
*gather* (an allgather of a Python object over the ranks); `sweep` does the rest identically for
Horovod and for raw MPI, so the two columns differ only in the library being timed.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Callable

from hvdbench.bench import formulas as F
from hvdbench.bench.rows import run_identity
from hvdbench.errors import HvdbenchError
from hvdbench.files import atomic_write_png
from hvdbench.output import human_bytes
from hvdbench.results.records.schema import AllreduceRow
from hvdbench.results.records.store import ALLREDUCE_CSV, append_rows

CSV_NAME = ALLREDUCE_CSV
IMPLS = ("horovod", "torch", "mpi")  # torch: torch.distributed all_reduce (Gloo)

DEFINITIONS = (
    "time: mean over ranks of each rank's average time per allreduce (min and max over ranks beside it); "
    "algbw = bytes / time; busbw = algbw x 2(n-1)/n: the definitions of nccl-tests "
    "(doc/PERFORMANCE.md); GB/s = 1e9 B/s. Horovod/MPI = MPI time / Horovod time "
    "(= ratio of their bandwidths). In-place sum; each size is checked once before timing "
    "(wrong = elements differing from the expected sum).")

Timer = Callable[[str, int, int, int], tuple[float, int]]
Gather = Callable[[object], list]


def new_run(layout: dict) -> AllreduceRow:
    """The identity and layout shared by every row of one `bench allreduce` run."""
    run_id, started_at = run_identity()
    return AllreduceRow(run_id=run_id, started_at=started_at, **layout)


def plan(dtypes: list[str], min_bytes: int, max_bytes: int) -> list[tuple[str, int]]:
    """Every (dtype, message size) a run measures, in order."""
    return [(dtype, size) for dtype in dtypes for size in F.message_sizes(min_bytes, max_bytes, dtype)]


def sweep(base: AllreduceRow, impl: str, timer: Timer, gather: Gather, points: list[tuple[str, int]],
          iters: int, warmup_iters: int, budget_bytes: int,
          on_row: Callable[[AllreduceRow], None] = lambda row: None) -> list[AllreduceRow]:
    """Time `impl` at every point. Every rank calls this with the same arguments (the timers are
    collectives); every rank gets the same rows; `on_row` sees each as it is measured."""
    rows = []
    for dtype, nbytes in points:
        timed, warm = F.iterations(nbytes, iters, warmup_iters, budget_bytes)
        seconds, wrong = timer(dtype, nbytes, timed, warm)
        per_rank = gather((seconds, wrong))
        mean, low, high = F.across_ranks([s for s, _ in per_rank])
        ab = F.algbw(nbytes, mean)
        rows.append(replace(base, impl=impl, dtype=dtype, bytes=nbytes, elements=nbytes // F.DTYPE_BYTES[dtype],
                            iters=timed, warmup_iters=warm, time_mean_s=mean, time_min_s=low,
                            time_max_s=high, algbw_gb_s=ab, busbw_gb_s=F.busbw(ab, len(per_rank)),
                            wrong=sum(w for _, w in per_rank)))
        on_row(rows[-1])
    return rows


def line(r: AllreduceRow) -> str:
    """One measured point, printed as it completes (the run's progress)."""
    return (f"{r.impl:>7} {r.dtype} {human_bytes(r.bytes):>8}: {_us(r.time_mean_s):>12} us/op "
            f"(ranks {_us(r.time_min_s)}-{_us(r.time_max_s)}), algbw {_g(r.algbw_gb_s)} GB/s, "
            f"busbw {_g(r.busbw_gb_s)} GB/s, {r.iters} iters" + (f", {r.wrong} WRONG" if r.wrong else ""))


def compare(rows: list[AllreduceRow]) -> list[AllreduceRow]:
    """Set vs_mpi on each Horovod row that has an MPI row at the same dtype and size."""
    mpi = {(r.dtype, r.bytes): r for r in rows if r.impl == "mpi"}
    out = []
    for r in rows:
        ref = mpi.get((r.dtype, r.bytes))
        if r.impl == "horovod" and ref and r.time_mean_s:
            r = replace(r, vs_mpi=ref.time_mean_s / r.time_mean_s)
        out.append(r)
    return out


# --- output ----------------------------------------------------------------------------------

def table(rows: list[AllreduceRow], title: str = "allreduce"):
    """A rich Table: one line per (dtype, size), Horovod beside torch.distributed and MPI ("-" for
    what was not measured: Horovod where it is not installed, MPI outside an MPI job)."""
    from rich.box import ASCII2  # ASCII: mpirun's output forwarding may split a line mid-character
    from rich.table import Table

    t = Table(title=title, caption=DEFINITIONS, caption_justify="left", box=ASCII2)
    for name in ("size", "dtype", "iters", "hvd time us", "min-max us", "hvd algbw GB/s",
                 "hvd busbw GB/s", "torch busbw GB/s", "mpi time us", "mpi busbw GB/s", "hvd/torch", "hvd/mpi",
                 "wrong"):
        t.add_column(name, justify="left" if name in ("size", "dtype") else "right")
    by = {impl: {(r.dtype, r.bytes): r for r in rows if r.impl == impl} for impl in IMPLS}
    for key in dict.fromkeys((r.dtype, r.bytes) for r in rows):  # Horovod's may be missing (not installed)
        h, o, m = (by[impl].get(key) for impl in IMPLS)
        measured = [x for x in (h, o, m) if x]
        t.add_row(human_bytes(key[1]), key[0], str(measured[0].iters), _us(h and h.time_mean_s),
                  f"{_us(h.time_min_s)}-{_us(h.time_max_s)}" if h else "-", _g(h and h.algbw_gb_s),
                  _g(h and h.busbw_gb_s), _g(o and o.busbw_gb_s), _us(m and m.time_mean_s), _g(m and m.busbw_gb_s),
                  f"{o.time_mean_s / h.time_mean_s:.2f}" if h and o and o.time_mean_s and h.time_mean_s else "-",
                  f"{h.vs_mpi:.2f}" if h and h.vs_mpi is not None else "-",
                  str(sum(x.wrong for x in measured)))
    return t


def _us(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:,.1f}"


def _g(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def figure(rows: list[AllreduceRow], link: str = "", devices: str = ""):
    """busbw vs message size, log-log, one line per (implementation, dtype). With one rank busbw is
    0 by definition, so algbw is drawn instead (and the axis says so). Under the title, as under
    every plot of the report: the devices (when the caller knows them), the runs, the hosts and the
    inter-node link (`link`: the sweep's, see write_outputs)."""
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend

    from hvdbench.results.stats.aggregate import Where, where_ran

    world = rows[0].world_size if rows else 0
    value = "busbw_gb_s" if world > 1 else "algbw_gb_s"
    fig = Figure(figsize=(7, 5), layout="constrained")  # room for the title's lines
    ax = fig.add_subplot()
    for impl in IMPLS:
        for dtype in F.DTYPE_BYTES:
            series = sorted((r.bytes, getattr(r, value)) for r in rows if r.impl == impl and r.dtype == dtype)
            series = [(b, v) for b, v in series if v and v > 0]
            if series:
                ax.plot(*zip(*series), marker="o", markersize=3,
                        linestyle={"horovod": "-", "torch": ":"}.get(impl, "--"),
                        label=f"{impl} {dtype}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(("bus" if value == "busbw_gb_s" else "algorithm") + " bandwidth (GB/s)")
    if rows:
        r = rows[0]
        runs = len({row.run_id for row in rows})
        first = ([f"devices: {devices}"] if devices else []) + [f"{runs} run{'s' if runs != 1 else ''}"]
        where = where_ran([Where(hosts=row.hosts, nodes=row.nodes, link=link) for row in rows])
        ax.set_title(f"allreduce, {r.world_size} ranks ({r.layout}, {r.controller or 'no'} controller)\n"
                     + " · ".join(first) + (f"\n{where.replace(' · ', chr(10))}" if where else ""), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[1]:
        ax.legend()
    return fig


def plot(rows: list[AllreduceRow], path: Path, link: str = "", devices: str = "") -> Path:
    """Write `figure(rows)` as a PNG (atomically)."""
    return atomic_write_png(figure(rows, link, devices), path)


def write_outputs(rows: list[AllreduceRow], out: Path) -> list[Path]:
    """Append the rows to OUT/bench_allreduce.csv and draw OUT/bench_allreduce_<layout>_<controller>.png
    (naming the inter-node link OUT/sweep.json records, when OUT is a sweep's folder)."""
    from hvdbench.results.records.store import SWEEP_RECORD, sweep_link

    out = Path(out)
    csv_path = append_rows(out / CSV_NAME, rows)
    r = rows[0]
    try:
        link = sweep_link(out / SWEEP_RECORD)
    except HvdbenchError:  # a damaged sweep.json is the sweep's to report, not the bench's
        link = ""
    png = plot(rows, out / f"bench_allreduce_{r.layout}_{r.controller or 'single'}.png", link)
    return [csv_path, png]


def ratio_at(rows: list[AllreduceRow], dtype: str, nbytes: int) -> float | None:
    """Horovod/MPI bandwidth ratio at one size (None when either was not measured)."""
    for r in rows:
        if r.impl == "horovod" and r.dtype == dtype and r.bytes == nbytes:
            return r.vs_mpi
    return None


def summary(rows: list[AllreduceRow]) -> list[str]:
    """One line per dtype: Horovod/MPI at 1 MiB, 16 MiB and 256 MiB where measured."""
    lines = []
    for dtype in F.DTYPE_BYTES:
        parts = [f"{human_bytes(n)} {ratio_at(rows, dtype, n):.2f}" for n in (F.MIB, 16 * F.MIB, 256 * F.MIB)
                 if ratio_at(rows, dtype, n) is not None and not math.isnan(ratio_at(rows, dtype, n))]
        if parts:
            lines.append(f"Horovod/MPI bandwidth {dtype}: " + ", ".join(parts))
        tor = {r.bytes: r.time_mean_s for r in rows if r.impl == "torch" and r.dtype == dtype and r.time_mean_s}
        hvd = {r.bytes: r.time_mean_s for r in rows if r.impl == "horovod" and r.dtype == dtype and r.time_mean_s}
        parts = [f"{human_bytes(n)} {tor[n] / hvd[n]:.2f}" for n in (F.MIB, 16 * F.MIB, 256 * F.MIB)
                 if n in tor and n in hvd]
        if parts:
            lines.append(f"Horovod/torch.distributed bandwidth {dtype}: " + ", ".join(parts))
    return lines
