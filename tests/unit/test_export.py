"""`hvdbench export --mlperf OUT`: a sweep's time-to-accuracy runs as an MLPerf results tree that
the official result summarizer accepts and scores as `hvdbench report` does (the summarizer is run
here, on the exported tree), with systems JSONs the official checker passes."""

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest
from click.testing import CliRunner
from mlperf_logging.mllog import constants as C
from mlperf_logging.system_desc_checker.system_desc_checker import check_system_desc
from conftest import csv_rows
from test_mllog import T0, compliant_lines, write

from hvdbench.cli.main import cli
from hvdbench.results.export import SYSTEM_FIELDS
from hvdbench.results.records.schema import RunResult
from hvdbench.results.records.store import append_run

ENV = {"hostname": "node001", "cpu_count": 64, "platform": "Linux-6.1.0-x86_64-with-glibc2.36",
       "python": {"version": "3.11.2"}, "hvdbench": "0.1.0", "torch": {"installed": True, "version": "2.13.0"},
       "tensorflow": {"installed": True, "version": "2.21.0"}, "horovod": {"installed": True, "version": "0.28.1"},
       "mpi": {"implementation": "mpirun (Open MPI) 4.1.4"}, "nccl": None, "gpus": []}


def sweep_run(sweep, layout, minutes, i, status="success", log=True, mode="time_to_accuracy", epochs=34):
    """A runs.csv row and, like a worker, its run folder's mllog.txt (time_to_train_s from the log)."""
    nodes, gpus = map(int, layout.split("x"))
    run_id = f"2026010{i // 10}T12{i % 10:02d}00Z-{layout}{i:04d}"
    start = datetime.fromtimestamp(T0 / 1000 + i * 10**5, timezone.utc)
    record = RunResult(
        run_id=run_id, sweep=sweep.name, repeat=i, model="resnet50", flavor="debug", framework="torch",
        precision="fp32", mode=mode, dataset="data/digits", batch_per_gpu=32, accum_steps=1,
        global_batch=32 * nodes * gpus, world_size=nodes * gpus, nodes=nodes, gpus_per_node=gpus, layout=layout,
        scale="up" if nodes == 1 else "out", launcher="horovodrun", controller="gloo", devices="cpu",
        versions="python=3.11.2;torch=2.13.0;horovod=0.28.1", metric_name="top1_accuracy", target=0.75,
        status=status, started_at=(start + timedelta(seconds=i)).isoformat(),
        time_to_train_s=minutes * 60 if status == "success" else None,
        epochs_to_target=epochs if status == "success" else None,
        throughput=500.0 if mode == "throughput" else None, steps=50 if mode == "throughput" else 0)
    if log:
        stop = C.SUCCESS if status == "success" else C.ABORTED
        lines = compliant_lines(minutes, epochs, batch=record.global_batch, platform=f"{layout} cpu",
                                layout=(nodes, gpus), status=stop, t0=T0 + i * 10**8)
        if status in ("failed", "timeout"):  # killed before run_stop
            lines = [line for line in lines if C.RUN_STOP not in line]
        write(sweep / run_id / "mllog.txt", lines)
    append_run(sweep / "runs.csv", record)
    return record


@pytest.fixture
def sweep(tmp_path):
    """1x2: 30, 31, 33, 35 min and a run that failed before writing any log (olympic: 31, 33, 35);
    2x2: 16, 17, 18 min (olympic: 17); plus a throughput run, which is no MLPerf result."""
    folder = tmp_path / "results" / "demo"
    for i, minutes in enumerate((30.0, 31.0, 33.0, 35.0)):
        sweep_run(folder, "1x2", minutes, i)
    sweep_run(folder, "1x2", 40.0, 4, status="failed", log=False)
    for i, minutes in enumerate((16.0, 17.0, 18.0), start=5):
        sweep_run(folder, "2x2", minutes, i)
    sweep_run(folder, "1x1", 1.0, 8, mode="throughput")
    return folder


def invoke(*args):
    return CliRunner().invoke(cli, [*map(str, args)])


