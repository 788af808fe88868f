"""The worker's protocol: JSON-lines events on stdout, JSON-lines commands on stdin, as typed dataclasses.

This module is the single source of truth for event and command names and fields; the one process
client (:mod:`trainer.client`), the CLI and the studio read the dataclasses' fields, never string
keys. The wire is stable: fields may be added, never renamed or removed.

Events (stdout, one JSON object per line, each with ``"event"``, ``"run_id"`` and ``"time"`` (Unix
seconds)). Every event is written only after what it reports is committed to the run store, so a
reader that saw an event can find it in the store.

``run_started`` (:class:`RunStarted`)
    ``name``, ``device`` ("cpu", "cuda:0"), ``params`` (parameter count), ``epochs``,
    ``steps_per_epoch``, ``batch_size``, ``train_size``, ``val_size``, ``test_size``, ``classes``
    (list of class names), ``start_step`` (0, or the step a resumed run continues from),
    ``precision``, ``compile``, ``run_dir``.
``compile_done`` (:class:`CompileDone`)
    ``seconds`` (time of the first, compiling, training step), ``mode``, ``graph_breaks`` and
    ``recompiles`` (how many dynamo logged up to then). Only when compile is on.
``graph_break`` (:class:`GraphBreakEvent`)
    While a compiled run compiles: ``reason``, ``node`` (the graph node the break is in, or None),
    ``where`` (file:line and code), ``count`` (breaks so far; only the first 20 are sent).
``recompile`` (:class:`Recompile`)
    ``function``, ``reason`` (the guard that failed), ``count`` (recompiles so far; the first 20 sent).
``metrics`` (:class:`Metrics`)
    ``step`` (optimizer steps done, 1-based), ``epoch`` (1-based), ``loss`` and ``accuracy`` (mean
    over the training steps since the previous metrics event), ``lr``, ``samples_per_s``.
    One per ``train.metrics_interval_s`` of training (default 0.25 s), however short the epochs:
    the steps may span an epoch boundary (``epoch`` is that of the last one); the run's last
    steps are reported before its last ``epoch_end``, or before ``finished`` when it stops.
``epoch_end`` (:class:`EpochEnd`)
    ``epoch``, ``step``, ``train_loss``, ``train_accuracy``, ``val_loss``, ``val_accuracy`` (None
    without a val split), ``lr``, ``seconds``, ``best`` (true when this epoch is the new best), and
    with a val split ``per_class`` (:class:`PerClass`: ``{"precision": [...], "recall": [...],
    "f1": [...], "support": [...]}``, one entry per class), ``confusion`` (rows = true class,
    columns = predicted) and ``classes`` (the class names).
``memory`` (:class:`Memory`)
    ``step``, ``device``; on CUDA ``allocated``, ``reserved``, ``peak``, ``active``,
    ``inactive_split``, ``free``, ``total`` (bytes), ``alloc_retries``, ``num_ooms``; on CPU
    ``rss``, ``peak_rss``.
``checkpoint`` (:class:`Checkpoint`)
    ``kind`` ("best" or "last"), ``path`` (the .safetensors file), ``step``, ``epoch``,
    ``metric`` (name), ``value``.
``state`` (:class:`State`)
    ``state`` ("paused", "running", "stopping"), ``reason`` (the command or signal that caused it).
``finished`` (:class:`Finished`)
    ``status`` ("completed", "stopped", "early_stopped"), ``epoch``, ``step``, ``test_loss``,
    ``test_accuracy``, ``test_per_class``, ``test_confusion`` (test metrics use the best
    checkpoint's weights when one was kept), ``best`` (:class:`Best`: ``{"metric", "value",
    "epoch"}`` or None), ``seconds`` (training wall time).
``failed`` (:class:`Failed`)
    ``kind`` ("spec", "data", "graph", "nan", "oom", "error"), ``message``, ``traceback`` (empty for
    spec/data/graph problems, which are the user's to fix), ``step`` (None before training), and for
    "oom" during training ``memory`` (the CUDA figures at the failure). Spec/data/graph failures, and
    "oom" while the model's weights are placed on the device, come before ``run_started``, have
    ``run_id`` None and a ``problems`` list (one ``"field.path: message"`` each). A run whose
    predicted peak exceeds ``memory.budget_mb`` (or, on CUDA, the GPU's memory) is refused as "oom"
    before ``run_started`` with ``diagnosis`` (:meth:`trainer.memory_doctor.Diagnosis.to_dict`: the
    prediction, the nodes holding most at its peak, and fixes each with its predicted peak and spec
    changes; ``problems`` says the same in lines).
``memory_trace`` (:class:`MemoryTimeline`)
    After the ``record_memory`` command: ``step`` (the first recorded), ``steps`` (2), ``path`` (the
    full record, JSON, in the run directory), ``peak_bytes`` (above what lived before), ``attributed``
    (share of allocated bytes with a node or phase), ``peak_phase``, ``peak_node``, ``at_peak`` (live
    bytes by node at the peak), ``timeline`` (``t_ms``, ``live`` and ``nodes``: the top nodes' live
    bytes, at most 2000 points); ``error`` instead where the recording could not start or end.
``inspect`` (:class:`Inspect`)
    ``step`` (the inspected step), ``path`` (the report, a JSON file in the run directory: per graph
    node ||dL/dy||, ||dL/dW||, weight norm, update ratio, activation mean/std, zero fraction, CPU
    backward time; :func:`trainer.inspect.read_report`), ``nodes`` (how many), ``loss``, ``flags``
    (``[node, "vanishing" | "exploding", figure, value]`` for each gradient norm out of range). On the
    ``inspect`` command, and every ``train.inspect_every_s`` seconds when the spec sets it. The figures
    are also stored as metrics ``inspect/<figure>/<node>``.

A reader keeps what it does not know: an event name it does not know becomes an
:class:`UnknownEvent` (its fields in ``extra``), a field it does not know goes to the event's
``extra``; neither raises, and both are written back unchanged by :meth:`Event.to_json`.

Commands (stdin, one JSON object per line): ``{"command": "pause"}`` (:class:`Pause`),
``{"command": "resume"}`` (:class:`Resume`), ``{"command": "stop"}`` (:class:`Stop`: checkpoint,
then end with ``finished`` status "stopped"), ``{"command": "set_lr", "lr": 0.001}`` (:class:`SetLr`:
from the next step on the learning rate is this constant; the schedule no longer applies),
``{"command": "inspect"}`` (:class:`InspectNow`: the next step runs with hooks, then an ``inspect``
event), ``{"command": "record_memory"}`` (:class:`RecordMemory`: the next two steps' allocations,
then a ``memory_trace`` event).
:func:`parse_command` turns any line into a command or a :class:`CommandError` naming what is wrong
(never another exception: a 400-digit number or a 100000-deep nesting is a refused line like any
other); the worker reports refused lines on stderr and keeps reading. SIGTERM and SIGINT act as stop.
A closed stdin or stdout never stops training.

Exit status: 0 completed or stopped, 1 failed while running, 2 the spec, data or graph was refused.

Adding an event (or a command) is one dataclass here::

    @event_type("inspect")
    @dataclass(kw_only=True)
    class Inspect(Event):
        \"\"\"What it reports, and when.\"\"\"
        step: int = 0
        path: str = ""                    # a large payload goes to a file in the run directory
        nodes: list[str] | None = optional()   # optional(): left out of the JSON while None

Every field has a default (an older worker does not send a newer field); give it the name and
order the worker emits; document it in the list above. ``to_json``/``from_json``, the registry
(:data:`EVENT_TYPES`) and the worker's ``Emitter.emit("inspect", step=..., path=...)`` then work
unchanged; the bridge forwards it on its ``event`` signal (give it a signal of its own there if
the studio listens to it).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar, TypeVar

RUN_STARTED = "run_started"
COMPILE_DONE = "compile_done"
GRAPH_BREAK = "graph_break"
RECOMPILE = "recompile"
METRICS = "metrics"
EPOCH_END = "epoch_end"
MEMORY = "memory"
CHECKPOINT = "checkpoint"
STATE = "state"
FINISHED = "finished"
FAILED = "failed"
INSPECT = "inspect"
MEMORY_TRACE = "memory_trace"
RECORD_MEMORY = "record_memory"

PAUSE, RESUME, STOP, SET_LR = "pause", "resume", "stop", "set_lr"

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2

MAX_COMMAND_CHARS = 4096   # a command is a few dozen characters; a longer line is refused unread


class ProtocolError(ValueError):
    """A line that is not an event (not JSON, not an object, no ``"event"`` name)."""


class CommandError(ValueError):
    """A command line that cannot be obeyed; the message says why (the worker prints and ignores it)."""


def optional() -> Any:
    """A field that is left out of the JSON while it is None (so the wire only carries what applies)."""
    return field(default=None, metadata={"optional": True})


def _clean(value: Any) -> Any:
    """JSON has no NaN: non-finite floats become None (the failed event says why)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


