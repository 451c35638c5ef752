"""Every command of the README's "Using it" block works as written, in a fresh shell after `make
setup`, in order, each exiting 0.

Only these substitutions are made, all for size or for what a test machine lacks:
- SUBSTITUTIONS below: a tiny image tree for `/data/imagenet`, fewer steps, epochs and repeats;
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
    "--batch-per-gpu 16 --steps 50 --warmup-steps 10": "--batch-per-gpu 16 --steps 2 --warmup-steps 1",
    "train bert --flavor debug --data data/pydoc-packed --out runs/b1":
        "train bert --flavor debug --data data/pydoc-packed --out runs/b1 --max-epochs 0.2",
    "--repeats 3": "--repeats 1",
    "--vocab-size 4000": "--vocab-size 1000",
    "--max-bytes 64M": "--max-bytes 1M",
    "hvdbench bench compute --out results/local": "hvdbench bench compute --budget-s 0.05 --out results/local",
}


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Using it"):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_readme_block_is_what_this_test_adapts():
    commands = readme_commands()
    assert commands[0] == "source .venv/bin/activate"
    joined = "\n".join(commands)
    assert [old for old in SUBSTITUTIONS if old not in joined] == []
    assert sum(c.startswith(("hvdbench ", "horovodrun ")) for c in commands) == len(commands) - 1


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
    for command in steps:
        for old, new in SUBSTITUTIONS.items():
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
