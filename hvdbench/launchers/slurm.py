"""Slurm batch jobs: one sbatch script per layout, rendered from launch/slurm/run.sub.

    script = render(template, layout, command=[...], job_name="hvd-resnet50-2x4", ...)
    sbatch_argv(Path("results/s/slurm/2x4.sub"))  # ['sbatch', '--parsable', '.../2x4.sub']

Rendering uses `string.Template.substitute` (a missing or unknown field is an error). Values
that land on `#SBATCH` lines are parsed by sbatch, not by a shell, so they cannot be quoted: they
are validated instead (whole numbers, a time limit, a job name and paths from a safe character
set). The command that runs in the job is `shlex.join`ed, so every argument reaches it verbatim.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from string import Template

import hvdbench
from hvdbench.errors import ConfigError
from hvdbench.launchers.registry import Launcher
from hvdbench.topology import Layout

BINARY = "sbatch"
DEFAULT_TEMPLATE = Path(hvdbench.__file__).resolve().parents[1] / "launch" / "slurm" / "run.sub"

_JOB_NAME = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_TIME = re.compile(r"^([0-9]+-)?[0-9]+(:[0-9]{2}){0,2}$")  # Slurm: MM, MM:SS, H:MM:SS, D-H:MM:SS
_PATH = re.compile(r"^[A-Za-z0-9._/%+@:=,-]+$")  # no blanks, quotes, '$' or newlines


def render(template: str, layout: Layout, *, command: list[str], job_name: str, time_limit: str,
           output: Path, script: Path, store: Path, gpus: bool = True) -> str:
    """The sbatch script for `layout`: `nodes` nodes with `gpus_per_node` tasks each, and as many
    GPUs when `gpus` (a cluster without gpu GRES rejects any GPU request), running `command` (argv)."""
    if not _JOB_NAME.match(job_name):
        raise ConfigError(f"Slurm job name {job_name!r}: use letters, digits and ._- only")
    if not _TIME.match(time_limit):
        raise ConfigError(f"--time-limit {time_limit!r} is not a Slurm time (e.g. 02:00:00 or 1-00:00:00)")
    for what, path in (("output", output), ("script", script), ("run store", store)):
        if not _PATH.match(str(path)):
            raise ConfigError(f"{what} path {str(path)!r} cannot go in an sbatch script: "
                              "use letters, digits and ._/%+@:=,- only")
    gpu_request = (f"#SBATCH --gpus-per-node={layout.gpus_per_node}" if gpus else
                   "# no --gpus-per-node: this cluster's Slurm schedules no gpu GRES")
    fields = dict(job_name=job_name, nodes=layout.nodes, gpus_per_node=layout.gpus_per_node, gpu_request=gpu_request,
                  time_limit=time_limit, output=output, script=script, store=store,
                  command=shlex.join(command))
    try:
        return Template(template).substitute(fields)
    except KeyError as e:
        raise ConfigError(f"Slurm template: unknown field ${{{e.args[0]}}} "
                          f"(fields: {', '.join(sorted(fields))})") from None
    except ValueError as e:
        raise ConfigError(f"Slurm template: {e} (write a literal $ as $$)") from None


def load_template(path: Path | None = None) -> str:
    path = Path(path or DEFAULT_TEMPLATE)
    try:
        return path.read_text()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read Slurm template ({e.strerror})") from None


def sbatch_argv(script: Path, sbatch_args: tuple[str, ...] = (), binary: str = BINARY) -> list[str]:
    """`sbatch --parsable [ARGS] SCRIPT`: --parsable prints just the job id (';cluster' on
    federations), which the sweep records."""
    return [binary, "--parsable", *sbatch_args, str(script)]


def schedules_gpus(sinfo: str | None) -> bool:
    """Whether the Slurm that `sinfo` (a path, or None where there is none) reaches has gpu GRES on
    some node. Without a Slurm to ask, a GPU cluster is assumed (the scripts are for one)."""
    import subprocess

    if sinfo is None:
        return True
    try:
        proc = subprocess.run([sinfo, "-h", "-o", "%G"], capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return True
    return proc.returncode != 0 or "gpu" in proc.stdout


# A batch launcher: it submits one job per layout, each running this sweep again with srun inside its
# allocation (hvdbench/sweep/batch.py); no process is started by it directly.
LAUNCHER = Launcher("slurm", BINARY, runs_with="srun")
