"""runs.csv as the report reads it (issue 54, item 8): by a plan of the record's columns made once,
a row read as the record's own parse reads it, cell by cell."""

import pytest

from hvdbench.results.records.schema import LoadedRun, RunResult, SchemaError
from hvdbench.results.records.store import append_run, load_sweeps


def run(i: int, **kw) -> RunResult:
    return RunResult(**{"run_id": f"1x1-r{i}", "sweep": "s", "model": "resnet50", "flavor": "debug",
                        "framework": "torch", "layout": "1x1", "world_size": 1, "nodes": 1, "gpus_per_node": 1,
                        "throughput": float(i), **kw})


def test_the_report_s_reader_reads_each_cell_as_the_row_by_row_parse(tmp_path):
    """load_sweeps reads runs.csv by the class's column plan (CsvRecord.from_cells): the same records,
    empty cells, flags and older-version rows included, as from_row over each row's dict."""
    import csv

    path = tmp_path / "sw" / "runs.csv"
    rows = [run(1, target=0.75, final_metric=-0.5, status="failed", error='say "why", twice'),
            run(2, throughput=None, slowest_rank=3, other_gpu_procs=None, mlperf_samples_per_row=1.9)]
    for r in rows:
        append_run(path, r)
    loaded = load_sweeps([path.parent])
    with open(path, newline="") as f:
        by_dict = [LoadedRun.from_row(row, "x") for row in csv.DictReader(f)]
    assert loaded == by_dict and [r.to_row() for r in loaded] == [r.to_row() for r in rows]
    # a bad cell is named with its line and column, whichever way the row is read
    path.write_text(path.read_text().replace(",3,", ",three,", 1))
    with pytest.raises(SchemaError, match=rf"{path}:3: column slowest_rank has 'three', expected int \| None"):
        load_sweeps([path.parent])
