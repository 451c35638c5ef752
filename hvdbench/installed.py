"""The entry points of installed packages, read once per process for every registry that takes them
(models: `hvdbench.models`, engines: `hvdbench.engines`, launchers: `hvdbench.launchers`).

    from hvdbench.installed import entry_points_of
    {ep.name: ep.value for ep in entry_points_of("hvdbench.engines")}

Reading a group scans every installed distribution's metadata (~20-30 ms here, per group and
process); one scan serves the three registries of a worker.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def _every_entry_point():
    from importlib.metadata import entry_points

    return entry_points()


def entry_points_of(group: str):
    """The entry points in `group` of the packages installed in this Python."""
    return _every_entry_point().select(group=group)
