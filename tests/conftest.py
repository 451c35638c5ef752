"""Shared test fixtures: the project's venv tools and an environment that lets Open MPI run as root."""

import csv
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hvdbench.files import LockFile

BIN = Path(sys.executable).parent  # the venv's bin: horovodrun and hvdbench live beside python

# torch.compile's kernels compile in the test's own process: inductor's default pool of compile
# workers (one a core, each importing torch) only adds CPU where two pytest workers share two cores
# (tests/unit/test_levers.py with inductor's cache empty: 98 -> 90 and 94 CPU-seconds). Before torch's
# import.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")


def csv_rows(path) -> list[dict]:
    """A CSV table hvdbench wrote (runs.csv, a report's tables), one dict per row."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# The README's pip path ("Which set-up to choose"): its block's heading, what starts its install lines,
# and its sweep made shorter where CI's torch tiers run it (the same engines, layouts and flavor; two
# warm-up steps, not up to 10).
PIP_PATH = "### Which set-up to choose"
PIP_INSTALL = "python -m pip install "
PIP_PATH_SUBSTITUTIONS = {"--flavor debug --synthetic":
                          "--flavor debug --synthetic --steps 6 --warmup-steps 2 --warmup-max-steps 2"}


def readme_commands(heading: str) -> list[str]:
    """The commands of the first bash block under `heading` in the checkout's README.md (indented
    blocks too), comments dropped: what tests/integration/test_readme.py ("## Using it") and CI's torch
    tiers (tests/tiers, "### Which set-up to choose") run as written."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = text[text.index(heading):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    lines = [line.split("  #")[0].strip() for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def run_readme_line(command: str, cwd, path: str) -> subprocess.CompletedProcess:
    """One README line as a user types it: a fresh `bash --noprofile --norc` in `cwd` with PATH=`path`
    and, because CI runs as root, Open MPI's two run-as-root variables; it must exit 0 and print no
    Python traceback (TensorFlow's start-up notes are not errors)."""
    env = {"PATH": path, "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-c", command], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, \
        f"{command}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, f"{command}\n{proc.stderr[-3000:]}"
    return proc


def launch_env(**extra) -> dict:
    """Environment for real launches: Open MPI refuses root without these two (CI runs as root);
    one math thread per rank so two ranks on two cores do not oversubscribe."""
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1",
               PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    env.update(extra)
    return env


# Beside a second worker's launch on two cores a test takes up to twice its time alone: its hang limits
# (pytest-timeout's, and run()'s on a launch) scale with it, so a slow neighbour is never read as a hang.
# HVDBENCH_TEST_TIMEOUT_SCALE sets it (a slower machine); a limit is no measure of speed.
TIMEOUT_SCALE = float(os.environ.get("HVDBENCH_TEST_TIMEOUT_SCALE") or (2 if os.environ.get("PYTEST_XDIST_WORKER") else 1))


def run(argv, timeout=300, check=True, **kw):
    """Run argv (never a shell string) with the launch environment; show output when it fails. Past
    `timeout` the command gets SIGTERM (a sweep then ends its run in flight through the run's guard,
    so no rank is left behind) and then SIGKILL, and the failure shows what it had printed and the
    end of every launch.log under its --out: where a launch hung."""
    argv = [str(a) for a in argv]
    timeout = timeout and timeout * TIMEOUT_SCALE
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=kw.pop("env", launch_env()), **kw) as child:
        try:
            stdout, stderr = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.terminate()
            stdout, stderr = _printed(child, 60)
            raise AssertionError(f"{argv} ran past {timeout:g} s\n--- stdout\n{stdout[-4000:]}\n--- stderr\n"
                                 f"{stderr[-4000:]}{launch_logs(argv)}") from None
        finally:  # pytest-timeout's exception, Ctrl-C, any: the command ends too (Popen's exit waits for it)
            _end(child)
    proc = subprocess.CompletedProcess(argv, child.returncode, stdout, stderr)
    if check and proc.returncode != 0:
        raise AssertionError(f"{argv} exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}"
                             f"\n--- stderr\n{proc.stderr[-4000:]}")
    return proc


def _end(child) -> None:
    """SIGTERM to a child still running, SIGKILL 10 s later."""
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()


def _printed(child, wait) -> tuple[str, str]:
    """What an ending child printed, waiting `wait` s for it to end; then SIGKILL, keeping what it had
    printed (a process it left behind may hold its pipes open: not waited for)."""
    try:
        return child.communicate(timeout=wait)
    except subprocess.TimeoutExpired as e:
        child.kill()
        child.wait()
        return tuple((b or b"").decode(errors="replace") for b in (e.stdout, e.stderr))


