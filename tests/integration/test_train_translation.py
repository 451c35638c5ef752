"""`hvdbench train transformer` and `train gnmt` (debug flavors) on the built-in gettext En->De
corpus: each reaches its BLEU target and the whole validation split is translated, the Transformer
under a real two-rank Horovod launch (MPI; both ranks end with the same parameters, the family's
BLEU is reduced across them), GNMT alone (one rank, one thread: 132 CPU-s against 172 on two
ranks, issue 56; GNMT trains on two Gloo ranks on --synthetic data); the debug and MLPerf-size
networks run on --synthetic data."""

import json

import pytest
from conftest import run

from hvdbench.contracts import get_spec
from hvdbench.families.translation import catalogs
from hvdbench.results.mllog import read_event_dicts as read_events
from hvdbench.results.records.schema import read_result

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def gettext_de(tmp_path_factory, hvdbench_bin):
    if not catalogs.LOCALE_DIR.is_dir():
        pytest.skip("no German catalogs (make setup installs the packages)")
    out = tmp_path_factory.mktemp("data") / "gettext-de"
    run([hvdbench_bin, "prepare", "translation", "--src", "builtin:gettext-de", "--vocab-size", "4000",
         "--max-len", "64", "--out", out])
    return out


def check_run(out, model, data, proc, ranks):
    record, config = read_result(out / "result.json")
    target = get_spec(model).target("debug")
    assert (record.status, record.mode, record.metric_name) == ("success", "time_to_accuracy", "bleu")
    assert record.target == target and record.final_metric >= target
    assert (record.world_size, record.layout) == (ranks, f"1x{ranks}") and record.dataset == str(data)
    checks = json.loads((out / "checks.json").read_text())
    assert checks["params_identical"] is True
    val = json.loads((data / "manifest.json").read_text())["splits"]["val"]["samples"]
    assert all(e["samples"] == val for e in checks["evals"])  # every sentence once, over all ranks
    events = read_events(out / "mllog.txt")
    assert [e["value"] for e in events if e["key"] == "submission_benchmark"] == [model]
    bleu = [e["value"] for e in events if e["key"] == "eval_accuracy"]
    assert bleu[-1] == pytest.approx(record.final_metric) and bleu[-1] > bleu[0]
    assert proc.stdout.count(f"parameters identical on all {ranks} ranks: True") == 1
    print(f"{model}: BLEU {record.final_metric:.2f} after {record.epochs:.2f} epochs, "
          f"time-to-train {record.time_to_train_s:.1f} s")
    return record, config


# Both reach their targets at their second evaluation (the Transformer's at epoch 2, GNMT's at 1.5):
# 109-131 s measured with other jobs on the 2-core machine (load 4-6), 220-240 s under load 11.
# Under MPI, not Gloo: Horovod's Gloo sends each step's gradients (GNMT's 10 MB) through loopback
# TCP, Open MPI through shared memory:
# GNMT to its target on two ranks took 196 CPU-s against Gloo's 220, the same BLEU at the same epoch.
# Gloo trains to a target in test_train_bert.py, test_train_resnet.py (TensorFlow) and
# test_closed_division.py; BLEU's reduction is the engine's, whatever the controller.
@pytest.mark.timeout(420)
def test_debug_transformer_reaches_its_bleu_target_under_horovodrun(gettext_de, tmp_path, horovodrun,
                                                                     hvdbench_bin):
    out = tmp_path / "run"
    proc = run([horovodrun, "-np", "2", "-H", "localhost:2", "--mpi", hvdbench_bin, "train", "transformer",
                "--flavor", "debug", "--data", gettext_de, "--out", out], timeout=420)
    record, config = check_run(out, "transformer", gettext_de, proc, ranks=2)
    assert record.parameters == 1_438_208 and record.global_batch == 2 * config["batch_per_gpu"]
    assert config["optimizer"] == "adam" and record.epochs <= 4


@pytest.mark.timeout(420)
def test_debug_gnmt_reaches_its_bleu_target_alone(gettext_de, tmp_path, hvdbench_bin):
    """One rank, one thread: the 1x1 layout a sweep starts from (BLEU 6.9 at its second evaluation,
    1.5 epochs, 104 s alone)."""
    out = tmp_path / "run"
    proc = run([hvdbench_bin, "train", "gnmt", "--flavor", "debug", "--data", gettext_de, "--threads", "1",
                "--out", out], timeout=420)
    check_run(out, "gnmt", gettext_de, proc, ranks=1)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("model, parameters", [("transformer", 210_878_464), ("gnmt", 160_665_150)])
def test_the_mlperf_size_networks_run_on_synthetic_data(model, parameters, tmp_path, hvdbench_bin):
    """The full flavors in throughput mode, at a CPU-sized batch of synthetic sentences."""
    out = tmp_path / "run"
    run([hvdbench_bin, "train", model, "--synthetic", "--batch-per-gpu", "2", "--steps", "2", "--warmup-steps",
         "1", "--out", out], timeout=300)
    record, _ = read_result(out / "result.json")
    assert (record.status, record.mode, record.flavor) == ("success", "throughput", "full")
    assert record.parameters == parameters and record.throughput > 0


@pytest.mark.timeout(120)
def test_debug_transformer_runs_on_synthetic_data(tmp_path, hvdbench_bin):
    out = tmp_path / "run"
    run([hvdbench_bin, "train", "transformer", "--flavor", "debug", "--synthetic", "--steps", "5", "--warmup-steps",
         "1", "--out", out], timeout=120)
    record, _ = read_result(out / "result.json")
    assert (record.status, record.mode, record.flavor) == ("success", "throughput", "debug")


@pytest.mark.timeout(180)
def test_debug_gnmt_trains_on_two_gloo_ranks(tmp_path, horovodrun, hvdbench_bin):
    """GNMT's two-rank launch (its time-to-BLEU runs alone, above): three synthetic steps under Gloo
    leave both ranks with the same weights."""
    out = tmp_path / "run"
    proc = run([horovodrun, "-np", "2", "-H", "localhost:2", "--gloo", hvdbench_bin, "train", "gnmt", "--flavor",
                "debug", "--synthetic", "--batch-per-gpu", "32", "--steps", "3", "--warmup-steps", "1", "--out", out],
               timeout=180)
    record, _ = read_result(out / "result.json")
    assert (record.status, record.mode, record.flavor, record.world_size) == ("success", "throughput", "debug", 2)
    assert proc.stdout.count("parameters identical on all 2 ranks: True") == 1
