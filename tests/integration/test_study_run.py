"""A two-model study with real launches: ResNet-50 and BERT (debug flavors, data made by each
model's prepare recipe), 1x1 and 1x2, one repeat, stopped with SIGTERM in the middle (after the
first model's first row) and resumed: every run is recorded once, the completed rows stay byte for
byte, and the report prints the speed-up across models. (Two repeats ran here until CI's budget asked
for their four launches; the stop still lands midway through the first model.)"""

import csv
import signal
import subprocess
import time

import pytest
import yaml
from conftest import launch_env, run

from hvdbench.results.records.store import read_runs

pytestmark = pytest.mark.integration


def study_file(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump({
        "study": "two", "reproduces": "the integration test's two-model study", "mode": "throughput",
        "layouts": ["1x1", "1x2"], "repeats": 1, "flavor": "debug", "timeout": 240,
        "throughput": {"steps": 6, "warmup_steps": 2},
        "models": {
            "resnet50": {"data": str(tmp_path / "digits"), "prepare": ["digits"], "train": {"batch_per_gpu": 16}},
            "bert": {"data": str(tmp_path / "pydoc"), "prepare": ["bert", "--src", "builtin:pydoc",
                                                                  "--vocab-size", "2000"]},
        }}, sort_keys=False))
    return path


@pytest.mark.timeout(600)
def test_study_stopped_midway_resumes_with_every_row_once(tmp_path, hvdbench_bin):
    out = tmp_path / "out"
    argv = [hvdbench_bin, "study", "run", study_file(tmp_path), "--hosts", "localhost:2", "--out", out]
    proc = subprocess.Popen([str(a) for a in argv], env=launch_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    store = out / "resnet50" / "throughput" / "runs.csv"
    try:
        deadline = time.monotonic() + 300
        while not (store.exists() and len(read_runs(store)) >= 1):  # midway through the first model
            assert proc.poll() is None, f"study ended early: {proc.stderr.read()}"
            assert time.monotonic() < deadline, "the study recorded no run in 300 s"
            time.sleep(0.5)
        first = store.read_bytes()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 143 and "run the same command again to resume" in stderr
    assert not (out / "bert" / "throughput" / "runs.csv").exists()  # the second model had not started

    done = run(argv, timeout=500)
    assert "study two: 4 runs: 4 success" in done.stdout
    assert store.read_bytes().startswith(first)  # the rows before the stop are intact
    for model in ("resnet50", "bert"):
        rows = read_runs(out / model / "throughput" / "runs.csv")
        ids = sorted(r.run_id for r in rows)
        batch = 16 if model == "resnet50" else rows[0].batch_per_gpu
        assert ids == sorted(f"1x{g}x{batch}x1-r{k}" for g in (1, 2) for k in (1,)), ids
        assert {(r.model, r.flavor, r.mode, r.status) for r in rows} == {(model, "debug", "throughput", "success")}

    report = run([hvdbench_bin, "report", out])
    assert "## Speed-up across models" in report.stdout
    with open(out / "report" / "study_speedup.csv", newline="") as f:
        table = [(r["model"], r["gpus"], r["layout"]) for r in csv.DictReader(f)]
    assert table == [("bert", "1", "1x1"), ("bert", "2", "1x2"), ("resnet50", "1", "1x1"), ("resnet50", "2", "1x2")]
    assert (out / "report" / "study_speedup.png").stat().st_size > 10_000