# ---------------------------------------------------------------- nested records
@dataclass
class PerClass:
    """Precision, recall and F1 of every class (0 where undefined) and its support, index = class."""

    precision: list[float]
    recall: list[float]
    f1: list[float]
    support: list[int]

    def to_dict(self) -> dict[str, list[Any]]:
        return {"precision": list(self.precision), "recall": list(self.recall), "f1": list(self.f1),
                "support": list(self.support)}

    @classmethod
    def from_dict(cls, obj: Any) -> PerClass:
        """Raises :class:`ProtocolError` when ``obj`` is not the four equal-length lists."""
        if not isinstance(obj, dict) or not all(isinstance(obj.get(k), list) for k in _PER_CLASS_KEYS):
            raise ProtocolError(f"per-class figures need lists {', '.join(_PER_CLASS_KEYS)}, got {_short(obj)}")
        if len({len(obj[k]) for k in _PER_CLASS_KEYS}) != 1:
            raise ProtocolError("per-class lists of different lengths")
        return cls(*(list(obj[k]) for k in _PER_CLASS_KEYS))

    def __len__(self) -> int:
        return len(self.support)


_PER_CLASS_KEYS = ("precision", "recall", "f1", "support")


@dataclass
class Best:
    """The best value of the checkpoint metric and the epoch that reached it."""

    metric: str
    value: float | None
    epoch: int

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "value": self.value, "epoch": self.epoch}

    @classmethod
    def from_dict(cls, obj: Any) -> Best:
        if not isinstance(obj, dict) or not {"metric", "value", "epoch"} <= obj.keys():
            raise ProtocolError(f"best needs metric, value and epoch, got {_short(obj)}")
        return cls(obj["metric"], obj["value"], obj["epoch"])


