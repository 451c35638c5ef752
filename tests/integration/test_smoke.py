"""Real horovodrun launches of the smoke worker: an allreduce of known values, PyTorch's under Gloo and
TensorFlow's under MPI, one framework a launch (issue 56: both frameworks in every rank cost 35 CPU-s
for the two launches; each framework's import is paid once now). The other two pairs train under
real launches: PyTorch under MPI in test_train_resnet.py, TensorFlow under Gloo there too, and each
pair's ranks end with the same parameters."""

import json
import sys

import pytest

from conftest import run


@pytest.mark.integration
@pytest.mark.timeout(300)
@pytest.mark.parametrize("controller, framework", [("--gloo", "torch"), ("--mpi", "tensorflow")])
def test_horovodrun_allreduces_in_each_framework(horovodrun, controller, framework, tmp_path):
    # Reports come back as files: Open MPI may interleave the two ranks' long stdout lines.
    proc = run([horovodrun, "-np", "2", "-H", "localhost:2", controller, sys.executable, "-m",
                "hvdbench.frameworks.smoke", "--framework", framework, "--expect-size", "2",
                "--expect-local-size", "2", "--expect-cross-size", "1", "--report-dir", tmp_path])
    reports = [json.loads(path.read_text()) for path in sorted(tmp_path.glob("rank-*.json"))]
    assert len(reports) == 2, proc.stdout
    assert proc.stdout.count("SMOKE ") == 2
    assert all(r["ok"] and framework in r for r in reports)
    assert sorted(r[framework]["rank"] for r in reports) == [0, 1]
    assert sorted(r[framework]["local_rank"] for r in reports) == [0, 1]
    assert {r[framework]["controller"] for r in reports} == {controller.strip("-")}
    # rank 0 sends [1,2,3,4], rank 1 sends [2,4,6,8]
    assert all(r[framework]["allreduce"] == [3.0, 6.0, 9.0, 12.0] for r in reports)


def test_expected_sum_formula():
    from hvdbench.frameworks.smoke import expected_sum
    assert expected_sum(1) == [1, 2, 3, 4]
    assert expected_sum(4) == [10, 20, 30, 40]
