"""Real horovodrun launches (Gloo and MPI) of the smoke worker: allreduce in PyTorch and TensorFlow."""

import json
import sys

import pytest

from conftest import run


@pytest.mark.integration
@pytest.mark.timeout(300)
@pytest.mark.parametrize("controller", ["--gloo", "--mpi"])
def test_horovodrun_allreduces_in_both_frameworks(horovodrun, controller, tmp_path):
    # Reports come back as files: Open MPI may interleave the two ranks' long stdout lines.
    proc = run([horovodrun, "-np", "2", "-H", "localhost:2", controller, sys.executable, "-m",
                "hvdbench.frameworks.smoke", "--expect-size", "2", "--expect-local-size", "2",
                "--expect-cross-size", "1", "--report-dir", tmp_path])
    reports = [json.loads(path.read_text()) for path in sorted(tmp_path.glob("rank-*.json"))]
    assert len(reports) == 2, proc.stdout
    assert proc.stdout.count("SMOKE ") == 2
    assert all(r["ok"] for r in reports)
    for fw in ("torch", "tensorflow"):
        assert sorted(r[fw]["rank"] for r in reports) == [0, 1]
        assert sorted(r[fw]["local_rank"] for r in reports) == [0, 1]
        assert {r[fw]["controller"] for r in reports} == {controller.strip("-")}
        # rank 0 sends [1,2,3,4], rank 1 sends [2,4,6,8]
        assert all(r[fw]["allreduce"] == [3.0, 6.0, 9.0, 12.0] for r in reports)


def test_expected_sum_formula():
    from hvdbench.frameworks.smoke import expected_sum
    assert expected_sum(1) == [1, 2, 3, 4]
    assert expected_sum(4) == [10, 20, 30, 40]
