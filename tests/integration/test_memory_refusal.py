"""`hvdbench train` on a machine without GPUs refuses, before the first step and in one line, a run
whose memory estimate exceeds what it may use, naming the batch or flavor that fits."""

import pytest
from conftest import launch_env, run

pytestmark = pytest.mark.integration


@pytest.mark.timeout(120)
@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_a_full_flavor_at_full_batch_is_refused_up_front(framework, tmp_path, hvdbench_bin):
    out = tmp_path / "run"
    proc = run([hvdbench_bin, "train", "resnet50", "--framework", framework, "--synthetic",
                "--batch-per-gpu", "256", "--steps", "5", "--out", out],
               env=launch_env(HVDBENCH_HOST_MEMORY_GB="8"), check=False)
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr
    assert f"resnet50/full ({framework}, horovod) needs ~2" in errors[0] and "8.0 GB available per rank" in errors[0]
    assert "try --flavor debug or --batch-per-gpu" in errors[0]
    assert "throughput" not in proc.stdout  # no step ran
