"""A real Slurm on the emulated cluster (`hvdbench cluster up --slurm`): munge, slurmctld and one
slurmd per node from the cluster's own files. Submitted for real: srun ranks under Horovod, a
2-layout sweep through sbatch, a prepare batch job, a job cancelled mid-sweep and resubmitted, a
job that reaches its time limit; `cluster down` leaves nothing behind. Needs root and Linux (CI runs
as root) and Debian's slurmctld, slurmd, slurm-client and munge (installed by `make setup`).
"""

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import launch_env, run
from hvdbench.cluster.launch import launch_settings
from hvdbench.results.records.store import read_runs
from test_cluster import STATE_ROOT, cluster

pytestmark = [pytest.mark.integration, pytest.mark.root,
              pytest.mark.skipif(platform.system() != "Linux" or os.geteuid() != 0,
                                 reason="network namespaces need root on Linux (CI runs as root)")]

NAME, SUBNET = "itslurm", "10.213.41.0/24"
TRAIN = ["--flavor", "debug", "--steps", "6", "--warmup-steps", "2", "--batch-per-gpu", "16"]


@pytest.fixture(scope="module")
def slurm_cluster(hvdbench_bin):
    """A 2-node x 2-slot cluster with Slurm, node2's slurmd in a CPU-quota cgroup (at its whole share:
    nothing slower); taken down (and checked) after the module's tests."""
    with cluster(hvdbench_bin, NAME, SUBNET, 2, 2, "--slurm", "--node-cpu", "node2=1") as state:
        yield state
    # `cluster` checked that every recorded process (sshds, munged, slurmctld, slurmds) is gone.
    assert not any(e["kind"] == "daemon" and Path(f"/proc/{e['pid']}").exists() and
                   str(e["config"]) in Path(f"/proc/{e['pid']}/cmdline").read_text()
                   for e in state["created"])


def slurm_env(**extra):
    base = launch_env()
    return launch_env(**launch_settings(NAME, path=base["PATH"]).env, **extra)


def slurm(*argv, timeout=60, check=True):
    return run(list(argv), timeout=timeout, check=check, env=slurm_env())


def wait_for_jobs(*jobs, timeout_s=300):
    """Until the Slurm jobs `jobs` (none given: every job) have left the queue."""
    deadline = time.monotonic() + timeout_s
    while True:
        queued = set(slurm("squeue", "-h", "-o", "%i").stdout.split())
        if not (queued & set(jobs) if jobs else queued):
            return
        assert time.monotonic() < deadline, slurm("squeue").stdout
        time.sleep(1)


@pytest.mark.timeout(180)
def test_the_cluster_runs_slurm_and_status_shows_sinfo(slurm_cluster, hvdbench_bin):
    daemons = [e["name"] for e in slurm_cluster["created"] if e["kind"] == "daemon"]
    assert daemons == ["munged", "slurmctld", f"slurmd of {NAME}-node1", f"slurmd of {NAME}-node2"]
    conf = STATE_ROOT / NAME / "slurm" / "slurm.conf"
    assert slurm_env()["SLURM_CONF"] == str(conf) and "/etc/slurm" not in conf.read_text()
    status = run([hvdbench_bin, "cluster", "status", "--name", NAME]).stdout
    assert f"{NAME}-node1 hvd* idle 2" in status and f"{NAME}-node2 hvd* idle 2" in status
    # a job step on node2 runs in node2's cgroup, as its slurmd does (--node-cpu); node1's does not
    where = {n: slurm("srun", "-w", f"{NAME}-{n}", "-N1", "-n1", "cat", "/proc/self/cgroup").stdout
             for n in ("node1", "node2")}
    assert f"/hvdbench-{NAME}-node2\n" in where["node2"] and "/hvdbench-" not in where["node1"], where


