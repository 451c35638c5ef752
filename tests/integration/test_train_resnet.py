"""`hvdbench train resnet50` under real two-rank Horovod launches (Gloo and MPI, PyTorch and
TensorFlow): the debug ResNet reaches its target on the built-in digits, both ranks end with the
same parameters, the event log passes MLCommons' compliance checker, and throughput runs on
synthetic data write a complete result record."""

import json
import socket
import subprocess
import sys

import pytest
from conftest import run

from hvdbench.events import read_events
from hvdbench.results.schema import read_result

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def digits(tmp_path_factory, hvdbench_bin):
    out = tmp_path_factory.mktemp("data") / "digits16"
    run([hvdbench_bin, "prepare", "digits", "--out", out, "--size", "16"])
    return out


def hvdrun(horovodrun, controller, *argv):
    return [horovodrun, "-np", "2", "-H", "localhost:2", f"--{controller}", *argv]


def assert_two_local_ranks(record, controller):
    assert (record.world_size, record.nodes, record.gpus_per_node) == (2, 1, 2)
    assert (record.layout, record.scale, record.controller) == ("1x2", "up", controller)
    assert record.hosts == socket.gethostname() and record.devices == "cpu"
    assert "horovod=0.28.1" in record.versions and "python=" in record.versions


def assert_same_parameters_on_both_ranks(out):
    checks = json.loads((out / "checks.json").read_text())
    digests = checks["param_digests"]
    assert len(digests) == 2 and len(digests[0]) == 64  # one sha256 per rank, computed by that rank
    assert digests[0] == digests[1] and checks["params_identical"] is True


def compliance(mllog, cwd):
    # Ruleset 4.0.0 is the last training ruleset with ResNet-50; open division (see events.py).
    return subprocess.run([sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", "training",
                           "--ruleset", "4.0.0", "--werror", "--log_output", str(cwd / "cc.log"), str(mllog)],
                          capture_output=True, text=True, cwd=cwd)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("controller", ["gloo", "mpi"])
@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_debug_resnet_reaches_its_target_on_digits(framework, controller, digits, tmp_path, horovodrun,
                                                   hvdbench_bin):
    out = tmp_path / "run"
    proc = run(hvdrun(horovodrun, controller, hvdbench_bin, "train", "resnet50", "--framework", framework,
                      "--flavor", "debug", "--data", digits, "--out", out))
    record, config = read_result(out / "result.json")
    assert (record.status, record.mode, record.metric_name) == ("success", "time_to_accuracy", "top1_accuracy")
    assert record.target == 0.95 and record.final_metric >= 0.95
    assert record.epochs_to_target == record.epochs <= 12
    assert record.time_to_train_s > 0 and 0 < record.time_per_epoch_s < record.time_to_train_s
    assert record.global_batch == 2 * 16 and record.framework == framework
    assert_two_local_ranks(record, controller)
    assert record.launcher == ("horovodrun" if controller == "gloo" else "mpirun")
    assert_same_parameters_on_both_ranks(out)
    assert config["flavor"] == "debug" and (out / "config.yaml").exists()

    events = read_events(out / "mllog.txt")
    accuracies = [e["value"] for e in events if e["key"] == "eval_accuracy"]
    assert len(accuracies) == record.epochs and accuracies[-1] == pytest.approx(record.final_metric)
    assert accuracies[0] < 0.95 <= accuracies[-1]
    stop = [e for e in events if e["key"] == "run_stop"]
    assert len(stop) == 1 and stop[0]["metadata"]["status"] == "success"
    epochs = [e["metadata"]["epoch_num"] for e in events if e["key"] == "epoch_start"]
    assert epochs == list(range(1, len(accuracies) + 1))
    checked = compliance(out / "mllog.txt", tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # Rank 0 speaks, rank 1 stays quiet.
    assert proc.stdout.count("parameters identical on all 2 ranks: True") == 1


@pytest.mark.timeout(240)
def test_torch_throughput_on_synthetic_data_writes_a_complete_record(tmp_path, horovodrun, hvdbench_bin):
    out = tmp_path / "run"
    run(hvdrun(horovodrun, "gloo", hvdbench_bin, "train", "resnet50", "--flavor", "debug", "--synthetic",
               "--steps", "8", "--warmup-steps", "2", "--accum-steps", "2", "--fp16-allreduce",
               "--precision", "bf16", "--run-id", "r-1", "--sweep-name", "demo", "--repeat", "3", "--out", out))
    record, config = read_result(out / "result.json")
    assert_throughput_record(record, "torch", "gloo", "horovodrun")
    assert config["fp16_allreduce"] is True and config["precision"] == "bf16"
    assert_same_parameters_on_both_ranks(out)


@pytest.mark.timeout(240)
def test_tensorflow_throughput_under_plain_mpirun(tmp_path, mpirun, hvdbench_bin):
    out = tmp_path / "run"
    run([mpirun, "-np", "2", hvdbench_bin, "train", "resnet50", "--framework", "tensorflow", "--flavor", "debug",
         "--synthetic", "--steps", "8", "--warmup-steps", "2", "--accum-steps", "2", "--fp16-allreduce",
         "--precision", "bf16", "--run-id", "r-1", "--sweep-name", "demo", "--repeat", "3", "--out", out])
    record, _ = read_result(out / "result.json")
    assert_throughput_record(record, "tensorflow", "mpi", "mpirun")
    assert "tensorflow=" in record.versions and "keras=" in record.versions
    assert_same_parameters_on_both_ranks(out)


def assert_throughput_record(record, framework, controller, launcher):
    assert (record.status, record.mode, record.dataset) == ("success", "throughput", "synthetic")
    assert record.framework == framework
    assert (record.run_id, record.sweep, record.repeat) == ("r-1", "demo", 3)
    assert (record.steps, record.warmup_steps, record.accum_steps, record.batch_per_gpu) == (8, 2, 2, 16)
    assert record.global_batch == 16 * 2 * 2 and record.precision == "bf16"
    assert record.throughput > 0 and record.throughput_per_gpu == pytest.approx(record.throughput / 2)
    assert record.step_time_mean_s > 0 and record.step_time_std_s >= 0
    assert record.time_to_train_s is None and record.final_metric is None  # not a time-to-accuracy run
    assert_two_local_ranks(record, controller)
    assert record.launcher == launcher and record.wall_s > 0 and record.started_at
