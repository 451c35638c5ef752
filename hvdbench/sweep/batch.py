"""`--launcher slurm`: one sbatch script per layout, and (with --submit) its submission.

    jobs = slurm_jobs(spec, time_limit="02:00:00", sbatch_args=("--partition=gpu",))
    write_slurm_jobs(spec, jobs, submit=True)     # sbatch each; job ids in OUT/slurm/<NxG>.jobids

Each job runs this same sweep again inside its allocation, restricted to its layout and with
`--launcher srun`, so runs there get the same timeouts, records, resume and interleaving of
repeats as a sweep started by hand (jobs of different layouts run whenever Slurm schedules them).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
from pathlib import Path

from hvdbench import launchers
from hvdbench.files import atomic_write_text, open_no_link
from hvdbench.launchers import guard
from hvdbench.launchers.slurm import SlurmJob, load_template, render, sbatch_argv, schedules_gpus
from hvdbench.sweep.spec import SweepSpec, check_sweep_record


def slurm_jobs(spec: SweepSpec, template: Path | None = None, time_limit: str = "02:00:00",
               sbatch_args: tuple[str, ...] = ()) -> list[tuple[str, Path, str, list[str]]]:
    """One (layout, script path, script text, sbatch argv) per layout. Each job runs this sweep
    again inside its allocation with `--launcher srun --layouts NxG`."""
    text = load_template(template)
    gpus = schedules_gpus(shutil.which("sinfo"))
    slurm_dir = spec.out / "slurm"
    jobs, seen = [], set()
    for entry in spec.entries:
        lay = entry.layout
        if lay.name in seen:
            continue
        seen.add(lay.name)
        inner = [str(launchers.bin_dir() / "hvdbench"), "sweep", spec.model, "--launcher", "srun",
                 "--layouts", lay.name, "--repeats", str(spec.repeats), "--out", str(spec.out),
                 "--name", spec.name]
        if spec.config_path:
            inner += ["--config", str(spec.config_path.resolve())]
        if spec.timeout:
            inner += ["--timeout", f"{spec.timeout:g}"]
        inner += ["--kill-grace", f"{spec.grace_s:g}"]
        for key, value in spec.user_env.items():
            inner += ["--env", f"{key}={value}"]
        for arg in spec.launcher_args:
            inner += [f"--launcher-arg={arg}"]
        if spec.retry_failed:
            inner += ["--retry-failed"]
        engines = list(dict.fromkeys(e.engine for e in spec.entries if e.engine))
        if engines:
            inner += ["--engines", ",".join(engines)]
        inner += ["--", *spec.train_args]
        script = slurm_dir / f"{lay.name}.sub"
        job_name = re.sub(r"[^A-Za-z0-9._-]", "_", f"hvd-{spec.name}-{lay.name}")[:128]
        job = SlurmJob(command=inner, job_name=job_name, time_limit=time_limit,
                       output=slurm_dir / f"{lay.name}-%j.out", script=script, store=spec.store)
        body = render(text, lay, job, gpus=gpus)
        jobs.append((lay.name, script, body, sbatch_argv(script, sbatch_args,
                                                         launchers.resolve_binary("sbatch"))))
    return jobs


def write_slurm_jobs(spec: SweepSpec, jobs, submit: bool, echo=print) -> None:
    spec.out.mkdir(parents=True, exist_ok=True)
    check_sweep_record(spec)
    for name, script, body, argv in jobs:
        script.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(script, body)
        script.chmod(0o755)
        if submit:
            job_id = guard.capture(argv).strip()
            with open_no_link(script.with_suffix(".jobids"), "a") as f:
                f.write(job_id + "\n")
            echo(f"{name}: submitted job {job_id} ({script})")
        else:
            echo(f"{name}: {shlex.join(argv)}")


@contextlib.contextmanager
def cluster_slurm(spec, echo=None):
    """With a sweep on an emulated cluster's own Slurm (`--cluster NAME --launcher slurm`; spec
    None otherwise), the cluster's SLURM_CONF for this process while it asks sinfo for GPU GRES and
    sbatch-submits (the jobs inherit it), put back after; `echo` says it (a dry run, or scripts the
    user submits by hand)."""
    conf = (spec.user_env or {}).get("SLURM_CONF") if spec is not None else None
    if not conf:
        yield
        return
    if echo is not None:
        echo(f"# the cluster's own Slurm: export SLURM_CONF={shlex.quote(conf)}")
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = conf
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