def launch_logs(argv, lines=30) -> str:
    """The last lines of each launch.log under argv's --out (a sweep's runs, a train's own)."""
    if "--out" not in argv[:-1]:
        return ""
    out = Path(argv[argv.index("--out") + 1])
    return "".join(f"\n--- {log}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
                   for log in sorted(out.glob("**/launch.log")))


# What a PyTorch launch must not print: TensorFlow's and absl's start-up logs (horovodrun used to import
# TensorFlow to ask whether Horovod was built with MPI or Gloo; scripts/patch_horovod.py asks PyTorch first).
TF_NOISE = ("absl", "oneDNN", "tensorflow", "cpu_feature_guard", "I0000")


def assert_quiet_torch_launch(proc) -> None:
    """A PyTorch launch's output holds hvdbench's lines only: no TensorFlow/absl start-up logs, and every
    stdout line of hvdbench's whole (one tag, no stray launcher tag left at its end)."""
    noisy = [line for line in (proc.stdout + proc.stderr).splitlines() if any(n in line for n in TF_NOISE)]
    assert noisy == []
    ours = [line for line in proc.stdout.splitlines() if "[hvdbench]" in line]
    assert len(ours) >= 3
    assert all(line.count("[hvdbench]") == 1 and not line.rstrip().endswith(":") for line in ours)


def torch_parameters(model: str, **info) -> int:
    """The PyTorch network of `model`'s debug flavor built on the meta device for the data sizes `info`
    (none: the flavor's own, synthetic data's): its parameter count, which a TensorFlow twin must match."""
    import torch  # here, not at the top: most test modules never load torch

    from hvdbench.contracts import get_spec

    spec = get_spec(model)
    with torch.device("meta"):
        network = spec.framework_module("torch").build(spec.flavor("debug"), **info)
    return sum(p.numel() for p in network.parameters())


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


def shared_tmp(tmp_path_factory) -> Path:
    """The run's temporary folder that every pytest-xdist worker sees: a worker's own basetemp is a
    folder of it (BASETEMP/popen-gwN); without xdist, the basetemp itself."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def prepared(tmp_path_factory, name: str, *argv) -> Path:
    """`hvdbench prepare ARGV --out DIR` once per test run, for every worker and test module that asks
    for `name`: the first to ask prepares it under a file lock, the others wait and read the same DIR
    (tests only read a prepared dataset). A failed attempt is removed; the next asker tries again."""
    root = shared_tmp(tmp_path_factory) / "prepared"
    root.mkdir(exist_ok=True)
    out, done = root / name, root / f"{name}.done"
    with LockFile(root / f"{name}.lock"):
        if not done.exists():
            shutil.rmtree(out, ignore_errors=True)
            run([BIN / "hvdbench", "prepare", *argv, "--out", out], timeout=900)
            done.touch()
    return out


@pytest.fixture(scope="session")
def digits(tmp_path_factory):
    """scikit-learn's digits prepared once for the run (`hvdbench prepare digits`); tests only read it."""
    return prepared(tmp_path_factory, "digits", "digits")


@pytest.fixture(scope="session")
def digits16(tmp_path_factory):
    """The digits at 16x16 (test_train_resnet.py and test_closed_division.py's ResNet-50 runs)."""
    return prepared(tmp_path_factory, "digits16", "digits", "--size", "16")


@pytest.fixture(scope="session")
def digits8(tmp_path_factory):
    """The digits at 8x8 (the image generators' debug runs: Stable Diffusion, Flux.1)."""
    return prepared(tmp_path_factory, "digits8", "digits", "--size", "8")


@pytest.fixture(scope="session")
def pydoc(tmp_path_factory):
    """BERT's debug data from CPython's documentation, 4,000-token vocabulary, 64 tokens, and its
    packed form (the BERT tests of both frameworks and the closed division's). --short-seq-prob 1.0:
    every sequence gets a random target length, so a good share of packs hold several sequences (with
    BERT's 0.1, pydoc's sequences nearly fill 64 tokens and 3 % do)."""
    bert = prepared(tmp_path_factory, "pydoc", "bert", "--src", "builtin:pydoc", "--vocab-size", "4000",
                    "--max-seq-len", "64", "--max-predictions", "10", "--short-seq-prob", "1.0")
    return {"bert": bert, "bert_packed": prepared(tmp_path_factory, "pydoc-packed", "pack", "--src", bert)}


