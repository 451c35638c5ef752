"""A store as a process has read it (records/store.py's Store, issue 54 item 8): read whole once,
then only what others appended since; an append writes the new rows at the end, in the header's
column order, without reading the old ones again; a store replaced since is read whole again; and
the reader of the report reads a row as the record's own parse does, cell by cell."""

import os

import pytest

from hvdbench.errors import StoreError
from hvdbench.results.records.schema import LoadedRun, RunResult, SchemaError
from hvdbench.results.records.store import Store, append_run, load_sweeps, read_runs


def run(i: int, **kw) -> RunResult:
    return RunResult(**{"run_id": f"1x1-r{i}", "sweep": "s", "model": "resnet50", "flavor": "debug",
                        "framework": "torch", "layout": "1x1", "world_size": 1, "nodes": 1, "gpus_per_node": 1,
                        "throughput": float(i), **kw})


def test_what_others_append_is_read_alone_and_the_old_rows_never_again(tmp_path):
    path = tmp_path / "runs.csv"
    for i in (1, 2):
        append_run(path, run(i))
    store = Store(path, RunResult)
    assert [r.run_id for r in store.rows] == ["1x1-r1", "1x1-r2"]
    append_run(path, run(3))  # another sweep's row
    # Row 1 damaged in place, as long as it was: what this process read stays read.
    path.write_bytes(path.read_bytes().replace(b",success,", b",sxccess,", 1))
    store.refresh()
    assert [r.run_id for r in store.rows] == ["1x1-r1", "1x1-r2", "1x1-r3"]
    store.append([run(4), run(2, status="failed")])
    assert [r.throughput for r in store.of("1x1-r2")] == [2.0, 2.0] and store.of("1x1-r2")[-1].status == "failed"
    assert store.of("1x1-r9") == []
    # A reader of the whole file finds the four rows after the damaged one, which it names.
    with pytest.raises(SchemaError, match=f"{path}:2: status 'sxccess' is not one of"):
        read_runs(path)
    assert path.read_text().count("\n") == 1 + 5


def test_a_store_replaced_since_it_was_read_is_read_whole_again(tmp_path):
    path = tmp_path / "runs.csv"
    append_run(path, run(1))
    store = Store(path, RunResult)
    other = tmp_path / "copy.csv"
    append_run(other, run(7))
    append_run(other, run(8))
    os.replace(other, path)  # another process rewrote it (an older store upgraded in place does)
    store.refresh()
    assert [r.run_id for r in store.rows] == ["1x1-r7", "1x1-r8"] and store.of("1x1-r1") == []
    store.append([run(9)])
    assert [r.run_id for r in read_runs(path)] == ["1x1-r7", "1x1-r8", "1x1-r9"]


def test_new_rows_follow_the_header_s_column_order(tmp_path):
    """A header with the columns in another order (an edited file) gets the new rows' cells in its
    order, not the record's: they read back as written."""
    path = tmp_path / "runs.csv"
    path.write_text(",".join(reversed(RunResult.columns())) + "\n")
    append_run(path, run(1, error="a, b"))
    assert path.read_text().splitlines()[0] == ",".join(reversed(RunResult.columns()))
    [back] = read_runs(path)
    assert back == run(1, error="a, b")


def test_a_link_in_place_of_the_store_since_it_was_read_is_refused(tmp_path):
    path = tmp_path / "runs.csv"
    append_run(path, run(1))
    store = Store(path, RunResult)
    victim = tmp_path / "victim.txt"
    victim.write_text("mine\n")
    path.unlink()
    path.symlink_to(victim)
    with pytest.raises(StoreError, match="is a symbolic link"):
        store.append([run(2)])
    assert victim.read_text() == "mine\n"


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


def test_a_last_row_an_append_never_finished_is_left_out_and_cut_away_by_the_next(tmp_path, capsys):
    """An append is one write at the end (not a copy and a rename): a machine that stops inside it leaves
    a row cut short. The rows before it stay readable (it is named and left out, never the whole store
    refused), and the next append rewrites the store without it."""
    path = tmp_path / "runs.csv"
    for i in (1, 2):
        append_run(path, run(i))
    whole = path.read_bytes()
    path.write_bytes(whole + b"1x1-r3,s,0,resnet50,deb")  # the crash: a third row's first cells
    assert [r.run_id for r in read_runs(path)] == ["1x1-r1", "1x1-r2"]
    said = capsys.readouterr().err
    assert f"warning: {path}:4: a row cut short (no line end, not " in said and "left out" in said
    store = Store(path, RunResult)
    assert [r.run_id for r in store.rows] == ["1x1-r1", "1x1-r2"]
    store.append([run(3)])
    for i in (1, 2, 3):
        append_run(tmp_path / "clean.csv", run(i))
    assert path.read_bytes() == (tmp_path / "clean.csv").read_bytes()  # the cut row gone, the new one after
    assert [r.run_id for r in read_runs(path)] == ["1x1-r1", "1x1-r2", "1x1-r3"]
    # A whole last row without its end (an edited file) is a row, not a cut one.
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    assert [r.run_id for r in read_runs(path)] == ["1x1-r1", "1x1-r2", "1x1-r3"]
    # A cut row in the middle of a store is an edit, and refused naming its line, as before.
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join([lines[0], lines[1][:20], *lines[2:]]) + b"\n")
    with pytest.raises(StoreError, match=f"{path}:2: .* cell\\(s\\), the header has"):
        read_runs(path)
