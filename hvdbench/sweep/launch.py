"""The one way a sweep starts anything: a training run and the per-layout allreduce bench alike.

    hvdbench sweep resnet50 --hosts localhost:2 --allreduce-bench 64M --out results/demo -- --synthetic
    ->  argv, env = command(spec, run)                  # the launcher around `hvdbench train ...`
        started_at, outcome = launch_run(spec, run)     # results/demo/1x2-r1/
        started_at, outcome = launch_bench(spec, layout)  # results/demo/bench-allreduce-1x2/

`launch` builds the command with hvdbench.launchers (the sweep's launcher, controller, launcher
arguments and --env), writes what the launch directory keeps of it (hostfile, command.txt with
the environment the sweep adds, logs/, and any extra files such as layout.yaml), and runs it
under the guard (hvdbench.launchers.guard: timeout, grace, launch.log, launch.json).
"""

from __future__ import annotations

import os
import shlex
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping, NamedTuple

from hvdbench import launchers
from hvdbench.errors import HvdbenchError
from hvdbench.files import atomic_write_text
from hvdbench.frameworks import horovod_installed
from hvdbench.launchers import guard
from hvdbench.launchers.registry import get_launcher
from hvdbench.sweep.plan import PlannedRun
from hvdbench.sweep.spec import SweepSpec, resolve_entry, run_dir, train_args
from hvdbench.topology import Layout, write_hostfile


class Launched(NamedTuple):
    started_at: str  # UTC, ISO 8601, to the second
    outcome: guard.Outcome


