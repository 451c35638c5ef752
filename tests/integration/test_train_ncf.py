"""`hvdbench train ncf` under a real two-rank Horovod launch: the debug NeuMF reaches its HR@10
target on the built-in MovieLens-100K (99 evaluation negatives per user), both ranks end with the
same parameters and the whole validation split is scored; the full flavor runs on --synthetic."""

import json

import pytest
from conftest import run

from hvdbench.results.mllog import read_event_dicts as read_events
from hvdbench.results.records.schema import read_result

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ml100k(tmp_path_factory, hvdbench_bin):
    out = tmp_path_factory.mktemp("data") / "ml-100k"
    run([hvdbench_bin, "prepare", "movielens", "--src", "builtin:ml-100k", "--out", out, "--workers", "1"])
    return out


@pytest.mark.timeout(240)
def test_debug_ncf_reaches_its_hr_at_10_target_under_horovodrun(ml100k, tmp_path, horovodrun, hvdbench_bin):
    out = tmp_path / "run"
    proc = run([horovodrun, "-np", "2", "-H", "localhost:2", "--gloo", hvdbench_bin, "train", "ncf",
                "--flavor", "debug", "--data", ml100k, "--out", out], timeout=240)
    record, config = read_result(out / "result.json")
    assert (record.status, record.mode, record.metric_name) == ("success", "time_to_accuracy", "hr_at_10")
    assert record.target == 0.60 and record.final_metric >= 0.60
    assert record.epochs_to_target == record.epochs <= 6  # 2-3 when measured
    assert (record.world_size, record.layout, record.global_batch) == (2, "1x2", 8)
    assert record.parameters == 128_769
    assert config["optimizer"] == "adam" and config["lr"] == 1e-2 and config["decay_power"] == 0.0

    checks = json.loads((out / "checks.json").read_text())
    assert checks["params_identical"] is True
    evals = checks["evals"]
    assert all(e["samples"] == 943 for e in evals)  # every user once, over both ranks
    assert evals[0]["metric"] > 0.3  # chance with 99 negatives is 0.10
    events = read_events(out / "mllog.txt")
    assert [e["value"] for e in events if e["key"] == "submission_benchmark"] == ["ncf"]
    hr = [e["value"] for e in events if e["key"] == "eval_accuracy"]
    assert len(hr) == record.epochs and hr[-1] == pytest.approx(record.final_metric)
    assert proc.stdout.count("parameters identical on all 2 ranks: True") == 1


@pytest.mark.timeout(180)
def test_full_ncf_runs_on_synthetic_data(tmp_path, hvdbench_bin):
    """The MLPerf-size NeuMF (31.8M parameters, rows of 1,000 pairs) in throughput mode."""
    out = tmp_path / "run"
    run([hvdbench_bin, "train", "ncf", "--synthetic", "--steps", "1", "--warmup-steps", "0", "--out", out],
        timeout=180)
    record, _ = read_result(out / "result.json")
    assert (record.status, record.mode, record.flavor) == ("success", "throughput", "full")
    assert record.parameters == 31_832_577 and record.throughput > 0
