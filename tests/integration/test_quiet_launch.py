"""A PyTorch run's output holds hvdbench's lines only: no TensorFlow/absl start-up logs (horovodrun
used to import TensorFlow to ask whether Horovod was built with MPI or Gloo; scripts/patch_horovod.py
makes it ask PyTorch first), and every stdout line is whole (no stray launcher tags)."""

import pytest
from conftest import run

pytestmark = pytest.mark.integration

NOISE = ("absl", "oneDNN", "tensorflow", "cpu_feature_guard", "I0000")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("controller", ["gloo", "mpi"])
def test_a_torch_launch_prints_no_tensorflow_logs(controller, tmp_path, horovodrun, hvdbench_bin):
    proc = run([horovodrun, "-np", "2", "-H", "localhost:2", f"--{controller}", hvdbench_bin, "train", "resnet50",
                "--flavor", "debug", "--synthetic", "--steps", "3", "--warmup-steps", "1", "--out", tmp_path / "r"])
    noisy = [line for line in (proc.stdout + proc.stderr).splitlines() if any(n in line for n in NOISE)]
    assert noisy == []
    ours = [line for line in proc.stdout.splitlines() if "[hvdbench]" in line]
    assert len(ours) >= 3
    assert all(line.count("[hvdbench]") == 1 and not line.rstrip().endswith(":") for line in ours)
