"""torch.compile's caches live in the user's cache directory, kept across runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.compilation.cache import VARIABLE, compile_cache_dir

from ..helpers import ROOT

pytestmark = pytest.mark.process


def test_the_user_cache_directory_unless_the_user_chose_one(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))      # platformdirs' user cache directory on Linux
    env: dict[str, str] = {}
    assert compile_cache_dir(env) == tmp_path / "torch-studio" / "inductor"
    assert env[VARIABLE] == str(tmp_path / "torch-studio" / "inductor")
    mine = {VARIABLE: "/somewhere/else"}
    assert compile_cache_dir(mine) == Path("/somewhere/else") and mine[VARIABLE] == "/somewhere/else"


def test_inductor_and_aot_autograd_cache_there(tmp_path):
    """As the worker's entry does it (before torch is imported), Inductor compiles into the user cache
    directory, and both caches it keeps there (FX graphs, AOTAutograd) are on."""
    code = ("from trainer.compilation.cache import compile_cache_dir\n"
            "compile_cache_dir()\n"
            "import torch, torch._inductor.config as ic, torch._functorch.config as fc\n"
            "from torch._inductor.runtime.cache_dir_utils import cache_dir\n"
            "print(cache_dir(), ic.fx_graph_cache, fc.enable_autograd_cache)\n")
    env = {k: v for k, v in os.environ.items() if k != VARIABLE} | {"XDG_CACHE_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert out == [str(tmp_path / "torch-studio" / "inductor"), "True", "True"]
