"""Bad inputs (issue 15) where a real launch is involved: a worker given a damaged manifest or an
unwritable --out, a sweep whose train arguments `train` would refuse (nothing may be launched), and
two identical sweeps into one folder with real horovodrun runs (both exit 0, each run once, with
environment variable names horovodrun's shell cannot take: none breaks a launch or runs)."""

import json
import shutil
import subprocess

import pytest

from conftest import launch_env, run
from hvdbench.results.records.store import read_runs

pytestmark = pytest.mark.integration

TINY = ["--flavor", "debug", "--synthetic", "--steps", "2", "--warmup-steps", "1", "--batch-per-gpu", "8"]


def one_line_error(proc, *names) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("Error: "), proc.stderr
    for name in names:
        assert str(name) in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, hvdbench_bin):
    out = tmp_path_factory.mktemp("data") / "images"
    run([hvdbench_bin, "prepare", "synthetic", "--like", "images", "--samples", "64", "--size", "8",
         "--num-classes", "4", "--samples-per-shard", "32", "--out", out])
    return out


@pytest.mark.timeout(180)
@pytest.mark.parametrize("key", ["samples", "file"])
def test_train_names_the_manifest_and_the_key_a_shard_lacks(tmp_path, dataset, hvdbench_bin, key):
    data = tmp_path / "d"
    shutil.copytree(dataset, data)
    manifest = json.loads((data / "manifest.json").read_text())
    del manifest["splits"]["train"]["shards"][0][key]
    (data / "manifest.json").write_text(json.dumps(manifest))
    proc = run([hvdbench_bin, "train", "resnet50", "--flavor", "debug", "--data", data, "--out", tmp_path / "run"],
               check=False)
    line = one_line_error(proc, data / "manifest.json", f"splits.train.shards[0]: key '{key}' missing")
    assert "KeyError" not in line


@pytest.mark.timeout(120)
def test_train_refuses_an_unwritable_out_before_a_framework_starts(tmp_path, hvdbench_bin):
    proc = run([hvdbench_bin, "train", "resnet50", *TINY, "--out", "/proc/hvdbench-no-such/run"], check=False)
    one_line_error(proc, "--out /proc/hvdbench-no-such/run", "cannot write")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("train_args, words", [
    (["--flavor", "huge", "--synthetic"], ["no flavor 'huge'"]),
    (["--synthetic", "--steps", "0"], ["--steps 0"]),
])
def test_a_sweep_launches_nothing_train_would_refuse(tmp_path, hvdbench_bin, train_args, words):
    out = tmp_path / "sw"
    proc = run([hvdbench_bin, "sweep", "resnet50", "--hosts", "localhost:2", "--out", out, "--", *train_args],
               check=False)
    one_line_error(proc, "train arguments after --", *words)
    assert not out.exists()  # no run directory, no failed rows, no sweep.json


@pytest.mark.timeout(420)
def test_two_identical_real_sweeps_into_one_folder_both_exit_0(tmp_path, hvdbench_bin):
    out = tmp_path / "sw"
    argv = [hvdbench_bin, "sweep", "resnet50", "--hosts", "localhost:1", "--repeats", "2", "--timeout", "300",
            "--out", str(out), "--", *TINY]
    # Issue 40: horovodrun writes variable names unquoted into a /bin/sh line; one with parentheses
    # broke every launch, a crafted one ran a command. Both are in these sweeps' environment.
    pwned = tmp_path / "pwned"
    odd = {"A(B)": "1", f"X;touch {pwned};Y": "1"}
    procs = [subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=launch_env(**odd)) for _ in range(2)]
    outputs = [p.communicate(timeout=400) for p in procs]
    for p, (stdout, stderr) in zip(procs, outputs):
        assert p.returncode == 0, stdout[-3000:] + stderr[-3000:]
        assert "2 runs: 2 success" in stdout
        assert "warning: environment variable(s) 'A(B)', 'X;touch" in stdout
    assert not pwned.exists()
    rows = read_runs(out / "runs.csv")
    assert sorted(r.run_id for r in rows) == ["1x1-r1", "1x1-r2"]  # each run recorded once
    assert all(r.status == "success" and r.wall_s > 0 for r in rows)
