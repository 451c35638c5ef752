"""A Python without Horovod (the pip path's: `pip install '.[torch]'` into a cluster's own Python) trains
with what it has when no engine is named, as a sweep's default launcher already follows it (issue 58: a
plain `hvdbench sweep` there planned --engine horovod under torchrun and refused itself).

The Python here is real: a venv whose site-packages holds every package of this checkout's `.venv`
but Horovod (links to them, made in seconds, where the torch tiers' venvs take minutes and GBs), with
its own `hvdbench` and `torchrun` scripts.

    .venv/bin/python -m pytest tests/integration/test_default_engine.py
"""

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import run

pytestmark = pytest.mark.integration

SCRIPTS = ("hvdbench", "torchrun")
STEPS = ["--flavor", "debug", "--synthetic", "--steps", "2", "--warmup-steps", "1"]


@pytest.fixture(scope="module")
def without_horovod(tmp_path_factory) -> Path:
    """The venv's bin folder: python, hvdbench and torchrun over this venv's packages less Horovod."""
    venv = tmp_path_factory.mktemp("no-horovod") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    ours = Path(sysconfig.get_paths()["purelib"])
    theirs = venv / ours.relative_to(sys.prefix)
    for entry in ours.iterdir():
        if not entry.name.lower().startswith("horovod"):
            (theirs / entry.name).symlink_to(entry)
    for name in SCRIPTS:  # console scripts whose first line names the new venv's python
        body = (Path(sys.executable).parent / name).read_text().split("\n", 1)[1]
        script = venv / "bin" / name
        script.write_text(f"#!{venv / 'bin' / 'python'}\n{body}")
        script.chmod(0o755)
    return venv / "bin"


def _env(bin_dir: Path) -> dict:
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", "OMP_NUM_THREADS": "1",
            "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def test_the_premise_horovod_is_not_there_but_torch_is(without_horovod):
    proc = run([without_horovod / "python", "-c", "import importlib.util as u; import torch; "
                "print(u.find_spec('horovod') is None)"], env=_env(without_horovod))
    assert proc.stdout.strip() == "True"


def test_a_run_that_names_no_engine_takes_ddp_there_and_horovod_here(without_horovod, tmp_path):
    ask = ("from hvdbench.train.options import resolve_train_args as r; "
           "print(r('resnet50', ['--flavor', 'debug', '--synthetic'], out='x').engine, "
           "r('resnet50', ['--flavor', 'debug', '--synthetic', '--framework', 'tensorflow'], out='x').engine)")
    there = run([without_horovod / "python", "-c", ask], env=_env(without_horovod)).stdout.split()
    here = run([sys.executable, "-c", ask]).stdout.split()
    # TensorFlow has no engine but Horovod's: it keeps horovod, whose refusal says how to get it.
    assert there == ["ddp", "horovod"] and here == ["horovod", "horovod"]
    proc = run([without_horovod / "hvdbench", "train", "resnet50", *STEPS, "--out", tmp_path / "r"],
               env=_env(without_horovod), timeout=300)
    record = json.loads((tmp_path / "r" / "result.json").read_text())
    assert (record["status"], record["engine"]) == ("success", "ddp"), proc.stdout[-2000:]


def test_a_plain_sweep_there_plans_ddp_under_torchrun(without_horovod, tmp_path):
    """Its --dry-run resolves every layout's run as the launch would, and prints each launch."""
    proc = run([without_horovod / "hvdbench", "sweep", "resnet50", "--hosts", "localhost:2", "--dry-run",
                "--out", tmp_path / "s", "--", *STEPS], env=_env(without_horovod))
    launches = [line for line in proc.stdout.splitlines() if line.startswith(("1x1-r1:", "1x2-r1:"))]
    assert len(launches) == 2 and all(" torchrun " in f" {line} " or "/torchrun " in line for line in launches)
    env = run([without_horovod / "hvdbench", "env", "--json"], env=_env(without_horovod), check=False)
    info = json.loads(env.stdout)
    assert env.returncode == 0 and not info["horovod"]["installed"], info["problems"]
    assert info["engines"]["ddp"]["available"] and not info["engines"]["horovod"]["available"]
