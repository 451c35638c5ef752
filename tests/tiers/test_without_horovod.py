"""hvdbench `pip install`ed into a Python with the oldest or the newest supported PyTorch and no Horovod
(CI's torch tiers, scripts/test_torch_tier.sh, which names the tier's torch in HVDBENCH_TIER_TORCH; not
part of `make test`, whose venv has Horovod): the README's pip path run as written but its installs (a
ddp/fsdp sweep at 1x1 and 1x2 and its report), a ddp/fsdp sweep under torchrun (the launcher a sweep
takes where Horovod is not installed) and its report, a ddp run and the allreduce bench under mpirun
(the sweep names the rendezvous Horovod would have agreed); ddp and fsdp end ResNet-50's steps with the
same parameters (SGD: bit-identical, as under torch 2.13); asking for Horovod is one line, and a run
that names no engine takes ddp; `hvdbench env` names the engines there are and why Horovod's is not, and
the torch as inside the tested range; `bench compute` and `bench flops` measure and count on it.

    make test-oldest
    make test-newest
"""

import csv
import json
import os

import numpy as np
import pytest
from conftest import (BIN, PIP_INSTALL, PIP_PATH, PIP_PATH_SUBSTITUTIONS, csv_rows, readme_commands, run,
                      run_readme_line)

from hvdbench.frameworks import horovod_installed
from hvdbench.results.records.schema import read_result

pytestmark = pytest.mark.integration

STEPS = ["--flavor", "debug", "--synthetic", "--steps", "6", "--warmup-steps", "2", "--save-parameters"]


def test_this_python_has_no_horovod():
    assert not horovod_installed()  # the tier's premise: nothing below may lean on Horovod


@pytest.mark.timeout(900)
def test_a_ddp_and_fsdp_sweep_and_its_report_without_horovod(tmp_path, hvdbench_bin):
    out = tmp_path / "sweep"
    run([hvdbench_bin, "sweep", "resnet50", "--hosts", "localhost:2", "--layouts", "1x2", "--engines", "ddp,fsdp",
         "--out", out, "--", *STEPS], timeout=600)
    params = {}
    for engine in ("ddp", "fsdp"):
        record, _ = read_result(out / f"1x2-{engine}-r1" / "result.json")
        assert (record.status, record.engine, record.world_size, record.launcher) == ("success", engine, 2, "torchrun")
        assert record.throughput > 0 and record.comm_s is not None
        with np.load(out / f"1x2-{engine}-r1" / "parameters.npz") as saved:
            params[engine] = dict(saved)
    assert params["ddp"] and list(params["ddp"]) == list(params["fsdp"])
    for name in params["ddp"]:
        assert np.array_equal(params["ddp"][name], params["fsdp"][name]), name
    sweep = json.loads((out / "sweep.json").read_text())
    host = next(iter(sweep["hardware"].values()))  # this machine's record, once per host
    assert host["cpu"]["model"] and host["cpu"]["cores"] > 0 and host["gpus"] == []
    report = tmp_path / "report"
    proc = run([hvdbench_bin, "report", out, "--out", report])
    assert "## Engines side by side" in proc.stdout
    assert "intra-node link" in (report / "summary.md").read_text()


@pytest.mark.timeout(900)
def test_the_readme_pip_path_runs_as_written(tmp_path):
    """The README's pip path ("Which set-up to choose") but its `pip install` lines, which the tier
    made: each line in a fresh shell (`bash --noprofile --norc`, this Python's bin first on PATH), in
    order, each exiting 0 with no traceback; the sweep with PIP_PATH_SUBSTITUTIONS' fewer steps."""
    for command in readme_commands(PIP_PATH):
        if command.startswith(PIP_INSTALL):
            continue
        for old, new in PIP_PATH_SUBSTITUTIONS.items():
            command = command.replace(old, new)
        run_readme_line(command, tmp_path, f"{BIN}:/usr/bin:/bin")
    mine = tmp_path / "results/mine"
    report = mine / "report"
    # Every run of both engines succeeded (under torchrun: no Horovod here), and the report put them
    # side by side, ddp the reference (the first of the two in the engine registry's order), one
    # scaling group per engine, and each 1x2 run's ranks (ranks.csv) judged apart from the other engine's.
    assert sorted((r["layout"], r["engine"], r["status"]) for r in csv_rows(mine / "runs.csv")) == [
        ("1x1", "ddp", "success"), ("1x1", "fsdp", "success"), ("1x2", "ddp", "success"), ("1x2", "fsdp", "success")]
    assert sorted(p.name for p in mine.iterdir() if p.name.endswith("-r1")) == [
        "1x1-ddp-r1", "1x1-fsdp-r1", "1x2-ddp-r1", "1x2-fsdp-r1"]
    summary = (report / "summary.md").read_text()
    assert "## Engines side by side" in summary and "## Which rank or host held the others back" in summary
    rows = csv_rows(report / "engines.csv")
    assert [(r["layout"], r["engine"], r["reference"]) for r in rows] == [
        ("1x1", "ddp", "ddp"), ("1x1", "fsdp", "ddp"), ("1x2", "ddp", "ddp"), ("1x2", "fsdp", "ddp")]
    assert all(float(r["throughput_mean"]) > 0 and r["comm_ms"] != "" for r in rows)
    assert [float(r["vs_reference"]) for r in rows][::2] == [1.0, 1.0]
    assert (report / "engines.png").stat().st_size > 10_000
    assert {r["engine"] for r in csv_rows(report / "scaling.csv")} == {"ddp", "fsdp"}
    ranks = csv_rows(report / "stragglers.csv")
    assert sorted((r["engine"], r["layout"], r["rank"]) for r in ranks) == [
        ("ddp", "1x2", "0"), ("ddp", "1x2", "1"), ("fsdp", "1x2", "0"), ("fsdp", "1x2", "1")]
    assert all(float(r["compute_ms"]) > 0 for r in ranks)
    # fsdp's compute holds its waits for the other rank (its all-gathers): no imbalance is split out of
    # it and none of its ranks is named; ddp's wait for the slower rank stands apart from communication.
    assert {r["straggler"] for r in ranks if r["engine"] == "fsdp"} == {"no"}
    falls = {r["engine"]: r for r in csv_rows(report / "waterfall.csv")}
    assert falls["ddp"]["imbalance_loss"] != "" and falls["fsdp"]["imbalance_loss"] == ""


