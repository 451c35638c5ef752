"""`hvdbench env --json` is the machine-readable stack report; without --probe it imports no framework
(issue 58: 8.2 CPU-s and 974 MiB to print versions), with it Horovod's controllers are asked."""

import json
import os
import subprocess
import sys

from hvdbench import envinfo


def _env_json(env=None, *options):
    proc = subprocess.run([sys.executable, "-m", "hvdbench", "env", "--json", *options],
                          capture_output=True, text=True, timeout=300, env=env)
    return proc, json.loads(proc.stdout)


def test_env_json_names_every_field_and_finds_horovod_frameworks(tmp_path):
    # with an nvidia-smi on PATH that answers in bytes that are not UTF-8 (issue 50: a traceback)
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.buffer.write(b'0, \\xff\\xfe, 1, 2, 3\\n')\n")
    smi.chmod(0o755)
    proc, info = _env_json({**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}, "--probe")
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
    # Without --probe: the same versions from package metadata, Horovod's frameworks from its files.
    fast_proc, fast = _env_json()
    assert fast_proc.returncode == 0, fast["problems"]
    assert not fast["probed"] and info["probed"]
    for package in ("torch", "tensorflow", "horovod"):
        assert fast[package]["version"] == info[package]["version"], package
    assert fast["mpi"]["mpi4py"] == info["mpi"]["mpi4py"] and fast["engines"] == info["engines"]
    for fw, package in (("pytorch", "torch"), ("tensorflow", "tensorflow")):
        assert fast["horovod"]["frameworks"][fw] == {"built": True, "built_against": info[package]["version"]}


def test_env_without_probe_imports_no_framework_and_starts_no_python():
    """What an import would cost (seconds, ~1 GB) is left to --probe: an audit hook sees every import and
    every process collect() starts."""
    code = """if True:
        import json, sys
        seen = []
        sys.addaudithook(lambda event, args: seen.append((event, args))
                         if event in ("import", "subprocess.Popen") else None)
        from hvdbench import envinfo
        info = envinfo.collect()
        print(json.dumps({"imports": sorted({a[0].split(".")[0] for e, a in seen if e == "import"}),
                          "started": [[str(x) for x in a[1]] for e, a in seen if e == "subprocess.Popen"],
                          "torch": info["torch"]["version"], "horovod": info["horovod"]["version"]}))
    """
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    found = json.loads(proc.stdout)
    assert not {"torch", "tensorflow", "keras", "horovod", "mpi4py"} & set(found["imports"]), found["imports"]
    assert [argv for argv in found["started"] if "python" in argv[0] or "-m" in argv] == [], found["started"]
    assert found["torch"].startswith("2.13.0") and found["horovod"] == "0.28.1"


def test_a_horovod_built_for_another_torch_or_without_tensorflow_is_named(tmp_path):
    """Horovod's files say what it was built for: a library per framework, and the versions its build
    wrote in metadata.json. One built for torch alone, against torch 2.11.0, beside this Python's 2.13."""
    package = tmp_path / "horovod"
    (package / "torch").mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('env must not import me')\n")
    (package / "torch" / "mpi_lib_v2.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    (package / "metadata.json").write_text('{"pytorch": "2.11.0", "dummy": "none"}')
    (tmp_path / "horovod-0.28.9.dist-info").mkdir()
    (tmp_path / "horovod-0.28.9.dist-info" / "METADATA").write_text("Name: horovod\nVersion: 0.28.9\n")
    proc, info = _env_json({**os.environ, "PYTHONPATH": str(tmp_path)})
    hvd = info["horovod"]
    assert hvd["version"] == "0.28.9" and hvd["frameworks"]["pytorch"] == {"built": True, "built_against": "2.11.0"}
    assert not hvd["frameworks"]["tensorflow"]["built"]
    assert proc.returncode == 1
    stale = [p for p in info["problems"] if "built against torch 2.11.0" in p]
    assert stale and "this Python has 2.13.0" in stale[0] and "make setup" in stale[0]
    assert any("lacks tensorflow" in p for p in info["problems"])
    assert not info["engines"]["horovod"]["available"] and info["engines"]["ddp"]["available"]
    assert "built against torch 2.11.0" in info["engines"]["horovod"]["why"]


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
