"""Every command of the README's "Using it" block works as written, in a fresh shell after `make
setup`, in order, each exiting 0. The block holds no placeholder: what needs data only the user has is
in "On your own data", which says so. The pip path's block ("Which set-up to choose": env, a ddp/fsdp
sweep, its report) is run as written where it belongs, in a Python with hvdbench `pip install`ed and no
Horovod: CI's torch tiers (tests/tiers/test_without_horovod.py); this file checks that block's shape.

Only these substitutions are made, all for size (the tour's lines each run in under a minute as
written, or say their time):
- SUBSTITUTIONS below: fewer epochs, repeats and allreduce iterations, a smaller vocabulary;
- the commands run in a temporary folder holding `.venv` (a link to this checkout's) and a copy of
  `hostfiles/`, so `data/`, `runs/` and `results/` are written there;
- the shell is `bash --noprofile --norc` with PATH=/usr/bin:/bin and, because CI runs as root, Open
  MPI's two run-as-root variables (the README says so below the block).
"""

import re
import shutil
from pathlib import Path

import pytest
from conftest import PIP_INSTALL, PIP_PATH, PIP_PATH_SUBSTITUTIONS, csv_rows, readme_commands, run_readme_line

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

# README text -> what the test runs instead (each must occur in the block).
SUBSTITUTIONS = {
    "--steps 20 --warmup-steps 5 --out runs/r2": "--steps 2 --warmup-steps 1 --out runs/r2",
    # One epoch: the sweep below trains the same network on the same data to its target (Gloo), and
    # test_train_resnet.py under MPI as r1 runs (horovodrun's default here).
    "train resnet50 --flavor debug --data data/digits --out runs/r1":
        "train resnet50 --flavor debug --data data/digits --out runs/r1 --max-epochs 1",
    "train bert --flavor debug --data data/pydoc-packed --out runs/b1":
        "train bert --flavor debug --data data/pydoc-packed --out runs/b1 --max-epochs 0.05",
    "--repeats 3": "--repeats 1",
    "--vocab-size 4000": "--vocab-size 1000",
    "--max-bytes 64M": "--max-bytes 1M --iters 2 --warmup-iters 1",
    "hvdbench bench compute --out results/local": "hvdbench bench compute --budget-s 0.05 --out results/local",
}


def test_readme_block_is_what_this_test_adapts():
    commands = readme_commands("## Using it")
    assert commands[0] == "source .venv/bin/activate"
    joined = "\n".join(commands)
    assert [old for old in SUBSTITUTIONS if old not in joined] == []
    assert sum(c.startswith(("hvdbench ", "horovodrun ")) for c in commands) == len(commands) - 1
    pip_path = readme_commands(PIP_PATH)
    installs = [c for c in pip_path if c.startswith(PIP_INSTALL)]
    assert pip_path[:len(installs)] == installs and all(c.startswith("hvdbench ") for c in pip_path[len(installs):])
    assert installs[-1] == "python -m pip install '.[torch]'"
    # The CPU build's line asks for the range the torch extra admits (setup.cfg), from PyTorch's CPU index.
    extra = re.search(r"^torch =\n    (torch\S+)$", (ROOT / "setup.cfg").read_text(), re.M).group(1)
    assert installs[0] == f"python -m pip install '{extra}' --index-url https://download.pytorch.org/whl/cpu"
    assert not re.search(r"/data/|path/to", joined)  # no placeholder in the tour (issue 58)
    assert [old for old in PIP_PATH_SUBSTITUTIONS if old not in "\n".join(pip_path)] == []
    # The sweep a CPU machine can run (issue 50: the full flavor failed all four runs there).
    assert any(" sweep " in c and "--flavor debug" in c for c in pip_path)


@pytest.mark.timeout(1200)
def test_every_readme_command_runs_as_written(tmp_path):
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    shutil.copytree(ROOT / "hostfiles", tmp_path / "hostfiles")
    commands = readme_commands("## Using it")
    activate, steps = commands[0], commands[1:]
    for command in steps:
        for old, new in SUBSTITUTIONS.items():
            command = command.replace(old, new)
        run_readme_line(f"{activate} && {command}", tmp_path, "/usr/bin:/bin")
    assert (tmp_path / "results/local/report/scaling.csv").is_file()
    # The time-to-accuracy sweep's 1x2 time to train in parts, read from its runs' mllog.txt: the
    # parts add up to the measured time (issue 27's waterfall on real runs).
    falls = [row for row in csv_rows(tmp_path / "results/local/report/ttt_waterfall.csv") if row["layout"] == "1x2"]
    assert falls, "no 1x2 row in ttt_waterfall.csv"
    parts = ("ideal_min", "convergence_min", "throughput_min", "eval_min", "other_min")
    cells, measured = [float(falls[0][p]) for p in parts], float(falls[0]["measured_min"])
    # each cell at 4 significant digits: within half a unit of the 4th (5e-4 of itself) of the sum
    assert sum(cells) == pytest.approx(measured, abs=5e-4 * (sum(map(abs, cells)) + measured))
    assert falls[0]["trained_from"] and falls[0]["eval_from"]
    assert (tmp_path / "runs/r1/result.json").is_file() and (tmp_path / "runs/r2/result.json").is_file()
