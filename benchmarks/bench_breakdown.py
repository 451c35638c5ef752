"""What the step-time breakdown costs: throughput with it on against off, measured in the same run.

    .venv/bin/python benchmarks/bench_breakdown.py                 # about 2 minutes on 2 cores
    .venv/bin/python benchmarks/bench_breakdown.py --rounds 6 --model bert --steps 60

Each round runs `horovodrun -np 2 --gloo hvdbench train MODEL --synthetic` twice, once with
`--breakdown` (the default: host clock or CUDA events at each phase boundary, plus Horovod's
synchronize() called apart from the update) and once with `--no-breakdown`, in ABBA order, and prints
each round's ratio on/off, their median and spread (the goal: the median >= 0.99). On a shared
machine the rounds spread; the median of the ratios is the figure.
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


def throughput(model: str, steps: int, breakdown: bool, workdir: Path, tag: str) -> float:
    out = workdir / tag
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    subprocess.run([str(BIN / "horovodrun"), "-np", "2", "-H", "localhost:2", "--gloo", str(BIN / "hvdbench"),
                    "train", model, "--flavor", "debug", "--synthetic", "--steps", str(steps), "--warmup-steps", "5",
                    "--breakdown" if breakdown else "--no-breakdown", "--out", str(out)],
                   check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads((out / "result.json").read_text())["throughput"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    ratios = []
    with tempfile.TemporaryDirectory(prefix="hvdbench-bench-breakdown-") as tmp:
        for r in range(args.rounds):
            order = (True, False) if r % 2 == 0 else (False, True)  # ABBA
            got = {on: throughput(args.model, args.steps, on, Path(tmp), f"r{r}-{'on' if on else 'off'}")
                   for on in order}
            ratios.append(got[True] / got[False])
            print(f"round {r + 1}: on {got[True]:,.1f}, off {got[False]:,.1f} samples/s, on/off {ratios[-1]:.3f}")
    print(f"{args.model} debug, 2 ranks, {args.steps} steps: on/off median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}, {len(ratios)} rounds)")


if __name__ == "__main__":
    main()
