"""Where one of `make demo`'s launches spends its seconds, and what the demo's settings save: each
model's launch at 1x2 (horovodrun --gloo on this machine's two slots, the demo study's train settings)
with the warm-up the demo asks for against the default one, alternated round by round (ABBA), as
ratios of the launch's wall time measured in the same round; and, once per round, what every launch
pays before its first step: horovodrun's own start, its check that Horovod has Gloo alone (it
imports horovod.torch, so torch, in a forked process; asked once per build since the patch that keeps
the answer, docs/building.md), a Python importing torch, the same importing
torch._dynamo (the first optimizer a run builds imports it), diffusers, and counting ResNet-50's
debug FLOPs per sample on the meta device (every run's record, hvdbench.frameworks.torch.flops).

    .venv/bin/python benchmarks/bench_demo_launch.py                       # about 10 minutes on 2 cores
    .venv/bin/python benchmarks/bench_demo_launch.py --rounds 4 --models resnet50,llama2_lora

Printed: per model, the launch's wall time with the demo's warm-up over the default's (median [min,
max] over the rounds), the warm-up steps each took, and the worker's own time against the launch's;
then the fixed costs' medians in seconds and CPU-seconds.
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

import yaml

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]
DEMO = yaml.safe_load((ROOT / "hvdbench" / "studies" / "demo.yaml").read_text())
# The warm-up the default gives the demo's settings (--warmup-max-steps 0: 5 x --warmup-steps, ending
# earlier once step times settle), against the demo's own (hvdbench/studies/demo.yaml).
DEFAULT = {"warmup_max_steps": 0}
# What a launch pays before its first step, each alone: (wall s, CPU-s) of a command.
COUNT = ("import torch._dynamo; from hvdbench.contracts import get_spec; from hvdbench.frameworks.torch.flops import "
         "count; count(get_spec('resnet50'), 'debug')")
# horovodrun's check that Horovod has Gloo, as every launch asked it before scripts/patch_horovod.py kept
# the answer (docs/building.md): the forked process importing horovod.torch.
ASK_GLOO = ("from horovod.common.util import _check_extension_lambda_in_a_process as ask; "
            "assert ask('torch', lambda ext: ext.gloo_built(), 'built with Gloo', False)")
FIXED = {
    "horovodrun -np 1 true": [str(BIN / "horovodrun"), "-np", "1", "-H", "localhost:1", "--gloo", "true"],
    "horovodrun's build check": [sys.executable, "-c", ASK_GLOO],
    "python: import torch": [sys.executable, "-c", "import torch"],
    "python: import torch._dynamo": [sys.executable, "-c", "import torch._dynamo"],
    "python: import diffusers": [sys.executable, "-c", "import torch, diffusers.models"],
    "python: + count FLOPs (r50)": [sys.executable, "-c", COUNT],
}


def timed(argv: list[str], **kw) -> tuple[float, float]:
    """(wall seconds, CPU seconds of it and its children) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.monotonic() - t0, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def train_args(model: str, data: Path, settings: dict) -> list[str]:
    plan = DEMO["models"][model]
    args = ["--flavor", "debug"] + (["--synthetic"] if plan.get("synthetic") else ["--data", str(data / model)])
    for key, value in {**plan.get("train", {}), **DEMO["throughput"], **settings}.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return args


def launch(model: str, data: Path, settings: dict, out: Path) -> dict:
    argv = [str(BIN / "horovodrun"), "-np", "2", "-H", "localhost:2", "--gloo", str(BIN / "hvdbench"), "train",
            model, *train_args(model, data, settings), "--thread-share", "2", "--out", str(out)]
    wall, cpu = timed(argv)
    record = json.loads((out / "result.json").read_text())
    return {"wall": wall, "cpu": cpu, "worker": record["wall_s"], "warmup": record["warmup_steps"]}


def prepare(model: str, data: Path) -> None:
    recipe = DEMO["models"][model].get("prepare")
    if recipe and not (data / model / "manifest.json").exists():
        timed([str(BIN / "hvdbench"), "prepare", *recipe, "--out", str(data / model)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--models", default="resnet50,bert,llama2_lora")
    args = parser.parse_args()
    models = args.models.split(",")
    demo = {k: v for k, v in DEMO["throughput"].items() if k.startswith("warmup")}
    arms = {"demo": {}, "default": DEFAULT}
    got: dict = {(m, a): [] for m in models for a in arms}
    fixed: dict = {name: [] for name in FIXED}
    with tempfile.TemporaryDirectory(prefix="hvdbench-bench-demo-") as tmp:
        data = Path(tmp) / "data"
        for model in models:
            prepare(model, data)
        for r in range(args.rounds):
            order = list(arms) if r % 2 == 0 else list(arms)[::-1]  # ABBA
            for model in models:
                for arm in order:
                    res = launch(model, data, arms[arm], Path(tmp) / f"r{r}-{model}-{arm}")
                    got[(model, arm)].append(res)
                    print(f"round {r + 1} {model} {arm}: launch {res['wall']:.1f} s ({res['cpu']:.1f} CPU-s), worker "
                          f"{res['worker']:.1f} s, {res['warmup']} warm-up steps", flush=True)
            for name, argv in FIXED.items():
                fixed[name].append(timed(argv))
    print(f"\nthe demo's warm-up ({demo}) against the default's: launch wall time, demo / default of the same round "
          "(median [min, max]); warm-up steps; the worker's share of the launch")
    for model in models:
        ratios = [a["wall"] / b["wall"] for a, b in zip(got[(model, "demo")], got[(model, "default")])]
        cpu = [a["cpu"] / b["cpu"] for a, b in zip(got[(model, "demo")], got[(model, "default")])]
        warm = {arm: sorted(x["warmup"] for x in got[(model, arm)]) for arm in arms}
        share = statistics.median(x["worker"] / x["wall"] for arm in arms for x in got[(model, arm)])
        print(f"  {model:16} wall {statistics.median(ratios):.2f} [{min(ratios):.2f}, {max(ratios):.2f}]  CPU "
              f"{statistics.median(cpu):.2f}  warm-up {warm['demo']} vs {warm['default']}  worker {share:.0%} of "
              "the launch")
    print("\nwhat a launch pays before its first step (median over the rounds): wall s, CPU-s")
    for name, values in fixed.items():
        print(f"  {name:28} {statistics.median(w for w, _ in values):6.1f} s  {statistics.median(c for _, c in values):6.1f}"
              " CPU-s")


if __name__ == "__main__":
    main()
