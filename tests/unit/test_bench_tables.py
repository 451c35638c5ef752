"""The report's bench tables: busbw at the model's gradient size beside training throughput per
layout, and the reader's samples/s beside the samples/s training consumed."""

import csv

import pytest

from hvdbench.bench.allreduce_report import CSV_NAME as AR_CSV
from hvdbench.bench.allreduce_report import AllreduceRow
from hvdbench.bench.io import CSV_NAME as IO_CSV
from hvdbench.bench.io import IoRow
from hvdbench.results.analyses import bench_tables as BT
from hvdbench.results.records.schema import ComputeRow, LoadedRun, RunResult
from hvdbench.results.records.store import append_rows, append_run
from hvdbench.results.report.load import load

MIB = 1 << 20
GRAD = 25_557_032 * 4  # resnet50/full fp32 gradients: 97.5 MiB, under the 128 MiB fusion buffer


def run(model, flavor, layout, throughput, status="success", global_batch=512):
    nodes, gpus = map(int, layout.split("x"))
    return LoadedRun(model=model, flavor=flavor, framework="torch", layout=layout, nodes=nodes,
                     gpus_per_node=gpus, world_size=nodes * gpus, throughput=throughput,
                     global_batch=global_batch, status=status)


def allreduce_rows(layout, run_id, started_at, scale):
    """busbw = scale x size / 64 MiB (a straight line in log-log), MPI twice as fast."""
    rows = []
    for impl, factor in (("horovod", 1.0), ("mpi", 2.0)):
        for size in (32 * MIB, 64 * MIB, 128 * MIB, 256 * MIB):
            bus = scale * factor * size / (64 * MIB)
            rows.append(AllreduceRow(run_id=run_id, started_at=started_at, impl=impl, dtype="fp32", bytes=size,
                                     algbw_gb_s=bus / 1.5, busbw_gb_s=bus, layout=layout, controller="mpi",
                                     world_size=4))
    return rows


@pytest.fixture
def sweep(tmp_path):
    for r in (run("resnet50", "full", "1x4", 1000.0), run("resnet50", "full", "1x4", 1200.0),
              run("resnet50", "full", "1x4", None, status="failed"), run("resnet50", "full", "2x2", 800.0),
              run("resnet50", "debug", "1x4", 5000.0), run("bert", "base", "1x4", 300.0),
              run("bert", "large", "1x4", 100.0)):
        append_run(tmp_path / "runs.csv", r)
    append_rows(tmp_path / AR_CSV, allreduce_rows("1x4", "old", "2026-01-01T00:00:00+00:00", 100.0))
    append_rows(tmp_path / AR_CSV, allreduce_rows("1x4", "new", "2026-02-01T00:00:00+00:00", 1.0))
    append_rows(tmp_path / IO_CSV, [
        IoRow(run_id="io1", started_at="2026-02-01", dataset="data/imagenet", kind="images", split="train",
              impl=impl, pass_index=k, samples_s=v, layout="1x4", world_size=4, caches_dropped=True)
        for k, impl, v in [(0, "reader", 900.0), (0, "reader+decode", 200.0), (0, "h5py", 3000.0),
                           (1, "reader", 1300.0), (1, "reader+decode", 400.0), (1, "h5py", 3000.0)]])
    return tmp_path


def built(path):
    """The bench tables of one sweep folder, as the report builds them."""
    loaded = load([path])
    return BT.build(loaded.runs, loaded.allreduce, loaded.io)


def test_busbw_at_the_gradient_size_beside_throughput(sweep):
    tables = built(sweep)
    rows = {(r.model, r.flavor, r.layout): r for r in tables.comm}
    assert set(rows) == {("resnet50", "full", "1x4"), ("resnet50", "debug", "1x4"), ("bert", "base", "1x4"),
                         ("bert", "large", "1x4")}
    r = rows[("resnet50", "full", "1x4")]
    assert r.bench_run_id == "new"  # the later run of that layout supersedes the earlier one
    assert r.throughput_mean == pytest.approx(1100.0)  # successful runs only
    assert r.gradient_mib == pytest.approx(GRAD / MIB) and r.message_mib == pytest.approx(GRAD / MIB)
    assert r.busbw_gb_s == pytest.approx(GRAD / (64 * MIB))  # on the log-log line
    assert r.mpi_busbw_gb_s == pytest.approx(2 * GRAD / (64 * MIB))
    assert r.allreduce_ms == pytest.approx(1e3 * GRAD / (r.busbw_gb_s / 1.5 * 1e9))
    assert r.step_ms == pytest.approx(1e3 * 512 / 1100.0)
    assert r.comm_share == pytest.approx(r.allreduce_ms / r.step_ms)
    # 130,002 parameters: 0.5 MB, below the measured message sizes (no extrapolation)
    assert rows[("resnet50", "debug", "1x4")].busbw_gb_s is None
    assert rows[("bert", "base", "1x4")].busbw_gb_s is None  # parameter count not recorded
    assert any("gradient size unknown" in n for n in tables.notes)
    assert ("resnet50", "full", "2x2") not in rows  # no bench run of that layout


