"""The default math threads against a neighbour: a lone rank's throughput with the old default (one
thread per core) and the new one (the cores a neighbour leaves free) while a known background load
runs, alternated in the same run.

    .venv/bin/python benchmarks/bench_threads.py                   # about 1 minute on 2 cores
    .venv/bin/python benchmarks/bench_threads.py --rounds 6 --load 1

A background process spins on `--load` cores the whole time. Each round trains the ResNet-50 debug
flavor on --synthetic data for `--steps` steps twice, ABBA: "old" with --threads set to the machine's
core count (what the default was: every core to a lone rank), "new" with the default, which measures
the neighbour at start (hvdbench.frameworks.math_threads). It prints each run's samples/s and
step-time spread, and the median ratio new/old.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BIN = Path(sys.executable).parent
SPIN = "import time\nt = time.time()\nwhile time.time() - t < 3600: pass"


def train(threads: int | None, steps: int, out: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    argv = [str(BIN / "hvdbench"), "train", "resnet50", "--flavor", "debug", "--synthetic", "--steps", str(steps),
            "--warmup-steps", "5", "--out", str(out)]
    if threads:
        argv += ["--threads", str(threads)]
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads((out / "result.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--load", type=int, default=1, help="cores the background load spins on")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.load)]
    ratios = []
    try:
        with tempfile.TemporaryDirectory(prefix="hvdbench-bench-threads-") as tmp:
            for r in range(args.rounds):
                order = ("old", "new") if r % 2 == 0 else ("new", "old")  # ABBA
                got = {}
                for which in order:
                    rec = train(cores if which == "old" else None, args.steps, Path(tmp) / f"r{r}-{which}")
                    got[which] = rec
                    print(f"round {r + 1} {which}: {rec['throughput']:8.1f} samples/s, step "
                          f"{1e3 * rec['step_time_mean_s']:.1f} +- {1e3 * rec['step_time_std_s']:.1f} ms, "
                          f"other_cpus {rec.get('other_cpus') or 0:.2f}", flush=True)
                ratios.append(got["new"]["throughput"] / got["old"]["throughput"])
    finally:
        for s in spinners:
            s.kill()
            s.wait()
    print(f"{cores} cores, {args.load} spinning: new/old throughput median {statistics.median(ratios):.2f} "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f}, {len(ratios)} rounds)")


if __name__ == "__main__":
    main()