# ---------------------------------------------------------------- events
@dataclass(kw_only=True)
class Event:
    """One event. ``EVENT`` is its name on the wire; ``extra`` keeps fields this version does not know."""

    EVENT: ClassVar[str] = ""
    NESTED: ClassVar[dict[str, type[PerClass] | type[Best]]] = {}   # fields holding a nested record
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
            out[f.name] = value.to_dict() if isinstance(value, PerClass | Best) else value
        out.update({k: v for k, v in self.extra.items() if k not in out})
        return _clean(out)

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
        return decode(_loads(line, ProtocolError))

    # Reads by key, for code written against the protocol's dicts; new code reads the attributes.
    def __getitem__(self, key: str) -> Any:
        if key == "event":
            return self.event
        if key in ("run_id", "time"):
            return getattr(self, key)
        if key in _field_names(type(self)):
            value = getattr(self, key)
            return value.to_dict() if isinstance(value, PerClass | Best) else value
        if key in self.extra:
            return self.extra[key]
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        """A key the wire object has: the header, a field that applies (not an optional None), an extra."""
        if not isinstance(key, str):
            return False
        return key in self.to_dict()


_BASE_FIELDS = ("run_id", "time", "extra")

EVENT_TYPES: dict[str, type[Event]] = {}
E = TypeVar("E", bound=type[Event])


def event_type(name: str) -> Callable[[E], E]:
    """Register an event class under its wire name; a name registered twice is refused."""
    def register(cls: E) -> E:
        if name in EVENT_TYPES:
            raise ValueError(f"event {name!r} is registered twice ({EVENT_TYPES[name].__name__}, {cls.__name__})")
        cls.EVENT = name
        EVENT_TYPES[name] = cls
        return cls
    return register


