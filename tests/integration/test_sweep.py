"""`hvdbench sweep` for real: horovodrun (Gloo and MPI controllers) and mpirun launches of the debug
ResNet-50 on the built-in digits, on this machine's two slots (hostfiles/localhost).

Faults come from the worker's own injection (HVDBENCH_INJECT_FAULT=crash|hang, passed with the
sweep's --env). Leftover processes are looked for by the pids and process group each run recorded
in its launch.json, never by name."""

import csv
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from browser import chromium, load

from conftest import launch_env, run
from hvdbench.results.records.store import read_runs

ROOT = Path(__file__).resolve().parents[2]
LOCALHOST = ROOT / "hostfiles" / "localhost"
STEPS = ["--flavor", "debug", "--steps", "6", "--warmup-steps", "2", "--batch-per-gpu", "16"]

pytestmark = pytest.mark.integration


def sweep_argv(hvdbench_bin, out, *options, train=()):
    return [hvdbench_bin, "sweep", "resnet50", "--hostfile", LOCALHOST, "--out", out, *options, "--", *train]


def running(record: dict) -> list[int]:
    """Processes of a recorded run still alive: its recorded descendants (same pid and creation
    time) and any member of its process group."""
    alive = []
    for pid, ctime in record.get("descendants", {}).items():
        try:
            p = psutil.Process(int(pid))
            if abs(p.create_time() - ctime) < 0.05 and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p.pid)
        except psutil.NoSuchProcess:
            pass
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) == record["pgid"] and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    return alive


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.2)


