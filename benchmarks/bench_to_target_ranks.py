"""What a debug flavor's run to its target costs alone against two ranks, on this machine: each model's
`hvdbench train MODEL --flavor debug` on its test data, one rank on one thread (how make test runs SSD,
RetinaNet and GNMT) against `horovodrun -np 2 -H localhost:2 --mpi` (one thread a rank: how it runs
Mask R-CNN and the Transformer), alternated round by round (ABBA), as the CPU-seconds of the whole
launch (every process it waited for), its wall time, and the epoch and metric it stopped at. The
ratio two ranks / alone is taken within a round, so a slower machine moves both sides.

    .venv/bin/python benchmarks/bench_to_target_ranks.py                         # ssd, retinanet: ~5 min
    .venv/bin/python benchmarks/bench_to_target_ranks.py --models gnmt,transformer --rounds 2   # ~20 min

Printed: per model and round, each side's CPU-seconds, wall seconds, epochs and metric; then per model
the median [min, max] of the two-rank / alone CPU-second ratio over the rounds. The data is prepared
once into a temporary folder (the built-in digit scenes, gettext En->De at the tests' vocabulary).

Measured at bcce5f1 (2026-11-30, quiet, one round, 5 min 10 s):

    model        round side         CPU s  wall s epochs   metric
    ssd              1 alone         48.5    47.4   4.00   0.5693
    ssd              1 two ranks     60.5    32.2   4.00   0.5842
    ssd              1 two ranks     59.4    31.5   4.00   0.5842
    ssd              1 alone         51.2    49.9   4.00   0.5693
    retinanet        1 alone         37.3    36.4   2.00   0.3602
    retinanet        1 two ranks     68.8    36.4   3.00   0.4443
    retinanet        1 two ranks     66.5    35.1   3.00   0.4443
    retinanet        1 alone         39.9    38.9   2.00   0.3602
      ssd          1.20x, retinanet    1.75x

GNMT alone and on two MPI ranks, measured the same way but by hand the same night: 132 against 172
CPU-s (BLEU 7.5 and 5.6 at epoch 2).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
HVDBENCH = str(BIN / "hvdbench")
# model -> the `hvdbench prepare` arguments of its data (as tests/integration prepares it)
SCENES = ("digit-scenes",)
GETTEXT = ("translation", "--src", "builtin:gettext-de", "--vocab-size", "4000", "--max-len", "64")
DATA = {"ssd": SCENES, "retinanet": SCENES, "maskrcnn": SCENES, "gnmt": GETTEXT, "transformer": GETTEXT}
SIDES = {"alone": [], "two ranks": [str(BIN / "horovodrun"), "-np", "2", "-H", "localhost:2", "--mpi"]}
ABBA = ("alone", "two ranks", "two ranks", "alone")  # one round


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def launch(side: str, model: str, data: Path, out: Path) -> dict:
    """One run to the target: its CPU-seconds, wall seconds, and where it stopped."""
    argv = [*SIDES[side], HVDBENCH, "train", model, "--flavor", "debug", "--data", str(data), "--out", str(out)]
    if side == "alone":
        argv += ["--threads", "1"]
    cpu, wall = cpu_seconds(), time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True)
    cpu, wall = cpu_seconds() - cpu, time.monotonic() - wall
    if proc.returncode != 0:
        sys.exit(f"{model} ({side}) exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
    record = json.loads((out / "result.json").read_text())
    if record["status"] != "success":  # stopped short of the target: its CPU-seconds are not to the target
        sys.exit(f"{model} ({side}) ended {record['status']}, not at its target: {out / 'result.json'}")
    return {"cpu": cpu, "wall": wall, "epochs": record["epochs"], "metric": record["final_metric"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="ssd,retinanet", help=f"comma-separated, of {', '.join(DATA)}")
    parser.add_argument("--rounds", type=int, default=1, help="ABBA rounds (each runs both sides twice)")
    args = parser.parse_args()
    models = args.models.split(",")
    unknown = [m for m in models if m not in DATA]
    if unknown:
        sys.exit(f"unknown model(s) {', '.join(unknown)}: choose from {', '.join(DATA)}")
    with tempfile.TemporaryDirectory(prefix="bench-to-target-") as tmp:
        root = Path(tmp)
        prepared = {}
        for model in models:
            kind = DATA[model]
            if kind not in prepared:
                prepared[kind] = root / f"data{len(prepared)}"
                subprocess.run([HVDBENCH, "prepare", *kind, "--out", str(prepared[kind])], check=True,
                               capture_output=True)
        ratios: dict[str, list[float]] = {m: [] for m in models}
        print(f"{'model':12} {'round':>5} {'side':10} {'CPU s':>7} {'wall s':>7} {'epochs':>6} {'metric':>8}")
        for model in models:
            for r in range(args.rounds):
                got: dict[str, list[dict]] = {side: [] for side in SIDES}
                for i, side in enumerate(ABBA):
                    res = launch(side, model, prepared[DATA[model]], root / f"{model}-{r}-{i}")
                    got[side].append(res)
                    print(f"{model:12} {r + 1:>5} {side:10} {res['cpu']:7.1f} {res['wall']:7.1f} "
                          f"{res['epochs']:6.2f} {res['metric']:8.4f}", flush=True)
                ratios[model].append(statistics.mean(x["cpu"] for x in got["two ranks"]) /
                                     statistics.mean(x["cpu"] for x in got["alone"]))
        print("\ntwo ranks / alone, CPU-seconds to the target: median [min, max] over the rounds")
        for model, rs in ratios.items():
            print(f"  {model:12} {statistics.median(rs):.2f}x [{min(rs):.2f}, {max(rs):.2f}]")


if __name__ == "__main__":
    main()