def test_mpirun_starts_ddp_and_the_allreduce_bench_without_horovod(tmp_path, hvdbench_bin):
    """Horovod is not there to agree torch.distributed's rendezvous: the sweep names it (MASTER_ADDR/PORT),
    for the run and for its layout's allreduce bench, which times torch.distributed's and MPI's."""
    out = tmp_path / "mpi"
    run([hvdbench_bin, "sweep", "resnet50", "--hosts", "localhost:2", "--layouts", "1x2", "--launcher", "mpirun",
         "--engines", "ddp", "--allreduce-bench", "256K", "--out", out, "--", *STEPS[:-1]], timeout=300)
    record, _ = read_result(out / "1x2-ddp-r1" / "result.json")
    assert (record.status, record.engine, record.world_size, record.launcher) == ("success", "ddp", 2, "mpirun")
    assert "-x MASTER_ADDR -x MASTER_PORT" in (out / "1x2-ddp-r1" / "command.txt").read_text()
    # The layout's allreduce bench without Horovod: torch.distributed's rows, every sum right; MPI's
    # reference needs mpi4py, which this Python (pip install .[torch,dev]) has not: said in the note.
    with open(out / "bench_allreduce.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and {r["impl"] for r in rows} == {"torch"} and all(r["layout"] == "1x2" for r in rows)
    assert all(float(r["busbw_gb_s"]) > 0 and r["wrong"] == "0" for r in rows)
    assert rows[0]["note"].startswith("Horovod is not installed here: torch.distributed only; ")
    assert "mpi4py is not installed" in rows[0]["note"]


def test_asking_for_horovod_is_one_line(tmp_path, hvdbench_bin):
    proc = run([hvdbench_bin, "train", "resnet50", *STEPS, "--engine", "horovod", "--out", tmp_path / "t"],
               check=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert "needs Horovod, which is not installed" in lines[0] and "ddp and fsdp need no Horovod" in lines[0]
    # A sweep that names no engine takes ddp here, under torchrun (issue 58: it planned horovod and refused).
    proc = run([hvdbench_bin, "sweep", "resnet50", "--hosts", "localhost:2", "--dry-run", "--out", tmp_path / "s",
                "--", *STEPS])
    assert "/torchrun " in proc.stdout and "--engine" not in proc.stdout
    proc = run([hvdbench_bin, "bench", "allreduce", "--tune", "--out", tmp_path / "b"], check=False)
    assert proc.returncode != 0 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "bench allreduce --tune (a search over Horovod's settings) needs Horovod" in proc.stderr


def test_env_lists_the_engines_here_and_why_not_horovod(hvdbench_bin):
    proc = run([hvdbench_bin, "env", "--json"], check=False)
    info = json.loads(proc.stdout)
    assert proc.returncode == 0, info["problems"]
    assert info["engines"]["ddp"]["available"] and info["engines"]["fsdp"]["available"]
    assert not info["engines"]["horovod"]["available"]
    assert "not installed" in info["engines"]["horovod"]["why"]
    assert info["torch"]["version"].split("+")[0] == os.environ["HVDBENCH_TIER_TORCH"]
    assert info["torch"]["tested"] is True, info["torch"]


def test_the_installed_package_has_its_studies(hvdbench_bin):
    """The study files are package data: `pip install` (not editable) brings them (issue 50)."""
    proc = run([hvdbench_bin, "study", "list"])
    assert "demo: resnet50, bert" in proc.stdout and "dgx1-mlperf-v05-suite:" in proc.stdout


def test_bench_compute_and_flops(tmp_path, hvdbench_bin):
    run([hvdbench_bin, "bench", "compute", "--dtype", "fp32", "--size", "128", "--copy-bytes", "1M",
         "--budget-s", "0.05", "--out", tmp_path])
    with open(tmp_path / "bench_compute.csv") as f:
        rows = list(csv.DictReader(f))
    matmul = [r for r in rows if r["op"] == "matmul"]
    assert matmul and all(float(r["tflops"]) > 0 for r in matmul), rows
    assert any(r["op"] == "copy" and float(r["gb_s"]) > 0 for r in rows), rows
    flops = tmp_path / "flops.csv"
    run([hvdbench_bin, "bench", "flops", "--model", "resnet50", "--model", "bert", "--flavor", "debug", "--out", flops])
    with open(flops) as f:
        rows = list(csv.DictReader(f))
    assert {r["model"] for r in rows} == {"resnet50", "bert"}, rows
    assert all(float(r["training_gflop"]) > float(r["forward_gflop"]) > 0 for r in rows), rows
