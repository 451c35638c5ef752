"""BERT at MLPerf's count: `--synthetic-kind bert_packed` trains on synthetic packed rows, and a
throughput run (synthetic or on real packed data) records the sequences its rows held
(mlperf_samples_per_row) beside its rows/s.

    .venv/bin/python -m pytest tests/unit/test_bert_packed_runs.py
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hvdbench.data.synthetic import prepare_synthetic
from hvdbench.errors import ConfigError
from hvdbench.models.bert import SPEC
from hvdbench.models.bert.data import BERT_PACKED
from hvdbench.models.bert.packing import prepare_pack
from hvdbench.results.records.schema import read_result
from hvdbench.train.config import resolve

HVDBENCH = str(Path(sys.executable).parent / "hvdbench")
STEPS = ["--steps", "3", "--warmup-steps", "1", "--warmup-max-steps", "1", "--batch-per-gpu", "8"]


def test_synthetic_kind_is_one_the_model_trains_on_and_only_with_synthetic():
    cfg = resolve({"model": "bert", "flavor": "debug", "synthetic": True, "synthetic_kind": "bert_packed", "out": "o"})
    assert cfg.dataset == "synthetic bert_packed"
    assert resolve({"model": "bert", "synthetic": True, "out": "o"}).dataset == "synthetic"
    with pytest.raises(ConfigError, match="--synthetic-kind: bert trains on bert, bert_packed, not 'images'"):
        resolve({"model": "bert", "synthetic": True, "synthetic_kind": "images", "out": "o"})
    with pytest.raises(ConfigError, match="--synthetic-kind is the kind of --synthetic's batch"):
        resolve({"model": "bert", "data": "d", "synthetic_kind": "bert_packed", "out": "o"})


def _train(tmp_path, name, *args):
    out = tmp_path / name
    proc = subprocess.run([HVDBENCH, "train", "bert", "--flavor", "debug", *args, *STEPS, "--out", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return read_result(out / "result.json")[0], proc.stdout


@pytest.mark.timeout(180)
def test_a_packed_run_counts_its_sequences_as_mlperf_does(tmp_path):
    # The synthetic batch is the worker's second draw from its seeded stream (the first is the
    # one-row example it compiles with): its sequences a row are the record's, exactly.
    record, said = _train(tmp_path, "synthetic", "--synthetic", "--synthetic-kind", "bert_packed")
    info = SPEC.synthetic_info(SPEC.flavor("debug"), BERT_PACKED)
    rng = np.random.default_rng([0, 0])
    BERT_PACKED.synthetic(1, info, rng)
    assert record.mlperf_samples_per_row == BERT_PACKED.mlperf_samples(BERT_PACKED.synthetic(8, info, rng)) / 8
    assert record.dataset == "synthetic bert_packed" and 1.5 < record.mlperf_samples_per_row < 2.5
    assert f"{record.throughput * record.mlperf_samples_per_row:,.1f} sequences/s" in said
    # Real packed data: the sequences of the 3 timed steps' 24 rows, counted as they are read.
    small = {"vocab_size": 200, "max_seq_len": 64, "max_predictions": 10}
    prepare_synthetic("bert", 400, tmp_path / "b", info=small, val_fraction=0.1)
    prepare_pack(tmp_path / "b", tmp_path / "p", strategy="nnlshp")
    real, _ = _train(tmp_path, "real", "--data", str(tmp_path / "p"))
    counted = real.mlperf_samples_per_row * 24
    assert counted == pytest.approx(round(counted)) and 24 <= counted <= 72