def test_io_beside_consumed_samples_for_datasets_the_model_reads(sweep):
    tables = built(sweep)
    assert {(r.model, r.flavor) for r in tables.io} == {("resnet50", "full"), ("resnet50", "debug")}
    r = next(r for r in tables.io if r.flavor == "full")
    assert r.io_samples_s == pytest.approx(1100.0) and r.io_samples_s_min == 900.0
    assert r.reader_vs_h5py == pytest.approx(1100 / 3000) and r.decoded_samples_s == pytest.approx(300.0)
    assert r.feed == pytest.approx(1.0)  # 1100 io vs 1100 training
    debug = next(r for r in tables.io if r.flavor == "debug")
    assert debug.feed == pytest.approx(1100 / 5000)


def test_markdown_and_csvs(sweep, tmp_path):
    tables = built(sweep)
    text = BT.markdown(tables)
    assert "## Interconnect" in text and "## Storage" in text and "resnet50/full | 1x4" in text
    written = BT.write_csvs(tables, tmp_path / "report")
    assert [p.name for p in written] == ["comm_vs_training.csv", "io_vs_training.csv"]
    with open(written[0]) as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == BT.CommRow.columns() and len(rows) == 4


def test_a_sweep_without_bench_results_adds_nothing(tmp_path):
    append_run(tmp_path / "runs.csv", run("resnet50", "full", "1x4", 1000.0))
    tables = built(tmp_path / "runs.csv")
    assert tables.comm == tables.io == [] and BT.markdown(tables) == ""
    assert BT.write_csvs(tables, tmp_path / "report") == []


def test_interpolation_stays_inside_the_measured_range():
    points = [(1024, 1.0), (4096, 4.0)]
    assert BT.interpolate(points, 2048) == pytest.approx(2.0)
    assert BT.interpolate(points, 1024) == 1.0 and BT.interpolate(points, 4096) == 4.0
    assert BT.interpolate(points, 512) is None and BT.interpolate(points, 8192) is None
    assert BT.interpolate([], 10) is None


def test_the_csv_formats_and_their_shared_layout_columns():
    """The column order of runs.csv and the bench CSVs is their file format: rows are appended under
    the header a file already has, so it never changes. The layout columns are declared once."""
    from dataclasses import fields

    from hvdbench.results.records.schema import LayoutFields

    layout = [f.name for f in fields(LayoutFields)]
    assert RunResult.columns()[12:20] == layout == [
        "world_size", "nodes", "gpus_per_node", "layout", "scale", "launcher", "controller", "hosts"]
    bench_layout = ["world_size", "nodes", "gpus_per_node", "layout", "scale", "hosts", "controller", "launcher"]
    assert AllreduceRow.columns() == [
        "run_id", "started_at", "impl", "dtype", "bytes", "elements", "iters", "warmup_iters", "time_mean_s",
        "time_min_s", "time_max_s", "algbw_gb_s", "busbw_gb_s", "wrong", "vs_mpi", "note",
        *bench_layout, "schema_version"]
    assert IoRow.columns() == [
        "run_id", "started_at", "dataset", "kind", "split", "impl", "pass_index", "batch_size", "samples",
        "dataset_samples", "bytes", "elapsed_s", "samples_s", "mb_s", "rank_samples_s_min", "rank_samples_s_max",
        "rank_mb_s_min", "rank_mb_s_max", "vs_h5py", "caches_dropped", "dataset_bytes", "mem_available_bytes",
        "fits_in_cache", "demand_samples_s", "demand_source", "feed_fraction", *bench_layout, "schema_version"]
    assert RunResult.columns()[:12] == [
        "run_id", "sweep", "repeat", "model", "flavor", "framework", "precision", "mode", "dataset",
        "batch_per_gpu", "accum_steps", "global_batch"]
    assert RunResult.columns()[20:] == [
        "devices", "versions", "parameters", "steps", "warmup_steps", "throughput", "throughput_per_gpu",
        "step_time_mean_s", "step_time_std_s", "metric_name", "target", "final_metric", "epochs",
        "epochs_to_target", "time_per_epoch_s", "time_to_train_s", "status", "error", "started_at", "wall_s",
        "data_s", "compute_s", "comm_s", "update_s", "other_s",  # schema 2 added the breakdown
        "other_cpus", "other_gpu_procs", "timeline_negotiate_ms", "timeline_allreduce_ms",  # schema 3
        "timeline_cycles_per_step", "timeline_fused_mib", "threads",  # schema 4: threads
        "engine", "shard_parameters",  # schema 5: the engine and a rank's parameters
        "flops_per_sample", "model_tflops_per_gpu", "peak_tflops", "mfu", "mem_allocated_gb",  # schema 6: compute
        "mem_reserved_gb", "mem_resident_gb", "mem_estimate_gb", "energy_j", "energy_j_per_sample",
        "power_w_per_gpu", "compile_s",  # and the seconds --compile took
        "levers", "published_share", "published_ref",  # schema 7: the levers (a run's identity), the run
        "slowest_rank", "slowest_host", "slowest_compute_ratio", "imbalance_s",  # beside MLPerf's published
        "mlperf_samples_per_row",  # rate, and the per-rank times' summary; schema 8: MLPerf's samples a row
        "schema_version"]
    assert ComputeRow.columns() == [
        "run_id", "started_at", "rank", "host", "device", "op", "dtype", "size", "iters", "time_mean_s", "tflops",
        "gb_s", "peak_tflops", "vs_peak", "note", *bench_layout, "schema_version"]


def test_markdown_cells_with_a_bar_stay_one_cell():
    from hvdbench.results.render.tables import markdown_table

    assert markdown_table(["a", "b"], [["x|y", 2]]) == "| a | b |\n|---|---|\n| x\\|y | 2 |"
