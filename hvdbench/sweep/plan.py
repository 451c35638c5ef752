"""The sweep plan: which runs, in which order, and which are already done.

    entries = plan_entries(layouts, config)     # one entry per layout (or per config name)
    runs = interleave(entries, repeats=3)       # r1 of every layout, then r2 of every layout, ...
    todo = pending(runs, read_runs(store), retry_failed=False)

A run is identified by `run_id` = `<entry name>-r<repeat>` (`1x2-r1`, or `2x4x32x1-r2` with a
config; `1x2-ddp-r1` under `--engines`), which is also its directory under the sweep's --out. Repeats are interleaved across
layouts, not run back to back, so a drift of the machine (thermal, other jobs, a degrading link)
spreads over every layout instead of biasing one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hvdbench.errors import TopologyError
from hvdbench.results.records.schema import RunResult
from hvdbench.sweep.layout_config import LayoutConfig, SweepConfig
from hvdbench.topology import Layout

if TYPE_CHECKING:
    from hvdbench.train.config import TrainConfig

DONE = ("success", "aborted")  # aborted: ran to the end without reaching the target


@dataclass(frozen=True)
class Entry:
    """One layout to run: its hosts, its per-layout settings when a config is used, and the train
    configuration its runs resolve (set by hvdbench.sweep.build.check_runs before any launch)."""

    layout: Layout
    config: LayoutConfig | None = None
    train: TrainConfig | None = None
    engine: str = ""  # `sweep --engines`: the run's --engine (its name then ends in it: 1x2-ddp)

    @property
    def name(self) -> str:
        base = self.config.name if self.config else self.layout.name
        return f"{base}-{self.engine}" if self.engine else base


@dataclass(frozen=True)
class PlannedRun:
    entry: Entry
    repeat: int  # 1-based

    @property
    def run_id(self) -> str:
        return f"{self.entry.name}-r{self.repeat}"

    @property
    def layout(self) -> Layout:
        return self.entry.layout


def plan_entries(layouts: list[Layout], config: SweepConfig | None = None,
                 strict: bool = True) -> list[Entry]:
    """Without a config: one entry per layout. With one: an entry per config name of each layout
    (a layout may have several, e.g. two batch sizes). `strict`: a layout the config does not
    describe is an error (else it is left out)."""
    if config is None:
        return [Entry(lay) for lay in layouts]
    entries = []
    for lay in layouts:
        described = [cfg for cfg in config.layouts if cfg.layout == lay.name]
        if not described and strict:
            raise TopologyError(f"{config.path}: no settings for layout {lay.name}")
        entries += [Entry(lay, cfg) for cfg in described]
    if not entries:
        raise TopologyError(f"{config.path}: describes none of the selected layouts "
                            f"({', '.join(lay.name for lay in layouts)})")
    return entries


def with_engines(entries: list[Entry], engines: tuple[str, ...] = ()) -> list[Entry]:
    """Each entry once per engine, the engines of a layout next to each other (so a drift of the
    machine touches every engine of a layout alike); unchanged without engines."""
    if not engines:
        return entries
    return [dataclasses.replace(e, engine=engine) for e in entries for engine in engines]


def interleave(entries: list[Entry], repeats: int) -> list[PlannedRun]:
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    return [PlannedRun(e, r) for r in range(1, repeats + 1) for e in entries]


def latest_status(rows: list[RunResult]) -> dict[str, str]:
    """run_id -> status of its last row (a retried run has several rows; the last one counts)."""
    return {row.run_id: row.status for row in rows}


def pending(runs: list[PlannedRun], rows: list[RunResult], retry_failed: bool = False) -> list[PlannedRun]:
    """The runs still to do: no row yet, or (with `retry_failed`) a failed or timed-out last row."""
    status = latest_status(rows)
    todo = []
    for run in runs:
        s = status.get(run.run_id)
        if s is None or (retry_failed and s not in DONE):
            todo.append(run)
    return todo
