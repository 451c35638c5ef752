"""Every command of the README's "Using it" block works as written, in a fresh shell after `make
setup`, in order, each exiting 0; then the pip path's block ("Which set-up to choose": env, a ddp/fsdp
sweep, its report) the same way, but for its `pip install` lines, which `make setup` did already. The
block holds no placeholder: what needs data only the user has is in "On your own data", which says so.

Only these substitutions are made, all for size (the tour's lines each run in under a minute as
written, or say their time):
- SUBSTITUTIONS below: fewer epochs, repeats and allreduce iterations, a smaller vocabulary
  (PIP_PATH_SUBSTITUTIONS for the pip path's sweep: fewer steps);
- the commands run in a temporary folder holding `.venv` (a link to this checkout's) and a copy of
  `hostfiles/`, so `data/`, `runs/` and `results/` are written there;
- the shell is `bash --noprofile --norc` with PATH=/usr/bin:/bin and, because CI runs as root, Open
  MPI's two run-as-root variables (the README says so below the block).
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import csv_rows

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


# The pip path's sweep, shorter: the same engines, layouts and flavor, two warm-up steps (not up to 10).
PIP_PATH_SUBSTITUTIONS = {"--flavor debug --synthetic":
                          "--flavor debug --synthetic --steps 6 --warmup-steps 2 --warmup-max-steps 2"}
PIP_INSTALL = "python -m pip install "


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
    commands = readme_commands()
    activate, steps = commands[0], commands[1:]
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    pip_steps = [c for c in pip_path_commands() if not c.startswith(PIP_INSTALL)]
    for command in steps + pip_steps:
        for old, new in (SUBSTITUTIONS if command in steps else PIP_PATH_SUBSTITUTIONS).items():
            command = command.replace(old, new)
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-c", f"{activate} && {command}"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{command}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"
        # No Python traceback anywhere (TensorFlow's start-up notes are not errors).
        assert "Traceback" not in proc.stderr, f"{command}\n{proc.stderr[-3000:]}"
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
    # The pip path's sweep: every run of both engines succeeded, and its report put them side by side,
    # ddp the reference (the first of the two in the engine registry's order), one scaling group per
    # engine, and each 1x2 run's ranks (ranks.csv) judged apart from the other engine's.
    mine, report = tmp_path / "results/mine", tmp_path / "results/mine/report"
    assert sorted((r["layout"], r["engine"], r["status"]) for r in csv_rows(mine / "runs.csv")) == [
        ("1x1", "ddp", "success"), ("1x1", "fsdp", "success"), ("1x2", "ddp", "success"), ("1x2", "fsdp", "success")]
    assert sorted(p.name for p in mine.iterdir() if p.name.endswith("-r1")) == [
        "1x1-ddp-r1", "1x1-fsdp-r1", "1x2-ddp-r1", "1x2-fsdp-r1"]
    summary = (report / "summary.md").read_text()
    assert "## Engines side by side" in summary and "## Which rank or host held the others back" in summary
    rows = csv_rows(report / "engines.csv")
    assert [(r["layout"], r["engine"], r["reference"]) for r in rows] == [
        ("1x1", "ddp", "ddp"), ("1x1", "fsdp", "ddp"), ("1x2", "ddp", "ddp"), ("1x2", "fsdp", "ddp")]
    assert all(float(r["throughput_mean"]) > 0 and r["comm_ms"] != "" for r in rows)
    assert [float(r["vs_reference"]) for r in rows][::2] == [1.0, 1.0]
    assert (report / "engines.png").stat().st_size > 10_000
    assert {r["engine"] for r in csv_rows(report / "scaling.csv")} == {"ddp", "fsdp"}
    ranks = csv_rows(report / "stragglers.csv")
    assert sorted((r["engine"], r["layout"], r["rank"]) for r in ranks) == [
        ("ddp", "1x2", "0"), ("ddp", "1x2", "1"), ("fsdp", "1x2", "0"), ("fsdp", "1x2", "1")]
    assert all(float(r["compute_ms"]) > 0 for r in ranks)
    # fsdp's compute holds its waits for the other rank (its all-gathers): no imbalance is split out of
    # it and none of its ranks is named; ddp's wait for the slower rank stands apart from communication.
    assert {r["straggler"] for r in ranks if r["engine"] == "fsdp"} == {"no"}
    falls = {r["engine"]: r for r in csv_rows(report / "waterfall.csv")}
    assert falls["ddp"]["imbalance_loss"] != "" and falls["fsdp"]["imbalance_loss"] == ""
