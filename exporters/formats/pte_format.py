"""ExecuTorch programs (``.pte``) for edge devices, lowered to XNNPACK where it can run the ops.

Needs the ``edge`` extra (``executorch``). Verification loads the file in the ExecuTorch runtime
and compares its outputs with PyTorch; memory is planned for batches up to ``max_batch``.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from ..errors import ExportError
from ..locate import export_program, raise_at_node
from ..options import ExportOptions
from ..proof import parity
from ..registry import Format, Written, export_format
from ..report import Check, latencies
from ..source import ExportSource
from .pt2_format import sidecar_check


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        level = logging.root.level
        logging.root.setLevel(logging.ERROR)
        try:
            yield
        finally:
            logging.root.setLevel(level)


def lower(module: torch.nn.Module, args: tuple[torch.Tensor, ...], max_batch: int) -> Any:
    """torch.export, then edge dialect with the XNNPACK partitioner, then an ExecuTorch program."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    with _quiet():
        program = export_program(module, args, max_batch)
        return to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()]).to_executorch()


@export_format
class PteFormat(Format):
    name = "pte"
    title = "ExecuTorch"
    suffix = ".pte"
    menu_text = "&ExecuTorch (.pte)"
    tip = "For edge devices (XNNPACK), run in the ExecuTorch runtime and checked"
    order = 30
    latency = "executorch_ms"
    requires = ("executorch",)
    install_hint = 'Install the edge extra: pip install "torch-studio[edge]" (it brings executorch).'

    def write(self, source: ExportSource, path: Path, options: ExportOptions) -> Written:
        if options.example_batch > options.max_batch:
            raise ExportError(f"the example batch {options.example_batch} exceeds max batch {options.max_batch}")
        example = source.example(options.example_batch)
        try:
            program = lower(source.model, (example,), options.max_batch)
        except Exception as exc:
            raise_at_node("ExecuTorch", source.module, source.graph, example,
                          lambda m, args: lower(m, args, options.max_batch), exc)
        path.write_bytes(program.buffer)
        side = source.prep.save_beside(path)
        graph = program.exported_program().graph_module.graph
        delegated = sum(1 for n in graph.nodes if "executorch_call_delegate" in str(n.target))
        portable = sum(1 for n in graph.nodes if n.op == "call_function" and "aten" in str(n.target))
        return Written([path, side], {"example_batch": options.example_batch, "max_batch": options.max_batch,
                                "xnnpack_partitions": delegated, "portable_ops": portable},
                       [f"batches of 1..{options.max_batch} samples; {delegated} XNNPACK partition(s), "
                        f"{portable} op(s) on portable kernels", f"preprocessing and class names in {side.name}"])

    def verify(self, source: ExportSource, written: Written, options: ExportOptions,
               ) -> tuple[list[Check], dict[str, object]]:
        from executorch.runtime import Runtime

        inputs = source.samples[:options.max_batch]
        with _quiet():
            method = Runtime.get().load_program(str(written.files[0])).load_method("forward")
            got = method.execute([inputs])[0]
        checks = [Check("ExecuTorch runtime", True, "the program loads and runs in the ExecuTorch runtime")]
        more, figures = parity(source, got, options, "parity with eager", len(inputs))
        checks += [*more, sidecar_check(written.files[0], source)]
        return checks, {**figures, **latencies(options.timing_runs, executorch_ms=lambda: method.execute([inputs]),
                                               pytorch_eager_ms=lambda: source.reference(inputs))}
