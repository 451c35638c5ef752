"""`hvdbench env --json` is the machine-readable stack report."""

import json
import subprocess
import sys

from hvdbench import envinfo


def _env_json():
    proc = subprocess.run([sys.executable, "-m", "hvdbench", "env", "--json"],
                          capture_output=True, text=True, timeout=300)
    return proc, json.loads(proc.stdout)


def test_env_json_names_every_field_and_finds_horovod_frameworks():
    proc, info = _env_json()
    for key in ("hostname", "cpu_count", "python", "torch", "tensorflow", "horovod", "mpi", "nccl",
                "gpus", "problems"):
        assert key in info, key
    assert proc.returncode == 0, info["problems"]
    assert info["horovod"]["version"] == "0.28.1"
    for fw in ("pytorch", "tensorflow"):
        assert set(info["horovod"]["frameworks"][fw]["controllers"]) >= {"mpi", "gloo"}
    assert "Open MPI" in info["mpi"]["implementation"]
    assert info["torch"]["version"].startswith("2.13.0")
    assert info["tensorflow"]["version"].startswith("2.21")


def _fake_info(horovod):
    return {"horovod": horovod}


def test_missing_horovod_is_reported_with_the_fix():
    found = envinfo.problems(_fake_info({"installed": False, "error": "No module named 'horovod'"}))
    assert len(found) == 1 and "make setup" in found[0] and "not installed" in found[0]


def test_missing_framework_and_controller_are_named():
    found = envinfo.problems(_fake_info({
        "installed": True, "version": "0.28.1",
        "frameworks": {"pytorch": {"built": True, "controllers": ["mpi"], "tensor_operations": []},
                       "tensorflow": {"built": False, "error": "undefined symbol"}}}))
    assert any("lacks tensorflow" in f for f in found)
    assert any("pytorch" in f and "gloo" in f for f in found)
    assert all("make setup" in f for f in found)
