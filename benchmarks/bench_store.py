"""How fast runs.csv is read and a run is recorded (issue 54, item 8): the report's reader of the
store (`load_sweeps`, runs.csv -> LoadedRun) over 10,000 and 30,000 rows, and the sweep recording a
run (`run_sweep`, its own path: claim, resume check, result.json, store lock, append) into a store of
10 and of 10,000 rows.

    .venv/bin/python benchmarks/bench_store.py                  # this tree alone, about 1 minute
    git archive a709c93 hvdbench | tar -x -C /tmp/h54base       # the tree to compare with
    .venv/bin/python benchmarks/bench_store.py --baseline /tmp/h54base --rounds 4

The rows are real RunResult records written by the store's own writer: four models, layouts 1x1 to
4x8, both modes, successes, failures with their error text, time-outs, and the empty cells each of
those leaves. Each figure is measured in a fresh process (`--child`, with this tree's or the
baseline's hvdbench first on sys.path); with --baseline the two trees alternate ABBA, round by
round, and the ratios baseline / this tree are printed with their median and spread. Times are the
process's CPU time (the machine is shared: other processes' load moves wall time more), wall time
beside them.

Recording: a sweep of --runs runs that finished but were not appended (each folder has its
result.json and launch.json: the resume path, nothing launches) over a store of N rows. Each run
prints one line when its row is in; one run's cost is the median time from one line to the next,
which leaves out what a sweep does once (reading the store to plan, before the first line).

Measured on the 2-core development machine, shared (load average about 10), 4 rounds ABBA against
a709c93 (the tree before), CPU time, median (min-max):
    reading, ms per row        10,000 rows: 0.0765 (0.0506-0.0794), before 0.2408 (0.2189-0.3028): 3.60x
                               30,000 rows: 0.0644 (0.0551-0.0853), before 0.2400 (0.2013-0.2862): 3.58x
    recording one run, ms      10 rows:     2.7 (1.9-4.0),   before 14.3 (11.7-18.4)
                               10,000 rows: 3.4 (2.3-3.9),   before 5722 (4760-5774)
    one run at 10,000 rows / at 10 rows: 1.18 (0.71-2.09), before 370 (310-494)
(wall time per recorded run, its fsync and locks: 13.3 and 15.6 ms, before 67 ms and 21 s).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
MODELS = (("resnet50", "images", "accuracy", 0.759, "throughput"), ("bert", "large", "mlm_accuracy", 0.72, "ttt"),
          ("llama31_8b", "debug", "log_perplexity", 3.3, "throughput"), ("ssd", "debug", "mAP", 0.34, "ttt"))
LAYOUTS = ((1, 1), (1, 2), (1, 4), (1, 8), (2, 4), (2, 8), (4, 8))


def realistic_rows(n: int, seed: int = 0) -> list:
    """n RunResult records as sweeps leave them (hvdbench's own tree)."""
    from hvdbench.results.records.schema import RunResult

    rng = random.Random(seed)
    rows = []
    for i in range(n):
        model, flavor, metric, target, mode = MODELS[i % len(MODELS)]
        nodes, gpus = LAYOUTS[(i // len(MODELS)) % len(LAYOUTS)]
        world = nodes * gpus
        hosts = ";".join(f"node{k:03d}" for k in range(nodes))
        status = rng.choices(("success", "failed", "timeout", "aborted"), (85, 9, 4, 2))[0]
        row = RunResult(run_id=f"{nodes}x{gpus}x32x1-r{i}", sweep=f"sweep{i // 500}", repeat=1 + i % 5, model=model,
                        flavor=flavor, framework="torch", precision=rng.choice(("fp32", "bf16")),
                        mode="throughput" if mode == "throughput" else "time_to_accuracy",
                        dataset=f"/data/{model}/prepared", batch_per_gpu=32, accum_steps=1, global_batch=32 * world,
                        world_size=world, nodes=nodes, gpus_per_node=gpus, layout=f"{nodes}x{gpus}",
                        scale="up" if nodes == 1 else "out", launcher=rng.choice(("horovodrun", "mpirun", "srun")),
                        controller="gloo", hosts=hosts, metric_name=metric, status=status,
                        started_at=f"2026-01-{1 + i % 28:02d}T12:{i % 60:02d}:00+00:00",
                        engine=rng.choice(("horovod", "ddp", "fsdp")), wall_s=round(rng.uniform(30, 900), 3))
        if status != "success" and status != "aborted":  # a failed run: what the sweep knew, and why
            row.error = (f"exit status 1 | RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:{rng.randint(100, 3000)}, "
                         "unhandled system error | rank 3 killed by signal 9 (SIGKILL)")
            rows.append(row)
            continue
        row.devices = "NVIDIA H100 80GB HBM3"
        row.versions = "torch=2.13.0;horovod=0.28.1;nccl=2.27.3;cuda=12.8"
        row.parameters, row.threads, row.shard_parameters = 25_557_032, 8, 25_557_032 // world
        tput = world * rng.uniform(800, 3000)
        row.steps, row.warmup_steps = 200, 20
        row.throughput, row.throughput_per_gpu = tput, tput / world
        row.step_time_mean_s, row.step_time_std_s = 32 * world / tput, rng.uniform(1e-4, 1e-2)
        row.data_s, row.compute_s, row.comm_s, row.update_s, row.other_s = (rng.uniform(1e-4, 0.05) for _ in range(5))
        row.other_cpus, row.other_gpu_procs = rng.uniform(0, 0.4), 0
        row.flops_per_sample, row.peak_tflops = 2.4e10, 989.0
        row.model_tflops_per_gpu = row.flops_per_sample * row.throughput_per_gpu / 1e12
        row.mfu = row.model_tflops_per_gpu / row.peak_tflops
        row.mem_allocated_gb, row.mem_reserved_gb, row.mem_estimate_gb = 21.5, 24.0, 20.0
        row.energy_j, row.energy_j_per_sample, row.power_w_per_gpu = 1.2e5, 0.4, 610.0
        if world > 1:
            row.slowest_rank, row.slowest_host = rng.randrange(world), hosts.split(";")[0]
            row.slowest_compute_ratio, row.imbalance_s = rng.uniform(1.0, 1.2), rng.uniform(0, 0.01)
        if row.mode == "time_to_accuracy":
            row.target, row.final_metric = target, target * 1.01
            row.epochs = row.epochs_to_target = float(rng.randint(30, 45))
            row.time_per_epoch_s = rng.uniform(20, 200)
            row.time_to_train_s = row.epochs * row.time_per_epoch_s
        rows.append(row)
    return rows


# --- the two measurements, each run in a child process of the tree under test ---------------------

def time_read(store_dir: Path, rows: int) -> tuple[float, float]:
    from hvdbench.results.records.store import load_sweeps

    cpu, wall = time.process_time(), time.perf_counter()
    runs = load_sweeps([store_dir])
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert len(runs) == rows, (len(runs), rows)
    return cpu, wall


class _Clock(io.StringIO):
    """The sweep's console: each finished run prints one line (`1x1-r2 ... repeat 2 ...`); the
    process's CPU and wall clocks are read as each arrives."""

    def __init__(self):
        super().__init__()
        self.finished: list[tuple[float, float]] = []

    def write(self, text: str) -> int:
        if " repeat " in text:
            self.finished.append((time.process_time(), time.perf_counter()))
        return super().write(text)


def time_record(template: Path, work: Path, runs: int, rows: int) -> tuple[float, float]:
    """run_sweep over a copy of `template` (its runs.csv and its finished, unrecorded run folders),
    `runs` of them planned: the median time from one run's line to the next (CPU, wall), each run's
    whole path after the first (which also reads the store to plan)."""
    from rich.console import Console

    from hvdbench.sweep.plan import Entry
    from hvdbench.sweep.run import SweepSpec, run_sweep
    from hvdbench.topology import Layout

    shutil.copytree(template, work)
    spec = SweepSpec(model="resnet50", out=work, entries=[Entry(Layout(1, 1, ("localhost",)))], repeats=runs,
                     launcher="mpirun", train_args=("--flavor", "debug", "--synthetic"))
    clock = _Clock()
    counts = run_sweep(spec, Console(file=clock, width=200))
    assert counts == {"success": runs}, counts
    assert spec.store.read_bytes().count(b"\n") == 1 + rows + runs
    assert len(clock.finished) == runs, clock.getvalue()
    steps = [(b[0] - a[0], b[1] - a[1]) for a, b in zip(clock.finished, clock.finished[1:])]
    return statistics.median(s[0] for s in steps), statistics.median(s[1] for s in steps)


def make_store(folder: Path, rows: int, runs: int) -> None:
    """folder/runs.csv of `rows` realistic rows, and `runs` run folders 1x1-r1.. the sweep finished
    but did not record (result.json and launch.json each)."""
    from hvdbench.results.records.schema import RunResult, write_result
    from hvdbench.results.records.store import append_rows

    folder.mkdir(parents=True)
    append_rows(folder / "runs.csv", realistic_rows(rows))
    for r in range(1, runs + 1):
        rdir = folder / f"1x1-r{r}"
        rdir.mkdir()
        write_result(rdir / "result.json", RunResult(model="resnet50", flavor="debug", framework="torch",
                                                     world_size=1, nodes=1, gpus_per_node=1, throughput=5.0 + r))
        (rdir / "launch.json").write_text(json.dumps({
            "status": "exited", "returncode": 0, "pid": 1, "pgid": 1, "wall_s": 4.0, "leftover": [],
            "started_at": "2026-01-01T00:00:00+00:00"}))


def child(args) -> None:
    sys.path.insert(0, str(args.tree))
    import hvdbench

    assert Path(hvdbench.__file__).resolve().is_relative_to(Path(args.tree).resolve()), hvdbench.__file__
    if args.child == "read":
        got = time_read(args.folder, args.rows)
    else:
        got = time_record(args.folder, args.work, args.runs, args.rows)
    print(json.dumps(got))


def measure(tree: Path, *argv: str) -> tuple[float, float]:
    out = subprocess.run([sys.executable, str(HERE), "--tree", str(tree), *argv], check=True,
                         stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    return tuple(json.loads(out.stdout.splitlines()[-1]))


def spread(values: list[float], scale: float = 1.0, fmt: str = ".3f") -> str:
    values = [v * scale for v in values]
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="a tree holding another hvdbench/ to compare with")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--read-rows", default="10000,30000")
    parser.add_argument("--record-rows", default="10,10000")
    parser.add_argument("--runs", type=int, default=5, help="runs each timed sweep records")
    parser.add_argument("--child", choices=("read", "record"), help=argparse.SUPPRESS)
    parser.add_argument("--tree", type=Path, default=ROOT, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    sys.path.insert(0, str(ROOT))
    trees = {"this": ROOT} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    read_rows = [int(n) for n in args.read_rows.split(",")]
    record_rows = [int(n) for n in args.record_rows.split(",")]
    with tempfile.TemporaryDirectory(prefix="hvdbench-bench-store-") as tmp:
        tmp = Path(tmp)
        for n in sorted(set(read_rows) | set(record_rows)):
            make_store(tmp / f"store-{n}", n, args.runs)
        read = {(t, n): [] for t in trees for n in read_rows}
        record = {(t, n): [] for t in trees for n in record_rows}
        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(trees)[::-1]  # ABBA
            for n in read_rows:
                for t in order:
                    read[t, n].append(measure(trees[t], "--child", "read", "--folder", str(tmp / f"store-{n}"),
                                              "--rows", str(n)))
            for n in record_rows:
                for t in order:
                    work = tmp / f"work-{t}-{n}"
                    record[t, n].append(measure(trees[t], "--child", "record", "--folder", str(tmp / f"store-{n}"),
                                                "--work", str(work), "--runs", str(args.runs), "--rows", str(n)))
                    shutil.rmtree(work)
            print(f"round {r + 1} of {args.rounds} done", flush=True)
    print(f"reading runs.csv (load_sweeps), ms per row, median (min-max) of {args.rounds} rounds; CPU | wall:")
    for n in read_rows:
        for t in trees:
            cpu, wall = ([x[i] / n for x in read[t, n]] for i in (0, 1))
            print(f"  {t:8s} {n:6d} rows: {spread(cpu, 1e3, '.4f')} | {spread(wall, 1e3, '.4f')}")
        if args.baseline:
            print(f"  baseline / this, CPU: {spread([b[0] / a[0] for a, b in zip(read['this', n], read['baseline', n])], fmt='.2f')}")
    print(f"recording one run (run_sweep, median of {args.runs - 1} runs' times), ms, median (min-max); CPU | wall:")
    for n in record_rows:
        for t in trees:
            cpu, wall = ([x[i] for x in record[t, n]] for i in (0, 1))
            print(f"  {t:8s} {n:6d} rows: {spread(cpu, 1e3, '.1f')} | {spread(wall, 1e3, '.1f')}")
        if args.baseline:
            print(f"  baseline / this, CPU: {spread([b[0] / a[0] for a, b in zip(record['this', n], record['baseline', n])], fmt='.1f')}")
    first, last = record_rows[0], record_rows[-1]
    for t in trees:
        ratio = [b[0] / a[0] for a, b in zip(record[t, first], record[t, last])]
        print(f"  {t}: one run at {last} rows / at {first} rows, CPU: {spread(ratio, fmt='.2f')}")


if __name__ == "__main__":
    main()
