"""The worker's protocol: JSON-lines events on stdout, JSON-lines commands on stdin.

This module is the single source of truth for event names and fields; the studio's training bridge
and :mod:`trainer.client` build on it. It is stable: fields may be added, never renamed or removed.

Events (stdout, one JSON object per line, each with ``"event"``, ``"run_id"`` and ``"time"`` (Unix
seconds)). Every event is written only after what it reports is committed to the run store, so a
reader that saw an event can find it in the store.

``run_started``
    ``name``, ``device`` ("cpu", "cuda:0"), ``params`` (parameter count), ``epochs``,
    ``steps_per_epoch``, ``batch_size``, ``train_size``, ``val_size``, ``test_size``, ``classes``
    (list of class names), ``start_step`` (0, or the step a resumed run continues from),
    ``precision``, ``compile``, ``run_dir``.
``compile_done``
    ``seconds`` (time of the first, compiling, training step), ``mode``. Only when compile is on.
``metrics``
    ``step`` (optimizer steps done, 1-based), ``epoch`` (1-based), ``loss`` and ``accuracy`` (mean
    over the training steps since the previous metrics event), ``lr``, ``samples_per_s``.
    One per ``train.metrics_interval_s`` of training (default 0.25 s), however short the epochs:
    the steps may span an epoch boundary (``epoch`` is that of the last one); the run's last
    steps are reported before its last ``epoch_end``, or before ``finished`` when it stops.
``epoch_end``
    ``epoch``, ``step``, ``train_loss``, ``train_accuracy``, ``val_loss``, ``val_accuracy`` (None
    without a val split), ``lr``, ``seconds``, ``per_class`` (``{"precision": [...], "recall":
    [...], "f1": [...], "support": [...]}``, one entry per class, on the val split), ``confusion``
    (rows = true class, columns = predicted), ``best`` (true when this epoch is the new best).
``memory``
    ``device``; on CUDA ``allocated``, ``reserved``, ``peak`` (bytes); on CPU ``rss``, ``peak_rss``.
``checkpoint``
    ``kind`` ("best" or "last"), ``path`` (the .safetensors file), ``step``, ``epoch``,
    ``metric`` (name), ``value``.
``state``
    ``state`` ("paused", "running", "stopping"), ``reason`` (the command or signal that caused it).
``finished``
    ``status`` ("completed", "stopped", "early_stopped"), ``epoch``, ``step``, ``best`` (``{"metric",
    "value", "epoch"}`` or None), ``test_loss``, ``test_accuracy``, ``test_per_class``,
    ``test_confusion`` (test metrics use the best checkpoint's weights when one was kept),
    ``seconds`` (training wall time).
``failed``
    ``kind`` ("spec", "data", "graph", "nan", "oom", "error"), ``message``, ``traceback`` (empty for
    spec/data/graph problems, which are the user's to fix), ``step`` (None before training), and for
    "oom" during training ``memory`` (the CUDA figures at the failure). Spec/data/graph failures, and
    "oom" while the model's weights are placed on the device, come before ``run_started``, have
    ``run_id`` None and a ``problems`` list (one ``"field.path: message"`` each).

Commands (stdin, one JSON object per line; unknown or malformed lines are reported on stderr and
ignored): ``{"command": "pause"}``, ``{"command": "resume"}``, ``{"command": "stop"}`` (checkpoint,
then end with ``finished`` status "stopped"), ``{"command": "set_lr", "lr": 0.001}`` (from the next
step on the learning rate is this constant; the schedule no longer applies). SIGTERM and SIGINT act
as stop.
A closed stdin or stdout never stops training.

Exit status: 0 completed or stopped, 1 failed while running, 2 the spec, data or graph was refused.
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import IO, Any

RUN_STARTED = "run_started"
COMPILE_DONE = "compile_done"
METRICS = "metrics"
EPOCH_END = "epoch_end"
MEMORY = "memory"
CHECKPOINT = "checkpoint"
STATE = "state"
FINISHED = "finished"
FAILED = "failed"
EVENTS = (RUN_STARTED, COMPILE_DONE, METRICS, EPOCH_END, MEMORY, CHECKPOINT, STATE, FINISHED, FAILED)

PAUSE, RESUME, STOP, SET_LR = "pause", "resume", "stop", "set_lr"
COMMANDS = (PAUSE, RESUME, STOP, SET_LR)

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2


def _clean(value: Any) -> Any:
    """JSON has no NaN: non-finite floats become None (the failed event says why)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def encode(event: str, run_id: int | None, **fields: Any) -> str:
    """One event as a JSON line (without the newline)."""
    return json.dumps({"event": event, "run_id": run_id, "time": round(time.time(), 3), **_clean(fields)})


def encode_command(command: str, **fields: Any) -> str:
    return json.dumps({"command": command, **fields})


def parse_command(line: str) -> dict[str, Any]:
    """A command line as a dict; raises ValueError naming what is wrong."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict) or obj.get("command") not in COMMANDS:
        raise ValueError(f"unknown command {line.strip()!r} (choose {', '.join(COMMANDS)})")
    if obj["command"] == SET_LR:
        lr = obj.get("lr")
        if not isinstance(lr, int | float) or isinstance(lr, bool) or not lr > 0 or not math.isfinite(lr):
            raise ValueError(f"set_lr needs a positive number 'lr', got {lr!r}")
    return obj


class Emitter:
    """Writes events to a stream; a closed stream (the GUI went away) silences it, training goes on."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.run_id: int | None = None
        self.closed = False

    def emit(self, event: str, **fields: Any) -> None:
        if self.closed:
            return
        try:
            self.stream.write(encode(event, self.run_id, **fields) + "\n")
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
