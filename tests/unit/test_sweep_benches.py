"""A sweep's benches (issue 50, item 13): `--compute-bench` measures the peak on the math threads
its runs have (their --thread-share), so a layout's MFU against the measured peak is comparable
across layouts; `--dry-run` lists every bench launch it would make, before the runs, as it makes them."""

import shlex
import sys
from pathlib import Path

from click.testing import CliRunner

from hvdbench.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
HVDBENCH = str(Path(sys.executable).parent / "hvdbench")


def dry_run(out, *extra):
    result = CliRunner().invoke(cli, ["sweep", "resnet50", "--hosts", "localhost:2", "--out", str(out), "--dry-run",
                                      *extra, "--", "--flavor", "debug", "--synthetic"])
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def test_dry_run_lists_the_bench_launches_with_the_runs_threads(tmp_path):
    out = tmp_path / "sw"
    lines = dry_run(out, "--compute-bench", "--allreduce-bench", "64K")
    named = [line.split(": ", 1) for line in lines if line.startswith(("bench-", "1x1-", "1x2-"))]
    assert [n for n, _ in named] == ["bench-allreduce-1x1", "bench-allreduce-1x2", "bench-compute-1x1",
                                     "bench-compute-1x2", "1x1-r1", "1x2-r1"]
    commands = {n: shlex.split(c) for n, c in named}
    for layout in ("1x1", "1x2"):
        compute = commands[f"bench-compute-{layout}"]
        assert compute[compute.index(HVDBENCH):] == [HVDBENCH, "bench", "compute", "--threads", "0",
                                                     "--thread-share", "2", "--out", str(out)]
        train = commands[f"{layout}-r1"]
        assert train[-2:] == ["--thread-share", "2"]  # the share the bench got
    allreduce = commands["bench-allreduce-1x2"]
    assert allreduce[allreduce.index(HVDBENCH):] == [HVDBENCH, "bench", "allreduce", "--max-bytes", "64K",
                                                     "--out", str(out)]
    assert not out.exists()


def test_threads_the_user_chose_go_to_the_bench_too(tmp_path):
    result = CliRunner().invoke(cli, ["sweep", "resnet50", "--hosts", "localhost:2", "--out", str(tmp_path / "s"),
                                      "--dry-run", "--compute-bench", "--", "--flavor", "debug", "--synthetic",
                                      "--threads", "1"])
    assert result.exit_code == 0, result.output
    compute = [line for line in result.output.splitlines() if line.startswith("bench-compute-1x2: ")]
    assert compute and "bench compute --threads 1 --thread-share 0 --out" in compute[0]


def test_without_benches_the_dry_run_lists_none(tmp_path):
    assert not [line for line in dry_run(tmp_path / "sw") if line.startswith("bench-")]


def test_links_bench_is_one_launch_over_every_host(tmp_path):
    """`bench links` measures pairs, so once a sweep: over every host given, with the most ranks per host
    the sweep's layouts use, though its layouts use fewer hosts (three hosts: 1x1 and 2x1 by default)."""
    out = tmp_path / "sw"
    lines = dry_run(out, "--links-bench", "--allreduce-bench", "64K")
    named = [line.split(": ", 1) for line in lines if line.startswith("bench-")]
    assert [n for n, _ in named] == ["bench-allreduce-1x1", "bench-allreduce-1x2", "bench-links-1x2"]
    links = shlex.split(named[-1][1])
    assert links[links.index(HVDBENCH):] == [HVDBENCH, "bench", "links", "--out", str(out)]
    assert links[1:5] == ["-np", "2", "-H", "localhost:2"]

    result = CliRunner().invoke(cli, ["sweep", "resnet50", "--hosts", "n1:2,n2:2,n3:1", "--gpus", "1,2",
                                      "--out", str(out), "--dry-run", "--links-bench", "--", "--flavor", "debug",
                                      "--synthetic"])
    assert result.exit_code == 0, result.output
    [line] = [x for x in result.output.splitlines() if x.startswith("bench-links-")]
    assert line.startswith("bench-links-3x1: ") and " -np 3 -H n1:1,n2:1,n3:1 " in line  # n3 has one slot


def test_links_bench_needs_two_ranks(tmp_path):
    result = CliRunner().invoke(cli, ["sweep", "resnet50", "--hosts", "localhost:2", "--layouts", "1x1", "--out",
                                      str(tmp_path / "s"), "--dry-run", "--links-bench", "--", "--flavor", "debug",
                                      "--synthetic"])
    assert result.exit_code == 1, result.output
    assert ("--links-bench measures pairs of ranks, over every host of the sweep with the most ranks per host its "
            "layouts use: 1x1 is one rank") in result.output
