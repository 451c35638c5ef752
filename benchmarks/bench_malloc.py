"""glibc's malloc as hvdbench sets it for CPU training (hvdbench.frameworks.cpu_malloc_settings: what a
step frees is kept for the next) against glibc's defaults (freed memory returned to the kernel and
faulted in again next step), alternated in the same run.

    .venv/bin/python benchmarks/bench_malloc.py                     # about 4 minutes on 2 cores
    .venv/bin/python benchmarks/bench_malloc.py --models bert --rounds 6 --steps 60

Each round trains each model's debug flavor on --synthetic data for --steps steps, one rank on one
thread, twice, ABBA: "glibc" with GLIBC_TUNABLES=glibc.malloc.perturb=0 in its environment (a malloc
tunable the user set, so hvdbench leaves malloc alone; perturb 0 is glibc's default, so this is
glibc's own behaviour), "kept" without it. Printed per model: each run's mean step time and the CPU
seconds the whole process took (user + system, its start included), then the medians, the median
ratio kept / glibc of the step time, and its spread over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BIN = Path(sys.executable).parent
BASELINE_ENV = {"GLIBC_TUNABLES": "glibc.malloc.perturb=0"}


def train(model: str, kept: bool, steps: int, out: Path) -> tuple[float, float, float]:
    """(mean step s, user CPU s, system CPU s) of one synthetic run."""
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    if not kept:
        env.update(BASELINE_ENV)
    argv = [str(BIN / "hvdbench"), "train", model, "--flavor", "debug", "--synthetic", "--steps", str(steps),
            "--warmup-steps", "5", "--threads", "1", "--out", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    step = json.loads((out / "result.json").read_text())["step_time_mean_s"]
    return step, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="transformer,bert,resnet50,maskrcnn")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    summary = []
    with tempfile.TemporaryDirectory(prefix="hvdbench-bench-malloc-") as tmp:
        for model in args.models.split(","):
            runs: dict[str, list] = {"glibc": [], "kept": []}
            for r in range(args.rounds):
                for which in (("glibc", "kept") if r % 2 == 0 else ("kept", "glibc")):  # ABBA
                    step, user, system = train(model, which == "kept", args.steps, Path(tmp) / f"{model}-{r}-{which}")
                    runs[which].append((step, user, system))
                    print(f"{model} round {r + 1} {which:5s}: step {1e3 * step:7.1f} ms, CPU {user:5.1f} s user "
                          f"+ {system:4.1f} s system", flush=True)
            ratios = [k[0] / g[0] for k, g in zip(runs["kept"], runs["glibc"])]
            med = {w: [statistics.median(v[i] for v in runs[w]) for i in range(3)] for w in runs}
            summary.append((model, med, ratios))
    print(f"\n{'model':12s} {'glibc step':>11s} {'kept step':>10s} {'kept/glibc':>11s} {'spread':>13s} "
          f"{'glibc CPU (sys)':>16s} {'kept CPU (sys)':>15s}")
    for model, med, ratios in summary:
        g, k = med["glibc"], med["kept"]
        print(f"{model:12s} {1e3 * g[0]:8.1f} ms {1e3 * k[0]:7.1f} ms {statistics.median(ratios):11.2f} "
              f"{min(ratios):6.2f}-{max(ratios):.2f} {g[1] + g[2]:8.1f} s ({g[2]:.1f}) {k[1] + k[2]:7.1f} s ({k[2]:.1f})")


if __name__ == "__main__":
    main()
