"""A tiny synchronous signal, so that views can follow the model without Qt."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Signal:
    """Callbacks called in connection order by :meth:`emit`."""

    __slots__ = ("_slots", "_blocked")

    def __init__(self) -> None:
        self._slots: list[Callable[..., Any]] = []
        self._blocked = 0

    def connect(self, slot: Callable[..., Any]) -> None:
        self._slots.append(slot)

    def disconnect(self, slot: Callable[..., Any]) -> None:
        self._slots.remove(slot)

    def emit(self, *args: Any) -> None:
        if self._blocked:
            return
        for slot in list(self._slots):
            slot(*args)


class GraphEvents:
    """Everything a view of a :class:`~graph_editor.model.graph.Graph` needs to follow it.

    ``changed`` fires after every mutation, so a view that only needs "something changed"
    (the summary, the problems list) connects to that and debounces.
    """

    def __init__(self) -> None:
        self.node_added = Signal()  # (node_id)
        self.node_removed = Signal()  # (node_id)
        self.edge_added = Signal()  # (edge)
        self.edge_removed = Signal()  # (edge)
        self.params_changed = Signal()  # (node_id, param_name)
        self.node_moved = Signal()  # (node_id)
        self.groups_changed = Signal()  # ()
        self.spec_changed = Signal()  # () input spec or class count
        self.metadata_changed = Signal()  # (key) a metadata entry: the fine-tuning plan, the sweep variables
        self.changed = Signal()  # ()
