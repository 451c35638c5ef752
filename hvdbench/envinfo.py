"""What `hvdbench env` reports: the software and hardware stack, as one dict, and the engines that can
train here (ddp and fsdp need torch; horovod needs Horovod built for torch).

Framework facts come from `python -m hvdbench.frameworks.probe` in a subprocess (the core never imports
a framework); system facts from the standard library, `mpirun --version` and `nvidia-smi`; the
hardware record (CPU, GPUs, GPU links, NICs and their rates) from hvdbench/hardware.py.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys

from hvdbench import hardware
from hvdbench.contracts import engines as registry
from hvdbench.frameworks import HOROVOD_HOWTO
from hvdbench.releases import TESTED_WORDS, range_words, torch_tested

REQUIRED_FRAMEWORKS = ("pytorch", "tensorflow")
REQUIRED_CONTROLLERS = ("mpi", "gloo")
FIX = "run `make setup` in the hvdbench checkout"
TORCH_HOWTO = f"pip install 'hvdbench[torch]' (torch {TESTED_WORDS}), or `make setup`"


def collect() -> dict:
    probe = _probe()
    info = {
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
        "hardware": hardware.host_record(),
    }
    info["gpus"] = _gpus(info["hardware"])
    if info["torch"].get("installed"):
        info["torch"]["tested"] = torch_tested(info["torch"]["version"])
    info["engines"] = engines(info)
    return info


def engines(info: dict) -> dict:
    """Each engine: {"available": bool, "why": what is missing and how to get it ('' when available)}."""
    torch = info["torch"]
    no_torch = "" if torch.get("installed") else f"torch is not installed ({torch.get('error', '')}); {TORCH_HOWTO}"
    hvd = info["horovod"]
    if not hvd.get("installed"):
        no_horovod = f"Horovod is not installed ({hvd.get('error', 'import failed')}); {HOROVOD_HOWTO}"
    elif not hvd.get("frameworks", {}).get("pytorch", {}).get("built"):
        no_horovod = f"Horovod {hvd['version']} lacks pytorch; {FIX}"
    else:
        no_horovod = ""
    found = {}
    for engine in registry.engines():  # each is a torch engine (Engine.torch); those that need Horovod, through it
        why = (no_horovod if engine.needs_horovod else "") or no_torch
        found[engine.name] = {"available": not why, "why": why}
    return found


def problems(info: dict) -> list[str]:
    """What is missing for hvdbench to train, each with what to do about it: no engine at all, or a
    Horovod that is installed but lacks a framework or controller. A Python without Horovod is no
    problem (ddp and fsdp need none): `engines` says why --engine horovod is not there."""
    hvd = info["horovod"]
    if not hvd.get("installed"):
        usable = [name for name, e in info.get("engines", {}).items() if e["available"]]
        return [] if usable else [f"no engine can train here: torch is not installed and Horovod is not "
                                  f"({hvd.get('error', 'import failed')}); {FIX}"]
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
        f"torch           {_torch_version(info['torch'])}",
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
    hw = info["hardware"]
    cpu = hw["cpu"]
    lines.append(f"cpu             {cpu['model'] or 'not read'}: {cpu['cores']} cores, {cpu['logical']} logical, "
                 f"{cpu['sockets']} socket(s)")
    for nic in hw["nics"]:
        rate = nic.get("rate") or (f"{nic['speed_mbps']} Mb/s" if nic["speed_mbps"] else "speed not reported")
        lines.append(f"nic {nic['name']:<11} {nic['kind']}, {nic['state'] or 'state not read'}, {rate}")
    lines.append(f"intra-node link {hw['intra_node_link']}")
    lines.append(f"inter-node link {hw['inter_node_link'] or 'none found'}")
    lines += [f"note            {note}" for note in hw.get("notes", [])]
    for name, engine in info["engines"].items():
        known = registry.find_engine(name)
        lines.append(f"engine {name:<8} " + (f"available: {known.summary if known else name}" if engine["available"]
                                             else f"NOT AVAILABLE: {engine['why']}"))
    return "\n".join(lines)


def _version(entry: dict) -> str:
    if not entry.get("installed"):
        return f"NOT INSTALLED ({entry.get('error', 'import failed')})"
    return entry["version"]


def _torch_version(torch: dict) -> str:
    """The version and whether hvdbench was tested on it: outside the range, throughputs may differ
    for reasons of torch's own, and an API hvdbench calls may have moved."""
    if not torch.get("installed"):
        return _version(torch)
    return range_words(torch["version"])


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


def _gpus(record: dict) -> list[dict]:
    """The GPUs as `env` lists them, from the hardware record's one nvidia-smi query (its tolerant
    path: garbage, bytes that are not UTF-8 or a hang leave it empty, with a note)."""
    return [{"name": g["name"], "memory": f"{g['memory_mib']} MiB" if g["memory_mib"] is not None else "not read",
             "driver": g["driver"]} for g in record["gpus"]]
