"""Where torch.compile keeps what it compiled: the user's cache directory, kept across runs.

Inductor's FX graph cache and AOTAutograd's cache (both on by default) and, on a GPU, Triton's
kernels live under ``TORCHINDUCTOR_CACHE_DIR``, which defaults to ``/tmp/torchinductor_<user>``: a
temporary folder that a reboot or a tmp cleaner empties, and with it every compiled graph. On this
project's 2-core CPU the first compiled step of digits_cnn took 27.6 s with a cold cache and 2.3 s with
a warm one, so the worker (``python -m trainer``) points the caches at the platform's user cache
directory (``platformdirs.user_cache_dir``: ``~/.cache/torch-studio/inductor`` on Linux) before it
imports torch: importing torch's compiler sets the variable to its ``/tmp`` default when it is unset.
A user's own ``TORCHINDUCTOR_CACHE_DIR`` is kept.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path

import platformdirs

from ..store.runs import APP

VARIABLE = "TORCHINDUCTOR_CACHE_DIR"


def compile_cache_dir(env: MutableMapping[str, str] | None = None) -> Path:
    """Set ``TORCHINDUCTOR_CACHE_DIR`` in ``env`` (``os.environ``) to the user cache directory unless it
    is set already; the directory the caches use."""
    env = os.environ if env is None else env
    if not env.get(VARIABLE):
        env[VARIABLE] = str(Path(platformdirs.user_cache_dir(APP)) / "inductor")
    return Path(env[VARIABLE])
