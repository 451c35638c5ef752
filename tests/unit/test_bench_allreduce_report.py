"""The allreduce sweep, comparison, CSV rows, table and plot, driven by timers with fixed times
(the real Horovod and MPI timers run in tests/integration/test_bench.py)."""

import csv
import dataclasses

import pytest
from click.testing import CliRunner

from hvdbench.bench import allreduce_report as AR
from hvdbench.bench import formulas as F
from hvdbench.bench.formulas import busbw
from hvdbench.cli.main import cli
from hvdbench.results.records.schema import SchemaError
from hvdbench.results.records.store import append_rows, read_rows

LAYOUT = {"world_size": 4, "nodes": 2, "gpus_per_node": 2, "layout": "2x2", "scale": "out",
          "hosts": "n1;n2", "controller": "mpi", "launcher": "horovodrun"}


def fixed_timer(per_byte_s: float, overhead_s: float, calls: list):
    def timer(dtype, nbytes, iters, warmup):
        calls.append((dtype, nbytes, iters, warmup))
        return overhead_s + per_byte_s * nbytes, 0
    return timer


def ranks(n: int, skew: float):
    """An allgather over n ranks whose times differ by `skew` (rank r reports t * (1 + r*skew))."""
    return lambda value: [(value[0] * (1 + r * skew), value[1]) for r in range(n)]


def run_both():
    base = AR.new_run(LAYOUT)
    points = AR.plan(["fp32", "fp16"], 4, 1 << 20)
    calls = []
    counts = F.Iterations(20, 5, 1 << 30)
    hvd = AR.sweep(base, "horovod", fixed_timer(2e-10, 1e-4, calls), ranks(4, 0.1), points, counts)
    mpi = AR.sweep(base, "mpi", fixed_timer(1e-10, 1e-5, calls), ranks(4, 0.0), points, counts)
    return AR.compare(hvd + mpi), calls


def test_sweep_rows_follow_the_formulas_exactly():
    rows, calls = run_both()
    hvd = [r for r in rows if r.impl == "horovod" and r.dtype == "fp32"]
    assert [r.bytes for r in hvd] == [4 << k for k in range(19)]
    for r in hvd:
        per_rank = [(1e-4 + 2e-10 * r.bytes) * (1 + k * 0.1) for k in range(4)]
        assert r.time_mean_s == pytest.approx(sum(per_rank) / 4)
        assert (r.time_min_s, r.time_max_s) == (pytest.approx(per_rank[0]), pytest.approx(per_rank[-1]))
        assert r.algbw_gb_s == r.bytes / r.time_mean_s / 1e9
        assert r.busbw_gb_s == busbw(r.algbw_gb_s, 4) == r.algbw_gb_s * 1.5
        assert r.elements == r.bytes // 4 and r.layout == "2x2" and r.run_id == rows[0].run_id
    fp16 = [r for r in rows if r.impl == "mpi" and r.dtype == "fp16"]
    assert fp16[0].bytes == 4 and fp16[0].elements == 2
    assert ("fp32", 4, 20, 5) in calls


def test_compare_sets_horovod_over_mpi_on_horovod_rows_only():
    rows, _ = run_both()
    for r in rows:
        if r.impl == "mpi":
            assert r.vs_mpi is None
        else:
            ref = next(m for m in rows if m.impl == "mpi" and (m.dtype, m.bytes) == (r.dtype, r.bytes))
            assert r.vs_mpi == pytest.approx(ref.time_mean_s / r.time_mean_s)
            assert r.vs_mpi == pytest.approx(r.busbw_gb_s / ref.busbw_gb_s)
            assert 0 < r.vs_mpi < 1  # the fixed Horovod timer is slower
    assert AR.ratio_at(rows, "fp32", 1 << 20) == pytest.approx(
        (1e-5 + 1e-10 * 2**20) / ((1e-4 + 2e-10 * 2**20) * 1.15))
    assert AR.summary(rows)[0].startswith("Horovod/MPI bandwidth fp32: 1 MiB 0.")


