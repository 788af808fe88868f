"""``torch.export`` programs (``.pt2``): saved with ``torch.export.save``, loaded back and checked."""

from __future__ import annotations

from pathlib import Path

import torch

from ..locate import export_program, raise_at_node
from ..options import ExportOptions
from ..preprocessing import read_sidecar, sidecar
from ..proof import parity
from ..registry import Format, Written, export_format
from ..report import Check, latencies
from ..source import ExportSource


@export_format
class Pt2Format(Format):
    name = "pt2"
    title = "torch.export"
    suffix = ".pt2"
    menu_text = "torch.export (.&pt2)"
    tip = "A torch.export program, loaded back and checked"
    order = 20
    latency = "pt2_ms"

    def write(self, source: ExportSource, path: Path, options: ExportOptions) -> Written:
        example = source.example(options.example_batch)
        try:
            program = export_program(source.model, (example,))
        except Exception as exc:
            raise_at_node("torch.export", source.module, source.graph, example,
                          lambda m, args: export_program(m, args), exc)
        torch.export.save(program, str(path))
        side = source.prep.save_beside(path)
        ops = sum(1 for n in program.graph.nodes if n.op == "call_function")
        return Written([path, side], {"example_batch": options.example_batch, "aten_ops": ops},
                       [f"preprocessing and class names in {side.name}"], keep={"program": program})

    def verify(self, source: ExportSource, written: Written, options: ExportOptions,
               ) -> tuple[list[Check], dict[str, object]]:
        program = written.keep.get("program")
        return verify_pt2(written.files[0], source, options,
                          program if isinstance(program, torch.export.ExportedProgram) else None)


def verify_pt2(path: Path, source: ExportSource, options: ExportOptions,
               program: torch.export.ExportedProgram | None = None,
               ) -> tuple[list[Check], dict[str, object]]:
    """Load the program back with ``torch.export.load``: bit-identical to the program that was saved,
    and within tolerance of the eager module (decompositions may round differently)."""
    try:
        loaded = torch.export.load(str(path)).module()
    except Exception as exc:
        return [Check("torch.export.load", False, f"{type(exc).__name__}: {str(exc)[:300]}")], {}
    checks = [Check("torch.export.load", True, "the program loads back")]
    inputs = source.samples
    with torch.inference_mode():
        got = loaded(inputs)
    if program is not None:
        with torch.inference_mode():
            before = program.module()(inputs)
        same = torch.equal(before, got)
        checks.append(Check("save/load round trip", same, "the loaded program gives bit-identical outputs" if same
                            else "the loaded program computes something else than the saved one"))
    more, figures = parity(source, got, options, "parity with eager")
    checks += [*more, sidecar_check(path, source)]

    def run() -> None:
        with torch.inference_mode():
            loaded(inputs)

    return checks, {**figures, **latencies(options.timing_runs, pt2_ms=run,
                                           pytorch_eager_ms=lambda: source.reference(inputs))}


def sidecar_check(path: Path, source: ExportSource) -> Check:
    """The JSON beside the file holds the preprocessing and class names the model was written with."""
    try:
        read = read_sidecar(path)
    except ValueError as exc:
        return Check("metadata", False, str(exc))
    same = read == source.prep
    return Check("metadata", same, f"{sidecar(path).name} holds the preprocessing and {len(source.prep.classes)} "
                 "class names" if same else f"{sidecar(path).name} is missing or differs from the model's")
