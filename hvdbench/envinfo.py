"""What `hvdbench env` reports: the software and hardware stack, as one dict, and the engines that can
train here (ddp and fsdp need torch; horovod needs Horovod built for torch).

    hvdbench env            # about a second: nothing of a framework is imported
    hvdbench env --probe    # seconds more: imports torch, TensorFlow and Horovod in a subprocess

Without --probe the framework facts come from package metadata and files (`installed`): each
framework's version, the CUDA build torch is, which frameworks Horovod was built for (its extension
libraries) and against which versions (its metadata.json). What only an import can say, Horovod's
controllers and tensor operations, the GPUs torch and TensorFlow see, the NCCL torch loads and the MPI
mpi4py loads, comes from `python -m hvdbench.frameworks.probe` in a subprocess with --probe (the core
never imports a framework). System facts come from the standard library, `mpirun --version` and
`nvidia-smi`; the hardware record (CPU, GPUs, GPU links, NICs and their rates) from hvdbench/hardware.py.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from hvdbench import hardware
from hvdbench.contracts import engines as registry
from hvdbench.frameworks import HOROVOD_HOWTO
from hvdbench.releases import TESTED_WORDS, range_words, torch_tested

REQUIRED_FRAMEWORKS = ("pytorch", "tensorflow")
REQUIRED_CONTROLLERS = ("mpi", "gloo")
FIX = "run `make setup` in the hvdbench checkout"
TORCH_HOWTO = f"pip install 'hvdbench[torch]' (torch {TESTED_WORDS}), or `make setup`"
PROBE = "hvdbench env --probe"

# The distributions a package is installed as, the first found wins (TensorFlow's CPU build and
# vendors' builds have names of their own).
DISTRIBUTIONS = {"torch": ("torch",), "tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-intel"),
                 "keras": ("keras",), "horovod": ("horovod",), "mpi4py": ("mpi4py",)}
# The NCCL wheels PyPI's CUDA torch loads (their version is the NCCL it ships).
NCCL_DISTRIBUTIONS = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")
# Horovod's extension library per framework it was built for: present only where its build took that
# framework in (`horovodrun --check-build` imports each to say the same).
HOROVOD_LIBRARIES = {"pytorch": ("torch", "mpi_lib_v2."), "tensorflow": ("tensorflow", "mpi_lib.")}


def collect(probe: bool = False) -> dict:
    """The whole record; `probe`: also import the frameworks (in a subprocess) for what only they say."""
    found = installed()
    if probe:
        found.update(_probe())
    info = {
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "hvdbench": _hvdbench_version(),
        "probed": probe,
        "torch": found.get("torch", {}),
        "tensorflow": found.get("tensorflow", {}),
        "horovod": found.get("horovod", {}),
        "mpi": _mpi(found.get("mpi4py", {})),
        "nccl": found.get("torch", {}).get("nccl"),
        "hardware": hardware.host_record(),
    }
    info["gpus"] = _gpus(info["hardware"])
    if info["torch"].get("installed"):
        info["torch"]["tested"] = torch_tested(info["torch"]["version"])
    info["engines"] = engines(info)
    return info


def installed() -> dict:
    """torch, tensorflow, horovod and mpi4py as package metadata and files say them, nothing imported
    (milliseconds): {"installed": bool, "version": ..., "error": why not installed, ...}."""
    torch = _distribution("torch")
    if torch["installed"]:
        torch["cuda"] = _torch_cuda()
        nccl = next((v for v in map(_version_of, NCCL_DISTRIBUTIONS) if v), None)
        torch["nccl"] = nccl
    tf = _distribution("tensorflow")
    if tf["installed"]:
        tf["keras"] = _version_of(*DISTRIBUTIONS["keras"])
    return {"torch": torch, "tensorflow": tf, "horovod": _horovod(), "mpi4py": _distribution("mpi4py")}


def _version_of(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _distribution(package: str) -> dict:
    version = _version_of(*DISTRIBUTIONS[package])
    if version is None:
        return {"installed": False, "error": f"no {' or '.join(DISTRIBUTIONS[package])} distribution installed"}
    return {"installed": True, "version": version}


def _package_dir(package: str) -> Path | None:
    """Where a package's files are, found as `import` would find it but without running it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    return Path(spec.submodule_search_locations[0]) if spec and spec.submodule_search_locations else None


