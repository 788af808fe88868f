"""safetensors weights together with the graph file they belong to.

``NAME.safetensors`` holds the state dict (keys are node ids: ``conv1.weight``) with the graph JSON
in its header metadata; ``NAME.graph.json`` beside it is the same graph as a normal graph file, so
``build_module(load_graph(...))`` plus ``load_state_dict`` gives the model back.
"""

from __future__ import annotations

from pathlib import Path

import torch

from graph_editor.model import dumps, load_graph, save_graph
from graph_editor.model.serialize import current_umask

from ..options import ExportOptions
from ..preprocessing import METADATA_KEY
from ..proof import parity
from ..registry import Format, Written, export_format
from ..report import Check
from ..source import ExportSource, build_reference, header_preprocessing, load_weights


def graph_file_for(path: Path) -> Path:
    """``model.safetensors`` -> ``model.graph.json`` (the graph saved beside the weights)."""
    return path.with_name(path.name.removesuffix(".safetensors") + ".graph.json")


def state_tensors(module: torch.nn.Module, rename: dict[str, str] | None = None) -> dict[str, torch.Tensor]:
    """The state dict as contiguous CPU tensors (safetensors refuses views and shared storage)."""
    out = {}
    for key, value in module.state_dict().items():
        node, _, rest = key.partition(".")
        name = f"{(rename or {}).get(node, node)}.{rest}" if rest else key
        out[name] = value.detach().to("cpu").clone().contiguous()
    return out


@export_format
class SafetensorsFormat(Format):
    name = "safetensors"
    title = "safetensors"
    suffix = ".safetensors"
    menu_text = "&safetensors + Graph"
    tip = "The weights with the graph file beside them"
    order = 40

    def write(self, source: ExportSource, path: Path, options: ExportOptions) -> Written:
        from safetensors.torch import save_file

        graph_path = graph_file_for(path)
        save_graph(source.graph, graph_path)
        tensors = state_tensors(source.module)
        save_file(tensors, str(path), metadata={"format": "pt", "torch_studio.graph": dumps(source.graph),
                                                 "torch_studio.source": source.description,
                                                 METADATA_KEY: source.prep.to_json()})
        for written in (path, graph_path):  # safetensors (and the atomic graph write) make 0600 files;
            written.chmod(_default_mode())   # the other exported files follow the umask
        params = sum(t.numel() for t in tensors.values())
        return Written([path, graph_path], {"tensors": len(tensors), "values": params},
                       [f"load with: build_module(load_graph('{graph_path.name}')).load_state_dict("
                        f"safetensors.torch.load_file('{path.name}'))",
                        f"the graph takes standardised samples: the preprocessing and class names are in the "
                        f"header metadata '{METADATA_KEY}' ({source.prep.describe()})"])

    def verify(self, source: ExportSource, written: Written, options: ExportOptions,
               ) -> tuple[list[Check], dict[str, object]]:
        from safetensors.torch import load_file

        path, graph_path = written.files
        rebuilt = build_reference(load_graph(graph_path), seed=1)
        load_weights(rebuilt, load_file(str(path)), str(path))
        prep = header_preprocessing(path)
        if prep is None:
            return [Check("metadata", False, f"the header has no readable '{METADATA_KEY}'")], {}
        with torch.inference_mode():
            got = prep.module(rebuilt)(source.samples)
        expected = source.reference(source.samples)
        same = torch.equal(got, expected)
        checks, figures = parity(source, got, options, "parity")
        return [Check("round trip", same, "graph file + weights + the header's preprocessing rebuild a model with "
                      "bit-identical outputs on raw samples" if same
                      else f"outputs differ after reloading (max abs diff {figures['max_abs_diff']:.3g})"),
                Check("metadata", prep == source.prep, f"the header holds the preprocessing and "
                      f"{len(prep.classes)} class names"), *checks[1:]], figures


def _default_mode() -> int:
    """The mode a newly created file gets here (0666 less the process's umask)."""
    return 0o666 & ~current_umask()
