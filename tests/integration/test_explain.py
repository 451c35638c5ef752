"""`hvdbench sweep --explain`: every layout and repeat again on --synthetic data in SWEEP/explain/,
and the report's waterfall measures each layout's data stall against its twin."""

import csv

import pytest
from conftest import run

from hvdbench.results.records.store import read_runs

pytestmark = pytest.mark.integration


@pytest.mark.timeout(400)
def test_explain_adds_exactly_one_synthetic_twin_per_run(digits, tmp_path, hvdbench_bin):
    out = tmp_path / "sweep"
    train = ["--", "--flavor", "debug", "--data", digits, "--steps", "6", "--warmup-steps", "2",
             "--warmup-max-steps", "2"]
    run([hvdbench_bin, "sweep", "resnet50", "--hosts", "localhost:2", "--layouts", "1x1,1x2", "--explain",
         "--out", out, *train], timeout=380)
    real = read_runs(out / "runs.csv")
    twins = read_runs(out / "explain" / "runs.csv")
    assert sorted(r.layout for r in real) == sorted(r.layout for r in twins) == ["1x1", "1x2"]
    assert {r.dataset for r in twins} == {"synthetic"} and all(r.dataset != "synthetic" for r in real)
    assert {r.status for r in real + twins} == {"success"}
    assert {r.sweep for r in twins} == {"sweep-explain"}

    # Run again: both sweeps resume and add nothing.
    run([hvdbench_bin, "sweep", "resnet50", "--hosts", "localhost:2", "--layouts", "1x1,1x2", "--explain",
         "--out", out, *train], timeout=120)
    assert len(read_runs(out / "explain" / "runs.csv")) == 2 and len(read_runs(out / "runs.csv")) == 2

    run([hvdbench_bin, "report", out, "--out", tmp_path / "report", "--format", "csv"])
    with open(tmp_path / "report" / "waterfall.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert row["layout"] == "1x2" and row["data_from"] == "synthetic twin"
    # The imbalance (waiting for the slowest rank) is its own loss when ranks.csv measured it.
    cells = [float(row[k] or 0) for k in ("comm_loss", "imbalance_loss", "data_loss", "compute_loss", "unattributed")]
    # Each cell is written at 4 significant digits (half a unit in the 4th: 5e-4 of itself at most).
    rounding = 5e-4 * (sum(map(abs, cells)) + float(row["ideal"]) + float(row["measured"]))
    assert float(row["ideal"]) - sum(cells) == pytest.approx(float(row["measured"]), abs=rounding)


def test_explain_needs_real_data_and_throughput_steps(tmp_path, hvdbench_bin):
    bad = run([hvdbench_bin, "sweep", "resnet50", "--hosts", "localhost:1", "--explain", "--out", tmp_path / "s",
               "--", "--flavor", "debug", "--synthetic", "--steps", "5"], check=False)
    assert bad.returncode == 2 and "give --data DIR after --" in bad.stderr
