"""launch/slurm/prepare.sub: the exact srun / mpirun argv it runs (Slurm is not here: a stub launcher
records its argv and then runs the command it was given, so the prepare itself really happens)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "launch" / "slurm" / "prepare.sub"
HVDBENCH = Path(sys.executable).parent / "hvdbench"

STUB = """#!/bin/bash
printf '%s\\n' "$@" > "$ARGV_FILE"
# drop the launcher's own options (srun: --opt=value; mpirun: -np N --map-by SPEC), run the rest
while [ "$#" -gt 0 ]; do
  case "$1" in
    -np|--map-by) shift 2 ;;
    --*) shift ;;
    *) break ;;
  esac
done
exec "$@"
"""


def run_sub(tmp_path, launcher, *args, **env):
    stubs = tmp_path / "stubs"
    stubs.mkdir(exist_ok=True)
    (stubs / launcher).write_text(STUB)
    (stubs / launcher).chmod(0o755)
    environ = {"PATH": f"{stubs}:/usr/bin:/bin", "HVDBENCH": str(HVDBENCH), "ARGV_FILE": str(tmp_path / "argv"),
               **env}
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], env=environ, capture_output=True, text=True,
                          timeout=120)


def test_srun_runs_hvdbench_prepare_with_the_arguments_as_given(tmp_path):
    out = tmp_path / "data dir"  # a space survives: argv, never re-split by a shell
    proc = run_sub(tmp_path, "srun", "digits", "--out", out, "--size", 8)
    assert proc.returncode == 0, proc.stderr
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv == ["--mpi=pmix", "--kill-on-bad-exit=1", str(HVDBENCH), "prepare", "digits", "--out", str(out),
                    "--size", "8"]
    assert json.loads((out / "manifest.json").read_text())["kind"] == "images"


def test_mpirun_inside_the_allocation(tmp_path):
    proc = run_sub(tmp_path, "mpirun", "digits", "--out", tmp_path / "d", "--size", 8, HVDBENCH_LAUNCHER="mpirun",
                   SLURM_NTASKS="8", SLURM_NTASKS_PER_NODE="4", SLURM_CPUS_PER_TASK="2")
    assert proc.returncode == 0, proc.stderr
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv[:4] == ["-np", "8", "--map-by", "ppr:4:node:PE=2"]
    assert argv[4:7] == [str(HVDBENCH), "prepare", "digits"]
    assert (tmp_path / "d" / "manifest.json").is_file()


@pytest.mark.parametrize("args, env, message", [
    ((), {}, "usage: sbatch"),
    (("digits",), {"HVDBENCH": "/nonexistent/hvdbench"}, "is not an executable hvdbench"),
    (("digits",), {"HVDBENCH_LAUNCHER": "ssh"}, "must be srun or mpirun"),
])
def test_bad_use_is_one_clear_line(tmp_path, args, env, message):
    proc = run_sub(tmp_path, "srun", *args, **env)
    assert proc.returncode == 2 and message in proc.stderr
