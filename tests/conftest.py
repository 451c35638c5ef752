"""Shared test fixtures: the project's venv tools and an environment that lets Open MPI run as root."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the venv's bin: horovodrun and hvdbench live beside python


def launch_env(**extra) -> dict:
    """Environment for real launches: Open MPI refuses root without these two (CI runs as root);
    one math thread per rank so two ranks on two cores do not oversubscribe."""
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1",
               PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    env.update(extra)
    return env


def run(argv, timeout=300, check=True, **kw):
    """Run argv (never a shell string) with the launch environment; show output when it fails."""
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout,
                          env=kw.pop("env", launch_env()), **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{argv} exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}"
                             f"\n--- stderr\n{proc.stderr[-4000:]}")
    return proc


@pytest.fixture
def victim(tmp_path):
    """A file outside the folder under test, holding "mine": what a link planted there points at."""
    path = tmp_path / "elsewhere" / "precious.txt"
    path.parent.mkdir()
    path.write_text("mine\n")
    return path


@pytest.fixture(scope="session")
def horovodrun():
    path = BIN / "horovodrun"
    assert path.exists(), f"{path} missing: run `make setup`"
    return str(path)


@pytest.fixture(scope="session")
def hvdbench_bin():
    path = BIN / "hvdbench"
    assert path.exists(), f"{path} missing: run `make setup`"
    return str(path)


@pytest.fixture(scope="session")
def mpirun():
    path = shutil.which("mpirun")
    assert path, "mpirun missing: run `make setup`"
    return path


@pytest.fixture(scope="module")
def torch_one_thread():
    """One torch math thread for a module (`pytestmark = pytest.mark.usefixtures("torch_one_thread")`):
    the unit tests' tensors are small, and on a shared 2-core machine two threads wait on each other
    (measured: a debug LM step 0.15 s with one, 1-2 s with two under load; flux1's learning test 0.4 s
    with one, 11-31 s with two)."""
    import torch  # here, not at the top: most test modules never load torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def digits(tmp_path_factory, hvdbench_bin):
    """scikit-learn's digits prepared once for the run (`hvdbench prepare digits`); tests only read it."""
    out = tmp_path_factory.mktemp("data") / "digits"
    run([hvdbench_bin, "prepare", "digits", "--out", out])
    return out


# `prepare lm-base` pre-trains llama2_lora's base on one thread for ~80 s; only
# tests/integration/test_train_llama2_lora.py needs it. Started in the background as soon as the
# run's tests are collected, it trains on the core the unit tests leave idle, and the fixture below
# waits for it (when those tests are not selected, it is never started).
LM_BASE = pytest.StashKey[tuple]()


def _start_lm_base() -> tuple:
    root = Path(tempfile.mkdtemp(prefix="hvdbench-test-lm-base-"))
    log = open(root / "prepare.log", "w")
    proc = subprocess.Popen([str(BIN / "hvdbench"), "prepare", "lm-base", "--out", str(root / "lm-base")],
                            stdout=log, stderr=subprocess.STDOUT, env=launch_env())
    log.close()
    return proc, root


def pytest_collection_finish(session):
    if not session.config.option.collectonly and \
            any("lm_base" in getattr(item, "fixturenames", ()) for item in session.items):
        session.config.stash[LM_BASE] = _start_lm_base()


def pytest_sessionfinish(session):
    started = session.config.stash.get(LM_BASE, None)
    if started is not None:
        proc, root = started
        if proc.poll() is None:  # the run ended before the fixture waited for it
            proc.terminate()
            proc.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def lm_base(request):
    """`hvdbench prepare lm-base --out DIR` with its defaults, as llama2_lora's README runs it (see
    LM_BASE above)."""
    started = request.config.stash.get(LM_BASE, None) or _start_lm_base()
    request.config.stash[LM_BASE] = started
    proc, root = started
    proc.wait(timeout=900)
    log = (root / "prepare.log").read_text()
    assert proc.returncode == 0, f"prepare lm-base exited {proc.returncode}:\n{log[-4000:]}"
    return root / "lm-base"