@event_type(RUN_STARTED)
@dataclass(kw_only=True)
class RunStarted(Event):
    """The run exists in the store and training begins."""

    name: str = ""
    device: str = ""
    params: int = 0
    epochs: int = 0
    steps_per_epoch: int = 0
    batch_size: int = 0
    train_size: int = 0
    val_size: int = 0
    test_size: int = 0
    classes: list[str] = field(default_factory=list)
    start_step: int = 0
    precision: str = ""
    compile: str = "off"
    run_dir: str = ""
    distributed: dict[str, Any] | None = optional()   # under torchrun: strategy, world_size, backend


@event_type(COMPILE_DONE)
@dataclass(kw_only=True)
class CompileDone(Event):
    """The first (compiling) training step is done."""

    seconds: float | None = None
    mode: str = ""
    graph_breaks: int | None = optional()   # dynamo's graph-break and recompile records up to then
    recompiles: int | None = optional()


@event_type(GRAPH_BREAK)
@dataclass(kw_only=True)
class GraphBreakEvent(Event):
    """torch.compile split the model's graph here (from dynamo's graph_breaks log)."""

    reason: str = ""
    node: str | None = None
    where: str = ""
    count: int = 0


@event_type(RECOMPILE)
@dataclass(kw_only=True)
class Recompile(Event):
    """torch.compile compiled a function again: a guard failed (from dynamo's recompiles log)."""

    function: str = ""
    reason: str = ""
    count: int = 0


@event_type(METRICS)
@dataclass(kw_only=True)
class Metrics(Event):
    """Training metrics over the steps since the previous metrics event."""

    step: int = 0
    epoch: int = 0
    loss: float | None = None
    accuracy: float | None = None
    lr: float | None = None
    samples_per_s: float | None = None


@event_type(EPOCH_END)
@dataclass(kw_only=True)
class EpochEnd(Event):
    """An epoch is trained and evaluated on the val split."""

    NESTED: ClassVar[dict[str, type[PerClass] | type[Best]]] = {"per_class": PerClass}
    epoch: int = 0
    step: int = 0
    train_loss: float | None = None
    train_accuracy: float | None = None
    val_loss: float | None = None
    val_accuracy: float | None = None
    lr: float | None = None
    seconds: float | None = None
    best: bool = False
    per_class: PerClass | None = optional()
    confusion: list[list[int]] | None = optional()
    classes: list[str] | None = optional()


@event_type(MEMORY)
@dataclass(kw_only=True)
class Memory(Event):
    """A memory sample: the CUDA allocator's counters, or the worker process's resident set on a CPU."""

    BYTES: ClassVar[tuple[str, ...]] = ("allocated", "reserved", "peak", "rss", "peak_rss")
    step: int | None = None
    device: str = ""
    allocated: int | None = optional()
    reserved: int | None = optional()
    peak: int | None = optional()
    rss: int | None = optional()
    peak_rss: int | None = optional()
    active: int | None = optional()           # CUDA: bytes in blocks in use
    inactive_split: int | None = optional()   # CUDA: freed pieces of split blocks (fragmentation)
    alloc_retries: int | None = optional()    # CUDA: allocations that freed the cache and retried
    num_ooms: int | None = optional()
    free: int | None = optional()             # CUDA: the device's free and total bytes (driver)
    total: int | None = optional()

    @property
    def cuda(self) -> bool:
        return self.allocated is not None

    def figures(self) -> dict[str, int]:
        """The byte counts this sample has, by name (allocated/reserved/peak, or rss/peak_rss)."""
        return {k: v for k in self.BYTES if isinstance(v := getattr(self, k), int | float)}


@event_type(CHECKPOINT)
@dataclass(kw_only=True)
class Checkpoint(Event):
    """A checkpoint file is written and recorded in the store."""

    kind: str = ""
    path: str = ""
    step: int = 0
    epoch: int = 0
    metric: str = ""
    value: float | None = None


@event_type(STATE)
@dataclass(kw_only=True)
class State(Event):
    """Paused, running again, or stopping; ``reason`` is the command or signal."""

    state: str = ""
    reason: str = ""


