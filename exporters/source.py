"""What an export starts from: a graph, its fp32 PyTorch module with weights, and verification inputs.

The module is always float32 on the CPU in eval mode: a model trained in bf16/fp16 (or with
autocast) is exported in fp32, its weights cast up on load, so every format gets the same exact
reference to be checked against.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import fx

from graph_editor.building import BuildError, build_module
from graph_editor.model import Graph

from .errors import ExportError
from .preprocessing import INPUT_PREPARED, METADATA_KEY, Preprocessing
from .run_data import run_data

LOW_PRECISION = ("float16", "bfloat16")


@dataclass
class ExportSource:
    """A model ready to export. ``module`` is the graph's module (it takes standardised samples, as in
    training); ``model`` is what every format exports: ``preprocessing`` in front of it, so it takes what
    the dataset file holds. ``samples`` are the inputs verification runs on, as ``model`` takes them
    (raw validation samples of a run, with their ``labels``; random input-spec data otherwise);
    ``metrics`` are a run's (step, name, value) rows for the TensorBoard format."""

    graph: Graph
    module: fx.GraphModule
    samples: torch.Tensor
    name: str
    description: str
    run_id: int | None = None
    checkpoint: str | None = None
    weights_dtype: str = "float32"
    metrics: list[tuple[int, str, float | None]] | None = None
    notes: list[str] = field(default_factory=list)
    store_url: str | None = None
    preprocessing: Preprocessing | None = None
    labels: torch.Tensor | None = None
    model: torch.nn.Module = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.preprocessing is None:
            self.preprocessing = Preprocessing([str(i) for i in range(self.graph.num_classes)],
                                               list(self.graph.input_spec.shape), input=INPUT_PREPARED)
        self.model = self.preprocessing.module(self.module).eval()

    @property
    def prep(self) -> Preprocessing:
        assert self.preprocessing is not None  # set in __post_init__
        return self.preprocessing

    def example(self, batch: int, seed: int = 1) -> torch.Tensor:
        """An input batch of the graph's spec for tracing (float inputs exported as float32)."""
        return random_inputs(self.graph, batch, seed)

    def prepared(self, inputs: torch.Tensor) -> torch.Tensor:
        """``inputs`` as training fed them to the graph: standardised by the trainer's own function."""
        if not self.prep.standardises:
            return inputs
        from trainer.data import normalise

        return normalise(inputs, torch.tensor(self.prep.mean), torch.tensor(self.prep.std))

    def reference(self, inputs: torch.Tensor) -> torch.Tensor:
        """The PyTorch eager output every export is compared with: the graph's module on the inputs
        standardised as training did (not through ``model``, so an export that drops the step fails)."""
        with torch.inference_mode():
            return self.module(self.prepared(inputs))


def export_dtype(graph: Graph) -> torch.dtype:
    """The input dtype of exported models: int64 stays int64, every float becomes float32."""
    return torch.int64 if graph.input_spec.dtype == "int64" else torch.float32


def random_inputs(graph: Graph, batch: int, seed: int = 0) -> torch.Tensor:
    """Seeded random data of the input spec; columns read as category codes get valid codes."""
    gen = torch.Generator().manual_seed(seed)
    shape = (batch, *graph.input_spec.shape)
    if export_dtype(graph) == torch.int64:
        return torch.randint(0, _smallest_vocab(graph, None), shape, generator=gen)
    x = torch.randn(shape, generator=gen)
    for node in graph.nodes_of_type("Embedding"):
        if "Input" not in [graph.nodes[s].type for s in graph.predecessors(node.id)]:
            continue
        vocab = int(node.params.get("num_embeddings") or 2)
        cols = list(node.params.get("columns") or [])
        if cols:
            x[:, cols] = torch.randint(0, vocab, (batch, len(cols)), generator=gen).float()
        else:
            x = torch.randint(0, vocab, shape, generator=gen).float()
    return x


def _smallest_vocab(graph: Graph, default: int | None) -> int:
    sizes = [int(n.params.get("num_embeddings", 0)) for n in graph.nodes_of_type("Embedding")]
    sizes = [s for s in sizes if s > 0]
    return min(sizes) if sizes else (default or 2)


def build_reference(graph: Graph, seed: int = 0) -> fx.GraphModule:
    """The graph built as a float32 eval-mode module on the CPU (seeded initial weights)."""
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            module = build_module(graph, device="cpu")
    except BuildError as exc:
        raise ExportError(f"the graph cannot be built: {exc.message}", node=exc.node) from None
    return module.float().eval()


def read_weights(path: str | Path) -> dict[str, torch.Tensor]:
    """A state dict from a safetensors file (a trainer checkpoint's ``model.*`` or plain weights) or a
    ``torch.save``d state dict, loaded with ``weights_only=True``: nothing is unpickled."""
    p = Path(path)
    if not p.is_file():
        raise ExportError(f"{p}: no such checkpoint file")
    try:
        if p.suffix == ".safetensors":
            from safetensors.torch import load_file

            tensors = load_file(str(p))
            if any(k.startswith("model.") for k in tensors):
                tensors = {k.removeprefix("model."): v for k, v in tensors.items() if k.startswith("model.")}
            return tensors
        data = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # a corrupt or foreign file: say which and why
        raise ExportError(f"{p}: cannot read weights ({type(exc).__name__}: {exc})") from None
    for key in ("state_dict", "model"):
        if isinstance(data, dict) and isinstance(data.get(key), dict):
            data = data[key]
    if not isinstance(data, dict) or not all(isinstance(v, torch.Tensor) for v in data.values()):
        raise ExportError(f"{p}: not a state dict of tensors")
    return data


