"""Dynamo's graph-break and recompile log records, forwarded as worker events during a compiled run.

:func:`watch` turns on the ``graph_breaks`` and ``recompiles`` logging artifacts without touching
any other log setting (``TORCH_LOGS`` stays as the user set it) and hangs a handler on their two
loggers. Each record becomes a ``graph_break`` event, with the graph node the break is in
(:func:`trainer.compilation.explain.node_of` on the record's user stack), or a ``recompile`` event. Records
arrive only while dynamo compiles, never per step; past ``limit`` of a kind only the count grows.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from ..protocol import events as ev
from .explain import _class_lines, frames_in_text, node_of, split_reason

_BREAKS = "torch._dynamo.symbolic_convert.__graph_breaks"
_RECOMPILES = "torch._dynamo.guards.__recompiles"
_AT = re.compile(r"in user code at (.+):(\d+)")
_RECOMPILING = re.compile(r"Recompiling function (\S+)")


class CompileLog(logging.Handler):
    """Counts graph breaks and recompiles and emits the first ``limit`` of each as events."""

    def __init__(self, emitter: Any, model: Any, limit: int = 20) -> None:
        super().__init__(logging.DEBUG)
        self.emitter, self.model, self.limit = emitter, model, limit
        self.breaks = 0
        self.recompiles = 0
        self._owners: dict[str, list[tuple[str, int, int]]] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
            if record.name == _BREAKS:
                self._graph_break(text)
            elif record.name == _RECOMPILES:
                self._recompile(text)
        except Exception:  # a log handler must never fail the training step that logged
            self.handleError(record)

    def _graph_break(self, text: str) -> None:
        self.breaks += 1
        if self.breaks > self.limit:
            return
        head, _, trace = text.partition("User code traceback:")
        reason = split_reason(head.partition("Graph Break Reason:")[2] or head)[0]
        frames = frames_in_text(trace)
        at = _AT.search(head)  # the break's own place; a repeated break carries only this
        if at and not (frames and frames[-1][:2] == (at.group(1), int(at.group(2)))):
            frames.append((at.group(1), int(at.group(2)), ""))
        if self._owners is None:
            self._owners = _class_lines(self.model)
        file, line, code = frames[-1] if frames else ("", 0, "")
        where = (f"{file.rpartition('/')[2]}:{line}" + (f" `{code}`" if code else "")) if frames else ""
        self.emitter.emit(ev.GraphBreakEvent(reason=reason, node=node_of(frames, self.model, self._owners),
                                              where=where, count=self.breaks))

    def _recompile(self, text: str) -> None:
        self.recompiles += 1
        if self.recompiles > self.limit:
            return
        m = _RECOMPILING.search(text)
        lines = [ln.strip(" -") for ln in text.splitlines()[1:] if ln.strip(" -")]
        reason = next((ln for ln in lines if not ln.startswith("triggered by")), "")
        self.emitter.emit(ev.Recompile(function=m.group(1) if m else "", reason=reason, count=self.recompiles))


def watch(emitter: Any, model: Any, limit: int = 20) -> CompileLog:
    """Start forwarding; the handler's ``breaks`` and ``recompiles`` are the counts so far."""
    from torch._logging._internal import log_state

    handler = CompileLog(emitter, model, limit)
    for artifact in ("graph_breaks", "recompiles"):
        if not log_state.is_artifact_enabled(artifact):
            log_state.enable_artifact(artifact)  # dynamo asks the log state, not only the logger's level
    for name in (_BREAKS, _RECOMPILES):
        log = logging.getLogger(name)
        if log.getEffectiveLevel() > logging.DEBUG:
            log.setLevel(logging.DEBUG)
        log.addHandler(handler)
    return handler
