"""Every command and subcommand answers --help with an example, without importing a framework."""

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from hvdbench.cli.main import COMMANDS, cli
from hvdbench.errors import ConfigError
from hvdbench.train.config import TrainConfig, check_ranges


def _all_paths(group: click.Group, ctx: click.Context, prefix=()):
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, f"registered command {name!r} could not be loaded"
        yield prefix + (name,)
        if isinstance(command, click.Group):
            yield from _all_paths(command, click.Context(command, parent=ctx), prefix + (name,))


def test_every_registered_command_is_listed_in_root_help():
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0, result.output
    for name in COMMANDS:
        assert name in result.output


@pytest.mark.parametrize("path", list(_all_paths(cli, click.Context(cli))), ids=" ".join)
def test_help_of_every_command_has_an_example(path):
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output, f"`hvdbench {' '.join(path)} --help` shows no example"


def test_the_root_help_says_what_each_group_holds():
    """Issue 50: `bench` is not only "allreduce and storage": every subcommand's measure is named."""
    [line] = [x for x in CliRunner().invoke(cli, ["--help"]).output.splitlines() if x.strip().startswith("bench ")]
    assert all(word in line for word in ("allreduce", "links", "storage", "compute", "FLOPs"))
    bench = cli.get_command(click.Context(cli), "bench")
    assert set(bench.list_commands(click.Context(bench))) == {"allreduce", "links", "io", "compute", "flops"}


def test_unknown_command_is_a_one_line_error():
    result = CliRunner().invoke(cli, ["no-such-command"])
    assert result.exit_code != 0
    assert "No such command" in result.output


def test_help_does_not_import_frameworks():
    code = ("import sys; from click.testing import CliRunner; from hvdbench.cli.main import cli;"
            "r = CliRunner().invoke(cli, ['--help']); assert r.exit_code == 0;"
            "print(sorted(m for m in ('torch', 'tensorflow', 'horovod') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _float_options():
    ctx = click.Context(cli)
    for path in _all_paths(cli, ctx):
        command = cli
        for name in path:
            command = command.get_command(click.Context(command), name)
        for param in command.params:
            if isinstance(param, click.Option) and isinstance(param.type, click.FloatRange | click.types.FloatParamType):
                yield path, param


def test_no_float_option_takes_nan_or_inf():
    """Issue 57: click's float types take 'nan' (it compares false with every bound) and 'inf' (past
    every minimum); `bench links --budget-s inf` then failed on every rank, `prepare ... --val-fraction
    nan` far from the option. Every float option of every command refuses both where it is parsed."""
    found = list(_float_options())
    assert len(found) >= 12, [f"{' '.join(p)} {o.opts[0]}" for p, o in found]  # the sweep's, bench's, prepare's
    for path, option in found:
        for text in ("nan", "inf", "-inf"):
            if path == ("train",):  # its options are TrainConfig's fields: a config file's values meet the same check
                value = option.type.convert(text, option, None)
                with pytest.raises(ConfigError, match=f"^{option.name} must be a finite number, got"):
                    check_ranges(TrainConfig(model="resnet50", **{option.name: value}))
                continue
            with pytest.raises(click.BadParameter, match="not a finite number|not in the range"):
                option.type.convert(text, option, None)
