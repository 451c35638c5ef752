"""hvdbench/published.py: MLPerf's published per-GPU rates, looked up by accelerator (matched as the
peaks table matches it) and benchmark at the benchmark's flavor, and a run's rate as a share of one;
and the record's columns the trainer fills from it.

    .venv/bin/python -m pytest tests/unit/test_published.py
"""

import json

import pytest

from hvdbench.contracts import get_spec
from hvdbench.peaks import device_entry
from hvdbench.published import RATES, compare, markdown_table, published_rate
from hvdbench.results.analyses.efficiency import compute_rows
from hvdbench.results.records.schema import LoadedRun, RunResult
from hvdbench.results.records.store import append_rows
from hvdbench.results.report.load import load
from hvdbench.train.compute_window import fill


def test_every_row_names_a_known_accelerator_round_system_and_source():
    for r in RATES:
        assert device_entry(r.accelerator) is not None and device_entry(r.accelerator).name == r.accelerator
        assert r.round.startswith("v") and r.system and r.source.startswith("https://") and r.rate > 0
    assert markdown_table().count("\n") == len(RATES) + 1


def test_the_newest_round_of_the_runs_accelerator_and_benchmark_wins():
    h100 = published_rate("NVIDIA H100 80GB HBM3", "llama31_8b", "full")
    assert (h100.round, h100.rate, h100.unit) == ("v6.0", 11660, "tokens/s")
    assert h100.per_sample == pytest.approx(11660 / 8192)
    assert published_rate("NVIDIA H200", "bert", "large").rate == 1040
    assert published_rate("NVIDIA H100 80GB HBM3", "bert", "large").precision == "fp8"


@pytest.mark.parametrize("device, benchmark, flavor", [
    ("cpu", "llama31_8b", "full"),                        # no accelerator
    ("NVIDIA A100-SXM4-80GB", "llama31_8b", "full"),      # no published row for it
    ("NVIDIA H200", "llama31_8b", "full-4l"),             # another network than the benchmark's
    ("NVIDIA H200", "gnmt", "full"),                      # a benchmark without a row
])
def test_nothing_is_compared_where_nothing_was_published(device, benchmark, flavor):
    assert published_rate(device, benchmark, flavor) is None
    assert compare(device, benchmark, flavor, 1.0) == (None, "")


def test_a_runs_share_of_the_published_rate_says_where_it_comes_from():
    share, ref = compare("NVIDIA H200", "llama31_8b", "full", 11598 / 8192 / 2)
    assert share == pytest.approx(0.5)
    assert ref == "MLPerf Training v5.1, 64x H200, precision not stated: 11,598 tokens/s per GPU"
    assert compare("NVIDIA H200", "llama31_8b", "full", None) == (None, "")


def test_the_trainer_fills_the_records_published_columns():
    record = RunResult(model="bert", flavor="large", precision="bf16", devices="NVIDIA H200;NVIDIA H200",
                       throughput_per_gpu=260.0)  # 512-token rows/s: ~2 of MLPerf's packed sequences each
    fill(record, {})
    assert record.published_share == pytest.approx(0.5)
    assert record.published_ref.startswith("MLPerf Training v4.0/v5.0, NVIDIA 8x H200")
    assert "fp8" in record.published_ref
    debug = RunResult(model="bert", flavor="debug", precision="bf16", devices="cpu", throughput_per_gpu=10.0)
    fill(debug, {})
    assert (debug.published_share, debug.published_ref) == (None, "")


def test_bert_is_compared_in_the_sequences_its_rows_held():
    """A run that counted MLPerf's samples in its rows (packed BERT: ~2 sequences a row, unpacked: 1)
    is compared in those, not in the table's assumed 2 a row; a tokens rate never takes the count."""
    packed = compare("NVIDIA H200", "bert", "large", 260.0, mlperf_samples_per_row=1.98)
    assert packed[0] == pytest.approx(260.0 * 1.98 / 1040)
    unpacked = compare("NVIDIA H200", "bert", "large", 260.0, mlperf_samples_per_row=1.0)
    assert unpacked[0] == pytest.approx(0.25) and unpacked[1] == packed[1]
    assert compare("NVIDIA H200", "llama31_8b", "full", 0.708, 2.0)[0] == pytest.approx(0.708 / (11598 / 8192))
    record = RunResult(model="bert", flavor="large", precision="bf16", devices="NVIDIA H100 80GB HBM3",
                       throughput_per_gpu=400.0, mlperf_samples_per_row=2.0)
    fill(record, {})
    assert record.published_share == pytest.approx(800 / 949)


def _claimed_h100_sweep(tmp_path, gpus, flops):
    """A sweep folder whose runs.csv says resnet50 full on an H100 at 786.6 images/s (11.4 % of the published
    6,900), its sweep.json's hardware record holding `gpus`, its FLOPs per sample `flops`."""
    run = LoadedRun(run_id="r1", sweep="s", model="resnet50", flavor="full", framework="torch", engine="horovod",
                    precision="bf16", layout="1x1", world_size=1, nodes=1, gpus_per_node=1, status="success",
                    devices="NVIDIA H100 80GB HBM3", throughput=786.6, throughput_per_gpu=786.6,
                    flops_per_sample=flops, model_tflops_per_gpu=1.0)
    append_rows(tmp_path / "runs.csv", [run])
    (tmp_path / "sweep.json").write_text(json.dumps({"hardware": {"node1": {"cpu": {"model": "x", "logical": 2},
                                                                            "gpus": gpus}}}))
    return tmp_path


def test_a_share_of_published_checks_the_record_against_the_hardware_and_the_flavors_flops(tmp_path):
    """Issue 57 case 8: a CPU sweep whose runs.csv claims an H100 and the full flavor got "11.4 % of published",
    its FLOPs per sample the debug network's and its hardware record holding no GPU."""
    full = get_spec("resnet50").published_flops.flops_per_row
    [row] = compute_rows(load([_claimed_h100_sweep(tmp_path / "cpu", [], 1.2e8)]).runs)
    assert row.published_share is None
    assert row.published_ref == ("no published share: runs.csv names NVIDIA H100 80GB HBM3, but sweep.json's "
                                 f"hardware record has no GPU; its FLOPs per sample (1.2e+08) are not the full "
                                 f"flavor's ({full:.3g}): another network ran")
    a100 = [{"index": 0, "name": "NVIDIA A100-SXM4-80GB"}]
    [row] = compute_rows(load([_claimed_h100_sweep(tmp_path / "a100", a100, full)]).runs)
    assert row.published_share is None and row.published_ref == (
        "no published share: runs.csv names NVIDIA H100 80GB HBM3, but sweep.json's hardware record has "
        "NVIDIA A100-SXM4-80GB")
    # what the record says, held by the hardware record and the flavor's count: the share stands
    h100 = [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}]
    [row] = compute_rows(load([_claimed_h100_sweep(tmp_path / "h100", h100, full * 1.01)]).runs)
    assert row.published_share == pytest.approx(786.6 / 6900) and row.published_ref.startswith("MLPerf Training v4.0")
