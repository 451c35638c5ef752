"""The levers are part of a run's identity, as engine and precision are (issue 50, item 12): a plain
sweep and a levers sweep of one layout are two groups in every table, never repeats of one; and a
compiled run always warms up at least once, so its compilation is never timed as throughput."""

import csv
import io

from hvdbench.results.records.schema import SCHEMA_VERSION, LoadedRun, RunResult
from hvdbench.results.records.store import append_run, read_runs
from hvdbench.results.render.tables import markdown
from hvdbench.results.stats.aggregate import build_tables
from hvdbench.train.config import levers_text, resolve
from hvdbench.train.warmup import least


def run(layout, throughput, levers=""):
    nodes, gpus = map(int, layout.split("x"))
    return LoadedRun(model="resnet50", flavor="debug", framework="torch", precision="fp32", batch_per_gpu=32,
                     world_size=nodes * gpus, nodes=nodes, gpus_per_node=gpus, layout=layout,
                     scale="up" if nodes == 1 else "out", devices="cpu", throughput=throughput, levers=levers)


def test_a_run_records_the_levers_it_was_given_apart_from_its_models_defaults(tmp_path):
    base = {"model": "resnet50", "flavor": "debug", "synthetic": True, "out": str(tmp_path)}
    assert levers_text(resolve(base)) == ""  # compile auto is ResNet-50's own default: no lever
    assert levers_text(resolve({**base, "compile": "default", "channels_last": True})) == "compile=default;channels_last"
    assert levers_text(resolve({**base, "model": "bert", "attention": "varlen", "fused_optimizer": True,
                                "overlap_copies": True})) == "fused_optimizer;attention=varlen;overlap_copies"


def test_a_plain_and_a_levers_sweep_are_never_averaged_as_repeats():
    runs = [run("1x1", 100.0), run("1x1", 102.0), run("1x1", 150.0, "channels_last"),
            run("1x1", 152.0, "channels_last")]
    scaling = build_tables(runs).scaling
    assert sorted((r.levers, r.runs, r.throughput_mean) for r in scaling) == [
        ("", 2, 101.0), ("channels_last", 2, 151.0)]
    assert all("noisy" not in (r.flags or "") for r in scaling)
    # the Markdown names the levers in the section's title
    text = markdown(build_tables(runs))
    assert "fp32 · channels_last · throughput" in text


def test_a_schema_6_store_still_reads_with_no_levers(tmp_path):
    store = tmp_path / "runs.csv"
    append_run(store, run("1x1", 100.0))
    rows = list(csv.DictReader(io.StringIO(store.read_text())))
    columns = [c for c in RunResult.columns() if c not in RunResult.added_since(6)]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows({**r, "schema_version": "6"} for r in rows)
    store.write_text(out.getvalue())
    assert "levers" not in store.read_text().splitlines()[0]
    [old] = read_runs(store)
    assert (old.levers, old.throughput, old.schema_version) == ("", 100.0, SCHEMA_VERSION)
    append_run(store, run("1x1", 150.0, "compile=default"))  # upgraded in place by the next append
    assert [r.levers for r in read_runs(store)] == ["", "compile=default"]


def test_a_compiled_run_warms_up_at_least_once():
    assert least(0, compiles=True) == 1  # the first call compiles: never timed
    assert least(0, compiles=False) == 0  # nothing to compile: 0 means none
    assert least(5, compiles=True) == 5
