"""A registry that refuses duplicates: the one rule every growing list in the graph language follows.

Layer types, builders, FLOP rules, import rules, file migrations, export formats, dataset readers,
worker events and commands, and metric names each live in a :class:`Registry`. Registering a key twice is a programming error that would otherwise make the
last import win silently, so it raises :class:`DuplicateError` naming both registrations.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class DuplicateError(ValueError):
    """A key was registered twice in the same registry."""


class Registry(Generic[K, V]):
    """A dict that accepts each key once. ``what`` names the entries in errors ("a builder")."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._items: dict[K, V] = {}

    def add(self, key: K, value: V) -> V:
        return self.add_all([key], value)

    def add_all(self, keys: Iterable[K], value: V) -> V:
        """Register ``value`` under every key, or under none when one of them is taken."""
        keys = list(keys)
        for key in keys:
            if key in self._items:
                raise DuplicateError(f"{self.what} for {_name(key)} is already registered "
                                     f"({_origin(self._items[key])}); refusing the second ({_origin(value)})")
        for key in keys:
            self._items[key] = value
        return value

    def get(self, key: K) -> V | None:
        return self._items.get(key)

    def __getitem__(self, key: K) -> V:
        return self._items[key]

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[K]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[tuple[K, V]]:
        return list(self._items.items())

    def values(self) -> list[V]:
        return list(self._items.values())


def _name(key: object) -> str:
    if isinstance(key, str):
        return repr(key)
    qualname = getattr(key, "__qualname__", None)
    module = getattr(key, "__module__", None)
    return f"{module}.{qualname}" if qualname and module else repr(key)


def _origin(value: object) -> str:
    """Where a registered value was defined, e.g. ``graph_editor.building.ops.core._linear``."""
    fn = getattr(value, "__wrapped__", value)
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if module and qualname:
        return f"{module}.{qualname}"
    return type(value).__name__
