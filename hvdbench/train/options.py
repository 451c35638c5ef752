"""`hvdbench train`'s options, parsed in one place, beside TrainConfig: the `train` command, the
sweep (the arguments after `--`, and each layout's NxGxBxA settings), study files (through the
sweep) and the rows of failed runs all get a run's TrainConfig from here.

    hvdbench train resnet50 --flavor debug --synthetic --out runs/r1
    ->  overrides, config_file = parse_train_args("resnet50", ["--flavor", "debug", "--synthetic"])
        cfg = resolve_train_args("resnet50", ["--flavor", "debug", "--synthetic"], out="runs/r1")

`train_parameters` declares the command line (MODEL, one `--name` per TrainConfig field marked
`cli`, `--config FILE`, `--set KEY=VALUE`), so the command and every parse here share it.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Mapping

import click

from hvdbench.errors import ConfigError, UsageError
from hvdbench.train.config import TrainConfig, parse_yaml, quote, resolve


def parse_set(values) -> dict:
    """--set key=value (YAML value; dotted keys reach nested sections, e.g. submission.org=acme)."""
    out: dict = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {quote(item)}: expected KEY=VALUE")
        try:
            value = parse_yaml(raw, f"--set {key}")
        except ConfigError:  # not YAML: the text itself (a string key catches a wrong type later)
            value = raw
        node = out
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def overrides_from_options(model: str, set_values, options: dict) -> dict:
    """The `resolve` overrides of a train command line: --set pairs, then the options given (None:
    not given), then MODEL."""
    given = {k: v for k, v in options.items() if v is not None}
    return {**parse_set(set_values), **given, "model": model}


def _config_options(command):
    """One `--name` option per TrainConfig field marked `cli` (its type, choices and help come from
    the field), so every option is defined once, in hvdbench/train/config.py."""
    hints = typing.get_type_hints(TrainConfig)
    for f in reversed(dataclasses.fields(TrainConfig)):
        if not f.metadata.get("cli"):
            continue
        flag, hint = "--" + f.name.replace("_", "-"), hints[f.name]
        kwargs = {"help": f.metadata["help"], "default": None}
        if hint is bool:
            kwargs["is_flag"] = True
            if f.default is True:  # on unless turned off: --name/--no-name
                flag = f"{flag}/--no-{flag[2:]}"
        elif f.metadata.get("choices"):
            kwargs["type"] = click.Choice(f.metadata["choices"])
        elif f.name in ("data", "out"):
            kwargs["type"] = click.Path()
        else:
            kwargs["type"] = hint
        command = click.option(flag, f.name, **kwargs)(command)
    return command


def train_parameters(command):
    """The train command line's parameters, as click decorators (the command is called with
    model, config_file, set_values and one keyword per option)."""
    command = click.option("--set", "set_values", multiple=True, metavar="KEY=VALUE",
                           help="Any other config key, e.g. --set momentum=0.95 --set submission.org=acme.")(command)
    command = click.option("--config", "config_file", type=click.Path(),
                           help="YAML file of config keys (options win).")(command)
    command = _config_options(command)
    return click.argument("model")(command)


# A parser with the train command's parameters, for callers that parse a train command line
# without running it (the sweep's arguments after `--`).
_PARSER = click.command("train")(train_parameters(lambda **_: None))


def parse_train_args(model: str, args) -> tuple[dict, str | None]:
    """(overrides, --config file) of `hvdbench train MODEL ARGS...`; hvdbench's UsageError, with
    click's words, for a misspelt option or a wrong type."""
    try:
        ctx = _PARSER.make_context("hvdbench train", [model, *args])
    except click.UsageError as e:
        raise UsageError(e.format_message()) from None
    params = dict(ctx.params)
    model, config_file, set_values = params.pop("model"), params.pop("config_file"), params.pop("set_values")
    return overrides_from_options(model, set_values, params), config_file


def resolve_train_args(model: str, args=(), *, layout: dict | None = None, env: Mapping[str, str] = os.environ,
                       **given) -> TrainConfig:
    """The TrainConfig a worker started as `hvdbench train MODEL [--config layout.yaml] ARGS
    --out ... --run-id ...` resolves: `layout` is a sweep config's per-layout settings (the
    worker's layout.yaml), `env` the worker's environment (default this process's), `given` the
    options the sweep adds (out, run_id, sweep_name, repeat). ConfigError (or UsageError) as `train`
    itself would fail."""
    overrides, config_file = parse_train_args(model, args)
    return resolve({**overrides, **given}, config_file, layout=layout, env=env)
