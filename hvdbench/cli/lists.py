"""Comma-separated option values, checked whole: every entry given, each once, at most MAX_ENTRIES.

    @click.option("--engines", callback=comma_list)              # ('horovod', 'ddp')
    entries("1x1,,2x1")   ->  click.BadParameter: '1x1,,2x1': an empty entry (two commas in a row, or one at an end)

An empty or repeated entry used to be dropped unseen (`study run --only ',,,'` ran every model), and a
list had no bound (10,000 predicted layouts ran for minutes); click names the option in its error.
"""

from __future__ import annotations

import math

import click

from hvdbench.errors import ConfigError
from hvdbench.launchers import SHELL_NAME
from hvdbench.topology import Layout, parse_layouts

MAX_ENTRIES = 256  # layouts, engines, models or GPU counts in one option: more is a runaway script


class FiniteRange(click.FloatRange):
    """click's FloatRange that refuses nan and inf too: both pass any bound (nan compares false with
    everything, inf is past every minimum) and then fail far from the option, on every rank
    (`bench links --budget-s inf`)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


def shown(value: str, limit: int = 60) -> str:
    """The value as an error quotes it: repr, cut to about `limit` characters."""
    return repr(value) if len(value) <= limit else repr(value[:limit - 3])[:-1] + "...'"


def entries(value: str, most: int = MAX_ENTRIES) -> list[str]:
    """The entries of `value`, stripped; click.BadParameter for an empty one, a repeated one or more
    than `most`."""
    items = [v.strip() for v in value.split(",")]
    if not all(items):
        raise click.BadParameter(f"{shown(value)}: an empty entry (two commas in a row, or one at an end)")
    if len(items) > most:
        raise click.BadParameter(f"{shown(value)}: {len(items):,} entries; at most {most}")
    twice = next((v for i, v in enumerate(items) if v in items[:i]), None)
    if twice is not None:
        raise click.BadParameter(f"{shown(value)}: {twice} is given twice")
    return items


def comma_list(ctx, param, value) -> tuple[str, ...]:
    """click callback: `entries` of the value as a tuple; () when the option is not given."""
    return () if value is None else tuple(entries(value))


def layout_list(ctx, param, value):
    """click callback of a sweep's or study's --layouts: all, packed or spread as given, else a list
    of NODESxGPUS checked by `entries` (returned as the same comma-separated text)."""
    if value is None or value in ("all", "packed", "spread"):
        return value
    return ",".join(entries(value))


def int_list(ctx, param, value):
    """click callback of --gpus: positive whole numbers, comma-separated (`entries`)."""
    if value is None:
        return None
    try:
        numbers = [int(v) for v in entries(value)]
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected whole numbers like 1,2,4") from None
    if not numbers or min(numbers) < 1:
        raise click.BadParameter(f"{value!r}: expected positive whole numbers like 1,2,4")
    return numbers


def env_pairs(ctx, param, values):
    """click callback of a repeated --env KEY=VALUE: a dict, each KEY a shell variable name."""
    env = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not SHELL_NAME.fullmatch(key):
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE with KEY a variable name")
        env[key] = value
    return env


def one_line(ctx, param, value):
    """click callback of a free-text option (--link): one printable line of at most 200 characters."""
    if value is not None and (not value.strip() or len(value) > 200 or not value.isprintable()):
        raise click.BadParameter(f"{value!r}: one printable line of at most 200 characters")
    return value


def layout_pairs(ctx, param, value):
    """click callback of predict's --layouts and --fit-on and report's --predict: NxG,... -> [Layout, ...],
    each held to the hostfiles' bounds (hvdbench.topology.Layout.parse); click names the option given."""
    if value is None:
        return None
    try:
        layouts = parse_layouts(",".join(entries(value)), option="")
    except ConfigError as e:
        raise click.BadParameter(str(e)) from None
    twice = next((str(layout) for i, layout in enumerate(layouts) if layout in layouts[:i]), None)
    if twice:  # 1x8 and 01x8
        raise click.BadParameter(f"{shown(value)}: {twice} is given twice")
    return layouts


def one_layout(ctx, param, value):
    """click callback of report's --baseline: NxG -> Layout (hvdbench.topology.Layout.parse, its bounds);
    click names the option given."""
    if value is None:
        return None
    try:
        return Layout.parse(value, option="")
    except ConfigError as e:
        raise click.BadParameter(str(e)) from None


# Defined once: `hvdbench predict --layouts` and `hvdbench report --predict` take the same list.
def layouts_option(*names, **kwargs):
    return click.option(*names, metavar="NxG,...", callback=layout_pairs, **kwargs)
