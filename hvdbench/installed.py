"""The entry points of installed packages, read once per process for every registry that takes them
(models: `hvdbench.models`, engines: `hvdbench.engines`, launchers: `hvdbench.launchers`), and the
registry of named descriptors the engines and the launchers share.

    from hvdbench.installed import Registry, entry_points_of
    {ep.name: ep.value for ep in entry_points_of("hvdbench.engines")}
    ENGINES = Registry("engine", load)      # load(): {name: descriptor}, built-in first, run once
    ENGINES.all(), ENGINES.names(), ENGINES.find("ddp"), ENGINES.get("ddp")

Reading a group scans every installed distribution's metadata (~20-30 ms here, per group and
process); one scan serves the three registries of a worker.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, Generic, TypeVar

from hvdbench.errors import ConfigError

T = TypeVar("T")


@lru_cache(maxsize=1)
def _every_entry_point():
    from importlib.metadata import entry_points

    return entry_points()


def entry_points_of(group: str):
    """The entry points in `group` of the packages installed in this Python."""
    return _every_entry_point().select(group=group)


class Registry(Generic[T]):
    """Descriptors by name (the engines, the launchers): what `load` returns, the built-in ones
    first, then those installed packages add under an entry-point group, loaded once per process at
    the first question. Adding a registry is its descriptor type, its `load` and one line."""

    def __init__(self, what: str, load: Callable[[], dict[str, T]]):
        self.what, self._load, self._found = what, load, None

    def _items(self) -> dict[str, T]:
        if self._found is None:
            self._found = self._load()
        return self._found

    def all(self) -> list[T]:
        return list(self._items().values())

    def names(self) -> list[str]:
        return list(self._items())

    def find(self, name: str) -> T | None:
        """The descriptor of that name, or None (a report reads runs of ones this install may not have)."""
        return self._items().get(name)

    def get(self, name: str) -> T:
        """The descriptor of that name; a ConfigError listing the names there are if none."""
        found = self.find(name)
        if found is None:
            raise ConfigError(f"{self.what} {name!r} is not one of {', '.join(self.names())}")
        return found
