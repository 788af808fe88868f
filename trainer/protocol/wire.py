"""The worker protocol's codec: typed events to JSON lines and back, and the writer on the worker's stdout.

The event types themselves, and the list of their fields, are in :mod:`trainer.protocol.events`; the commands
in :mod:`trainer.protocol.commands`. Read and write events through :mod:`trainer.protocol.events`, which re-exports
this module's names: importing it is what registers every event type in :data:`EVENT_TYPES`.

A reader keeps what it does not know: an event name it does not know becomes an
:class:`UnknownEvent` (its fields in ``extra``), a field it does not know goes to the event's
``extra``; neither raises, and both are written back unchanged by :meth:`Event.to_json`. Events
are read by their fields (``event.step``); there is no dict-style access, so a misspelt field is an
``AttributeError``, not a silent None.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar, TypeVar

from graph_editor.model.registry import Registry


class ProtocolError(ValueError):
    """A line that is not an event (not JSON, not an object, no ``"event"`` name)."""


def optional() -> Any:
    """A field that is left out of the JSON while it is None (so the wire only carries what applies)."""
    return field(default=None, metadata={"optional": True})


def json_safe(value: Any) -> Any:
    """``value`` for JSON, which has no NaN or infinity: such floats become None, in lists and dicts too
    (on the wire the failed event says why; the run store's JSON columns use it as well)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def read_json(line: str | bytes, error: type[ValueError]) -> Any:
    """One JSON value; anything unreadable (not JSON, not UTF-8, nested too deep) raises ``error``."""
    try:
        return json.loads(line)
    except RecursionError:
        raise error("nested too deep to read") from None
    except (ValueError, TypeError) as exc:   # JSONDecodeError, UnicodeDecodeError, int digits limit
        raise error(f"not JSON: {short(str(exc))}") from None


def short(value: Any, most: int = 80) -> str:
    """A repr for a message, cut to ``most`` characters (never fails, whatever the value)."""
    try:
        text = value if isinstance(value, str) else repr(value)
    except Exception:  # noqa: BLE001 - e.g. an int beyond the str-conversion digit limit
        text = f"<{type(value).__name__}>"
    return text if len(text) <= most else text[: most - 3] + "..."


class Record:
    """A nested record inside an event (its own JSON object): per-class figures, the best epoch."""

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_dict(cls, obj: Any) -> Record:
        """Raises :class:`ProtocolError` when ``obj`` is not this record."""
        raise NotImplementedError


# ---------------------------------------------------------------- events
@dataclass(kw_only=True)
class Event:
    """One event. ``EVENT`` is its name on the wire; ``extra`` keeps fields this version does not know."""

    EVENT: ClassVar[str] = ""
    NESTED: ClassVar[dict[str, type[Record]]] = {}   # fields holding a nested record
    run_id: int | None = None
    time: float | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def event(self) -> str:
        return self.EVENT

    def to_dict(self) -> dict[str, Any]:
        """The JSON object on the wire: ``event``, ``run_id``, ``time``, the fields, then unknown ones."""
        out: dict[str, Any] = {"event": self.event, "run_id": self.run_id, "time": self.time}
        for f in dataclasses.fields(self):
            if f.name in _BASE_FIELDS:
                continue
            value = getattr(self, f.name)
            if value is None and f.metadata.get("optional"):
                continue
            out[f.name] = value.to_dict() if isinstance(value, Record) else value
        out.update({k: v for k, v in self.extra.items() if k not in out})
        return json_safe(out)

    def to_json(self) -> str:
        """One JSON line (without the newline)."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Event:
        """The typed event for a JSON object; see :func:`decode`."""
        return decode(obj)

    @classmethod
    def from_json(cls, line: str | bytes) -> Event:
        """The typed event for one JSON line; :class:`ProtocolError` when the line is not an event."""
        return decode(read_json(line, ProtocolError))


_BASE_FIELDS = ("run_id", "time", "extra")

EVENT_TYPES: Registry[str, type[Event]] = Registry("an event type")
E = TypeVar("E", bound=type[Event])


def event_type(name: str) -> Callable[[E], E]:
    """Register an event class under its wire name; a name registered twice is refused."""
    def register(cls: E) -> E:
        EVENT_TYPES.add(name, cls)
        cls.EVENT = name
        return cls
    return register


@dataclass(kw_only=True)
class UnknownEvent(Event):
    """An event this version does not know (from a newer worker): its name, its fields in ``extra``."""

    name: str = ""

    @property
    def event(self) -> str:
        return self.name

    def to_dict(self) -> dict[str, Any]:
        return json_safe({"event": self.name, "run_id": self.run_id, "time": self.time, **self.extra})


_FIELD_NAMES: dict[type[Event], frozenset[str]] = {}


def _field_names(cls: type[Event]) -> frozenset[str]:
    """The fields a class declares beyond the header (cached: the GUI thread parses every event)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls) if f.name not in _BASE_FIELDS)
    return names


def decode(obj: Any) -> Event:
    """The typed event for a parsed JSON object. An unknown event name gives an :class:`UnknownEvent`;
    unknown fields, and a nested record that does not parse, are kept in ``extra``. Raises
    :class:`ProtocolError` only when ``obj`` is no event at all (not an object, no ``"event"`` name)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
        raise ProtocolError(f"not an event: {short(obj)}")
    name, run_id, at = obj["event"], obj.get("run_id"), obj.get("time")
    rest = {k: v for k, v in obj.items() if k not in ("event", "run_id", "time")}
    cls = EVENT_TYPES.get(name)
    if cls is None:
        return UnknownEvent(name=name, run_id=run_id, time=at, extra=rest)
    known, extra = _split(cls, rest)
    return cls(run_id=run_id, time=at, extra=extra, **known)


def _split(cls: type[Event], fields: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Fields the class declares (nested records parsed) and the rest."""
    names = _field_names(cls)
    known, extra = {}, {}
    for k, v in fields.items():
        if k not in names:
            extra[k] = v
        elif k in cls.NESTED and v is not None and not isinstance(v, Record):
            try:
                known[k] = cls.NESTED[k].from_dict(v)
            except ProtocolError:
                extra[k] = v          # kept as sent, never a crash of the reader
        else:
            known[k] = v
    return known, extra


# ---------------------------------------------------------------- writing
class Emitter:
    """Writes events to a stream; a closed stream (the GUI went away) silences it, training goes on.

    It takes built events only (``emit(Metrics(step=..., loss=...))``): a field the event does not
    declare is a ``TypeError`` where the event is made, never a silent ``extra`` on the wire.
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.run_id: int | None = None
        self.closed = False

    def emit(self, event: Event, /) -> None:
        if not isinstance(event, Event):
            raise TypeError(f"Emitter.emit takes an event (trainer.protocol.events), not {short(event)}")
        if self.closed:
            return
        event.run_id = self.run_id if event.run_id is None else event.run_id
        event.time = round(time.time(), 3) if event.time is None else event.time
        line = event.to_json()
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            # EPIPE or a closed file: stop writing. Point stdout at devnull so that the
            # interpreter's final flush does not fail either.
            self.closed = True
            _silence(self.stream)


def _silence(stream: IO[str]) -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
    except (OSError, ValueError, AttributeError):
        pass