def start_sweep(argv, log: Path | None = None):
    """The sweep in the background: its stderr a pipe (read when it ends early), or with `log` both its
    outputs in that file, for a sweep nobody reads while other launches run."""
    if log is None:
        return subprocess.Popen([str(a) for a in argv], env=launch_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
    with open(log, "w") as out:
        return subprocess.Popen([str(a) for a in argv], env=launch_env(), stdout=out, stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def hung(tmp_path_factory, digits, hvdbench_bin):
    """A sweep whose ranks hang, started in the background: horovodrun's MPI controller (horovodrun ->
    its middleman (own session) -> mpirun -> ranks), ended by its 15-second --timeout. demo asks for it
    first, so those seconds of waiting run beside demo's sweep. (the sweep's Popen, its folder)"""
    out = tmp_path_factory.mktemp("sweep") / "hang"
    argv = sweep_argv(hvdbench_bin, out, "--layouts", "1x2", "--controller", "mpi", "--timeout", "15",
                      "--kill-grace", "3", "--env", "HVDBENCH_INJECT_FAULT=hang", train=[*STEPS, "--data", digits])
    proc = start_sweep(argv, log=out.parent / "hang.log")
    yield proc, out
    if proc.poll() is None:
        proc.kill()


@pytest.fixture(scope="module")
def demo(tmp_path_factory, digits, hvdbench_bin, hung):
    """One sweep for two tests (issue 56: a launch costs ~20 CPU-s before its first step): 1x1 and 1x2,
    two repeats, --allreduce-bench once per layout and --links-bench once over every host; then the
    same command again (resumed: nothing to run). (sweep's stdout of each, runs.csv's bytes between)"""
    out = tmp_path_factory.mktemp("sweep") / "demo"
    argv = sweep_argv(hvdbench_bin, out, "--layouts", "1x1,1x2", "--repeats", "2", "--allreduce-bench", "64K",
                      "--links-bench", train=[*STEPS, "--data", digits])
    first = run(argv, timeout=400)
    before = (out / "runs.csv").read_bytes()
    again = run(argv, timeout=200)
    return out, first.stdout, before, again.stdout


@pytest.mark.timeout(600)
def test_sweep_writes_one_success_row_per_layout_and_repeat(demo, digits):
    out, first, before, again = demo
    rows = read_runs(out / "runs.csv")
    assert [r.run_id for r in rows] == ["1x1-r1", "1x2-r1", "1x1-r2", "1x2-r2"]  # interleaved
    for r in rows:
        n = int(r.layout[-1])
        assert (r.status, r.error) == ("success", "")
        assert (r.layout, r.nodes, r.gpus_per_node, r.world_size, r.scale) == (f"1x{n}", 1, n, n, "up")
        assert (r.sweep, r.launcher, r.controller, r.model, r.flavor) == ("demo", "horovodrun", "gloo",
                                                                          "resnet50", "debug")
        assert r.repeat == int(r.run_id[-1]) and r.batch_per_gpu == 16 and r.global_batch == 16 * n
        assert r.dataset == str(digits) and r.throughput > 0
    run_dir = out / "1x2-r2"
    assert (run_dir / "hostfile").read_text() == "localhost slots=2\n"
    assert "-np 2 -H localhost:2 --gloo" in (run_dir / "command.txt").read_text()
    assert {p.name for p in (run_dir / "logs").iterdir()} == {"rank.0", "rank.1"}
    assert (run_dir / "result.json").exists() and (run_dir / "mllog.txt").exists()
    assert "sweep demo: 4 runs: 4 success" in first

    # The same command again: everything is done, nothing runs, the store is untouched.
    assert (out / "runs.csv").read_bytes() == before
    assert "4 runs: 4 success" in again


@pytest.mark.timeout(300)
def test_crashing_worker_gives_a_failed_row_and_the_sweep_goes_on(tmp_path, digits, hvdbench_bin):
    out = tmp_path / "crash"
    train = [*STEPS, "--data", digits]
    proc = run(sweep_argv(hvdbench_bin, out, "--launcher", "mpirun", "--layouts", "1x2,1x1",
                          "--env", "HVDBENCH_INJECT_FAULT=crash", "--env", "HVDBENCH_INJECT_FAULT_RANK=1",
                          train=train), check=False)
    assert proc.returncode == 1, proc.stderr  # some run failed
    failed, ok = read_runs(out / "runs.csv")
    assert (failed.run_id, failed.status, failed.launcher, failed.controller) == ("1x2-r1", "failed", "mpirun", "mpi")
    assert "injected fault" in failed.error and "\n" not in failed.error
    assert (failed.layout, failed.world_size, failed.dataset) == ("1x2", 2, str(digits))
    assert (ok.run_id, ok.status) == ("1x1-r1", "success")  # rank 1 does not exist in 1x1: no fault
    assert (out / "1x2-r1" / "logs" / "1" / "rank.1" / "stderr").exists()  # mpirun's per-rank logs

    # Without the fault, --retry-failed reruns only the failed run; its old files are kept aside.
    proc = run(sweep_argv(hvdbench_bin, out, "--launcher", "mpirun", "--layouts", "1x2,1x1", "--retry-failed",
                          train=train))
    rows = read_runs(out / "runs.csv")
    assert [(r.run_id, r.status) for r in rows] == [("1x2-r1", "failed"), ("1x1-r1", "success"),
                                                    ("1x2-r1", "success")]
    assert (out / "1x2-r1" / "attempts" / "1" / "launch.log").exists()


@pytest.mark.timeout(300)
def test_hung_worker_times_out_and_leaves_no_process(hung):
    proc, out = hung
    assert proc.wait(timeout=240) == 1, (out.parent / "hang.log").read_text()[-3000:]
    [row] = read_runs(out / "runs.csv")
    assert (row.run_id, row.status, row.controller) == ("1x2-r1", "timeout", "mpi")
    assert row.error.startswith("no result after 15 s")
    record = json.loads((out / "1x2-r1" / "launch.json").read_text())
    assert record["status"] == "timeout" and record["leftover"] == []
    assert len(record["descendants"]) >= 4  # horovodrun, its helpers, mpirun and the ranks were seen
    assert running(record) == []


def wait_for_second_run_in_flight(proc, out, run_dir):
    """Until runs.csv has its first row and the second run's launcher is running."""
    def ready():
        assert proc.poll() is None, f"sweep ended early: {proc.stderr.read()}"
        if not (out / "runs.csv").exists() or len(read_runs(out / "runs.csv")) < 1:
            return False
        try:
            record = json.loads((run_dir / "launch.json").read_text())
        except (OSError, ValueError):
            return False
        return "pid" in record and "status" not in record

    wait_until(ready, 180, "the second run to start")
    return json.loads((run_dir / "launch.json").read_text())


@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig, launcher", [(signal.SIGTERM, "mpirun"), (signal.SIGKILL, "horovodrun")],
                         ids=["SIGTERM-mpirun", "SIGKILL-horovodrun"])
def test_killed_sweep_resumes_with_one_row_per_run(tmp_path, digits, hvdbench_bin, sig, launcher):
    out = tmp_path / "killed"
    # The per-layout config names the runs 1x1x16x1-r<k> and gives batch 16, steps 6, flavor debug.
    argv = sweep_argv(hvdbench_bin, out, "--config", "resnet50-debug", "--layouts", "1x1", "--repeats", "2",
                      "--launcher", launcher, "--kill-grace", "3", train=["--data", digits])
    proc = start_sweep(argv)
    try:
        record = wait_for_second_run_in_flight(proc, out, out / "1x1x16x1-r2")
        first = (out / "runs.csv").read_bytes()
        proc.send_signal(sig)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == (143 if sig == signal.SIGTERM else -9)
    # SIGTERM: the sweep ended the run itself. SIGKILL: the run's guard got the kernel's
    # parent-death signal and ended it. Either way nothing of the run is left.
    wait_until(lambda: running(record) == [], 30, f"the run's processes to end: {running(record)}")
    assert (out / "runs.csv").read_bytes().startswith(first)  # the completed row is intact

    proc = run(argv)
    rows = read_runs(out / "runs.csv")
    assert [(r.run_id, r.status, r.batch_per_gpu) for r in rows] == [
        ("1x1x16x1-r1", "success", 16), ("1x1x16x1-r2", "success", 16)]
    assert (out / "runs.csv").read_bytes().startswith(first)
    assert "2 runs: 2 success" in proc.stdout


@pytest.mark.timeout(420)  # a report, a compare and Chromium's two page loads (the sweep is demo's)
def test_allreduce_bench_runs_once_per_layout_and_reaches_the_report(demo, tmp_path, hvdbench_bin):
    """--allreduce-bench once per layout, --links-bench once over every host (1x2: its one pair), both
    measured once over two repeats and a resumed sweep; the sweep's report.html and compare.html in a
    real browser."""
    from hvdbench.bench.allreduce_report import AllreduceRow
    from hvdbench.results.records.schema import LinkRow
    from hvdbench.results.records.store import read_rows

    out = demo[0]
    rows = read_rows(out / "bench_allreduce.csv", AllreduceRow)
    assert {r.layout for r in rows} == {"1x1", "1x2"}
    links = read_rows(out / "bench_links.csv", LinkRow)
    assert {(r.layout, r.kind, r.rank_a, r.rank_b) for r in links} == {("1x2", "within", 0, 1)}
    assert [r.bytes for r in links] == [8, 64 << 10, 1 << 20, 16 << 20] and all(r.wrong == 0 for r in links)
    assert max(r.bytes for r in rows) == 64 * 1024
    assert all(r.busbw_gb_s > 0 for r in rows if r.layout == "1x2")  # busbw is 0 by definition at n=1
    # Once per layout, not per repeat, and not again when the sweep resumed: each size measured once.
    assert len(rows) == len({(r.layout, r.impl, r.dtype, r.bytes) for r in rows}) and len(links) == 4
    assert len({r.run_id for r in rows}) == 2

    # Every run recorded its compute: FLOPs per sample (counted on the meta device), model TFLOP/s per
    # rank, resident memory beside the estimate; a CPU has no datasheet peak (no MFU) and no NVML energy.
    for r in read_runs(out / "runs.csv"):
        assert r.flops_per_sample > 0 and r.model_tflops_per_gpu > 0
        assert r.mem_resident_gb > 0 and r.mem_estimate_gb > 0
        assert r.mfu is None and r.energy_j is None and r.power_w_per_gpu is None
    # `bench compute` alone is the 1x1 layout: its measured fp32 peak gives that layout's MFU.
    run([hvdbench_bin, "bench", "compute", "--dtype", "fp32", "--size", "128", "--copy-bytes", "1M",
         "--budget-s", "0.05", "--out", out])

    run([hvdbench_bin, "report", out, "--out", tmp_path / "report", "--format", "csv,md"])
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "## Links between hosts and ranks (bench links)" in summary
    assert "(within) | 0-1 | gloo" in summary and "below 0.5 x the fastest pair" in summary
    assert (tmp_path / "report" / "links.csv").read_text().count("\n") == 2  # its header and the one pair
    comm = (tmp_path / "report" / "comm_vs_training.csv").read_text()
    assert "1x2" in comm
    compute = {r["layout"]: r for r in csv.DictReader((tmp_path / "report" / "compute.csv").open())}
    assert float(compute["1x1"]["mfu_measured"]) > 0 and compute["1x2"]["mfu_measured"] == ""

    # Issue 55: the same sweep's report.html and, against a copy of it, compare.html in a real browser:
    # offline (no request leaves the page, no console message), every plot decodes, the verdict's lines
    # are verdict.csv's; the same runs on both sides are within noise, never faster or slower.
    page_out, twin, cmp = tmp_path / "page", tmp_path / "twin", tmp_path / "cmp"
    run([hvdbench_bin, "report", out, "--out", page_out])
    shutil.copytree(out, twin, ignore=shutil.ignore_patterns(".locks"))
    run([hvdbench_bin, "compare", out, twin, "--out", cmp])
    with chromium(tmp_path) as browser:
        page, same = load(browser, page_out / "report.html"), load(browser, cmp / "compare.html")
    for seen in (page, same):
        assert seen.console == [] and seen.requests == [] and seen.broken_images == [], seen
    verdict = {r["check"]: r for r in csv.DictReader((page_out / "verdict.csv").open())}
    assert page.checks == {k: r["state"] for k, r in verdict.items()} and page.images >= 3
    assert verdict["failed_runs"]["state"] == "pass" and verdict["scaling_efficiency"]["state"] in ("pass", "warn")
    assert verdict["allreduce_busbw"]["state"] == "not measured"  # one node: no link between nodes to hold it to
    figures = list(csv.DictReader((cmp / "compare.csv").open()))
    assert {(r["layout"], r["figure"]) for r in figures} >= {("1x1", "throughput"), ("1x2", "throughput")}
    # The same runs on both sides: no change. Throughput, two repeats a side, is judged within the noise
    # of its 2 sigma; the allreduce's busbw, measured once per layout, is not judged.
    assert all(float(r["change"]) == 0 for r in figures)
    assert {(r["figure"], r["before_runs"], r["verdict"]) for r in figures} <= {
        ("throughput", "2", "within noise"), ("busbw", "1", "not judged")}
