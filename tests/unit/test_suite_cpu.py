"""make test's CPU-seconds per test: tests/conftest.py's log where HVDBENCH_TEST_CPU_LOG names a folder,
added up by scripts/suite_cpu.py.

    .venv/bin/python -m pytest tests/unit/test_suite_cpu.py
"""

import os
import subprocess
import sys
from pathlib import Path

from conftest import BESIDE_ROOT

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "suite_cpu.py"


def suite_cpu(*argv):
    return subprocess.run([sys.executable, SCRIPT, *map(str, argv)], capture_output=True, text=True, timeout=60)


BURN = """
import subprocess, sys, time


def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_own():
    burn(0.3)


def test_child():
    subprocess.run([sys.executable, "-c", "import time\\nend = time.process_time() + 0.3\\n"
                    "while time.process_time() < end: pass"], check=True)
"""


def test_a_run_with_the_log_on_writes_each_tests_cpu_which_the_script_adds_up(tmp_path):
    """tests/conftest.py loaded as a plugin into a pytest run of two tests: one that burns 0.3 CPU-s
    itself, one whose child does."""
    (tmp_path / "test_burn.py").write_text(BURN)
    log = tmp_path / "cpu"
    env = {**os.environ, "HVDBENCH_TEST_CPU_LOG": str(log), "PYTHONPATH": str(ROOT / "tests")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest",
                           "test_burn.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [written] = list(log.glob("*.tsv"))  # one pytest process, one file
    lines = {node: [float(v) for v in fields] for node, *fields in
             (line.split("\t") for line in written.read_text().splitlines())}
    assert set(lines) == {"test_burn.py::test_own", "test_burn.py::test_child"}
    wall, own, children = lines["test_burn.py::test_own"]
    assert own >= 0.25 and children < 0.1 and wall >= 0.25
    wall, own, children = lines["test_burn.py::test_child"]
    assert children >= 0.25 and own < 0.25

    summed = suite_cpu(log)
    assert summed.returncode == 0, summed.stderr
    assert summed.stdout.startswith("2 tests: ")
    [by_file] = [line.split() for line in summed.stdout.splitlines() if line.endswith("  test_burn.py")]
    assert by_file[3:] == ["2", "test_burn.py"] and float(by_file[0]) >= 0.5  # CPU s, share, wall s, tests


def test_the_script_sums_by_file_and_names_a_bad_line(tmp_path):
    (tmp_path / "1.tsv").write_text("tests/a.py::t1\t10.0\t1.0\t20.0\ntests/b.py::t1\t5.0\t0.5\t0.5\n")
    (tmp_path / "2.tsv").write_text("tests/a.py::t2\t3.0\t1.0\t2.0\nnot a line\n")
    proc = suite_cpu(tmp_path, "--top", "5")
    assert proc.returncode == 0
    assert proc.stderr.strip() == (f"warning: {tmp_path / '2.tsv'}:2: not node id, wall, own CPU and children's "
                                   f"CPU; left out")
    out = proc.stdout.splitlines()
    assert out[0] == ("3 tests: 18 worker-seconds of wall time, 25 CPU-seconds (the tests' own 2, the "
                      "processes they waited for 22)")
    files = [line.split() for line in out if line.endswith((" tests/a.py", " tests/b.py"))]
    assert files == [["24.0", "96.0%", "13.0", "2", "tests/a.py"], ["1.0", "4.0%", "5.0", "1", "tests/b.py"]]
    tests = [line.split()[-1] for line in out if "::" in line]
    assert tests == ["tests/a.py::t1", "tests/a.py::t2", "tests/b.py::t1"]  # costliest first


def test_a_missing_or_empty_folder_is_one_line(tmp_path):
    missing = suite_cpu(tmp_path / "nowhere")
    assert (missing.returncode, missing.stderr.strip()) == (1, f"error: {tmp_path / 'nowhere'}: no such folder")
    empty = suite_cpu(tmp_path)
    assert empty.returncode == 1 and empty.stderr.startswith(f"error: {tmp_path}: no test lines")


def test_the_files_run_beside_the_root_tests_exist():
    """conftest's BESIDE_ROOT names integration files by stem: a renamed file would silently drop out of
    the order make test relies on to keep both cores busy beside the root tests."""
    assert BESIDE_ROOT and all((ROOT / "tests" / "integration" / f"{stem}.py").is_file() for stem in BESIDE_ROOT)
