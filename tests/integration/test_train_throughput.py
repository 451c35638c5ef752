"""Throughput mode on synthetic data, under real two-rank launches, for every framework (ResNet-50
PyTorch under horovodrun/Gloo, BERT TensorFlow under plain mpirun, BERT PyTorch under horovodrun/MPI):
a complete result record with the right topology fields, and the same parameters on both ranks
(TensorFlow's BERT: as many as PyTorch's for the same sizes). Gradient accumulation, fp16 gradient
compression and bf16 autocast ride along, so those paths run for real too. (TensorFlow's ResNet-50
on synthetic data is the README's `runs/r2` line: tests/integration/test_readme.py.)"""

import json
import socket

import pytest
from conftest import launch_env, run, torch_parameters

from hvdbench.results.records.schema import read_result

pytestmark = pytest.mark.integration


# --warmup-max-steps 2: exactly two warm-up steps, whether or not the step times have settled by then.
COMMON = ["--flavor", "debug", "--synthetic", "--steps", "6", "--warmup-steps", "2", "--warmup-max-steps", "2",
          "--batch-per-gpu", "8",
          "--accum-steps", "2", "--fp16-allreduce", "--precision", "bf16",
          "--run-id", "r-1", "--sweep-name", "demo", "--repeat", "3"]

CASES = {  # id: (model, framework, launcher, controller, version key)
    "resnet50-torch-horovodrun-gloo": ("resnet50", "torch", "horovodrun", "gloo", "torch="),
    "bert-tensorflow-mpirun": ("bert", "tensorflow", "mpirun", "mpi", "tensorflow="),
    "bert-torch-horovodrun-mpi": ("bert", "torch", "horovodrun", "mpi", "torch="),
}


@pytest.mark.timeout(420)  # TensorFlow BERT under load: 3.5 min measured (load 9)
@pytest.mark.parametrize("case", list(CASES))
def test_throughput_on_synthetic_data_writes_a_complete_record(case, tmp_path, horovodrun, mpirun, hvdbench_bin):
    model, framework, launcher, controller, version = CASES[case]
    out = tmp_path / "run"
    train = [hvdbench_bin, "train", model, "--framework", framework, *COMMON, "--out", out]
    if launcher == "mpirun":
        argv = [mpirun, "-np", "2", *train]
    else:
        argv = [horovodrun, "-np", "2", "-H", "localhost:2", f"--{controller}", *train]
    # `horovodrun --mpi` runs mpirun and looks like it from inside; a sweep says which it used.
    run(argv, env=launch_env(HVDBENCH_LAUNCHER="horovodrun") if controller == "mpi" and launcher == "horovodrun"
        else launch_env(), timeout=400)
    record, config = read_result(out / "result.json")

    assert (record.status, record.mode, record.dataset) == ("success", "throughput", "synthetic")
    assert (record.model, record.framework, record.flavor) == (model, framework, "debug")
    assert (record.run_id, record.sweep, record.repeat) == ("r-1", "demo", 3)
    assert (record.steps, record.warmup_steps, record.accum_steps, record.batch_per_gpu) == (6, 2, 2, 8)
    assert record.global_batch == 8 * 2 * 2 and record.precision == "bf16"
    assert record.throughput > 0 and record.throughput_per_gpu == pytest.approx(record.throughput / 2)
    assert record.step_time_mean_s > 0 and record.step_time_std_s >= 0
    assert record.time_to_train_s is None and record.final_metric is None  # not a time-to-accuracy run
    assert (record.world_size, record.nodes, record.gpus_per_node) == (2, 1, 2)
    assert (record.layout, record.scale, record.controller, record.launcher) == ("1x2", "up", controller, launcher)
    assert record.hosts == socket.gethostname() and record.devices == "cpu"
    assert version in record.versions and "horovod=0.28.1" in record.versions
    assert record.wall_s > 0 and record.started_at
    assert config["fp16_allreduce"] is True and config["model"] == model

    digests = json.loads((out / "checks.json").read_text())["param_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]
    if framework == "tensorflow":  # the Keras network is PyTorch's, parameter for parameter
        assert record.parameters == torch_parameters(model)


@pytest.mark.timeout(300)
def test_the_step_time_breakdown_adds_up_and_a_slow_reader_shows_as_data(tmp_path, horovodrun, hvdbench_bin,
                                                                          digits):
    """Real data on two Gloo ranks, every batch read 50 ms late (HVDBENCH_INJECT_READ_DELAY_S): the
    measured phases cover the step, and the reader's wait is in data_s. One launch: the same checks of
    the phases on a run without the delay cost a second one (dropped; synthetic runs' records are
    checked whole above)."""
    out = tmp_path / "slow"
    run([horovodrun, "-np", "2", "-H", "localhost:2", "--gloo", hvdbench_bin, "train", "resnet50", "--flavor",
         "debug", "--data", digits, "--steps", "12", "--warmup-steps", "2", "--warmup-max-steps", "2",
         "--batch-per-gpu", "16", "--out", out], env=launch_env(HVDBENCH_INJECT_READ_DELAY_S="0.05"))
    slow, _ = read_result(out / "result.json")
    parts = (slow.data_s, slow.compute_s, slow.comm_s, slow.update_s)
    assert all(p is not None and p >= 0 for p in parts) and slow.compute_s > 0
    # The measured phases cover the step: what is left (other_s) is under 5 % of it.
    assert sum(parts) == pytest.approx(slow.step_time_mean_s, rel=0.05)
    assert sum(parts) + slow.other_s == pytest.approx(slow.step_time_mean_s, rel=1e-9)
    assert slow.data_s >= 0.05  # every step waited 50 ms for its batches
