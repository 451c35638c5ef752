"""What a sweep is asked: `hvdbench sweep`'s options, filled by `hvdbench sweep` and by `hvdbench
study run` (one sweep per model and mode), and the one argument of `build.build_spec`.

    options = SweepOptions(out=Path("results/demo"), model="resnet50", hosts="localhost:2", repeats=2,
                           train_args=("--flavor", "debug", "--synthetic"))
    spec = build_spec(options)
    # the same as: hvdbench sweep resnet50 --hosts localhost:2 --repeats 2 --out results/demo \\
    #                  -- --flavor debug --synthetic

The command-line options both commands take are declared once, in hvdbench/cli/sweep_options.py,
under these fields' names. None is "not given": the sweep's default, or a study's own setting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hvdbench.errors import UsageError
from hvdbench.launchers.registry import get_launcher, launchers


@dataclass
class SweepOptions:
    out: Path  # the sweep's folder (a study's: the study's folder)
    model: str = ""
    train_args: tuple[str, ...] = ()  # the arguments after --, for `hvdbench train`
    # the hosts: one of these, else the Slurm allocation
    hostfile: Path | None = None
    hosts: str | None = None
    cluster_name: str | None = None  # an emulated cluster (`hvdbench cluster up --name`)
    gpus_per_node: int | None = None  # slots per host of a Slurm allocation
    # the runs
    gpus: list[int] | None = None
    layouts: str | None = None  # all | packed | spread | NxG,... (None: all)
    repeats: int | None = None  # None: 1
    engines: tuple[str, ...] = ()  # each layout and repeat under each engine
    config_name: str | Path | None = None  # per-layout settings: launch/configs/NAME.yaml or a file
    name: str | None = None  # the sweep's name in its records (None: the name of out)
    # how they are launched
    launcher: str | None = None  # None: build.default_launcher()
    controller: str = "gloo"  # horovodrun's Horovod controller
    timeout: float | None = None  # seconds per run
    kill_grace: float = 10.0  # seconds between SIGTERM and SIGKILL when a run is ended
    env: dict[str, str] = field(default_factory=dict)
    launcher_args: tuple[str, ...] = ()
    require_idle: float | None = None  # seconds to wait for this machine to be idle before each run
    retry_failed: bool = False
    # measured beside the runs
    allreduce_bench: str | None = None  # the largest message of `bench allreduce`, once per layout
    compute_bench: bool = False
    links_bench: bool = False
    explain: bool = False  # every run again on --synthetic data, in out/explain/
    link: str | None = None  # the inter-node link, in words
    # what the command does with the plan
    dry_run: bool = False
    submit: bool = False  # a batch launcher's jobs submitted (sbatch)
    sbatch_args: tuple[str, ...] = ()
    time_limit: str = "02:00:00"  # per batch job
    template: Path | None = None  # the sbatch template (None: launch/slurm/run.sub)

    @property
    def submits_jobs(self) -> bool:
        """Whether the launcher writes batch jobs (slurm) instead of launching runs."""
        return self.launcher is not None and bool(get_launcher(self.launcher).runs_with)

    def check(self) -> None:
        """What the options alone say does not go together (UsageError naming them)."""
        if self.submit and not self.submits_jobs:
            batch = " or ".join(x.name for x in launchers() if x.runs_with)
            raise UsageError(f"--submit goes with --launcher {batch}")