@event_type(FINISHED)
@dataclass(kw_only=True)
class Finished(Event):
    """The run ended well (completed, stopped or early-stopped); the last event."""

    NESTED: ClassVar[dict[str, type[PerClass] | type[Best]]] = {"test_per_class": PerClass, "best": Best}
    status: str = "completed"
    epoch: int = 0
    step: int = 0
    test_loss: float | None = None
    test_accuracy: float | None = None
    test_per_class: PerClass | None = None
    test_confusion: list[list[int]] | None = None
    best: Best | None = None
    seconds: float | None = None


@event_type(FAILED)
@dataclass(kw_only=True)
class Failed(Event):
    """The run was refused (before ``run_started``, with ``problems``) or failed; the last event."""

    kind: str = "error"
    message: str = ""
    problems: list[str] | None = optional()
    traceback: str = ""
    step: int | None = None
    memory: dict[str, Any] | None = optional()
    diagnosis: dict[str, Any] | None = optional()   # "oom" refused by prediction: trainer.memory_doctor
    rank: int | None = optional()   # under torchrun: the rank whose failure ended the run


@event_type(MEMORY_TRACE)
@dataclass(kw_only=True)
class MemoryTimeline(Event):
    """The memory of recorded training steps, attributed to graph nodes; the full record is at ``path``."""

    step: int = 0                 # the first recorded step
    steps: int = 0
    path: str = ""
    peak_bytes: int = 0           # above what lived when the recording began
    attributed: float = 0.0       # share of the allocated bytes attributed to a node or phase
    peak_phase: str = ""
    peak_node: str = ""
    at_peak: dict[str, int] = field(default_factory=dict)    # live bytes by node at the peak
    timeline: dict[str, Any] = field(default_factory=dict)   # t_ms, live, nodes: {node: [...]}
    error: str | None = optional()


@event_type(INSPECT)
@dataclass(kw_only=True)
class Inspect(Event):
    """An inspected training step; its per-node figures are in the JSON file at ``path``."""

    step: int = 0
    path: str = ""
    nodes: int = 0
    loss: float | None = None
    flags: list[list[Any]] = field(default_factory=list)


@dataclass(kw_only=True)
class UnknownEvent(Event):
    """An event this version does not know (from a newer worker): its name, its fields in ``extra``."""

    name: str = ""

    @property
    def event(self) -> str:
        return self.name

    def to_dict(self) -> dict[str, Any]:
        return _clean({"event": self.name, "run_id": self.run_id, "time": self.time, **self.extra})

    def __getitem__(self, key: str) -> Any:
        if key == "event":
            return self.name
        if key in ("run_id", "time"):
            return getattr(self, key)
        return self.extra[key]


ENDS = (Finished, Failed)   # the events that end a run


@functools.cache
def _field_names(cls: type[Event]) -> frozenset[str]:
    """The fields a class declares beyond the header (cached: the GUI thread parses every event)."""
    return frozenset(f.name for f in dataclasses.fields(cls) if f.name not in _BASE_FIELDS)