def _torch_cuda() -> str | None:
    """The CUDA release torch was built for (torch.version.cuda), read off torch/version.py; None for a
    CPU build (and where the file cannot be read)."""
    folder = _package_dir("torch")
    try:
        text = (folder / "version.py").read_text() if folder else ""
    except OSError:
        return None
    found = re.search(r"^cuda\b[^=\n]*=\s*(.+)$", text, re.M)
    try:
        return ast.literal_eval(found.group(1).strip()) if found else None
    except (ValueError, SyntaxError):
        return None


def _horovod() -> dict:
    """Horovod's version and the frameworks it was built for (and against which of their versions),
    from its files: each framework's extension library, and the metadata.json its build writes."""
    hvd = _distribution("horovod")
    folder = _package_dir("horovod")
    if not hvd["installed"] or folder is None:
        return {"installed": False, "error": "No module named 'horovod'"} if not hvd["installed"] else \
            {**hvd, "installed": False, "error": "its distribution is installed but not its package"}
    try:
        built_against = json.loads((folder / "metadata.json").read_text())
    except (OSError, ValueError):
        built_against = {}
    hvd["frameworks"] = {}
    for fw, (sub, stem) in HOROVOD_LIBRARIES.items():
        built = any(p.name.startswith(stem) and p.suffix == ".so" for p in (folder / sub).glob("*.so"))
        entry = {"built": built} if built else {"built": False, "error": f"no horovod/{sub}/{stem}*so: not built"}
        if built and isinstance(built_against, dict) and built_against.get(fw):
            entry["built_against"] = str(built_against[fw])
        hvd["frameworks"][fw] = entry
    return hvd


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
        no_horovod = _stale(info, "pytorch")
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
        if _stale(info, fw):
            found.append(_stale(info, fw))
        for controller in REQUIRED_CONTROLLERS if "controllers" in entry else ():  # known only to --probe
            if controller not in entry["controllers"]:
                found.append(f"Horovod {hvd['version']} ({fw}) lacks the {controller} controller; {FIX}")
    return found


# Horovod's framework names against the packages `installed` reads.
PACKAGE_OF = {"pytorch": "torch", "tensorflow": "tensorflow"}


def _stale(info: dict, fw: str) -> str:
    """Why Horovod's library for `fw` will not load, where it was built against another release of the
    framework than this Python has (a C++ extension is bound to the headers it was built with); ''
    where they match or either is not known."""
    hvd = info["horovod"]
    against = hvd.get("frameworks", {}).get(fw, {}).get("built_against")
    have = info.get(PACKAGE_OF[fw], {}).get("version")
    if not against or not have or against == have:
        return ""
    return (f"Horovod {hvd['version']} was built against {PACKAGE_OF[fw]} {against}, and this Python has "
            f"{have}: its {fw} library will not load; {FIX}")


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
        if not entry.get("built"):
            lines.append(f"  {fw:<13} NOT BUILT")
        elif "controllers" in entry:
            lines.append(f"  {fw:<13} controllers: {', '.join(entry['controllers']) or 'none'}; "
                         f"tensor operations: {', '.join(entry['tensor_operations']) or 'none'}")
        else:
            against = f" against {PACKAGE_OF[fw]} {entry['built_against']}" if entry.get("built_against") else ""
            lines.append(f"  {fw:<13} built{against}; controllers and tensor operations: `{PROBE}`")
    mpi = info["mpi"]
    vendor = f": {mpi['mpi4py_vendor']}" if mpi.get("mpi4py_vendor") else ""
    lines.append(f"mpi             {mpi.get('implementation') or 'not found'}"
                 + (f" (mpi4py {mpi['mpi4py']}{vendor})" if mpi.get("mpi4py") else ""))
    nccl = info["nccl"] and (info["nccl"] if info.get("probed") else f"{info['nccl']} (torch's nvidia-nccl wheel)")
    lines.append(f"nccl            {nccl or 'not available'}")
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
    """What `python -m hvdbench.frameworks.probe` found by importing each framework, in a subprocess
    (seconds, and libraries that do not always coexist)."""
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
