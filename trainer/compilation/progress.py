"""What the first compiled step is compiling, as ``compile_progress`` events.

A compiled training step compiles several graphs, one after the other: the model's forward (dynamo
traces the frame; AOTAutograd and Inductor compile it), its backward (deferred until the first
``backward()``), the optimizer's step, more where dynamo breaks a graph. Dynamo calls the callbacks of
``torch._dynamo.callback`` around each: at each start the watcher emits which graph it is, how many
are done and what Inductor's FX graph cache has answered so far (a warm cache answers hits). Nothing
is called after the compiles are done: no per-step cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..protocol import events as ev


def cache_counts() -> tuple[int, int]:
    """Inductor's FX graph cache hits and misses in this process so far."""
    from torch._dynamo.utils import counters

    inductor = counters["inductor"]
    return int(inductor["fxgraph_cache_hit"]), int(inductor["fxgraph_cache_miss"])


class CompileProgress:
    """Emits a :class:`~trainer.protocol.events.CompileProgress` at the start of each graph dynamo
    compiles, from :meth:`start` until :meth:`close`."""

    def __init__(self, emit: Callable[[ev.Event], None], clock: Callable[[], float] = time.monotonic) -> None:
        self.emit, self.clock = emit, clock
        self.t0 = clock()
        self.graphs = 0          # traced frames begun
        self.backwards = 0       # deferred backwards begun
        self.compiled = 0        # compiles ended
        self._callbacks: tuple[Any, Any] | None = None

    def on_start(self, args: Any) -> None:
        lazy = getattr(getattr(args, "callback_trigger", None), "name", "") == "LAZY_BACKWARD"
        if lazy:
            self.backwards += 1
            stage = f"backward {self.backwards}"
        else:
            self.graphs += 1
            stage = f"graph {self.graphs}"
        hits, misses = cache_counts()
        self.emit(ev.CompileProgress(stage=stage, compiled=self.compiled, cache_hits=hits, cache_misses=misses,
                                     seconds=round(self.clock() - self.t0, 3)))

    def on_end(self, _args: Any) -> None:
        self.compiled += 1

    def start(self) -> CompileProgress:
        from torch._dynamo.callback import callback_handler

        self.t0 = self.clock()
        callback_handler.register_start_callback(self.on_start)
        callback_handler.register_end_callback(self.on_end)
        self._callbacks = (self.on_start, self.on_end)
        return self

    def close(self) -> None:
        if self._callbacks is None:
            return
        from torch._dynamo.callback import callback_handler

        start, end = self._callbacks
        callback_handler.remove_start_callback(start)
        callback_handler.remove_end_callback(end)
        self._callbacks = None
