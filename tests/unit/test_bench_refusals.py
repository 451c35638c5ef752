"""`bench flops` and `bench compute` refuse what they cannot measure in one line (issue 50, item 17):
an unknown flavor, an empty --out, a copy too small to time or too large for memory; a repeated
--model is counted once."""

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from hvdbench.cli.main import cli

HVDBENCH = str(Path(sys.executable).parent / "hvdbench")


def bench(*args):
    return CliRunner().invoke(cli, ["bench", *map(str, args)])


def test_flops_refuses_an_unknown_flavor_in_one_line():
    result = bench("flops", "--flavor", "debug", "--flavor", "nosuch")
    assert result.exit_code == 1 and result.stderr.strip() == "Error: no model has flavor nosuch", result.output


def test_flops_counts_a_repeated_model_once(tmp_path):
    result = bench("flops", "--model", "resnet50", "--model", "resnet50", "--flavor", "debug",
                   "--out", tmp_path / "f.csv")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "f.csv").read_text().count("resnet50,debug,") == 1


def test_flops_refuses_an_empty_out():
    result = bench("flops", "--model", "resnet50", "--out", "")
    assert result.exit_code == 2 and "Invalid value for '--out': an empty name" in result.stderr, result.output


def test_compute_refuses_a_copy_too_small_to_time(tmp_path):
    result = bench("compute", "--copy-bytes", "1", "--out", tmp_path)
    assert result.exit_code == 2 and "Invalid value for '--copy-bytes': 1 bytes: at least 1M" in result.stderr
    assert not tmp_path.joinpath("bench_compute.csv").exists()


def test_compute_refuses_a_copy_past_memory_in_one_line(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([HVDBENCH, "bench", "compute", "--dtype", "fp32", "--size", "64", "--budget-s", "0",
                           "--copy-bytes", "100000G", "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=120, env=env)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("Error: --copy-bytes 107374182400000: the copy needs 2.15e+05 GB") \
        and "give a smaller --copy-bytes" in lines[0], lines
    assert not (tmp_path / "bench_compute.csv").exists()
