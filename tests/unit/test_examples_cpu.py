"""Every example a newcomer copies that trains (each command's `--help` Example lines, every bash block of
the README: `hvdbench train`, `sweep` and `study run`) runs on a CPU as written: each of its runs
resolves as the launch would resolve it and fits a laptop's memory by train/memory.py's estimate, the
check a CPU worker makes before it builds anything; or the line says it is for GPUs (issue 58:
`hvdbench --help`'s own sweep and the README's --horovod-timeline line ran the full flavor and were
refused, "needs ~25.9 GB ...").

What a line cannot run here is named, not faked: a `# on GPU...` comment line labels the lines after it
in its block, a trailing `# a GPU`, `# on GPU nodes` or `# 8 GPUs` its own line; `--dry-run`,
`--submit` and the Slurm launcher launch nothing here. An emulated cluster's name stands for 4 nodes
of 2 slots, whose ranks all share this machine as the cluster's do.

    .venv/bin/python -m pytest tests/unit/test_examples_cpu.py
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import click
import pytest

from hvdbench.cli.main import cli
from hvdbench.contracts import get_spec
from hvdbench.train.memory import check_fits
from hvdbench.train.options import resolve_train_args

ROOT = Path(__file__).resolve().parents[2]
LAPTOP = 8e9  # bytes of host memory the examples must fit in, shared by the ranks on the machine
GPU_LINE = re.compile(r"#\s*on GPU")  # a comment line: the lines after it in its block are for GPUs
GPU_TAIL = re.compile(r"#\s*(on GPU|a GPU|\d+ GPUs)")  # a trailing comment: its line is for GPUs
CLUSTER_HOSTS = "node1:2,node2:2,node3:2,node4:2"


def _blocks_of_help() -> list[tuple[str, list[str]]]:
    """(command, the lines of its Example section), for every command and subcommand."""
    ctx = click.Context(cli)

    def walk(command, name):
        yield name, command
        if isinstance(command, click.Group):
            for sub in command.list_commands(ctx):
                yield from walk(command.get_command(ctx, sub), f"{name} {sub}")

    found = []
    for name, command in walk(cli, "hvdbench"):
        text = command.help or ""
        if "Example:" in text:
            found.append((f"`{name} --help`", text[text.index("Example:"):].splitlines()[1:]))
    return found


def _blocks_of_readme() -> list[tuple[str, list[str]]]:
    text = (ROOT / "README.md").read_text()
    return [(f"README.md block {i}", block.splitlines())
            for i, block in enumerate(re.findall(r"```bash\n(.*?)```", text, re.S), 1)]


def examples() -> list[tuple[str, str]]:
    """(where, command line) of every example that trains here: continuation lines joined, GPU lines
    and commands that launch nothing left out."""
    found = []
    for where, lines in _blocks_of_help() + _blocks_of_readme():
        gpu_from_here, joined = False, []
        for line in lines:
            line = line.strip()
            if joined and joined[-1].endswith("\\"):
                joined[-1] = joined[-1][:-1] + " " + line
            else:
                joined.append(line)
        for line in joined:
            if line.startswith("#"):
                gpu_from_here = gpu_from_here or bool(GPU_LINE.match(line))
                continue
            command, _, comment = line.partition("  #")
            if gpu_from_here or GPU_TAIL.match("#" + comment) or not re.search(r"\bhvdbench (train|sweep|study run)\b",
                                                                               command):
                continue
            if re.search(r"--dry-run|--submit|--launcher slurm", command):
                continue
            found.append((where, command.strip()))
    return found


def _ranks(argv: list[str]) -> int:
    """The ranks a launcher line starts on this machine: -np N or --nproc-per-node N, else one."""
    for flag in ("-np", "--nproc-per-node"):
        if flag in argv:
            return int(argv[argv.index(flag) + 1])
    return 1


def _runs(argv: list[str], tmp_path: Path) -> list[tuple]:
    """(TrainConfig, ranks sharing the machine, ranks of the job) of every run the command makes."""
    at = argv.index("hvdbench")
    command, rest = argv[at + 1], argv[at + 2:]
    if command == "train":
        ranks = _ranks(argv[:at])
        return [(resolve_train_args(rest[0], rest[1:]), ranks, ranks)]
    if "--cluster" in rest:  # a cluster's nodes are this machine's namespaces: every rank shares it
        i = rest.index("--cluster")
        rest = [*rest[:i], "--hosts", CLUSTER_HOSTS, *rest[i + 2:]]
    from hvdbench.sweep.build import build_spec
    from hvdbench.sweep.options import SweepOptions

    cluster = CLUSTER_HOSTS in rest
    if command == "sweep":
        ctx = cli.get_command(click.Context(cli), "sweep").make_context("sweep", rest)
        specs = [build_spec(SweepOptions(**ctx.params))]
    else:  # study run
        from hvdbench.study import run as study_run
        from hvdbench.study.schema import load_study
        from hvdbench.cli.study import find_study

        group = cli.get_command(click.Context(cli), "study")
        ctx = group.get_command(click.Context(group), "run").make_context("run", rest[1:])
        p = dict(ctx.params)
        study_file, flavor, only, skip = p.pop("file"), p.pop("flavor"), p.pop("only"), p.pop("skip_missing")
        opts = study_run.StudyOptions(SweepOptions(**p), flavor=flavor, only=only or (), skip_missing=skip)
        sweeps, _ = study_run.plan_study(load_study(find_study(study_file)), opts, tmp_path / "configs")
        specs = [s.spec for s in sweeps]
    return [(entry.train, entry.layout.world_size if cluster else entry.layout.gpus_per_node, entry.layout.world_size)
            for spec in specs for entry in spec.entries]


EXAMPLES = examples()


def test_the_examples_are_found():
    """The search finds what it should: train, sweep and study lines from both places, GPU lines out."""
    lines = [line for _, line in EXAMPLES]
    assert any(w.startswith("README") for w, _ in EXAMPLES) and any(w.startswith("`") for w, _ in EXAMPLES)
    assert {re.search(r"hvdbench (train|sweep|study run)", x).group(1) for x in lines} == {"train", "sweep", "study run"}
    assert not any("--flavor 70b" in x or "node1:8" in x for x in lines)


@pytest.mark.parametrize("where, line", EXAMPLES, ids=[f"{w}: {x[:60]}" for w, x in EXAMPLES])
def test_every_example_that_trains_fits_a_cpu(where, line, tmp_path, monkeypatch):
    shutil.copytree(ROOT / "hostfiles", tmp_path / "hostfiles")
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(line)
    runs = _runs(argv, tmp_path)
    assert runs, f"{where}: {line}: no run"
    for cfg, sharing, ranks in runs:
        check_fits(get_spec(cfg.model), cfg, sharing, available=int(LAPTOP), ranks=ranks)  # ConfigError: refused
