"""Horovod against PyTorch's DDP and FSDP2 on this machine's two local slots (1x2, CPU, Gloo): the
throughput of three models' debug flavors under each engine, as ratios to Horovod's measured in the
same round, engines alternated round by round (ABBA order, so a drift of the machine touches each
alike), and where each engine's step went.

    .venv/bin/python benchmarks/bench_engines.py                  # about 8 minutes on 2 cores
    .venv/bin/python benchmarks/bench_engines.py --rounds 4 --models resnet50,bert

Each run is `horovodrun -np 2 -H localhost:2 --gloo hvdbench train MODEL --flavor debug --synthetic
--steps N --engine E`. Printed: per model and engine, the median ratio to Horovod over the rounds
with its min and max, and the median step parts (compute, exposed communication, update) in ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BIN = Path(sys.executable).parent
ENGINES = ("horovod", "ddp", "fsdp")


def run(model: str, engine: str, steps: int, out: Path) -> dict:
    argv = [str(BIN / "horovodrun"), "-np", "2", "-H", "localhost:2", "--gloo", str(BIN / "hvdbench"), "train",
            model, "--flavor", "debug", "--synthetic", "--steps", str(steps), "--warmup-steps", "5",
            "--engine", engine, "--out", str(out)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads((out / "result.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--models", default="resnet50,bert,llama2_lora")
    args = parser.parse_args()
    models = args.models.split(",")
    got = {(m, e): [] for m in models for e in ENGINES}
    with tempfile.TemporaryDirectory(prefix="hvdbench-bench-engines-") as tmp:
        for r in range(args.rounds):
            order = ENGINES if r % 2 == 0 else ENGINES[::-1]  # ABBA
            for model in models:
                for engine in order:
                    res = run(model, engine, args.steps, Path(tmp) / f"r{r}-{model}-{engine}")
                    got[(model, engine)].append(res)
                    print(f"round {r + 1} {model} {engine}: {res['throughput']:.1f} samples/s, step "
                          f"{1e3 * res['step_time_mean_s']:.1f} ms (compute {1e3 * res['compute_s']:.1f}, "
                          f"comm {1e3 * res['comm_s']:.1f}, update {1e3 * res['update_s']:.1f})", flush=True)
    print("\nper model and engine: throughput / Horovod's of the same round (median [min, max]), median step parts")
    for model in models:
        for engine in ENGINES:
            runs = got[(model, engine)]
            ratios = [a["throughput"] / b["throughput"] for a, b in zip(runs, got[(model, "horovod")])]
            parts = {k: 1e3 * statistics.median(x[k] for x in runs) for k in ("compute_s", "comm_s", "update_s")}
            print(f"  {model:12} {engine:8} {statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}]  "
                  f"compute {parts['compute_s']:.1f} ms, comm {parts['comm_s']:.1f} ms, "
                  f"update {parts['update_s']:.1f} ms, {statistics.median(x['throughput'] for x in runs):.1f} "
                  f"samples/s")


if __name__ == "__main__":
    main()
