"""`hvdbench study`: run a published scaling study's models, layouts and repeats from one file."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

import click

from hvdbench.cli.lists import comma_list
from hvdbench.cli.main import Command
from hvdbench.cli.sweep import run_to_the_end
from hvdbench.cli.sweep_options import sweep_options

# The shipped study files: package data (setup.cfg's package_data), so a pip-installed hvdbench has them.
STUDIES_DIR = Path(__file__).resolve().parents[1] / "studies"


def find_study(name: str) -> Path:
    """A path as given, else studies/NAME.yaml here (the user's own), else the shipped STUDIES_DIR/NAME.yaml."""
    from hvdbench.errors import ConfigError
    from hvdbench.train.config import quote

    what = "a study is a NAME of `hvdbench study list` or a YAML file"
    given = Path(name)
    if given.is_dir():
        said = f"{name}: a directory, not a study file ({what})"
        if (given / "study.json").is_file():  # the --out of an earlier `study run`
            said += "; it holds a study's results: `hvdbench report " + shlex.quote(name) + "` reports them"
        raise ConfigError(said)
    if given.exists() and not given.is_file():  # a FIFO, a device: reading would block or never end
        raise ConfigError(f"{name}: not a regular file ({what})")
    candidates = [given, Path("studies") / f"{name}.yaml", STUDIES_DIR / f"{name}.yaml"]
    for path in candidates:
        try:
            if path.is_file():
                return path
        except (OSError, ValueError):  # a name too long for the file system, or with a NUL
            continue
    raise ConfigError(f"study {quote(name)} not found ({what}; looked for "
                      f"{', '.join(quote(str(p)) for p in candidates)})")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def study():
    """Studies: several models x layouts x repeats from one YAML file (`hvdbench study list`).

    \b
    Example:
      hvdbench study list
      hvdbench study run demo --hosts localhost:2 --layouts 1x1,1x2 --out results/demo-study
      hvdbench report results/demo-study
    """


@study.command("list")
def list_studies():
    """The study files shipped with hvdbench (hvdbench/studies/), with what each reproduces.

    \b
    Example:
      hvdbench study list
    """
    from hvdbench.errors import ConfigError, HvdbenchError
    from hvdbench.study.schema import load_study

    shipped = sorted(STUDIES_DIR.glob("*.yaml"))
    if not shipped:  # an install that left its package data out: say so, never an empty list and exit 0
        raise ConfigError(f"no study files in {STUDIES_DIR} (this hvdbench was installed without its package "
                          "data; reinstall it, or give `study run` a YAML file's path)")
    for path in shipped:
        try:
            s = load_study(path)
            click.echo(f"{path.stem}: {', '.join(s.models)} — {s.reproduces}")
        except HvdbenchError as e:
            click.echo(f"{path.stem}: unreadable ({e})")


@study.command("run", cls=Command)
@click.argument("file", metavar="FILE|NAME")
@sweep_options
@click.option("--flavor", help="Run every model in this flavor (e.g. debug on a laptop); per-layout "
              "settings of the file's flavor are then dropped and each model's 'debug' data is used.")
@click.option("--only", callback=comma_list, metavar="MODEL,...", help="Run only these models of the study.")
@click.option("--skip-missing", is_flag=True, help="Leave out models this hvdbench does not have (else an error).")
def run(file, flavor, only, skip_missing, **given):
    """Run every model of study FILE (a path, or a NAME of `hvdbench study list`) over its layouts and
    repeats, one sweep per model and mode in OUT; running it again resumes. `hvdbench report OUT`
    then prints the study's tables, the speed-up across models among them.

    \b
    Example:
      hvdbench study run demo --hosts localhost:2 --layouts 1x1,1x2 --out results/demo-study
      hvdbench study run dgx1-mlperf-v05-suite --dry-run --skip-missing --out results/dgx1
      hvdbench study run dgx1-mlperf-v05-suite --flavor debug --hosts localhost:2 \\
          --layouts 1x1,1x2 --skip-missing --out results/dgx1-debug
      hvdbench study run h100-64gpu-bert-llama-sd --launcher slurm --submit --skip-missing \\
          --sbatch-arg=--partition=gpu --out results/h100
    """
    import tempfile

    from hvdbench.output import console as output_console
    from hvdbench.study import run as study_run
    from hvdbench.study.schema import load_study
    from hvdbench.sweep import batch
    from hvdbench.sweep import run as sweep_run
    from hvdbench.sweep.options import SweepOptions

    given = SweepOptions(**given)
    given.check()
    s = load_study(find_study(file))
    opts = study_run.StudyOptions(dataclasses.replace(given, out=given.out.absolute()), flavor=flavor, only=only,
                                  skip_missing=skip_missing)
    dry_run, submit = given.dry_run, given.submit
    console = output_console()
    with tempfile.TemporaryDirectory(prefix="hvdbench-study-") as tmp:
        # A dry run writes nothing in OUT: its configs go to a temporary folder.
        config_dir = Path(tmp) if dry_run else opts.out / "configs"
        sweeps, notes = study_run.plan_study(s, opts, config_dir)
        for note in notes:
            click.echo(f"study {s.name}: {note}")
        runs = sum(len(sw.spec.runs) for sw in sweeps)
        click.echo(f"study {s.name}: {len(sweeps)} sweeps, {runs} runs — {s.reproduces}")
        if dataclasses.replace(given, launcher=given.launcher or s.launcher).submits_jobs:
            if not dry_run:
                study_run.check_study_record(s, opts)
            for sw in sweeps:
                with batch.cluster_slurm(sw.spec if given.cluster_name is not None else None,
                                         echo=click.echo if dry_run or not submit else None):
                    jobs = batch.slurm_jobs(sw.spec, None, given.time_limit, tuple(given.sbatch_args))
                    click.echo(f"== {sw.label}: {len(jobs)} batch jobs")
                    if dry_run:
                        if sw.prepare:
                            click.echo(f"# prepare first: {sw.prepare_command}")
                        for _, script, body, argv in jobs:
                            click.echo(f"# {script}\n{body}\n# submit: {shlex.join(argv)}\n")
                    else:
                        study_run.prepare_data(sw, console)
                        batch.write_slurm_jobs(sw.spec, jobs, submit, echo=click.echo)
            return
        if dry_run:
            for sw in sweeps:
                if sw.prepare:
                    click.echo(f"prepare first: {sw.prepare_command}")
                sweep_run.dry_run(sw.spec, console)
            click.echo(f"study {s.name}: {runs} launches")
            return
        run_to_the_end(f"study {s.name}", opts.out, lambda: study_run.run_study(s, sweeps, opts, console),
                       f"(report: {shlex.join(['hvdbench', 'report', str(opts.out)])})")