@pytest.mark.timeout(180)
def test_srun_gives_horovod_its_ranks_across_nodes(slurm_cluster):
    probe = ("import json, socket, horovod.torch as hvd; hvd.init(); "
             "print(json.dumps([socket.gethostname(), hvd.rank(), hvd.size(), hvd.local_rank(), "
             "hvd.cross_rank(), hvd.cross_size()]))")
    out = slurm("srun", "--nodes=2", "--ntasks-per-node=2", "--mpi=pmix", sys.executable, "-c", probe,
                timeout=120).stdout
    ranks = sorted(json.loads(line) for line in out.splitlines() if line.startswith("["))
    assert ranks == [[f"{NAME}-node1", 0, 4, 0, 0, 2], [f"{NAME}-node1", 1, 4, 1, 0, 2],
                     [f"{NAME}-node2", 2, 4, 0, 1, 2], [f"{NAME}-node2", 3, 4, 1, 1, 2]]


@pytest.mark.timeout(420)
def test_an_sbatch_sweep_fills_the_store_with_each_layout(slurm_cluster, hvdbench_bin, digits, tmp_path):
    out = tmp_path / "sweep"
    hostfile = launch_settings(NAME).hostfile
    submitted = run([hvdbench_bin, "sweep", "resnet50", "--hostfile", hostfile, "--layouts", "1x2,2x1",
                     "--launcher", "slurm", "--submit", "--timeout", "240", "--out", out, "--",
                     *TRAIN, "--data", digits], env=slurm_env()).stdout
    assert "1x2: submitted job" in submitted and "2x1: submitted job" in submitted
    # This cluster has no gpu GRES: the scripts ask for none (sbatch would refuse them).
    script = (out / "slurm" / "1x2.sub").read_text()
    assert "--gpus-per-node" not in script.replace("# no --gpus-per-node", "")
    wait_for_jobs()
    rows = {r.run_id: r for r in read_runs(out / "runs.csv")}
    assert sorted(rows) == ["1x2-r1", "2x1-r1"]
    assert {(r.layout, r.status, r.launcher, r.controller) for r in rows.values()} == {
        ("1x2", "success", "srun", "mpi"), ("2x1", "success", "srun", "mpi")}
    assert rows["2x1-r1"].hosts == f"{NAME}-node1;{NAME}-node2"
    for layout in ("1x2", "2x1"):
        [job] = (out / "slurm" / f"{layout}.jobids").read_text().split()
        record = json.loads((out / f"{layout}-r1" / "launch.json").read_text())
        assert record["slurm_job_id"] == job
        assert (out / "slurm" / f"{layout}-{job}.out").exists()


