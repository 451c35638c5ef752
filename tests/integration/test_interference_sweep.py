"""A sweep on a deliberately loaded machine: its runs record the neighbour (runs.csv other_cpus),
the report flags the layout `busy`, and `--require-idle` refuses to start a run while it lasts."""

import csv
import subprocess
import sys

import pytest
from conftest import run

from hvdbench.results.records.store import read_runs

pytestmark = pytest.mark.integration

SPIN = "import time\nt = time.time()\nwhile time.time() - t < 300: pass"  # one core, ended by the test


@pytest.fixture
def neighbour():
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    yield spinner
    spinner.kill()
    spinner.wait()


@pytest.mark.timeout(300)
def test_a_loaded_machine_is_recorded_flagged_and_refused(neighbour, tmp_path, hvdbench_bin):
    train = ["--", "--flavor", "debug", "--synthetic", "--steps", "20", "--warmup-steps", "2"]
    out = tmp_path / "sweep"
    run([hvdbench_bin, "sweep", "resnet50", "--hosts", "localhost:1", "--layouts", "1x1", "--out", out, *train],
        timeout=240)
    (row,) = read_runs(out / "runs.csv")
    assert row.status == "success" and row.other_cpus >= 0.5  # the spinner's core (and any other load)

    run([hvdbench_bin, "report", out, "--out", tmp_path / "report", "--format", "csv,md"])
    with open(tmp_path / "report" / "scaling.csv", newline="") as f:
        (scaling,) = list(csv.DictReader(f))
    assert "busy" in scaling["flags"].split(";") and float(scaling["other_cpus"]) >= 0.5
    assert "**busy**: other processes used" in (tmp_path / "report" / "summary.md").read_text()

    refused = tmp_path / "refused"
    proc = run([hvdbench_bin, "sweep", "resnet50", "--hosts", "localhost:1", "--layouts", "1x1",
                "--require-idle", "0", "--out", refused, *train], timeout=120, check=False)
    assert proc.returncode != 0  # a run that did not succeed makes the sweep's exit status non-zero
    (row,) = read_runs(refused / "runs.csv")
    assert row.status == "failed" and row.error.startswith("not started: this machine was busy")
    assert not (refused / row.run_id / "result.json").exists()  # nothing was launched
