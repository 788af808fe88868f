"""A reader that stops early (``torch-studio predict ... | head``): the command ends quietly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import save_file

from graph_editor.building import build_module
from graph_editor.model import load_graph
from studio.cli import BROKEN_PIPE_STATUS
from trainer.data import DIGITS

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[3]
MLP = ROOT / "assets" / "templates" / "mlp.graph.json"


def test_predict_into_head_ends_without_a_traceback(tmp_path):
    """The shipped mlp, untrained weights, 1,797 digits as JSON lines (far more than a pipe holds): the
    reader takes one line and closes; the command must neither print a BrokenPipeError traceback nor
    Python's "Exception ignored ... BrokenPipeError" at exit."""
    weights = tmp_path / "mlp.safetensors"
    save_file({k: v.contiguous() for k, v in build_module(load_graph(MLP)).state_dict().items()}, weights)
    cmd = [sys.executable, "-m", "studio", "predict", str(MLP), "--checkpoint", str(weights), str(DIGITS),
           "--json", "--top", "10"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()            # what head does after its lines
    err = proc.stderr.read().decode()
    code = proc.wait(120)
    assert first.startswith(b'{"input": '), err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert code == BROKEN_PIPE_STATUS, err