@pytest.mark.timeout(300)
def test_prepare_as_an_mpi_parallel_batch_job(slurm_cluster, hvdbench_bin, tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    for split, n in (("train", 12), ("val", 4)):
        for cls in ("cat", "dog"):
            folder = tmp_path / "src" / split / cls
            folder.mkdir(parents=True)
            for i in range(n):
                Image.fromarray(rng.integers(0, 255, (40, 48, 3), dtype=np.uint8)).save(folder / f"{i}.JPEG")
    log = tmp_path / "prepare-%j.out"
    # The job script's #SBATCH defaults are for a real cluster; the emulated nodes have 2 CPUs each.
    run(["sbatch", "--wait", "--nodes=2", "--ntasks-per-node=1", "--cpus-per-task=1", f"--output={log}",
         Path(__file__).resolve().parents[2] / "launch" / "slurm" / "prepare.sub", "images", "--src",
         tmp_path / "src", "--out", tmp_path / "images", "--size", "32", "--samples-per-shard", "8"],
        timeout=240, env=slurm_env(HVDBENCH=hvdbench_bin))
    verify = run([hvdbench_bin, "prepare", "verify", tmp_path / "images"]).stdout
    assert "ok: 32 samples in 4 shards" in verify


def _first_row_then(out: Path, run_dir: Path, timeout_s=240):
    """Until the first row is in runs.csv and the second run has started."""
    deadline = time.monotonic() + timeout_s
    while not ((out / "runs.csv").exists() and len(read_runs(out / "runs.csv")) >= 1
               and (run_dir / "launch.json").exists()):
        assert time.monotonic() < deadline, "the job recorded no row"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def limited(slurm_cluster, hvdbench_bin, digits, tmp_path_factory):
    """A one-layout sweep submitted with a 2-minute limit, its run far longer: Slurm warns 60 s before
    the limit (SIGUSR1, launch/slurm/run.sub), and the run in flight is ended then and recorded, not
    lost. Its rank waits 0.5 s for each step's batch (train/faults.py's slow reader), so its minute
    leaves the machine to other work (62 CPU-seconds for it alone before, 12 with the wait): the
    cancelled job's test asks for it, so the minute runs beside that test, on the other node.
    (the sweep's folder, its Slurm job id)"""
    out = tmp_path_factory.mktemp("slurm") / "limited"
    run([hvdbench_bin, "sweep", "resnet50", "--hostfile", launch_settings(NAME).hostfile, "--layouts", "1x1",
         "--launcher", "slurm", "--submit", "--time-limit", "00:02:00", "--out", out, "--",
         "--flavor", "debug", "--steps", "1000000", "--warmup-steps", "2", "--batch-per-gpu", "16",
         "--data", digits], env=slurm_env(HVDBENCH_INJECT_READ_DELAY_S="0.5"))
    [job] = (out / "slurm" / "1x1.jobids").read_text().split()
    yield out, job
    # Selected without the time-limit test (pytest -k), the job still runs: ended before the cluster is.
    slurm("scancel", job, check=False)
    wait_for_jobs(job)


@pytest.mark.timeout(480)
def test_a_cancelled_job_leaves_whole_rows_and_the_next_submission_resumes(slurm_cluster, hvdbench_bin,
                                                                             digits, tmp_path, limited):
    out = tmp_path / "cancelled"
    # Each run lasts 6 s or more past its start by waiting 0.2 s for each of its 32 steps' batches
    # (train/faults.py's slow reader), not by computing: the second run still lives well past the
    # cancel (sent within ~0.5 s of its launch.json), and the machine's cores stay free (400 computed
    # steps did the same at ~10 CPU-s a run).
    argv = [hvdbench_bin, "sweep", "resnet50", "--hostfile", launch_settings(NAME).hostfile, "--layouts", "1x1",
            "--repeats", "2", "--launcher", "slurm", "--submit", "--out", out, "--",
            "--flavor", "debug", "--steps", "30", "--warmup-steps", "2", "--warmup-max-steps", "2",
            "--batch-per-gpu", "16", "--data", digits]
    env = slurm_env(HVDBENCH_INJECT_READ_DELAY_S="0.2")
    run(argv, env=env)
    _first_row_then(out, out / "1x1-r2")
    first = (out / "runs.csv").read_bytes()
    [job] = (out / "slurm" / "1x1.jobids").read_text().split()
    slurm("scancel", job)
    wait_for_jobs(job)
    assert (out / "runs.csv").read_bytes() == first  # the interrupted run left no row, partial or not
    assert "JobState=CANCELLED" in slurm("scontrol", "-o", "show", "job", job).stdout
    run(argv, env=env)
    wait_for_jobs(*(out / "slurm" / "1x1.jobids").read_text().split())
    rows = read_runs(out / "runs.csv")
    assert [(r.run_id, r.status) for r in rows] == [("1x1-r1", "success"), ("1x1-r2", "success")]
    assert (out / "runs.csv").read_bytes().startswith(first)


@pytest.mark.timeout(400)
def test_a_job_at_its_time_limit_records_the_run_as_timed_out(limited):
    out, job = limited
    wait_for_jobs(job, timeout_s=330)
    [row] = read_runs(out / "runs.csv")
    assert row.status == "timeout" and row.error.startswith(f"Slurm job {job} reached its time limit")
    log = (out / "slurm" / f"1x1-{job}.out").read_text()
    assert "the Slurm job reached its time limit" in log


def test_rendered_job_scripts_submit_as_written(slurm_cluster, hvdbench_bin, tmp_path):
    """`sbatch --test-only` accepts every script a dry run prints for this cluster."""
    out = tmp_path / "dry"
    run([hvdbench_bin, "sweep", "resnet50", "--hostfile", launch_settings(NAME).hostfile, "--layouts",
         "1x1,1x2,2x1,2x2", "--launcher", "slurm", "--out", out, "--", "--synthetic", "--steps", "5"],
        env=slurm_env())
    for script in sorted((out / "slurm").glob("*.sub")):
        proc = subprocess.run(["sbatch", "--test-only", str(script)], capture_output=True, text=True,
                              env=slurm_env())
        assert proc.returncode == 0 and "to start at" in proc.stderr, (script.name, proc.stderr)
