"""What `hvdbench env` reports: the software and hardware stack, as one dict.

Framework facts come from `python -m hvdbench.frameworks.probe` in a subprocess (the core never imports
a framework); system facts from the standard library, `mpirun --version` and `nvidia-smi`.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys

REQUIRED_FRAMEWORKS = ("pytorch", "tensorflow")
REQUIRED_CONTROLLERS = ("mpi", "gloo")
FIX = "run `make setup` in the hvdbench checkout"


def collect() -> dict:
    probe = _probe()
    return {
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "hvdbench": _hvdbench_version(),
        "torch": probe.get("torch", {}),
        "tensorflow": probe.get("tensorflow", {}),
        "horovod": probe.get("horovod", {}),
        "mpi": _mpi(probe.get("mpi4py", {})),
        "nccl": probe.get("torch", {}).get("nccl"),
        "gpus": _gpus(),
    }


def problems(info: dict) -> list[str]:
    """What is missing for hvdbench to train, each with what to do about it."""
    hvd = info["horovod"]
    if not hvd.get("installed"):
        return [f"Horovod is not installed ({hvd.get('error', 'import failed')}); {FIX}"]
    found = []
    for fw in REQUIRED_FRAMEWORKS:
        entry = hvd["frameworks"].get(fw, {})
        if not entry.get("built"):
            found.append(f"Horovod {hvd['version']} lacks {fw} ({entry.get('error', 'not built')}); {FIX}")
            continue
        for controller in REQUIRED_CONTROLLERS:
            if controller not in entry["controllers"]:
                found.append(f"Horovod {hvd['version']} ({fw}) lacks the {controller} controller; {FIX}")
    return found


def format_text(info: dict) -> str:
    hvd = info["horovod"]
    lines = [
        f"hostname        {info['hostname']}",
        f"cpus            {info['cpu_count']}",
        f"platform        {info['platform']}",
        f"python          {info['python']['version']} ({info['python']['executable']})",
        f"hvdbench        {info['hvdbench']}",
        f"torch           {_version(info['torch'])}",
        f"tensorflow      {_version(info['tensorflow'])}",
        f"horovod         {_version(hvd)}",
    ]
    for fw, entry in hvd.get("frameworks", {}).items():
        if entry.get("built"):
            lines.append(f"  {fw:<13} controllers: {', '.join(entry['controllers']) or 'none'}; "
                         f"tensor operations: {', '.join(entry['tensor_operations']) or 'none'}")
        else:
            lines.append(f"  {fw:<13} NOT BUILT")
    mpi = info["mpi"]
    lines.append(f"mpi             {mpi.get('implementation') or 'not found'}"
                 + (f" (mpi4py {mpi['mpi4py']}: {mpi['mpi4py_vendor']})" if mpi.get("mpi4py") else ""))
    lines.append(f"nccl            {info['nccl'] or 'not available'}")
    if info["gpus"]:
        for i, gpu in enumerate(info["gpus"]):
            lines.append(f"gpu {i:<11} {gpu['name']}, {gpu['memory']}, driver {gpu['driver']}")
    else:
        lines.append("gpus            none")
    return "\n".join(lines)


def _version(entry: dict) -> str:
    if not entry.get("installed"):
        return f"NOT INSTALLED ({entry.get('error', 'import failed')})"
    return entry["version"]


def _probe() -> dict:
    proc = subprocess.run([sys.executable, "-m", "hvdbench.frameworks.probe"], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        err = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {name: {"installed": False, "error": f"probe failed: {err}"}
                for name in ("torch", "tensorflow", "horovod", "mpi4py")}


def _hvdbench_version() -> str:
    from hvdbench import __version__
    return __version__


def _mpi(mpi4py: dict) -> dict:
    implementation = None
    if shutil.which("mpirun"):
        out = subprocess.run(["mpirun", "--version"], capture_output=True, text=True, timeout=30).stdout
        implementation = out.splitlines()[0].strip() if out else None
    return {"implementation": implementation, "mpirun": shutil.which("mpirun"),
            "mpi4py": mpi4py.get("version"), "mpi4py_vendor": mpi4py.get("mpi_vendor")}


def _gpus() -> list[dict]:
    if not shutil.which("nvidia-smi"):
        return []
    proc = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                           "--format=csv,noheader"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        return []
    gpus = []
    for line in proc.stdout.strip().splitlines():
        name, memory, driver = (part.strip() for part in line.split(","))
        gpus.append({"name": name, "memory": memory, "driver": driver})
    return gpus