def job_command(spec: SweepSpec, layout: Layout, worker: list[str] | tuple[str, ...], rdir: Path,
                base_env: Mapping[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """(argv, env): `layout.world_size` copies of `worker` through the sweep's launcher."""
    user_env = {**rendezvous_env(spec, layout), **spec.user_env}
    job = launchers.Job(layout, tuple(worker), rdir, spec.controller, spec.launcher_args, tuple(user_env))
    return launchers.build(spec.launcher, job, launchers.launch_env(user_env, base=base_env))


def rendezvous_env(spec: SweepSpec, layout: Layout) -> dict[str, str]:
    """MASTER_ADDR/MASTER_PORT for a launcher that tells its ranks no rendezvous (mpirun; not torchrun
    or srun: Launcher.rendezvous) where Horovod is not installed: torch.distributed's ranks otherwise
    agree them through Horovod's collectives (frameworks/torch/process_group.py). Rank 0 runs on the
    layout's first host; the port is one free on this machine (the first host itself on one machine
    or an emulated cluster). Nothing where the user's --env names them."""
    if get_launcher(spec.launcher).rendezvous or horovod_installed() or "MASTER_ADDR" in spec.user_env:
        return {}
    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    return {"MASTER_ADDR": layout.hosts[0] if layout.hosts else "127.0.0.1", "MASTER_PORT": str(port)}


def train_worker(spec: SweepSpec, run: PlannedRun) -> list[str]:
    """`hvdbench train MODEL [--config RUN_DIR/layout.yaml] TRAIN_ARGS --out RUN_DIR --run-id ...`: the
    arguments resolve_entry resolved before the sweep began (spec.train_args)."""
    config_args = ["--config", str(run_dir(spec, run) / "layout.yaml")] if run.entry.config else []
    return launchers.worker_argv(spec.model, [*config_args, *train_args(spec, run)])


def command(spec: SweepSpec, run: PlannedRun, base_env=None) -> tuple[list[str], dict[str, str]]:
    """(argv, env) of one run: the launcher around `hvdbench train MODEL ... --out RUN_DIR`."""
    return job_command(spec, run.layout, train_worker(spec, run), run_dir(spec, run), base_env)


def env_additions(spec: SweepSpec) -> dict[str, str]:
    """What the sweep adds to the environment (shown by --dry-run and in command.txt)."""
    return {k: v for k, v in launchers.launch_env(spec.user_env).items() if os.environ.get(k) != v}


def env_left_out(spec: SweepSpec) -> str:
    """The warning for environment variables a launcher that writes names into a shell line cannot
    carry (Launcher.shell_names: horovodrun; not shell variable names), or '' when there are none or
    the launcher is another."""
    names = launchers.unsafe_names(os.environ) if get_launcher(spec.launcher).shell_names else []
    return (f"warning: environment variable(s) {', '.join(map(repr, names))} not passed to the ranks: "
            f"not shell variable names, and {spec.launcher} writes names into a shell command") if names else ""


def command_text(spec: SweepSpec, argv: list[str]) -> str:
    """command.txt: the added environment, one `KEY=value \\` line each, then the exact argv."""
    env_lines = "".join(f"{k}={shlex.quote(v)} \\\n" for k, v in sorted(env_additions(spec).items()))
    return env_lines + shlex.join(argv) + "\n"


def launch(spec: SweepSpec, layout: Layout, worker: list[str] | tuple[str, ...], rdir: Path,
           files: Mapping[str, str] | None = None) -> Launched:
    """Run `worker` over `layout` with its files in `rdir`; returns when it ended (or was ended)."""
    argv, env = job_command(spec, layout, worker, rdir)
    (rdir / "logs").mkdir(parents=True, exist_ok=True)
    write_hostfile(rdir / "hostfile", layout.host_slots)
    for name, text in (files or {}).items():
        atomic_write_text(rdir / name, text)
    atomic_write_text(rdir / "command.txt", command_text(spec, argv))
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    outcome = guard.run(argv, env, rdir / "launch.log", rdir / "launch.json",
                        timeout=spec.timeout, grace_s=spec.grace_s)
    return Launched(started, outcome)


def launch_run(spec: SweepSpec, run: PlannedRun) -> Launched:
    """One training run in RUN_DIR, with its layout.yaml when the sweep has a config."""
    files = {}
    if run.entry.config:
        import yaml

        files["layout.yaml"] = yaml.safe_dump(run.entry.config.settings, sort_keys=False)
    return launch(spec, run.layout, train_worker(spec, run), run_dir(spec, run), files)


def bench_dir(spec: SweepSpec, layout: Layout, bench: str = "allreduce") -> Path:
    return spec.out / f"bench-{bench}-{layout.name}"


def bench_launches(spec: SweepSpec) -> list[tuple[str, Layout]]:
    """(bench, layout) for each bench the sweep runs once per layout (--allreduce-bench, --compute-bench),
    and `bench links` once over every host of the sweep (--links-bench: build.links_layout)."""
    benches = [b for b, on in (("allreduce", spec.allreduce_bench), ("compute", spec.compute_bench)) if on]
    layouts = list(dict.fromkeys(entry.layout for entry in spec.entries))
    links = [("links", spec.links_layout)] if spec.links_layout else []
    return [(b, layout) for b in benches for layout in layouts] + links


def _threads_of(spec: SweepSpec, layout: Layout) -> list[str]:
    """`--threads T --thread-share S` as the layout's training runs resolve them, so `bench compute`
    measures the peak on the math threads each run's rank has (its MFU divides by that peak)."""
    entry = next(e for e in spec.entries if e.layout == layout)
    try:
        cfg = entry.train or resolve_entry(spec, entry)
    except HvdbenchError:  # the runs are refused the same way; the bench takes the worker's default
        return []
    return ["--threads", str(cfg.threads), "--thread-share", str(cfg.thread_share)]


def bench_worker(spec: SweepSpec, layout: Layout, bench: str) -> list[str]:
    """`hvdbench bench allreduce --max-bytes MAX --out SWEEP`, `bench compute --threads T
    --thread-share S --out SWEEP` with the threads of the layout's runs, or `bench links --out SWEEP`."""
    options = (["--max-bytes", spec.allreduce_bench] if bench == "allreduce" else [] if bench == "links"
               else _threads_of(spec, layout))
    return [str(launchers.bin_dir() / "hvdbench"), "bench", bench, *options, "--out", str(spec.out)]


def bench_command(spec: SweepSpec, layout: Layout, bench: str) -> tuple[list[str], dict[str, str]]:
    """(argv, env) of one bench launch (what --dry-run prints)."""
    return job_command(spec, layout, bench_worker(spec, layout, bench), bench_dir(spec, layout, bench))


def launch_bench(spec: SweepSpec, layout: Layout, bench: str = "allreduce") -> Launched:
    """bench_worker over `layout`, in bench_dir(); the bench appends its rows to
    SWEEP/bench_<bench>.csv itself."""
    return launch(spec, layout, bench_worker(spec, layout, bench), bench_dir(spec, layout, bench))
