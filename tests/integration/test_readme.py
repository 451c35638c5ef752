"""Every command of the README's "Using it" block works as written, in a fresh shell after `make
setup`, in order, each exiting 0; then the pip path's block ("Which set-up to choose": env, a ddp/fsdp
sweep, its report) the same way, but for its `pip install` line, which `make setup` did already.

Only these substitutions are made, all for size or for what a test machine lacks:
- SUBSTITUTIONS below: a tiny image tree for `/data/imagenet`, fewer steps, epochs, repeats and
  allreduce iterations, a smaller synthetic batch
  (PIP_PATH_SUBSTITUTIONS for the pip path's sweep);
- the commands run in a temporary folder holding `.venv` (a link to this checkout's) and a copy of
  `hostfiles/`, so `data/`, `runs/` and `results/` are written there;
- `path/to/mlperf/training_results/results` is made there: one MLPerf result log written with
  mlperf-logging;
- the shell is `bash --noprofile --norc` with PATH=/usr/bin:/bin and, because CI runs as root, Open
  MPI's two run-as-root variables (the README says so below the block).
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

# README text -> what the test runs instead (each must occur in the block).
SUBSTITUTIONS = {
    "--src /data/imagenet": "--src imagenet-sample",
    "--size 224": "--size 32",
    "--batch-per-gpu 16 --steps 50 --warmup-steps 10": "--batch-per-gpu 2 --steps 2 --warmup-steps 1",
    # One epoch: the sweep below trains the same network on the same data to its target (Gloo), and
    # test_train_resnet.py under MPI as r1 runs (horovodrun's default here).
    "train resnet50 --flavor debug --data data/digits --out runs/r1":
        "train resnet50 --flavor debug --data data/digits --out runs/r1 --max-epochs 1",
    "train bert --flavor debug --data data/pydoc-packed --out runs/b1":
        "train bert --flavor debug --data data/pydoc-packed --out runs/b1 --max-epochs 0.2",
    "--repeats 3": "--repeats 1",
    "--vocab-size 4000": "--vocab-size 1000",
    "--max-bytes 64M": "--max-bytes 1M --iters 2 --warmup-iters 1",
    "hvdbench bench compute --out results/local": "hvdbench bench compute --budget-s 0.05 --out results/local",
}


# The pip path's sweep, shorter: the same engines, layouts and flavor.
PIP_PATH_SUBSTITUTIONS = {"--flavor debug --synthetic": "--flavor debug --synthetic --steps 6 --warmup-steps 2"}
PIP_INSTALL = "python -m pip install '.[torch]'"


def readme_commands(heading: str = "## Using it") -> list[str]:
    """The commands of the first bash block under `heading` (indented blocks too), comments dropped."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index(heading):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    lines = [line.split("  #")[0].strip() for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def pip_path_commands() -> list[str]:
    return readme_commands("### Which set-up to choose")


def test_readme_block_is_what_this_test_adapts():
    commands = readme_commands()
    assert commands[0] == "source .venv/bin/activate"
    joined = "\n".join(commands)
    assert [old for old in SUBSTITUTIONS if old not in joined] == []
    assert sum(c.startswith(("hvdbench ", "horovodrun ")) for c in commands) == len(commands) - 1
    pip_path = pip_path_commands()
    assert pip_path[0] == PIP_INSTALL and all(c.startswith("hvdbench ") for c in pip_path[1:])
    assert [old for old in PIP_PATH_SUBSTITUTIONS if old not in "\n".join(pip_path)] == []
    # The sweep a CPU machine can run (issue 50: the full flavor failed all four runs there).
    assert any(" sweep " in c and "--flavor debug" in c for c in pip_path)


def _image_tree(root: Path) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    for split, n in (("train", 12), ("val", 4)):
        for cls in ("cat", "dog"):
            folder = root / split / cls
            folder.mkdir(parents=True)
            for i in range(n):
                Image.fromarray(rng.integers(0, 255, (40, 48, 3), dtype=np.uint8)).save(folder / f"{i}.png")


def _mlperf_results(root: Path) -> None:
    """One published-style result log, written by MLCommons' own logger."""
    import logging

    from mlperf_logging.mllog import constants as C
    from mlperf_logging.mllog.mllog import MLLogger

    folder = root / "path/to/mlperf/training_results/results/dgxa100_n1/resnet"
    folder.mkdir(parents=True)
    logger = logging.Logger("readme-fixture")
    handler = logging.FileHandler(folder / "result_0.txt")
    logger.addHandler(handler)
    log = MLLogger(logger=logger)
    t = 1_700_000_000_000
    log.event(C.SUBMISSION_BENCHMARK, "resnet", time_ms=t)
    log.event(C.SUBMISSION_PLATFORM, "DGXA100", time_ms=t)
    log.event(C.GLOBAL_BATCH_SIZE, 3264, time_ms=t)
    log.start(C.RUN_START, time_ms=t + 1000)
    log.event(C.EVAL_ACCURACY, 0.76, metadata={C.EPOCH_NUM: 40}, time_ms=t + 1_500_000)
    log.end(C.RUN_STOP, metadata={C.STATUS: C.SUCCESS}, time_ms=t + 1_800_000)
    handler.close()


@pytest.mark.timeout(1200)
def test_every_readme_command_runs_as_written(tmp_path):
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    shutil.copytree(ROOT / "hostfiles", tmp_path / "hostfiles")
    _image_tree(tmp_path / "imagenet-sample")
    _mlperf_results(tmp_path)
    commands = readme_commands()
    activate, steps = commands[0], commands[1:]
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    pip_steps = [c for c in pip_path_commands() if c != PIP_INSTALL]
    for command in steps + pip_steps:
        for old, new in (SUBSTITUTIONS if command in steps else PIP_PATH_SUBSTITUTIONS).items():
            command = command.replace(old, new)
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-c", f"{activate} && {command}"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{command}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"
        # No Python traceback anywhere (TensorFlow's start-up notes are not errors).
        assert "Traceback" not in proc.stderr, f"{command}\n{proc.stderr[-3000:]}"
    assert (tmp_path / "results/local/report/scaling.csv").is_file()
    assert (tmp_path / "report/time_to_train.csv").is_file()  # the --mllog report's default folder
    # The time-to-accuracy sweep's 1x2 time to train in parts, read from its runs' mllog.txt: the
    # parts add up to the measured time (issue 27's waterfall on real runs).
    import csv

    with open(tmp_path / "results/local/report/ttt_waterfall.csv") as f:
        falls = [row for row in csv.DictReader(f) if row["layout"] == "1x2"]
    assert falls, "no 1x2 row in ttt_waterfall.csv"
    parts = ("ideal_min", "convergence_min", "throughput_min", "eval_min", "other_min")
    assert sum(float(falls[0][p]) for p in parts) == pytest.approx(float(falls[0]["measured_min"]), rel=1e-6)
    assert falls[0]["trained_from"] and falls[0]["eval_from"]
    assert (tmp_path / "runs/r1/result.json").is_file() and (tmp_path / "data/imagenet/manifest.json").is_file()
    # The pip path's sweep: every run of both engines succeeded, and its report put them side by side.
    with open(tmp_path / "results/mine/runs.csv") as f:
        mine = list(csv.DictReader(f))
    assert {(r["engine"], r["status"]) for r in mine} == {("ddp", "success"), ("fsdp", "success")}
    assert "## Engines side by side" in (tmp_path / "results/mine/report/summary.md").read_text()
