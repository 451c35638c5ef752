"""`hvdbench env --json` is the machine-readable stack report."""

import json
import os
import subprocess
import sys

from hvdbench import envinfo


def _env_json(env=None):
    proc = subprocess.run([sys.executable, "-m", "hvdbench", "env", "--json"],
                          capture_output=True, text=True, timeout=300, env=env)
    return proc, json.loads(proc.stdout)


def test_env_json_names_every_field_and_finds_horovod_frameworks(tmp_path):
    # with an nvidia-smi on PATH that answers in bytes that are not UTF-8 (issue 50: a traceback)
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.buffer.write(b'0, \\xff\\xfe, 1, 2, 3\\n')\n")
    smi.chmod(0o755)
    proc, info = _env_json({**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"})
    assert info["gpus"] == [] and "output not UTF-8" in info["hardware"]["notes"][0], info["hardware"]["notes"]
    for key in ("hostname", "cpu_count", "python", "torch", "tensorflow", "horovod", "mpi", "nccl",
                "gpus", "hardware", "engines", "problems"):
        assert key in info, key
    assert proc.returncode == 0, info["problems"]
    assert info["horovod"]["version"] == "0.28.1"
    for fw in ("pytorch", "tensorflow"):
        assert set(info["horovod"]["frameworks"][fw]["controllers"]) >= {"mpi", "gloo"}
    assert "Open MPI" in info["mpi"]["implementation"]
    assert info["torch"]["version"].startswith("2.13.0") and info["torch"]["tested"] is True
    assert info["tensorflow"]["version"].startswith("2.21")


def _fake_info(horovod):
    return {"horovod": horovod}


def test_missing_horovod_leaves_ddp_and_fsdp_and_says_how_to_get_it():
    info = {"horovod": {"installed": False, "error": "No module named 'horovod'"},
            "torch": {"installed": True, "version": "2.11.0"}}
    info["engines"] = envinfo.engines(info)
    assert envinfo.problems(info) == []  # ddp and fsdp train without Horovod
    assert info["engines"]["ddp"] == info["engines"]["fsdp"] == {"available": True, "why": ""}
    why = info["engines"]["horovod"]["why"]
    assert not info["engines"]["horovod"]["available"] and "not installed" in why and "make setup" in why


def test_no_torch_and_no_horovod_is_a_problem_with_the_fix():
    info = {"horovod": {"installed": False, "error": "No module named 'horovod'"},
            "torch": {"installed": False, "error": "No module named 'torch'"}}
    info["engines"] = envinfo.engines(info)
    assert not any(e["available"] for e in info["engines"].values())
    assert "hvdbench[torch]' (torch 2.11 to 2.15)" in info["engines"]["ddp"]["why"]
    found = envinfo.problems(info)
    assert len(found) == 1 and "no engine can train here" in found[0] and "make setup" in found[0]


def test_missing_framework_and_controller_are_named():
    found = envinfo.problems(_fake_info({
        "installed": True, "version": "0.28.1",
        "frameworks": {"pytorch": {"built": True, "controllers": ["mpi"], "tensor_operations": []},
                       "tensorflow": {"built": False, "error": "undefined symbol"}}}))
    assert any("lacks tensorflow" in f for f in found)
    assert any("pytorch" in f and "gloo" in f for f in found)
    assert all("make setup" in f for f in found)


def test_env_says_whether_torch_is_inside_the_tested_range():
    assert [envinfo.torch_tested(v) for v in ("2.10.1", "2.11.0", "2.13.0+cpu", "2.15.0+cu130", "2.16.0.dev20261101",
                                              "3.0", "garbage", "", "2.x")] == [False, True, True, True, False,
                                                                                False, None, None, None]
    assert envinfo._torch_version({"installed": True, "version": "2.15.0", "tested": True}) == \
        "2.15.0 (inside the tested range, 2.11 to 2.15)"
    assert envinfo._torch_version({"installed": True, "version": "2.16.0", "tested": False}).startswith(
        "2.16.0 (OUTSIDE the tested range, 2.11 to 2.15: ")


def test_env_reads_a_torch_version_that_is_no_version_without_a_traceback():
    """Issue 57 case 15: a vendor build whose version is not PEP 440 ended `hvdbench env` in ValueError
    (collect() asks torch_tested, format_text prints _torch_version)."""
    torch = {"installed": True, "version": "nightly-abc"}
    torch["tested"] = envinfo.torch_tested(torch["version"])
    assert torch["tested"] is None
    assert envinfo._torch_version(torch) == ("'nightly-abc' (not a version hvdbench can read, so not known to be "
                                             "inside the tested range, 2.11 to 2.15)")
