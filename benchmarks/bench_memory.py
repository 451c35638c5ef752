"""Peak memory of `hvdbench train` on a CPU against hvdbench's estimate (hvdbench/train/memory.py).

    .venv/bin/python benchmarks/bench_memory.py                 # every model/flavor/framework below
    .venv/bin/python benchmarks/bench_memory.py --only resnet50:debug:torch

Each case runs `hvdbench train MODEL --synthetic` as users run it (one process, 2 timed steps) at
two batch sizes and reads the process's peak resident set size (getrusage of the finished child).
The difference between the two gives the measured bytes per sample, the rest the fixed part; both
are printed beside the estimate for each batch, with the ratio estimate / measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
HVDBENCH = str(Path(sys.executable).parent / "hvdbench")

# (model, flavor, framework, two batch sizes)
CASES = [
    ("resnet50", "debug", "torch", (64, 256)),
    ("resnet50", "debug", "tensorflow", (64, 256)),
    ("resnet50", "full", "torch", (4, 12)),
    ("resnet50", "full", "tensorflow", (4, 12)),
    ("bert", "debug", "torch", (16, 64)),
    ("bert", "large", "torch", (1, 3)),
]


# Runs one command and prints its peak RSS: a fresh parent per run, so getrusage(RUSAGE_CHILDREN)
# holds that run's peak alone (Linux reports kilobytes).
MEASURE = ("import resource, subprocess, sys\n"
           "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode\n"
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, code)")


def peak_rss(model: str, flavor: str, framework: str, batch: int) -> int:
    """Peak RSS in bytes of one `hvdbench train` process."""
    with tempfile.TemporaryDirectory() as out:
        argv = [HVDBENCH, "train", model, "--flavor", flavor, "--framework", framework, "--synthetic",
                "--batch-per-gpu", str(batch), "--steps", "2", "--warmup-steps", "1", "--out", out]
        env = {**os.environ, "OMP_NUM_THREADS": "2", "TF_CPP_MIN_LOG_LEVEL": "2"}
        proc = subprocess.run([sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True, env=env)
        peak, code = proc.stdout.split()
        if code != "0":
            raise SystemExit(f"{' '.join(argv)} failed (exit {code})")
        return int(peak)


def main() -> None:
    from hvdbench.contracts import get_spec
    from hvdbench.train import memory
    from hvdbench.train.config import TrainConfig

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", action="append", help="model:flavor:framework")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_memory.json")
    args = p.parse_args()
    results = []
    cases = CASES
    print(f"{'case':34s} {'batch':>5s} {'measured GB':>12s} {'estimate GB':>12s} {'ratio':>6s}")
    for model, flavor, framework, batches in cases:
        if args.only and f"{model}:{flavor}:{framework}" not in args.only:
            continue
        spec = get_spec(model)
        measured = [peak_rss(model, flavor, framework, b) for b in batches]
        per_sample = (measured[1] - measured[0]) / (batches[1] - batches[0])
        estimates = [memory.estimate(spec, TrainConfig(model=model, flavor=flavor, framework=framework, batch_per_gpu=b,
                                                       optimizer=spec.defaults.get("optimizer", "sgd"))).total
                     for b in batches]
        for b, m, e in zip(batches, measured, estimates):
            print(f"{model + ':' + flavor + ':' + framework:34s} {b:5d} {m / 1e9:12.2f} {e / 1e9:12.2f} {e / m:6.2f}")
        results.append({"model": model, "flavor": flavor, "framework": framework, "batches": batches,
                        "peak_rss": measured, "measured_per_sample": per_sample,
                        "measured_fixed": measured[0] - batches[0] * per_sample,
                        "estimates": estimates})
        print(f"{'':34s} measured: {per_sample / 1e6:,.1f} MB per sample + {results[-1]['measured_fixed'] / 1e9:.2f} GB")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