def load_weights(module: fx.GraphModule, weights: dict[str, torch.Tensor], where: str) -> str:
    """Load ``weights`` into ``module`` (cast to its float32); returns the weights' stored float dtype.

    A checkpoint that does not fit the graph raises an ExportError naming the first node at fault.
    """
    own = module.state_dict()
    missing = [k for k in own if k not in weights]
    extra = [k for k in weights if k not in own]
    wrong = [k for k in own if k in weights and tuple(weights[k].shape) != tuple(own[k].shape)]
    for keys, why in ((wrong, "has tensors of another shape"), (missing, "has no tensors"),
                      (extra, "is not in the graph but has tensors")):
        if keys:
            node = keys[0].split(".")[0]
            detail = f"{keys[0]} {tuple(weights[keys[0]].shape)} vs {tuple(own[keys[0]].shape)}" if keys is wrong \
                else ", ".join(keys[:4])
            raise ExportError(f"{where} does not fit this graph: node '{node}' {why} in it ({detail})", node=node)
    module.load_state_dict(weights, strict=True)  # copies cast bf16/fp16 values up to float32
    dtypes = {str(v.dtype).removeprefix("torch.") for v in weights.values() if v.is_floating_point()}
    return dtypes.pop() if len(dtypes) == 1 else ("mixed" if dtypes else "float32")


def from_graph(graph: Graph, *, checkpoint: str | Path | None = None, name: str | None = None,
               verify_batch: int = 3, seed: int = 0) -> ExportSource:
    """A source for a graph alone: its checkpoint's weights, or seeded fresh weights when there is none.

    A trainer checkpoint carries its run's spec: the run's data gives the preprocessing (the training
    split's standardisation and class names) and the raw validation samples verification runs on.
    Otherwise verification runs on random input-spec data of ``verify_batch`` samples, and the model
    takes its input as the graph does.
    """
    module = build_reference(graph, seed)
    stem = name or _stem(graph)
    notes = []
    weights_dtype = "float32"
    spec = None
    if checkpoint is not None:
        weights_dtype = load_weights(module, read_weights(checkpoint), str(checkpoint))
        spec = checkpoint_spec(checkpoint)
        desc = f"graph '{stem}' with weights from {checkpoint}"
    else:
        desc = f"graph '{stem}' with freshly initialised weights (no checkpoint)"
    if weights_dtype in LOW_PRECISION or graph.input_spec.dtype in LOW_PRECISION:
        notes.append(f"weights stored as {weights_dtype}, input spec {graph.input_spec.dtype}: exported in float32")
    ckpt = str(checkpoint) if checkpoint else None
    if spec is not None:
        data = run_data(spec, graph, max(verify_batch, 64))
        notes += [data.note, data.preprocessing.describe()]
        return ExportSource(graph, module, data.samples, stem, desc, checkpoint=ckpt, weights_dtype=weights_dtype,
                            notes=notes, preprocessing=data.preprocessing, labels=data.labels)
    prep = header_preprocessing(checkpoint) if checkpoint is not None else None
    if prep is not None:
        notes.append(prep.describe())
    notes.append(f"verified on random input-spec data ({verify_batch} samples, seed {seed}): the graph has no run")
    return ExportSource(graph, module, random_inputs(graph, verify_batch, seed), stem, desc, checkpoint=ckpt,
                        weights_dtype=weights_dtype, notes=notes, preprocessing=prep)


def _header(path: str | Path, key: str) -> dict[str, Any] | None:
    """The JSON object under ``key`` in a safetensors file's header, or None."""
    p = Path(path)
    if p.suffix != ".safetensors":
        return None
    import json

    from safetensors import safe_open

    try:
        with safe_open(str(p), "pt") as f:
            text = (f.metadata() or {}).get(key)
        data = json.loads(text) if text else None
    except Exception:  # noqa: BLE001 - read_weights already read the tensors; a foreign header holds nothing
        return None
    return data if isinstance(data, dict) else None


def checkpoint_spec(path: str | Path) -> dict[str, Any] | None:
    """The run spec a trainer checkpoint records in its header (None for plain weights)."""
    spec = (_header(path, "torch_studio") or {}).get("spec")
    return spec if isinstance(spec, dict) else None


def header_preprocessing(path: str | Path) -> Preprocessing | None:
    """The preprocessing an exported safetensors file holds in its header, or None."""
    data = _header(path, METADATA_KEY)
    try:
        return Preprocessing.from_dict(data) if data else None
    except ValueError:
        return None


def _stem(graph: Graph) -> str:
    raw = str(graph.metadata.get("name") or "model")
    cleaned = re.sub(r"[^0-9a-z]+", "_", raw.strip().lower()).strip("_")
    return cleaned or "model"