def summarize_officially(org, cwd):
    proc = subprocess.run([sys.executable, "-m", "mlperf_logging.result_summarizer", str(org), "training", "4.0.0",
                           "--csv", "summary.csv"], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {row["details_url"].rsplit("/", 1)[-1].removesuffix(".json"): row
            for row in csv_rows(cwd / "summary.csv")}, proc.stdout


def test_the_summarizer_scores_the_export_as_the_report_does(sweep, tmp_path):
    env = tmp_path / "env.json"
    env.write_text(json.dumps(ENV))
    out = tmp_path / "mlperf"
    result = invoke("export", sweep, "--mlperf", out, "--env", env, "--no-check")
    assert result.exit_code == 0, result.output

    one, two = "cpu_1x2x32x1_torch_debug", "cpu_2x2x32x1_torch_debug"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == sorted(
        [f"results/{one}/resnet/result_{i}.txt" for i in range(5)]
        + [f"results/{two}/resnet/result_{i}.txt" for i in range(3)] + [f"systems/{one}.json", f"systems/{two}.json"])
    first = sorted((sweep).glob("*/mllog.txt"))[0]
    assert (out / "results" / one / "resnet" / "result_0.txt").read_bytes() == first.read_bytes()  # unchanged
    assert "without an event log" in (out / "results" / one / "resnet" / "result_4.txt").read_text()

    desc = json.loads((out / "systems" / f"{two}.json").read_text())
    assert set(desc) == set(SYSTEM_FIELDS)
    assert {k: desc[k] for k in ("submitter", "division", "status", "system_name", "number_of_nodes",
                                 "accelerators_per_node", "accelerator_model_name", "framework",
                                 "host_processor_vcpu_count", "operating_system")} == {
        "submitter": "hvdbench", "division": "open", "status": "Available on-premise",
        "system_name": "cpu torch debug", "number_of_nodes": "2", "accelerators_per_node": "2",
        "accelerator_model_name": "cpu", "framework": "PyTorch 2.13.0, Horovod 0.28.1",
        "host_processor_vcpu_count": "64", "operating_system": ENV["platform"]}
    for system in (one, two):  # the official systems JSON checker
        assert check_system_desc(str(out / "systems" / f"{system}.json"), "training", "4.0.0")[0]

    official, said = summarize_officially(out, tmp_path)
    assert "Dropping non-converged run(s)" in said  # the run without a log counts as not converged
    report = invoke("report", sweep, "--out", tmp_path / "ours", "--format", "csv")
    assert report.exit_code == 0, report.output
    ours = {r["layout"]: r for r in csv_rows(tmp_path / "ours" / "time_to_train.csv")}
    assert float(official[one]["resnet"]) == pytest.approx(float(ours["1x2"]["ttt_min"]), rel=1e-9) == 33.0
    assert float(official[two]["resnet"]) == pytest.approx(float(ours["2x2"]["ttt_min"]), rel=1e-9) == 17.0

    # and the tree read back as published logs: the same scores, layouts and one system group
    back = invoke("report", "--mllog", out, "--out", tmp_path / "back", "--format", "csv")
    assert back.exit_code == 0, back.output
    rows = {r["layout"]: r for r in csv_rows(tmp_path / "back" / "time_to_train.csv")}
    assert {(r["system"], r["runs"], r["converged"], r["layout_source"]) for r in rows.values()} == {
        ("hvdbench / cpu torch debug", "5", "4", f"log events|systems JSON ({one}.json)"),  # the run without a log
        ("hvdbench / cpu torch debug", "3", "3", "log events")}
    for layout, system in (("1x2", one), ("2x2", two)):
        assert float(rows[layout]["ttt_min"]) == float(rows[layout]["ttt_rcp_min"]) == float(official[system]["resnet"])


def test_check_prints_the_summarizers_score_beside_ours(sweep, tmp_path):
    env = tmp_path / "env.json"
    env.write_text(json.dumps(ENV))
    result = invoke("export", sweep, "--mlperf", tmp_path / "mlperf", "--env", env)
    assert result.exit_code == 0, result.output
    assert ("results/cpu_1x2x32x1_torch_debug/resnet: 5 run(s); hvdbench: 33.0000 min (olympic mean of 3 of 5 "
            "(dropped fastest and the non-converged run)); summarizer: 33.0000 min") in result.output
    assert "results/cpu_2x2x32x1_torch_debug/resnet: 3 run(s); hvdbench: 17.0000 min" in result.output
    assert f"score it: python -m mlperf_logging.result_summarizer {tmp_path / 'mlperf'} training 4.0.0" in result.output


def test_an_aborted_run_is_exported_and_the_difference_said(tmp_path):
    sweep = tmp_path / "s"
    for i, minutes in enumerate((10.0, 11.0, 12.0)):
        sweep_run(sweep, "1x1", minutes, i)
    sweep_run(sweep, "1x1", 13.0, 3, status="aborted")
    env = tmp_path / "env.json"
    env.write_text(json.dumps(ENV))
    result = invoke("export", sweep, "--mlperf", tmp_path / "out", "--env", env, "--no-check")
    assert result.exit_code == 0, result.output
    assert ("results/cpu_1x1x32x1_torch_debug/resnet/result_3.txt: run 20260100T120300Z-1x10003 stopped aborted; "
            "in the open division the summarizer counts its time as a finished run, hvdbench as not converged"
            ) in result.output


def test_export_refusals(sweep, tmp_path):
    env = tmp_path / "env.json"
    env.write_text(json.dumps(ENV))
    busy = tmp_path / "busy"
    (busy / "results").mkdir(parents=True)
    result = invoke("export", sweep, "--mlperf", busy, "--env", env)
    assert result.exit_code == 1 and "exists and is not an empty folder" in result.output
    only_throughput = tmp_path / "tput"
    sweep_run(only_throughput, "1x1", 1.0, 0, mode="throughput")
    result = invoke("export", only_throughput, "--mlperf", tmp_path / "o1", "--env", env)
    assert result.exit_code == 1 and "no time-to-accuracy runs" in result.output
    result = invoke("export", sweep, "--mlperf", tmp_path / "o2", "--env", env, "--ruleset", "5.0.0", "--no-check")
    assert result.exit_code == 1 and "training ruleset 5.0.0 has no 'resnet' benchmark" in result.output
    result = invoke("export", sweep, "--mlperf", tmp_path / "o3", "--ruleset", "four")
    assert result.exit_code == 2 and "a training ruleset such as 4.0.0" in result.output
    (tmp_path / "bad.json").write_text("[1]")
    result = invoke("export", sweep, "--mlperf", tmp_path / "o4", "--env", tmp_path / "bad.json")
    assert result.exit_code == 1 and "not the JSON of `hvdbench env --json`" in result.output


# --- bad input (issue 30): crashed runs are exported as the unconverged runs they are -----------------

def crashed_run(sweep, layout, i, **fields):
    """A failed row as the sweep writes it when the worker died before recording anything
    (hvdbench.sweep.record._fallback): the run's resolved identity, no devices, no versions, no log."""
    nodes, gpus = map(int, layout.split("x"))
    record = RunResult(
        run_id=f"2026010{i // 10}T12{i % 10:02d}00Z-{layout}{i:04d}", sweep=sweep.name, repeat=i, model="resnet50",
        flavor="debug", framework="torch", precision="fp32", mode="time_to_accuracy", dataset="data/digits",
        batch_per_gpu=32, accum_steps=1, global_batch=32 * nodes * gpus, world_size=nodes * gpus, nodes=nodes,
        gpus_per_node=gpus, layout=layout, scale="up" if nodes == 1 else "out", launcher="horovodrun",
        controller="gloo", metric_name="top1_accuracy", target=0.75, status="failed",
        started_at=f"2026-01-0{1 + i % 9}T12:00:00+00:00", error="exit status 1 | RuntimeError: boom", **fields)
    append_run(sweep / "runs.csv", record)
    return record


def test_a_crashed_run_is_exported_beside_its_layouts_runs_as_not_converged(tmp_path):
    sweep = tmp_path / "s"
    for i, minutes in enumerate((10.0, 11.0, 12.0)):
        sweep_run(sweep, "1x2", minutes, i)
    crashed = crashed_run(sweep, "1x2", 3)  # no devices: it takes its sweep's ("cpu")
    env = tmp_path / "env.json"
    env.write_text(json.dumps(ENV))
    out = tmp_path / "out"
    result = invoke("export", sweep, "--mlperf", out, "--env", env, "--no-check")
    assert result.exit_code == 0, result.output
    folder = out / "results" / "cpu_1x2x32x1_torch_debug" / "resnet"
    assert sorted(p.name for p in folder.iterdir()) == [f"result_{i}.txt" for i in range(4)]
    assert sorted(p.name for p in (out / "systems").iterdir()) == ["cpu_1x2x32x1_torch_debug.json"]
    assert f"run {crashed.run_id} ended failed without an event log" in (folder / "result_3.txt").read_text()
    assert ("results/cpu_1x2x32x1_torch_debug/resnet: result_3.txt: 1 run(s) that ended failed before reaching "
            "the target, exported as runs that did not converge") in result.output
    assert "hvdbench: 11.5000 min (olympic mean of 2 of 4 (dropped fastest and the non-converged run))" \
        in result.output
    official, said = summarize_officially(out, tmp_path)
    assert "Dropping non-converged run(s)" in said
    assert float(official["cpu_1x2x32x1_torch_debug"]["resnet"]) == pytest.approx(11.5)


def test_a_sweep_whose_only_time_to_accuracy_runs_failed_exports_them(tmp_path):
    sweep = tmp_path / "s"
    for i in range(2):
        crashed_run(sweep, "1x1", i)
    env = tmp_path / "env.json"
    env.write_text(json.dumps(ENV))
    result = invoke("export", sweep, "--mlperf", tmp_path / "out", "--env", env, "--no-check")
    assert result.exit_code == 0, result.output
    assert "no time-to-accuracy runs" not in result.output
    assert "results/unknown_1x1x32x1_torch_debug/resnet: 2 run(s); hvdbench: DNF" in result.output
    assert len(list((tmp_path / "out" / "results").rglob("result_*.txt"))) == 2


@pytest.mark.parametrize("rows, words", [
    ([], ["no runs yet"]),
    ([{"mode": "throughput", "status": "success", "framework": "torch"}],
     ["no time-to-accuracy runs to export", "1 run(s) are recorded as throughput runs (0 of them failed",
      "a sweep with --data and no --steps after --"]),
    # a failed row written before failed rows carried their mode: no framework, the default mode
    ([{"mode": "throughput", "status": "failed", "framework": ""}] * 2,
     ["2 run(s) are recorded as throughput runs (2 of them failed", "2 failed row(s) do not record the run's mode",
      "--retry-failed"]),
])
def test_nothing_to_export_says_what_the_sweep_holds(tmp_path, rows, words):
    sweep = tmp_path / "s"
    sweep.mkdir()
    (sweep / "runs.csv").write_text("")
    for i, fields in enumerate(rows):
        append_run(sweep / "runs.csv", RunResult(run_id=f"r{i}", sweep="s", model="resnet50", **fields))
    if not rows:
        sweep_run(tmp_path / "other", "1x1", 1.0, 0, mode="throughput")  # a header only
        (sweep / "runs.csv").write_text((tmp_path / "other" / "runs.csv").read_text().splitlines()[0] + "\n")
    env = tmp_path / "env.json"
    env.write_text(json.dumps(ENV))
    result = CliRunner().invoke(cli, ["export", str(sweep), "--mlperf", str(tmp_path / "out"), "--env", str(env)])
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"Error: {sweep}: ")
    for word in words:
        assert word in line, line
    if rows and rows[0]["status"] == "failed":
        assert "--data and no --steps" not in line  # the sweep may well have been run that way
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_no_score_from_the_summarizer_says_why(tmp_path):
    """Issue 50: the demo's 2 runs of a layout get no official score: the line says why, in the
    summarizer's own rules and mlperf-logging's result file count for the benchmark."""
    folder = tmp_path / "results" / "two"
    for i, minutes in enumerate((30.0, 31.0)):
        sweep_run(folder, "1x2", minutes, i)
    env = tmp_path / "env.json"
    env.write_text(json.dumps(ENV))
    result = invoke("export", folder, "--mlperf", tmp_path / "mlperf", "--env", env)
    assert result.exit_code == 0, result.output
    assert ("results/cpu_1x2x32x1_torch_debug/resnet: 2 run(s); hvdbench: 30.5000 min (mean of 2); summarizer: "
            "no score (its olympic mean drops the 1 fastest and 1 slowest of 2 run(s), leaving none; MLPerf "
            "scores resnet from 5 runs, this system has 2)") in result.output
