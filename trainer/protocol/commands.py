"""The worker protocol's commands: JSON lines on the worker's stdin, as typed dataclasses.

Commands (stdin, one JSON object per line): ``{"command": "pause"}`` (:class:`Pause`),
``{"command": "resume"}`` (:class:`Resume`), ``{"command": "stop"}`` (:class:`Stop`: checkpoint,
then end with ``finished`` status "stopped"), ``{"command": "set_lr", "lr": 0.001}`` (:class:`SetLr`:
from the next step on the learning rate is this constant; the schedule no longer applies),
``{"command": "inspect"}`` (:class:`InspectNow`: the next step runs with hooks, then an ``inspect``
event), ``{"command": "record_memory"}`` (:class:`RecordMemory`: the next two steps' allocations,
then a ``memory_trace`` event), ``{"command": "write_checkpoints"}`` (:class:`WriteCheckpoints`: the
checkpoints held since the last write, written now; their ``checkpoint`` events answer).
:func:`parse_command` turns any line into a command or a :class:`CommandError` naming what is wrong
(never another exception: a 400-digit number or a 100000-deep nesting is a refused line like any
other); the worker reports refused lines on stderr and keeps reading. SIGTERM and SIGINT act as stop.
A closed stdin or stdout never stops training.

Adding a command is one dataclass here (``@command_type("name")``, fields with their wire names);
:class:`trainer.protocol.controls.Controls` obeys it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from graph_editor.model.registry import Registry

from .wire import read_json, short

PAUSE, RESUME, STOP, SET_LR = "pause", "resume", "stop", "set_lr"
INSPECT, RECORD_MEMORY, WRITE_CHECKPOINTS = "inspect", "record_memory", "write_checkpoints"

MAX_COMMAND_CHARS = 4096   # a command is a few dozen characters; a longer line is refused unread


class CommandError(ValueError):
    """A command line that cannot be obeyed; the message says why (the worker prints and ignores it)."""


@dataclass(kw_only=True)
class Command:
    """One command to the worker. ``COMMAND`` is its name on the wire."""

    COMMAND: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        return {"command": self.COMMAND, **dataclasses.asdict(self)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, obj: Any) -> Command:
        return _command_from(obj)

    @classmethod
    def from_json(cls, line: str | bytes) -> Command:
        return parse_command(line)


COMMAND_TYPES: Registry[str, type[Command]] = Registry("a command type")
C = TypeVar("C", bound=type[Command])


def command_type(name: str) -> Callable[[C], C]:
    """Register a command class under its wire name; a name registered twice is refused."""
    def register(cls: C) -> C:
        COMMAND_TYPES.add(name, cls)
        cls.COMMAND = name
        return cls
    return register


@command_type(PAUSE)
@dataclass(kw_only=True)
class Pause(Command):
    """Pause after the current step (a ``state`` event says "paused")."""


@command_type(RESUME)
@dataclass(kw_only=True)
class Resume(Command):
    """Continue a paused run."""


@command_type(STOP)
@dataclass(kw_only=True)
class Stop(Command):
    """Checkpoint, then end with ``finished`` status "stopped"."""


@command_type(SET_LR)
@dataclass(kw_only=True)
class SetLr(Command):
    """From the next step on, train at this constant learning rate."""

    lr: float

    def __post_init__(self) -> None:
        self.lr = _positive_finite(self.lr)


@command_type(INSPECT)
@dataclass(kw_only=True)
class InspectNow(Command):
    """Run the next training step with hooks and report it in an ``inspect`` event."""


@command_type(RECORD_MEMORY)
@dataclass(kw_only=True)
class RecordMemory(Command):
    """Record the allocations of the next two training steps (``trainer.memory.timeline``); a
    ``memory_trace`` event reports them."""


@command_type(WRITE_CHECKPOINTS)
@dataclass(kw_only=True)
class WriteCheckpoints(Command):
    """Write the checkpoints the run holds (the epochs since its last write, ``checkpoints.every_s``) now,
    after the current step: the studio asks when a confusion cell's samples need an epoch's weights."""


def _positive_finite(lr: Any) -> float:
    if isinstance(lr, bool) or not isinstance(lr, int | float):
        raise CommandError(f"set_lr needs a positive number 'lr', got {short(lr)}")
    try:
        value = float(lr)
    except OverflowError:
        raise CommandError(f"set_lr: 'lr' {short(lr, 24)} is too large") from None
    if not (math.isfinite(value) and value > 0):
        raise CommandError(f"set_lr needs a positive finite 'lr', got {short(lr)}")
    return value


def _command_from(obj: Any) -> Command:
    name = obj.get("command") if isinstance(obj, dict) else None
    cls = COMMAND_TYPES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise CommandError(f"unknown command {short(obj)} (choose {', '.join(COMMAND_TYPES)})")
    names = {f.name for f in dataclasses.fields(cls)}
    missing = [n for n in names if n not in obj]
    if missing:
        raise CommandError(f"{name} needs {', '.join(repr(m) for m in sorted(missing))}")
    return cls(**{k: v for k, v in obj.items() if k in names})   # unknown fields are ignored


def parse_command(line: str | bytes) -> Command:
    """One command line as a :class:`Command`. Anything wrong with the line, however odd (not JSON,
    not UTF-8, too long, nested too deep, a number too large to convert), raises :class:`CommandError`
    naming it, and nothing else."""
    try:
        if len(line) > MAX_COMMAND_CHARS:
            raise CommandError(f"a command line longer than {MAX_COMMAND_CHARS} characters")
        return _command_from(read_json(line, CommandError))
    except CommandError:
        raise
    except Exception as exc:  # noqa: BLE001 - the contract: one exception type for any bad line
        raise CommandError(f"cannot read the command ({type(exc).__name__}: {short(str(exc))})") from None


def encode_command(command: str | Command, /, **fields: Any) -> str:
    """One command as a JSON line (without the newline): a :class:`Command`, or a name and fields."""
    if isinstance(command, Command):
        return command.to_json()
    return _command_from({"command": command, **fields}).to_json()


COMMANDS = tuple(COMMAND_TYPES)
