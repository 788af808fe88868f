"""The worker's protocol: JSON-lines events on stdout, JSON-lines commands on stdin, as typed dataclasses.

This module is the single source of truth for event names and fields, and the one import for the
whole protocol: it re-exports the codec (:mod:`trainer.protocol.wire`: :class:`Event`, :func:`decode`,
:class:`Emitter`...) and the commands (:mod:`trainer.protocol.commands`). The one process client
(:mod:`trainer.protocol.client`), the CLI and the studio read the dataclasses' fields (``event.step``), never
string keys. The wire is stable: fields may be added, never renamed or removed.

Events (stdout, one JSON object per line, each with ``"event"``, ``"run_id"`` and ``"time"`` (Unix
seconds)). Every event is written only after what it reports is committed to the run store, so a
reader that saw an event can find it in the store.

``run_started`` (:class:`RunStarted`)
    ``name``, ``device`` ("cpu", "cuda:0"), ``params`` (parameter count), ``epochs``,
    ``steps_per_epoch``, ``batch_size``, ``train_size``, ``val_size``, ``test_size``, ``classes``
    (list of class names), ``start_step`` (0, or the step a resumed run continues from),
    ``precision``, ``compile``, ``run_dir``; ``predicted_peak`` (bytes) where the worker's memory gate
    predicted the run (on CUDA, or with ``memory.budget_mb``), and ``predicted_unmodelled``, the bytes it
    may be under (oneDNN's bf16 buffers on a CPU with native bf16 kernels; 0: none); with compile on,
    ``compile_first_time`` (true when no run or warm-up compiled this model and recipe into the compile caches before) and
    ``compile_expected_s`` (the seconds its last compile took, when one did).
``compile_progress`` (:class:`CompileProgress`)
    While the first compiled step compiles, at the start of each graph dynamo compiles: ``stage``
    ("graph 1", "backward 1", "graph 2"...: a traced frame or a graph's deferred backward),
    ``compiled`` (graphs done before it), ``cache_hits``/``cache_misses`` (Inductor's FX graph cache so
    far) and ``seconds`` since the step began. Only when compile is on.
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
    before ``run_started`` with ``diagnosis`` (:meth:`trainer.memory.doctor.Diagnosis.to_dict`: the
    prediction, the nodes holding most at its peak, and fixes each with its predicted peak and spec
    changes; ``problems`` says the same in lines).
``memory_trace`` (:class:`MemoryTimeline`)
    After the ``record_memory`` command: ``step`` (the first recorded), ``steps`` (2), ``path`` (the
    full record, JSON, in the run directory), ``peak_bytes`` (above what lived before), ``attributed``
    (share of allocated bytes with a node or phase), ``peak_phase``, ``peak_node``, ``at_peak`` (live
    bytes by node at the peak), ``timeline`` (``t_ms``, ``live`` and ``nodes``: the top nodes' live
    bytes, at most 2000 points); ``error`` instead where the recording could not start or end.
``skipped_files`` (:class:`SkippedFiles`)
    A dataset read from disk met files it cannot decode (corrupt, truncated, not an image): ``step``,
    ``split`` ("train", "val", "test"), ``files`` (``[path, reason]`` of each newly skipped file, at
    most 20), ``count`` (files of the run skipped so far, over every split). Each file once a run; the
    count is also the metric ``data/skipped_files`` and the list the run's ``skipped_files`` artifact.
``inspect`` (:class:`Inspect`)
    ``step`` (the inspected step), ``path`` (the report, a JSON file in the run directory: per graph
    node ||dL/dy||, ||dL/dW||, weight norm, update ratio, activation mean/std, zero fraction, CPU
    backward time; :func:`trainer.inspection.read_report`), ``nodes`` (how many), ``loss``, ``flags``
    (``[node, "vanishing" | "exploding", figure, value]`` for each gradient norm out of range). On the
    ``inspect`` command, and every ``train.inspect_every_s`` seconds when the spec sets it. The figures
    are also stored as metrics ``inspect/<figure>/<node>``.

A reader keeps what it does not know: an unknown event becomes an :class:`UnknownEvent`, an unknown
field goes to the event's ``extra`` (:mod:`trainer.protocol.wire`). The commands on stdin are listed in
:mod:`trainer.protocol.commands`.

Exit status: 0 completed or stopped, 1 failed while running, 2 the spec, data or graph was refused.

Adding an event is one dataclass here::

    @event_type("inspect")
    @dataclass(kw_only=True)
    class Inspect(Event):
        \"\"\"What it reports, and when.\"\"\"
        step: int = 0
        path: str = ""                    # a large payload goes to a file in the run directory
        nodes: list[str] | None = optional()   # optional(): left out of the JSON while None

Every field has a default (an older worker does not send a newer field); give it the name and
order the worker emits; document it in the list above. ``to_json``/``from_json``, the registry
(:data:`EVENT_TYPES`) and the worker's ``Emitter.emit(Inspect(step=..., path=...))`` then work
unchanged; the bridge forwards it on its ``event`` signal (give it a signal of its own there if
the studio listens to it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from .commands import (
    COMMAND_TYPES,
    COMMANDS,
    INSPECT,
    MAX_COMMAND_CHARS,
    PAUSE,
    RECORD_MEMORY,
    RESUME,
    SET_LR,
    STOP,
    Command,
    CommandError,
    InspectNow,
    Pause,
    RecordMemory,
    Resume,
    SetLr,
    Stop,
    WriteCheckpoints,
    command_type,
    encode_command,
    parse_command,
)
from .records import Best, PerClass
from .wire import (
    EVENT_TYPES,
    Emitter,
    Event,
    ProtocolError,
    Record,
    UnknownEvent,
    decode,
    event_type,
    optional,
)

__all__ = [
    # the codec (trainer.protocol.wire) and the commands (trainer.protocol.commands), read through this one module
    "EVENT_TYPES", "Emitter", "Event", "ProtocolError", "Record", "UnknownEvent", "decode", "event_type", "optional",
    "COMMAND_TYPES", "COMMANDS", "MAX_COMMAND_CHARS", "PAUSE", "RECORD_MEMORY", "RESUME", "SET_LR", "STOP",
    "Command", "CommandError", "InspectNow", "Pause", "RecordMemory", "Resume", "SetLr", "Stop", "WriteCheckpoints",
    "command_type",
    "encode_command", "parse_command",
    # the events
    "RUN_STARTED", "COMPILE_PROGRESS", "COMPILE_DONE", "GRAPH_BREAK", "RECOMPILE", "METRICS", "EPOCH_END", "MEMORY", "CHECKPOINT",
    "STATE", "FINISHED", "FAILED", "INSPECT", "MEMORY_TRACE", "SKIPPED_FILES", "EXIT_OK", "EXIT_FAILED", "EXIT_REFUSED",
    "PerClass", "Best", "RunStarted", "CompileProgress", "CompileDone", "GraphBreakEvent", "Recompile", "Metrics", "EpochEnd", "Memory",
    "Checkpoint", "State", "Finished", "Failed", "MemoryTimeline", "Inspect", "SkippedFiles", "ENDS", "EVENTS",
]

RUN_STARTED = "run_started"
COMPILE_PROGRESS = "compile_progress"
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
SKIPPED_FILES = "skipped_files"
MEMORY_TRACE = "memory_trace"   # INSPECT ("inspect") names both the event and the command

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2


# ---------------------------------------------------------------- events
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
    predicted_peak: int | None = optional()   # bytes: the peak the worker's memory gate predicted, where it ran
    predicted_unmodelled: int | None = optional()   # bytes that peak may be under (this CPU's bf16 kernels)
    compile_first_time: bool | None = optional()   # compile on: nothing compiled this model and recipe before
    compile_expected_s: float | None = optional()  # compile on: the seconds its last compile took, if any


@event_type(COMPILE_PROGRESS)
@dataclass(kw_only=True)
class CompileProgress(Event):
    """The first compiled step starts compiling another graph (a traced frame or a deferred backward)."""

    stage: str = ""
    compiled: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    seconds: float = 0.0


@event_type(COMPILE_DONE)
@dataclass(kw_only=True)
class CompileDone(Event):
    """The first (compiling) training step is done."""

    seconds: float | None = None
    mode: str = ""
    graph_breaks: int | None = optional()   # dynamo's graph-break and recompile records up to then
    recompiles: int | None = optional()
    cache_hits: int | None = optional()     # the graphs Inductor's FX graph cache answered in that step
    cache_misses: int | None = optional()   # ... and those it compiled


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

    NESTED: ClassVar[dict[str, type[Record]]] = {"per_class": PerClass}
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

    def counters(self) -> dict[str, Any]:
        """The device and every figure this sample has (a failed event's ``memory``)."""
        return {"device": self.device, **{k: v for k, v in self.to_dict().items()
                                          if k not in ("event", "run_id", "time", "step", "device")}}

    def figures(self) -> dict[str, float]:
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

    NESTED: ClassVar[dict[str, type[Record]]] = {"test_per_class": PerClass, "best": Best}
    status: str = "completed"
    epoch: int = 0
    step: int = 0
    test_loss: float | None = None
    test_accuracy: float | None = None
    test_per_class: PerClass | None = None
    test_confusion: list[list[int]] | None = None
    best: Best | None = None
    seconds: float | None = None

    def summary(self) -> dict[str, Any]:
        """What the run store keeps of the run's end (its ``summary``), as the event carries it."""
        wire = self.to_dict()
        return {k: wire.get(k) for k in ("test_loss", "test_accuracy", "test_per_class", "test_confusion", "best",
                                         "seconds")}


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
    diagnosis: dict[str, Any] | None = optional()   # "oom" refused by prediction: trainer.memory.doctor
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


@event_type(SKIPPED_FILES)
@dataclass(kw_only=True)
class SkippedFiles(Event):
    """Files of a dataset on disk that could not be decoded, skipped (the run goes on)."""

    step: int = 0
    split: str = "train"
    files: list[list[str]] = field(default_factory=list)   # [path, reason] of the newly skipped files
    count: int = 0                                          # skipped so far in this run


ENDS = (Finished, Failed)   # the events that end a run
EVENTS = tuple(EVENT_TYPES)
