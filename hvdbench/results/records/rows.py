"""The report's tables as typed rows: one frozen dataclass per table, declared beside the section
that fills it (stats/aggregate.py, analyses/*.py, predict/*.py), its fields the table's columns in
order. The report's CSVs are written from the class (render/tables.py `to_csv`), so a column is
named once, where its value is computed.

    @dataclass(frozen=True)
    class PairRow(ReportRow):
        layout: str = ""
        bandwidth_gb_s: float | None = None
        hosts: tuple = beside(())        # the figure's, not a column
    PairRow.columns()                    # ('layout', 'bandwidth_gb_s')
    PairRow(layout="1x2", bandwidth_gb_s=1.5).cells()   # ['1x2', '1.5']

A section builds each row once, from values it has computed; a figure another section needs is a
field of that section's row, which the other reads (never written into a row it does not own).
The runs' own CSVs (runs.csv, the bench CSVs, RUN/ranks.csv) are `CsvRecord`s (schema.py): those
are read back and validated against a schema version; a report table is written, never read back.

The group a row belongs to (the scaling table's, the time-to-train table's) is a frozen dataclass of
its own (`ScalingGroup`, `TttGroup`): a row whose table starts with the group's columns inherits it,
and `row.scaling_key` / `row.ttt_key` are the group's values, in the order its columns are.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any


def beside(default: Any = None) -> Any:
    """A row's field that is not one of its table's columns: what its Markdown or figure needs
    beside them (where the layout ran, the rows a waterfall came from)."""
    return dataclasses.field(default=default, metadata={"column": False}, compare=False, repr=False)


# A report CSV's float carries this many significant digits: a throughput, a time or a share measured
# on a cluster moves by a percent or more between repeats, so a fifth digit is noise, and 17 digits of
# repr() read as a precision nobody measured. The typed rows keep the full value for whoever computes
# on (the plots, summary.md, report.html, predict).
SIGNIFICANT = 4


def rounded(value: float) -> str:
    """`value` at SIGNIFICANT significant digits, in plain notation from 1e-4 to 1e15 (trailing zeros
    dropped: 0.95, 1, 0, 123457) and in exponent notation outside it; nan and inf as Python writes them."""
    if value == 0:
        return "0"
    if not math.isfinite(value):
        return repr(value)
    magnitude = math.floor(math.log10(abs(value)))
    if magnitude < -4 or magnitude >= 15:
        return f"{value:.{SIGNIFICANT - 1}e}"
    decimals = SIGNIFICANT - 1 - magnitude
    if decimals <= 0:  # every integer digit kept: 1234567.8 is 1234568, not 1.235e+06
        return str(round(value))
    return f"{value:.{decimals}f}".rstrip("0").rstrip(".")


def cell(value) -> str:
    """A report CSV's cell: empty for None, yes/no for booleans, floats at SIGNIFICANT digits."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return rounded(value) if isinstance(value, float) else str(value)


class ReportRow:
    """Base of a report table's row, a frozen dataclass: its columns are its fields in order, save
    those declared with `beside`. The field list is computed once per class (a report over 30,000
    runs writes tens of thousands of rows)."""

    __slots__ = ()

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        cached = cls.__dict__.get("_columns")  # this class's own, not a base's
        if cached is None:
            cached = tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("column", True))
            setattr(cls, "_columns", cached)
        return cached

    def cells(self, columns: tuple[str, ...] | None = None) -> list[str]:
        """The row's CSV cells under `columns` (default: its own). A wider table's column the row's
        class does not have is empty (prediction.csv's throughput rows under time to train's columns)."""
        return [cell(getattr(self, c, None)) for c in columns or self.columns()]


# --- the groups rows belong to (one Markdown section and one plot panel each) -----------------------

@dataclass(frozen=True)
class TttGroup:
    """The time-to-train table's group (and its waterfall's, and convergence's): what ran, on what."""

    system: str = ""  # the runs' devices, or a published log's system group
    model: str = ""
    flavor: str = ""
    framework: str = ""
    engine: str = ""
    precision: str = ""
    levers: str = ""

    @property
    def ttt_key(self) -> tuple:
        return (self.system, self.model, self.flavor, self.framework, self.engine, self.precision, self.levers)

    def ttt_group(self) -> "TttGroup":
        return TttGroup(*self.ttt_key)


@dataclass(frozen=True)
class ScalingGroup(TttGroup):
    """The scaling table's group (and every throughput section's): the time-to-train group, the mode
    and the batch."""

    mode: str = ""
    batch_per_gpu: int = 0
    accum_steps: int = 1

    @property
    def scaling_key(self) -> tuple:
        return (*self.ttt_key, self.mode, self.batch_per_gpu, self.accum_steps)

    def scaling_group(self) -> "ScalingGroup":
        return ScalingGroup(*self.scaling_key)


SCALING_GROUP = tuple(f.name for f in dataclasses.fields(ScalingGroup))
TTT_GROUP = tuple(f.name for f in dataclasses.fields(TttGroup))
