"""A sweep's fair baseline against the old one: the spread of the 1x1 repeats and the 1x2 scaling
efficiency with the old defaults (a 1x1 rank takes every core; a fixed 3-step warm-up) and with
today's (every layout's ranks get the largest layout's thread share; warm-up until the step times
settle), the two sweeps alternated in the same run (ABBA), on this machine's two local slots.

    .venv/bin/python benchmarks/bench_fair_baseline.py                 # about 3 minutes on 2 cores
    .venv/bin/python benchmarks/bench_fair_baseline.py --rounds 4 --repeats 3

Each round runs `hvdbench sweep resnet50 --hosts localhost:2 --layouts 1x1,1x2 --repeats R` on the
debug flavor and --synthetic data twice: "old" with `--thread-share 1 --warmup-max-steps 3` after
`--` (what a sweep did before: each rank shares the cores with the ranks of its own layout only, a
fixed warm-up), "new" with neither. It prints, per sweep, the 1x1 throughputs, their coefficient of
variation (std/mean over the repeats), the threads per rank each layout recorded, and the 1x2
efficiency (per-rank throughput of 1x2 / that of 1x1); then the medians over the rounds.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hvdbench.results.records.store import read_runs  # noqa: E402

BIN = Path(sys.executable).parent
OLD = ("--thread-share", "1", "--warmup-max-steps", "3")


def sweep(out: Path, repeats: int, steps: int, extra: tuple[str, ...]) -> dict:
    argv = [str(BIN / "hvdbench"), "sweep", "resnet50", "--hosts", "localhost:2", "--layouts", "1x1,1x2",
            "--repeats", str(repeats), "--out", str(out), "--", "--flavor", "debug", "--synthetic",
            "--steps", str(steps), "--warmup-steps", "3", *extra]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = [r for r in read_runs(out / "runs.csv") if r.status == "success"]
    one = [r.throughput for r in rows if r.layout == "1x1"]
    two = [r.throughput / 2 for r in rows if r.layout == "1x2"]
    return {"1x1": one, "cv": statistics.stdev(one) / statistics.mean(one) if len(one) > 1 else 0.0,
            "efficiency": statistics.mean(two) / statistics.mean(one),
            "threads": {r.layout: r.threads for r in rows}, "warmup": [r.warmup_steps for r in rows]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    got: dict[str, list[dict]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory(prefix="hvdbench-bench-fair-") as tmp:
        for r in range(args.rounds):
            for which in (("old", "new") if r % 2 == 0 else ("new", "old")):  # ABBA
                res = sweep(Path(tmp) / f"r{r}-{which}", args.repeats, args.steps, OLD if which == "old" else ())
                got[which].append(res)
                print(f"round {r + 1} {which}: 1x1 {', '.join(f'{t:.0f}' for t in res['1x1'])} samples/s "
                      f"(cv {res['cv']:.3f}), 1x2 efficiency {res['efficiency']:.3f}, threads per rank "
                      f"{res['threads']}, warm-up steps {res['warmup']}", flush=True)
    for which in ("old", "new"):
        print(f"{which}: median 1x1 cv {statistics.median(x['cv'] for x in got[which]):.3f}, median 1x2 "
              f"efficiency {statistics.median(x['efficiency'] for x in got[which]):.3f}")


if __name__ == "__main__":
    main()