@pytest.fixture(scope="session")
def lm_base(tmp_path_factory):
    """`hvdbench prepare lm-base --out DIR` with its defaults, as llama2_lora's README runs it: ~80
    CPU-seconds on one thread; only tests/integration/test_train_llama2_lora.py needs it."""
    return prepared(tmp_path_factory, "lm-base", "lm-base")


# The groups the other worker takes first, beside the root chain. Its tests mostly wait (a Slurm job's
# minute to its time limit, a node bound by its CPU quota, shaped links): in a fresh clone's run
# (2026-12-01, 7df7655) the machine had 73 idle core-seconds in the chain's 245 s, beside the files
# that come first by name (one-process reports, a demo, single-rank launches). These two files' tests
# are two-rank launches, ~240 s of them, which keep both cores busy while the chain waits.
BESIDE_ROOT = ("test_train_engines", "test_train_lm")


# How `make test` shares the machine (README, "Tests"): `pytest -n 2 --dist loadgroup`. pytest-xdist sends a
# group to one worker, whole and in order: each integration file is one group, so its module fixtures (a
# prepared dataset, an emulated cluster) are made once and its launches never meet each other; the `root`
# tests are one group, so two emulated clusters (their namespaces, bridges, cgroups, /etc/hosts lines and
# Slurm daemons) never run at once. A unit test goes to whichever worker is free. The two cluster tests that
# need one slow node or link start what they run at nice -20, ahead of the other worker
# (tests/integration/test_cluster.py).
@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    if not hasattr(config, "workerinput"):  # not an xdist worker: no groups, the order as collected
        return
    default = float(config.getini("timeout") or 0)
    for item in items:
        limit = item.get_closest_marker("timeout")
        if limit is not None and limit.args:
            item.add_marker(pytest.mark.timeout(limit.args[0] * TIMEOUT_SCALE, *limit.args[1:], **limit.kwargs),
                            append=False)
        elif limit is None and default:
            item.add_marker(pytest.mark.timeout(default * TIMEOUT_SCALE), append=False)
        if item.get_closest_marker("root"):
            item.add_marker(pytest.mark.xdist_group("root"))
        elif item.path.parent.name == "integration":
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
    # Longest first (the scheduler hands out groups in this order, with --no-loadscope-reorder): the
    # root tests' one long chain, the two-rank launches to run beside it (BESIDE_ROOT), then the other
    # launches; the short unit tests fill both workers' ends.
    items.sort(key=lambda item: 0 if item.get_closest_marker("root") else
               1 if item.path.stem in BESIDE_ROOT else 2 if item.path.parent.name == "integration" else 3)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A root test under pytest-xdist outside the `root` group errors before its fixtures (an emulated
    cluster) start: with --dist other than loadgroup, or under pytest 9.2 and later, whose node ids
    xdist 3.8 cannot tag with the group (pytest-xdist#1386; setup.cfg keeps pytest below 9.2)."""
    if item.get_closest_marker("root") and hasattr(item.config, "workerinput") and \
            not item.nodeid.endswith("@root"):
        pytest.fail("a root test under pytest-xdist runs only in the `root` group: `pytest -n 2 --dist loadgroup` "
                    "(make test) with a pytest below 9.2 (pytest-xdist#1386), or without -n", pytrace=False)


# `HVDBENCH_TEST_CPU_LOG=DIR make test`: each test's wall seconds and CPU-seconds, one tab-separated line
# (node id, wall, the pytest process's own CPU, its children's) appended to DIR/<worker pid>.tsv;
# `scripts/suite_cpu.py DIR` adds them up by file. The durations pytest lists grow with whatever the other
# worker runs beside a test; its CPU-seconds hardly do. Children count once they are waited for: a
# launch and its ranks, not the emulated cluster's sshd nor the Slurm daemons that started its ranks.
CPU_LOG = os.environ.get("HVDBENCH_TEST_CPU_LOG")


def _cpu_seconds() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not CPU_LOG:
        yield
        return
    (own, children), started = _cpu_seconds(), time.monotonic()
    yield
    (own_after, children_after), wall = _cpu_seconds(), time.monotonic() - started
    os.makedirs(CPU_LOG, exist_ok=True)
    with open(os.path.join(CPU_LOG, f"{os.getpid()}.tsv"), "a", encoding="utf-8") as f:
        f.write(f"{item.nodeid}\t{wall:.2f}\t{own_after - own:.2f}\t{children_after - children:.2f}\n")