def test_outputs_append_csv_and_draw_a_line_per_impl_and_dtype(tmp_path):
    rows, _ = run_both()
    written = AR.write_outputs(rows, tmp_path)
    assert [p.name for p in written] == ["bench_allreduce.csv", "bench_allreduce_2x2_mpi.png"]
    assert written[1].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    AR.write_outputs(rows[:3], tmp_path)  # a second run appends; the header is written once
    back = read_rows(tmp_path / AR.CSV_NAME, AR.AllreduceRow)
    assert back[:len(rows)] == rows and back[len(rows):] == rows[:3]
    with open(tmp_path / AR.CSV_NAME) as f:
        header = next(csv.reader(f))
    for column in ("world_size", "nodes", "gpus_per_node", "layout", "hosts", "controller", "busbw_gb_s"):
        assert column in header


def test_plot_draws_busbw_vs_size_per_impl_and_dtype():
    rows, _ = run_both()
    ax = AR.figure(rows).axes[0]
    line = next(l for l in ax.get_lines() if l.get_label() == "mpi fp16")
    assert list(line.get_xdata()) == [2 << k for k in range(1, 20)]
    assert list(line.get_ydata()) == [r.busbw_gb_s for r in rows if r.impl == "mpi" and r.dtype == "fp16"]
    assert ax.get_legend_handles_labels()[1] == ["horovod fp32", "horovod fp16", "mpi fp32", "mpi fp16"]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log" and "bus" in ax.get_ylabel()


def test_table_shows_horovod_beside_mpi():
    from rich.console import Console

    rows, _ = run_both()
    console = Console(width=200, record=True)
    console.print(AR.table(rows))
    text = console.export_text()
    assert "1 MiB" in text and "nccl-tests" in text and "hvd/mpi" in text
    assert len([line for line in text.splitlines() if "| fp16" in line]) == 19


def test_table_without_horovod_shows_torch_and_mpi():
    """Where Horovod is not installed the bench times torch.distributed and MPI: each size is a line
    with Horovod's columns "-" (the table was keyed on Horovod's rows and came out empty)."""
    from rich.console import Console

    rows, _ = run_both()
    torch_rows = [dataclasses.replace(r, impl="torch", vs_mpi=None) for r in rows if r.impl == "horovod"]
    without = AR.compare(torch_rows + [r for r in rows if r.impl == "mpi"])
    console = Console(width=220, record=True)
    console.print(AR.table(without))
    fp16 = [line for line in console.export_text().splitlines() if "| fp16" in line]
    assert len(fp16) == 19
    cells = [c.strip() for c in fp16[0].split("|")]
    assert cells[4] == "-" and cells[8] not in ("", "-") and cells[9] not in ("", "-")  # hvd time; torch, mpi


def test_rows_of_another_schema_version_are_refused(tmp_path):
    rows, _ = run_both()
    path = append_rows(tmp_path / "b.csv", rows[:1])
    text = path.read_text().replace(",1\n", ",99\n")
    path.write_text(text)
    with pytest.raises(SchemaError, match="schema_version 99"):
        read_rows(path, AR.AllreduceRow)


def test_appending_to_a_file_of_other_columns_fails_and_keeps_it(tmp_path):
    path = tmp_path / "bench_allreduce.csv"
    path.write_text("a,b\n1,2\n")
    rows, _ = run_both()
    with pytest.raises(SchemaError, match="missing column"):
        append_rows(path, rows)
    assert path.read_text() == "a,b\n1,2\n"


@pytest.mark.parametrize("args, message", [
    (["--max-bytes", "3M"], "--max-bytes 3145728: must be a power of two"),
    (["--dtype", "int8"], "int8: choose from fp32,fp16"),
    (["--max-bytes", "lots"], "'lots' is not a size"),
])
def test_cli_rejects_bad_options_before_starting_horovod(args, message, tmp_path):
    result = CliRunner().invoke(cli, ["bench", "allreduce", *args, "--out", str(tmp_path)])
    assert result.exit_code != 0
    assert message in result.output
    assert not any(tmp_path.iterdir())


def test_byte_sizes():
    from hvdbench.cli.bench import ByteSize

    convert = ByteSize().convert
    assert [convert(v, None, None) for v in ("4", "64K", "16M", "256MiB", "1G", "8B")] == \
        [4, 65536, 16 << 20, 256 << 20, 1 << 30, 8]


def test_a_run_is_named_by_its_start_time():
    import re
    from datetime import datetime

    base = AR.new_run(LAYOUT)
    assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{8}", base.run_id)
    started = datetime.fromisoformat(base.started_at)
    assert started.utcoffset().total_seconds() == 0 and base.run_id[:16] == f"{started:%Y%m%dT%H%M%SZ}"
    assert AR.new_run(LAYOUT).run_id != base.run_id
