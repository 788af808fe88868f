"""What both checkpoint layouts share -- the one-file ``.safetensors`` of :mod:`trainer.checkpoints.single_file`
and the sharded folder of :mod:`trainer.distributed.sharded_checkpoints`: the metadata version, the error, the
durable-write helper and the named save points where tests pause or kill the worker. Its own module
so that the sharded layout needs nothing back from the one-file layout that dispatches to it."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path

META_VERSION = 3      # 3: ``kinds`` (the kinds one file serves as: best and last share one) for ``kind``
META_KEY = "torch_studio"
FAULT_ENV = "TORCH_STUDIO_TEST_CHECKPOINT"  # tests only: pause or kill the worker inside a save
FAULT_POINTS = ("written", "torn", "renamed", "recorded", "pruned")
SHARDED_SUFFIX = ".dcp"      # a sharded checkpoint's folder: <kind>-<step>.dcp, written as .<name>.tmp


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used: missing, truncated, corrupt, or not the step it claims."""


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def remove_unfinished(folder: Path) -> list[Path]:
    """Delete the temporary folders of sharded saves that did not finish (a failed or killed run's) in
    a checkpoints folder that no rank writes now; the folders removed."""
    gone = sorted(p for p in folder.glob(f".*{SHARDED_SUFFIX}.tmp") if p.is_dir()) if folder.is_dir() else []
    for p in gone:
        shutil.rmtree(p, ignore_errors=True)
    return gone


def fault_point(point: str, tmp: Path | None = None) -> None:
    """A named point of the save sequence, where tests pause or kill the worker (``$TORCH_STUDIO_TEST_CHECKPOINT``).

    ``pause:SECONDS`` sleeps at every point after saying its name on stderr; ``kill:POINT[:N]`` kills
    the process with SIGKILL the N-th time (default first) it reaches POINT; ``torn`` is ``written``
    with the temporary file cut to half first. Unset, this costs one dictionary lookup."""
    plan = os.environ.get(FAULT_ENV)
    if not plan:
        return
    action, _, rest = plan.partition(":")
    if action == "pause":
        print(f"checkpoint-point {point}", file=sys.stderr, flush=True)
        time.sleep(float(rest or 0.05))
        return
    target, _, nth = rest.partition(":")
    if action == "kill" and target not in FAULT_POINTS:
        raise ValueError(f"${FAULT_ENV}={plan!r}: no save point {target!r} (choose {', '.join(FAULT_POINTS)})")
    if point == "written" and target == "torn":
        point = "torn"
    if action != "kill" or point != target:
        return
    _FAULT_COUNTS[point] = _FAULT_COUNTS.get(point, 0) + 1
    if _FAULT_COUNTS[point] < int(nth or 1):
        return
    if point == "torn" and tmp is not None:
        with open(tmp, "rb+") as f:
            f.truncate(max(tmp.stat().st_size // 2, 1))
    os.kill(os.getpid(), signal.SIGKILL)


_FAULT_COUNTS: dict[str, int] = {}
