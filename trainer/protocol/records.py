"""The records nested in events: a run's per-class figures and its best checkpoint metric.

Read and written through :mod:`trainer.protocol.events`, which names them with the events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .wire import ProtocolError, Record, short


@dataclass
class PerClass(Record):
    """Precision, recall and F1 of every class (0 where undefined) and its support, index = class."""

    precision: list[float]
    recall: list[float]
    f1: list[float]
    support: list[int]

    def to_dict(self) -> dict[str, Any]:
        return {"precision": list(self.precision), "recall": list(self.recall), "f1": list(self.f1),
                "support": list(self.support)}

    @classmethod
    def from_dict(cls, obj: Any) -> PerClass:
        """Raises :class:`ProtocolError` when ``obj`` is not the four equal-length lists."""
        if not isinstance(obj, dict) or not all(isinstance(obj.get(k), list) for k in _PER_CLASS_KEYS):
            raise ProtocolError(f"per-class figures need lists {', '.join(_PER_CLASS_KEYS)}, got {short(obj)}")
        if len({len(obj[k]) for k in _PER_CLASS_KEYS}) != 1:
            raise ProtocolError("per-class lists of different lengths")
        return cls(*(list(obj[k]) for k in _PER_CLASS_KEYS))

    def __len__(self) -> int:
        return len(self.support)


_PER_CLASS_KEYS = ("precision", "recall", "f1", "support")


@dataclass
class Best(Record):
    """The best value of the checkpoint metric and the epoch that reached it."""

    metric: str
    value: float | None
    epoch: int

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "value": self.value, "epoch": self.epoch}

    @classmethod
    def from_dict(cls, obj: Any) -> Best:
        if not isinstance(obj, dict) or not {"metric", "value", "epoch"} <= obj.keys():
            raise ProtocolError(f"best needs metric, value and epoch, got {short(obj)}")
        return cls(obj["metric"], obj["value"], obj["epoch"])
