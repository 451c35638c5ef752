"""The contract test: a model is one folder plus one registry line.

`tests/toy_model/` (a small MLP on a generated regression task; metric eval MSE, lower is better)
is copied to a temporary folder outside the package and registered with one entry point, as a
package of its own would be. With no edit to hvdbench it is prepared, verified, trained by
`horovodrun -np 2 --gloo` in time-to-accuracy mode to its target, swept in throughput mode on
`--synthetic` data, and reported.
"""

import csv
import json
import shutil
from pathlib import Path

import pytest
from conftest import launch_env, run

from hvdbench.results.records.schema import read_result
from hvdbench.results.records.store import read_runs

pytestmark = pytest.mark.integration

TOY = Path(__file__).resolve().parents[1] / "toy_model"


@pytest.fixture(scope="module")
def toy_env(tmp_path_factory):
    """An environment in which `toy` is a registered model: the folder on PYTHONPATH beside a
    dist-info whose entry_points.txt holds the one registry line."""
    site = tmp_path_factory.mktemp("site")
    shutil.copytree(TOY, site / "toy_model", ignore=shutil.ignore_patterns("__pycache__"))
    info = site / "toy_model-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-model\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[hvdbench.models]\ntoy = toy_model\n")
    return launch_env(PYTHONPATH=str(site))


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory, toy_env, hvdbench_bin):
    out = tmp_path_factory.mktemp("data") / "toy"
    run([hvdbench_bin, "prepare", "synthetic", "--like", "toy_regression", "--samples", "4096",
         "--out", out], env=toy_env)
    return out


def test_the_toy_is_prepared_and_verified_like_any_kind(toy_data, toy_env, hvdbench_bin):
    manifest = json.loads((toy_data / "manifest.json").read_text())
    assert (manifest["kind"], manifest["features"], manifest["synthetic"]) == ("toy_regression", 8, True)
    assert manifest["fields"] == {"x": {"shape": [8], "dtype": "float32"}, "y": {"shape": [], "dtype": "float32"}}
    proc = run([hvdbench_bin, "prepare", "verify", toy_data], env=toy_env)
    assert "toy_regression" in proc.stdout


@pytest.mark.timeout(300)
def test_the_toy_trains_to_its_target_under_horovodrun(toy_data, toy_env, tmp_path, horovodrun, hvdbench_bin):
    out = tmp_path / "run"
    run([horovodrun, "-np", "2", "-H", "localhost:2", "--gloo", hvdbench_bin, "train", "toy",
         "--data", toy_data, "--out", out], env=toy_env)
    record, config = read_result(out / "result.json")
    assert (record.model, record.metric_name, record.mode) == ("toy", "eval_mse", "time_to_accuracy")
    assert record.status == "success" and record.world_size == 2
    assert record.parameters == 8 * 64 + 64 + 64 * 64 + 64 + 64 + 1  # the toy's own debug flavor
    # Lower is better: the run stopped at the first evaluation at or below the target.
    assert record.final_metric <= record.target == 0.05
    evals = json.loads((out / "checks.json").read_text())["evals"]
    assert [e["metric"] <= 0.05 for e in evals] == [False] * (len(evals) - 1) + [True]
    assert evals[0]["samples"] == 205  # the whole validation split (5 % of 4096), over both ranks
    assert config["optimizer"] == "adam"  # the toy's own default reached the trainer


@pytest.mark.timeout(400)
def test_the_toy_sweeps_and_reports(toy_env, tmp_path, hvdbench_bin):
    sweep = tmp_path / "sweep"
    run([hvdbench_bin, "sweep", "toy", "--hosts", "localhost:2", "--out", sweep, "--",
         "--synthetic", "--steps", "20", "--warmup-steps", "2"], env=toy_env, timeout=400)
    with open(sweep / "runs.csv") as f:
        rows = list(csv.DictReader(f))
    assert {(r["layout"], r["status"], r["model"]) for r in rows} == {("1x1", "success", "toy"),
                                                                      ("1x2", "success", "toy")}
    assert all(float(r["throughput"]) > 0 for r in rows)
    run([hvdbench_bin, "report", sweep], env=toy_env)
    with open(sweep / "report" / "scaling.csv") as f:
        scaling = list(csv.DictReader(f))
    assert {r["model"] for r in scaling} == {"toy"} and len(scaling) == 2


@pytest.mark.timeout(400)
def test_a_crashed_run_is_counted_in_its_layouts_row(toy_env, tmp_path, hvdbench_bin):
    # The train arguments leave the flavor and the batch to the model's defaults (debug, 32): the
    # failed 1x2 row must still carry them, so it lands in the scaling group of the 1x1 success.
    sweep = tmp_path / "crash"
    proc = run([hvdbench_bin, "sweep", "toy", "--hosts", "localhost:2", "--layouts", "1x1,1x2", "--out", sweep,
                "--env", "HVDBENCH_INJECT_FAULT=crash", "--env", "HVDBENCH_INJECT_FAULT_RANK=1", "--",
                "--synthetic", "--steps", "20", "--warmup-steps", "2"], env=toy_env, timeout=400, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    ok, failed = read_runs(sweep / "runs.csv")
    assert (ok.layout, ok.status, failed.layout, failed.status) == ("1x1", "success", "1x2", "failed")
    assert "injected fault" in failed.error
    identity = ("model", "flavor", "framework", "precision", "mode", "batch_per_gpu", "accum_steps", "dataset")
    assert [getattr(failed, k) for k in identity] == [getattr(ok, k) for k in identity]
    assert (failed.flavor, failed.batch_per_gpu, failed.global_batch) == ("debug", 32, 64)
    assert failed.hosts == ok.hosts
    run([hvdbench_bin, "report", sweep], env=toy_env)
    with open(sweep / "report" / "scaling.csv") as f:
        scaling = {r["layout"]: r for r in csv.DictReader(f)}
    assert set(scaling) == {"1x1", "1x2"}  # one group: the failed layout has its row beside the success
    assert (scaling["1x1"]["ok"], scaling["1x2"]["runs"], scaling["1x2"]["failed"]) == ("1", "1", "1")
