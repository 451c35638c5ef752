"""`hvdbench train --horovod-timeline` under a real two-rank launch: Horovod's timeline of the
timed steps is kept beside the run and its summary is in the record."""

import pytest
from conftest import run

from hvdbench.results.records.schema import read_result
from hvdbench.train.timeline import COLUMNS, operations, read_events, summarise

pytestmark = pytest.mark.integration


@pytest.mark.timeout(240)
def test_a_two_rank_run_keeps_and_summarises_horovods_timeline(tmp_path, horovodrun, hvdbench_bin):
    out = tmp_path / "run"
    proc = run([horovodrun, "-np", "2", "-H", "localhost:2", "--mpi", hvdbench_bin, "train", "resnet50",
                "--flavor", "debug", "--synthetic", "--steps", "8", "--warmup-steps", "2", "--horovod-timeline",
                "--out", out], timeout=240)
    record, config = read_result(out / "result.json")
    assert config["horovod_timeline"] is True
    events = read_events(out / "timeline.json")
    names = {op["name"] for op in operations(events)}
    assert {"NEGOTIATE_ALLREDUCE", "ALLREDUCE", "MPI_ALLREDUCE"} <= names  # the MPI controller's own op
    # Only the timed steps: the start-up broadcast of the weights happened before the timeline began.
    assert "BROADCAST" not in names
    summary = summarise(out / "timeline.json", steps=8)
    assert {k: getattr(record, k) for k in COLUMNS} == pytest.approx(summary)
    assert record.timeline_cycles_per_step >= 1  # every step allreduces its gradients in some cycle
    assert 0 < record.timeline_fused_mib <= record.parameters * 4 / 2**20 + 1e-9
    assert record.timeline_allreduce_ms > 0 and record.timeline_negotiate_ms > 0
    assert "timeline: per step" in proc.stdout
