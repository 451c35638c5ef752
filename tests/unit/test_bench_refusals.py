"""`bench flops`, `bench compute` and `bench links` refuse what they cannot measure in one line (issue 50,
item 17): an unknown flavor, an empty --out, a copy too small to time or too large for memory, one rank
or a bad size for the links; a repeated --model is counted once."""

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


def test_links_refuses_one_rank_and_bad_sizes_before_writing(tmp_path, monkeypatch):
    from hvdbench.launchers.registry import launchers

    for launcher in launchers():
        if launcher.place:
            monkeypatch.delenv(launcher.place[0], raising=False)  # a lone process, whatever launched the tests
    out = tmp_path / "links"
    result = bench("links", "--out", out)
    assert result.exit_code == 1 and result.stderr.strip().startswith(
        "Error: bench links measures pairs of ranks and this is 1 rank: launch it over 2 or more"), result.output
    for sizes, said in (("8,,1M", "a comma list of sizes with no empty entry"), ("0", "0: a message is 1 byte to 4 GiB"),
                        ("8G", "8589934592: a message is 1 byte to 4 GiB"), ("1X", "'1X' is not a size")):
        result = bench("links", "--sizes", sizes, "--out", out)
        assert result.exit_code == 2 and "Invalid value for '--sizes': " in result.stderr, result.output
        assert said in result.stderr, result.stderr
    assert not out.exists()


def test_a_budget_that_is_no_number_is_refused_naming_the_option(tmp_path):
    """Issue 57 case 10: `bench links --budget-s inf|nan` passed the option check and failed on every rank."""
    for command in ("links", "compute"):
        for value in ("inf", "nan"):
            result = bench(command, "--budget-s", value, "--out", tmp_path / command)
            assert result.exit_code == 2, result.output
            assert f"Invalid value for '--budget-s': {value!r} is not a finite number." in result.stderr, result.stderr
            assert not (tmp_path / command).exists()
