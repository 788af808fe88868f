"""Which recipes the compile caches hold: a compile that starts warm says so.

On this project's 2-core CPU the first compiled step of digits_cnn takes 27.6 s with cold caches and
2.3 s with warm ones (:mod:`.cache` keeps them in the user cache directory across runs).

:func:`recipe_key` names what a run compiles: the graph with its input shape, the batch, everything
in the spec that shapes the traced graphs (precision and compile mode, optimizer and its constants,
label smoothing, frozen blocks, activation checkpointing), the device type and torch's version.
:class:`WarmIndex` keeps one small file per key beside the caches (``warm/KEY.json``: what it is and the
seconds its compile took), written once a run's first compiled step is done: a run whose key has one
starts warm (``run_started.compile_first_time`` false, ``compile_expected_s``), one without says
"first time". A cache emptied behind the index's back only makes that label wrong, never the compile.
The worker reads and marks the index (:mod:`trainer.worker`, :mod:`trainer.job`); :mod:`.warm` warms
recipes ahead of time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any


def recipe_key(spec: dict[str, Any], graph_hash: str, input_shape: list[int], device_type: str,
               channels_last: bool) -> str:
    """What a run compiles, as a hash: the same key, the same graphs in the caches."""
    import torch

    optim = {k: v for k, v in spec.get("optim", {}).items() if k != "lr"}   # the lr is a tensor: any value
    parts = {"graph": graph_hash, "shape": list(input_shape), "device": device_type, "torch": torch.__version__,
             "batch": spec.get("train", {}).get("batch_size"), "precision": spec.get("precision"),
             "optim": optim, "model": [spec.get("model", {}).get(k) for k in ("frozen", "lr_scale")],
             "memory": spec.get("memory", {}).get("checkpoint"), "channels_last": channels_last}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


class WarmIndex:
    """The recipes whose compiles the caches in ``folder`` hold (one JSON file per key)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder / "warm"

    def seconds(self, key: str) -> float | None:
        """The seconds the compile of ``key`` took, or None when it was never compiled here."""
        try:
            return float(json.loads((self.folder / f"{key}.json").read_text(encoding="utf-8"))["seconds"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def mark(self, key: str, seconds: float, what: str) -> None:
        """Record that ``key`` is compiled (atomically: a reader never sees half a file). The index only
        labels compiles: a folder that cannot be written leaves the next one "first time", nothing worse."""
        tmp = self.folder / f".{key}.{os.getpid()}.tmp"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"seconds": round(seconds, 3), "what": what, "time": time.time()}),
                           encoding="utf-8")
            os.replace(tmp, self.folder / f"{key}.json")
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)


def index() -> WarmIndex:
    """The index beside this process's compile caches (:func:`.cache.compile_cache_dir`)."""
    from .cache import compile_cache_dir

    return WarmIndex(compile_cache_dir())


def setup_key(setup: Any) -> str:
    """:func:`recipe_key` of a checked :class:`trainer.checks.Setup`."""
    return recipe_key(setup.spec.to_dict(), setup.graph_hash, list(setup.graph.input_spec.shape), setup.device.type,
                      setup.channels_last)
