"""``torch-studio predict``: an exported model (or a run, or a graph with weights) on raw inputs.

A model is opened as a :class:`Predictor`: a function from a batch of raw samples (what the dataset
file holds) to logits, with its :class:`~exporters.preprocessing.Preprocessing` (class names, input
shape) read from the model's own metadata. Every format exported here standardises inside itself, so
what is fed is never standardised here: prediction proves the export ships its preprocessing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ExportError
from .preprocessing import METADATA_KEY, Preprocessing, read_sidecar

BATCH = 256
Run = Callable[[np.ndarray], np.ndarray]


@dataclass
class Predictor:
    """A model ready to predict: ``run`` maps a float32 batch of raw samples to logits."""

    description: str
    preprocessing: Preprocessing
    run: Run

    def top(self, x: np.ndarray, k: int) -> list[list[dict[str, Any]]]:
        """The ``k`` most probable classes of each sample: ``{"index", "class", "prob"}``, best first."""
        out: list[list[dict[str, Any]]] = []
        classes = self.preprocessing.classes
        for i in range(0, len(x), BATCH):
            logits = np.asarray(self.run(np.ascontiguousarray(x[i:i + BATCH])), dtype=np.float64)
            z = np.exp(logits - logits.max(axis=1, keepdims=True))
            probs = z / z.sum(axis=1, keepdims=True)
            for row in probs:
                best = np.argsort(-row, kind="stable")[:k]
                out.append([{"index": int(j), "class": classes[j] if j < len(classes) else str(j),
                             "prob": float(row[j])} for j in best])
        return out


def open_model(model: str, *, checkpoint: str | None = None, store: str | None = None) -> Predictor:
    """A run id (its best checkpoint, or ``checkpoint``), an exported ``.onnx``/``.pt2``/``.pte`` file or
    ``model.py``, or a ``.graph.json`` with ``checkpoint`` (a trainer checkpoint or exported safetensors)."""
    path = Path(model).expanduser()
    if model.isdigit() and not path.exists():
        from .run_source import from_run

        return _eager(from_run(int(model), checkpoint=checkpoint or "best", store=store, verify_batch=1))
    if not path.exists():
        raise ExportError(f"{path}: no such file (MODEL is a run id, an .onnx/.pt2/.pte/.py file or a .graph.json)")
    name = path.name.lower()
    if name.endswith(".graph.json"):
        return _graph(path, checkpoint)
    if checkpoint is not None:
        raise ExportError(f"--checkpoint is for a run id or a .graph.json, not {path.name}")
    opener = {".onnx": _onnx, ".pt2": _pt2, ".pte": _pte, ".py": _python}.get(path.suffix.lower())
    if opener is None:
        raise ExportError(f"{path}: not a model predict can run (a run id, an exported .onnx/.pt2/.pte/.py file "
                          "or a .graph.json with --checkpoint)")
    return opener(path)


def _eager(source: Any) -> Predictor:
    import torch

    def run(x: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return source.model(torch.from_numpy(x)).float().numpy()

    return Predictor(source.description, source.prep, run)


def _graph(path: Path, checkpoint: str | None) -> Predictor:
    from graph_editor.model import GraphError, load_graph

    from .source import from_graph

    if checkpoint is None or checkpoint in ("best", "last"):
        raise ExportError(f"{path.name}: a graph needs --checkpoint WEIGHTS (a trainer checkpoint or exported "
                          "safetensors) to predict")
    try:
        graph = load_graph(path)
    except GraphError as exc:
        raise ExportError(str(exc)) from None
    return _eager(from_graph(graph, checkpoint=checkpoint, verify_batch=1))


def _onnx(path: Path) -> Predictor:
    import onnx
    import onnxruntime as ort

    try:
        proto = onnx.load(str(path), load_external_data=False)
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - a damaged or foreign file: say which and why
        raise ExportError(f"{path}: not a readable ONNX model ({type(exc).__name__}: {_first(exc)})") from None
    props = {p.key: p.value for p in proto.metadata_props}
    inp = session.get_inputs()[0]
    prep = _prep(path, props.get(METADATA_KEY))
    cast = np.int64 if "int64" in inp.type else np.float32

    def run(x: np.ndarray) -> np.ndarray:
        return np.asarray(session.run(None, {inp.name: x.astype(cast, copy=False)})[0])

    return Predictor(f"ONNX model {path}", prep, run)


def _pt2(path: Path) -> Predictor:
    import torch

    try:
        module = torch.export.load(str(path)).module()
    except Exception as exc:  # noqa: BLE001
        raise ExportError(f"{path}: not a readable torch.export program ({type(exc).__name__}: {_first(exc)})") \
            from None
    prep = _sidecar(path)

    def run(x: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return module(torch.from_numpy(x)).float().numpy()

    return Predictor(f"torch.export program {path}", prep, run)


def _pte(path: Path) -> Predictor:
    import torch

    try:
        from executorch.runtime import Runtime

        method = Runtime.get().load_program(str(path)).load_method("forward")
    except ImportError:
        raise ExportError(f"{path}: running an ExecuTorch program needs executorch: pip install "
                          '"torch-studio[edge]"') from None
    except Exception as exc:  # noqa: BLE001
        raise ExportError(f"{path}: not a readable ExecuTorch program ({type(exc).__name__}: {_first(exc)})") \
            from None
    prep = _sidecar(path)

    def run(x: np.ndarray) -> np.ndarray:
        return np.concatenate([method.execute([torch.from_numpy(x[i:i + 64])])[0].float().numpy()
                               for i in range(0, len(x), 64)])

    return Predictor(f"ExecuTorch program {path}", prep, run)


def _python(path: Path) -> Predictor:
    """A generated model.py with its weights beside it (its CLASSES, INPUT_SHAPE, MEAN and STD)."""
    import torch

    from .formats.python_format import load_generated

    try:
        code = load_generated(path)
        model = code.load()
        prep = Preprocessing(list(code.CLASSES), list(code.INPUT_SHAPE), list(getattr(code, "MEAN", [])),
                             list(getattr(code, "STD", [])))
    except Exception as exc:  # noqa: BLE001 - not a model.py written by the studio, or its weights are gone
        raise ExportError(f"{path}: not a model.py exported by Torch Studio with its weights beside it "
                          f"({type(exc).__name__}: {_first(exc)})") from None

    def run(x: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return model(torch.from_numpy(x)).float().numpy()

    return Predictor(f"PyTorch source {path}", prep, run)


def _sidecar(path: Path) -> Preprocessing:
    try:
        prep = read_sidecar(path)
    except ValueError as exc:
        raise ExportError(str(exc)) from None
    if prep is None:
        raise ExportError(f"{path}: its preprocessing file {path.name}.preprocessing.json is missing: the input "
                          "shape and class names are unknown (export it again with torch-studio export)")
    return prep


def _prep(path: Path, text: str | None) -> Preprocessing:
    if text is None:
        raise ExportError(f"{path}: holds no '{METADATA_KEY}' metadata (not exported by Torch Studio): its "
                          "preprocessing and class names are unknown")
    try:
        return Preprocessing.from_dict(json.loads(text))
    except ValueError as exc:
        raise ExportError(f"{path}: {exc}") from None


def _first(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__