def decode(obj: Any) -> Event:
    """The typed event for a parsed JSON object. An unknown event name gives an :class:`UnknownEvent`;
    unknown fields, and a nested record that does not parse, are kept in ``extra``. Raises
    :class:`ProtocolError` only when ``obj`` is no event at all (not an object, no ``"event"`` name)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
        raise ProtocolError(f"not an event: {_short(obj)}")
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
        elif k in cls.NESTED and v is not None and not isinstance(v, PerClass | Best):
            try:
                known[k] = cls.NESTED[k].from_dict(v)
            except ProtocolError:
                extra[k] = v          # kept as sent, never a crash of the reader
        else:
            known[k] = v
    return known, extra


def make_event(name: str, run_id: int | None = None, /, **fields: Any) -> Event:
    """The typed event ``name`` with ``fields`` (unknown names go to ``extra``, an unknown event to
    :class:`UnknownEvent`), stamped with the current time."""
    cls = EVENT_TYPES.get(name)
    at = round(time.time(), 3)
    if cls is None:
        return UnknownEvent(name=name, run_id=run_id, time=at, extra=dict(fields))
    known, extra = _split(cls, fields)
    return cls(run_id=run_id, time=at, extra=extra, **known)


def encode(event: str, run_id: int | None, /, **fields: Any) -> str:
    """One event as a JSON line (without the newline), through its dataclass."""
    return make_event(event, run_id, **fields).to_json()


# ---------------------------------------------------------------- commands
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


COMMAND_TYPES: dict[str, type[Command]] = {}
C = TypeVar("C", bound=type[Command])


def command_type(name: str) -> Callable[[C], C]:
    """Register a command class under its wire name; a name registered twice is refused."""
    def register(cls: C) -> C:
        if name in COMMAND_TYPES:
            raise ValueError(f"command {name!r} is registered twice")
        cls.COMMAND = name
        COMMAND_TYPES[name] = cls
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
    """Record the allocations of the next two training steps (``trainer.memtrace``); a
    ``memory_trace`` event reports them."""


def _positive_finite(lr: Any) -> float:
    if isinstance(lr, bool) or not isinstance(lr, int | float):
        raise CommandError(f"set_lr needs a positive number 'lr', got {_short(lr)}")
    try:
        value = float(lr)
    except OverflowError:
        raise CommandError(f"set_lr: 'lr' {_short(lr, 24)} is too large") from None
    if not (math.isfinite(value) and value > 0):
        raise CommandError(f"set_lr needs a positive finite 'lr', got {_short(lr)}")
    return value


def _command_from(obj: Any) -> Command:
    name = obj.get("command") if isinstance(obj, dict) else None
    cls = COMMAND_TYPES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise CommandError(f"unknown command {_short(obj)} (choose {', '.join(COMMAND_TYPES)})")
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
        return _command_from(_loads(line, CommandError))
    except CommandError:
        raise
    except Exception as exc:  # noqa: BLE001 - the contract: one exception type for any bad line
        raise CommandError(f"cannot read the command ({type(exc).__name__}: {_short(str(exc))})") from None


def encode_command(command: str | Command, /, **fields: Any) -> str:
    """One command as a JSON line (without the newline): a :class:`Command`, or a name and fields."""
    if isinstance(command, Command):
        return command.to_json()
    return _command_from({"command": command, **fields}).to_json()


def _loads(line: str | bytes, error: type[ValueError]) -> Any:
    try:
        return json.loads(line)
    except RecursionError:
        raise error("nested too deep to read") from None
    except (ValueError, TypeError) as exc:   # JSONDecodeError, UnicodeDecodeError, int digits limit
        raise error(f"not JSON: {_short(str(exc))}") from None


def _short(value: Any, most: int = 80) -> str:
    """A repr for a message, cut to ``most`` characters (never fails, whatever the value)."""
    try:
        text = value if isinstance(value, str) else repr(value)
    except Exception:  # noqa: BLE001 - e.g. an int beyond the str-conversion digit limit
        text = f"<{type(value).__name__}>"
    return text if len(text) <= most else text[: most - 3] + "..."


# ---------------------------------------------------------------- writing
class Emitter:
    """Writes events to a stream; a closed stream (the GUI went away) silences it, training goes on.

    ``emit(name, **fields)`` builds the event's dataclass (fields it does not declare are written
    too, as ``extra``; the worker's tests check there are none); ``emit(event)`` takes one built.
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.run_id: int | None = None
        self.closed = False

    def emit(self, event: str | Event, /, **fields: Any) -> None:
        if self.closed:
            return
        if isinstance(event, Event):
            event.run_id = self.run_id if event.run_id is None else event.run_id
            event.time = round(time.time(), 3) if event.time is None else event.time
            line = event.to_json()
        else:
            line = encode(event, self.run_id, **fields)
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            # EPIPE or a closed file: stop writing. Point stdout at devnull so that the
            # interpreter's final flush does not fail either.
            self.closed = True
            _silence(self.stream)


def _silence(stream: IO[str]) -> None:
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
    except (OSError, ValueError, AttributeError):
        pass


EVENTS = tuple(EVENT_TYPES)
COMMANDS = tuple(COMMAND_TYPES)
