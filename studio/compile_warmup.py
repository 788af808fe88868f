"""Warm the templates' compiles in the background, so that a compiled run starts warm.

The first compiled step of a template on a CPU takes tens of seconds with cold compile caches and a
few with warm ones (:mod:`trainer.compilation.warm`). Once the window shows, the studio starts
``python -m trainer.compilation.warm --idle --parent PID``: a child at idle CPU priority (it runs only
on cycles nothing else wants, so neither the studio nor a training run is slowed by it) that dies
with the studio, compiles each template not compiled before into the user's compile caches and
exits; later starts find the index full and are done in seconds. Its output goes to
``compile-warmup.log`` in the studio's data folder. ``TORCH_STUDIO_WARM_COMPILE=0`` turns it off (the
test suite does).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

SWITCH = "TORCH_STUDIO_WARM_COMPILE"


def warmup_command(parent: int) -> list[str]:
    return [sys.executable, "-m", "trainer.compilation.warm", "--idle", "--parent", str(parent)]


def start_compile_warmup(log: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes] | None:
    """Start the warm-up child (None when ``TORCH_STUDIO_WARM_COMPILE=0`` or it cannot start)."""
    env = os.environ if env is None else env
    if env.get(SWITCH, "1").strip() == "0":
        return None
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            return subprocess.Popen(warmup_command(os.getpid()), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    env=dict(env), start_new_session=True)
    except OSError as exc:   # a read-only data folder, say: the runs then compile cold, as before
        print(f"warning: the compile warm-up did not start: {exc}", file=sys.stderr)
        return None
