"""Numbers no run can have (issue 50, item 14): a published log whose run_stop is not after its
run_start is dropped with a warning naming the file (report and predict --mllog); a non-finite,
negative or absurd figure in runs.csv or a bench CSV is read as empty with a warning naming the file
and line, never printed, never an OverflowError; a run's non-finite figure is written empty, with
the reason in its row, and a store that already holds one is read, not refused."""

import csv
import math

import pytest
from click.testing import CliRunner
from test_mllog import compliant_lines, system_json

from hvdbench.cli.main import cli
from hvdbench.results import mllog
from hvdbench.results.records.schema import ComputeRow, RunResult
from hvdbench.results.records.store import append_rows, append_run, read_rows, read_runs

SYSTEM = "DGXA100_1x8x56x1"


def published(root, minutes=(10.0, 11.0, 12.0)):
    for i, m in enumerate(minutes):
        path = root / "Org" / "results" / SYSTEM / "resnet" / f"result_{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(compliant_lines(m, 8, layout=(1, 8), t0=1_700_000_000_000 + i * 10**8)) + "\n")
    system_json(root / "Org" / "systems" / f"{SYSTEM}.json", "DGX A100", 1, 8)
    return root


def test_a_log_stopped_before_it_started_or_at_once_is_dropped_with_a_warning(tmp_path):
    root = published(tmp_path / "pub", minutes=(10.0, -5.0, 0.0))  # run_stop 5 min before run_start; at it
    runs, notes = mllog.load(root)
    assert len(runs) == 1 and runs[0].time_to_train_s > 0
    backwards, zero = (root / "Org" / "results" / SYSTEM / "resnet" / f"result_{i}.txt" for i in (1, 2))
    assert f"warning: {backwards}: run_stop 300000 ms before run_start, an impossible time to train: run dropped" \
        in notes
    assert f"warning: {zero}: run_stop at the same time as run_start, an impossible time to train: run dropped" \
        in notes


def test_predict_says_which_published_logs_it_dropped(tmp_path):
    root = published(tmp_path / "pub", minutes=(10.0, -5.0, 11.0))
    result = CliRunner().invoke(cli, ["predict", "--mllog", str(root), "--layouts", "2x8", "--out", str(tmp_path / "p")])
    assert "Traceback" not in result.output
    assert "result_1.txt: run_stop 300000 ms before run_start, an impossible time to train: run dropped" \
        in result.output


def run(layout="1x1", **figures):
    nodes, gpus = map(int, layout.split("x"))
    return RunResult(**{"run_id": f"{layout}-r{len(figures)}", "model": "resnet50", "flavor": "debug",
                        "framework": "torch", "batch_per_gpu": 32, "world_size": nodes * gpus, "nodes": nodes,
                        "gpus_per_node": gpus, "layout": layout, "scale": "up", "devices": "cpu",
                        "throughput": 100.0, **figures})


def test_a_non_finite_figure_is_written_empty_and_the_row_says_why(tmp_path):
    store = tmp_path / "runs.csv"
    append_run(store, run(throughput=math.inf, compile_s=-1.0, final_metric=math.nan))
    assert ",inf," not in store.read_text() and ",nan," not in store.read_text()
    [back] = read_runs(store)
    assert back.throughput is None and back.compile_s is None and back.final_metric is None
    # (NaN has always meant "not measured", a metric over no samples: emptied without a word)
    assert back.error == "column throughput has inf: not a finite number, left empty; " \
                         "column compile_s has -1.0: negative, left empty"


def test_a_store_holding_an_infinity_is_read_with_a_warning_and_rewritten_clean(tmp_path, capsys):
    store = tmp_path / "runs.csv"
    append_run(store, run())
    append_run(store, run("1x2"))
    store.write_text(store.read_text().replace(",100.0,", ",Infinity,", 1))  # line 2: as an edit left it
    rows = read_runs(store)  # not refused
    assert [r.throughput for r in rows] == [None, 100.0]
    assert f"warning: {store}:2: column throughput has inf: not a finite number, left empty" in capsys.readouterr().err
    append_run(store, run("2x1"))  # a resumed sweep appends: the store is rewritten without it
    assert "Infinity" not in store.read_text() and [r.throughput for r in read_runs(store)] == [None, 100.0, 100.0]


def test_absurd_compute_figures_are_never_printed_and_never_overflow(tmp_path):
    sweep = tmp_path / "sw"
    for layout in ("1x1", "1x2"):
        append_run(sweep / "runs.csv", run(layout, flops_per_sample=1e308, model_tflops_per_gpu=1e308,
                                           peak_tflops=-3.0, mfu=1e300, mem_resident_gb=-1.0))
    result = CliRunner().invoke(cli, ["report", str(sweep), "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert "1e+308" not in result.output and "OverflowError" not in result.output
    for table in (tmp_path / "r").glob("*.csv"):
        assert "1e+308" not in table.read_text() and "1e+300" not in table.read_text(), table


def test_a_bench_csv_with_impossible_figures_is_read_with_warnings(tmp_path, capsys):
    path = tmp_path / "bench_compute.csv"
    rows = [ComputeRow(op="matmul", dtype="fp32", size=64, iters=2, time_mean_s=1e-3, tflops=0.5, layout="1x1"),
            ComputeRow(op="copy", dtype="fp32", size=1 << 20, iters=2, time_mean_s=1e-3, gb_s=2.0, layout="1x1")]
    append_rows(path, rows)
    text = path.read_text().splitlines()
    cells = next(csv.reader([text[1]]))
    cells[ComputeRow.columns().index("tflops")] = "-0.5"
    text[1] = ",".join(cells)
    cells = next(csv.reader([text[2]]))
    cells[ComputeRow.columns().index("gb_s")] = "1e999"
    text[2] = ",".join(cells)
    path.write_text("\n".join(text) + "\n")
    matmul, copy = read_rows(path, ComputeRow)
    assert (matmul.tflops, copy.gb_s, copy.time_mean_s) == (None, None, 1e-3)
    err = capsys.readouterr().err
    assert f"warning: {path}:2: column tflops has -0.5: negative, left empty" in err
    assert f"warning: {path}:3: column gb_s has inf: not a finite number, left empty" in err


@pytest.mark.parametrize("number", ["1e150", "1.5e150", "9.9e150", "1e999", "-1E+151", "1e0151", str(10 ** 200),
                                    "-Infinity", "NaN", "1e-999", "1" * 39 + ".5e99", "1" * 40, "0.5", "12"])
def test_reading_skips_the_non_finite_walk_only_where_no_number_could_need_it(number):
    # the decoder's note of a number that may need it (events._Parser) lets a record skip the walk:
    # the walk over the same record says the same
    from hvdbench.results.mllog import events

    line = (f':::MLLOG {{"namespace": "", "time_ms": 1.0, "event_type": "POINT_IN_TIME", "key": "x", '
            f'"value": {{"a": [{number}]}}, "metadata": {{"m": {number}}}}}')
    event = events.parse_line(line)
    walked = events._non_finite(event.value, "value") or events._non_finite(event.metadata, "metadata")
    assert event.non_finite == walked
    assert bool(walked) == (number not in ("1e150", "1e-999", "1" * 39 + ".5e99", "1" * 40, "0.5", "12"))
