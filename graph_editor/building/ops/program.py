"""The exported-program node's PyTorch side: encoding, loading, builder, FLOP rule and import rule.

A program is encoded as text that a graph file holds: zlib-compressed JSON of the ExportedProgram's
own serialised graph (``torch._export.serde``: data, no pickle), the names, shapes and dtypes of its
weights (their values are the node's, in the weights file or checkpoint like any node's) and its
constant tensors as safetensors. Loading deserialises that graph with placeholder weights and never
falls back to unpickling; ``sha256`` must match, so a damaged or hand-edited program is refused.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors
from torch import fx, nn
from torch.utils.flop_counter import FlopCounterMode

from ...analysis.per_node import flop_rule
from ...importer.rules import Mapped, Unmappable, module_rule
from ...model.layers.program import TYPE
from ..modules import Call, Example, Params, Shape, builder, built_call

if TYPE_CHECKING:
    from torch.export import ExportedProgram

FORMAT = 1
# The example program of the per-type tests: encode() of a module returning
# ``((x @ x.transpose(1, 2)) * self.scale + self.w, x.relu())``, w a [4, 4] parameter, scale a constant 0.5.
_EXAMPLE_PROGRAM = (
    "eNrtWW1PIzcQ/iur/XLQi/ZIDpXSCqnctb3mxNGWUpUrG1lm15sYvPae7SVJEf+945fdbEJIQqA5CREpkV/G45lnHttj5ybMhMyx"
    "Dr8P2q0gLKToS5xDLbyJQygWA5SLtGQkhraqyZcpL0qtTOUcalghTbgS0vdynNtBcVigYRze3raChVIXSCXYzLNUEhuZXgtKotSr"
    "mYDTdAXFkrCy1s1FSmrNGss+0U5KC5kMIlGoCIOeSEvMVSEUiSgHCTN0GpiJfkVY5iRAnZ99iZtG+Iry1DS1nf0TiZTmO3P0WTuc"
    "+OLB7fsHd2YGPwzuGpMazZxonGKNvajSOLlCIJb4Eb9QRoI4jsM3Oi/eUPjmV2QUFWPT1goY5STYbwWUB8DXIZZpHPMAPpLoUvJg"
    "Cwc/BngSiy0gc2d7O/gmUJGlVfAaSsMWyJggb207zzn37EbWIGfKEUImUAi1WgjlmHKEop9HboCNPcr4jJuo/QM4OBApAs4kkhYg"
    "FzVBsKxQaCAKpCjvw4QOOeTsN+p4yZi1aS6KNngLWAhLOC9ZlJIMl2zDNBR6QOTqCqfI8RiWOZ+fN8Wcj3P5Vbu/Frkao5cwC2h1"
    "6gPwdKyaxO4pqTV1hjyCWM+eVfdR6hF8WolMcA7/H2R6eibVOcv6LPI5x/NlETg4l0XO8bVYVA1dzCLjw4aOuoeFfCqBfJYxN6rm"
    "Bt27vlbU/ViLmhe/xqx06feNX4y2lOpxYQftGVlF/yXNqPjcdbfO8+sGq1qSLyWVRCG4xNjwalkS05GSa5pUN5xqhjhMirJiV0pG"
    "lenWRaUlTVea21NIAUa4T5DIMuVYPSW1Y7UyPAaqWfdsvT7OFvo+37cMM/UEzq1vPF4pZGRUVMvIFIGU0tn35zi/EGzrldrfe9UK"
    "gOBU02tycGpDBhOTPpG25nk98MbM3GJu73JhRXI8EYDTZPh2qTmP4Usjs36Bfin07XvMWQv6Kp99wX2zlH8B/SuAbrO0F9A3C7pL"
    "kl5Q3xzqbuJxbiSaCWndfiEEu9MB2e99mW/tf1KCMTkSF5dz9WZM4OkZXRftcwy6SPP9HamCJDUuBZaQVWtSEWBy65m92hqFtTSa"
    "9E6e6i/KLFuoaPLaYpNVK97Q5DvtREQqqgAPXcPgJykVjLGO3JloyT1t6i+AaRSsUtfxEK3uvt407ME6qgsgGOeOJ3fVAiQYqv86"
    "MSZmX/yFygE0N7SNDLx5A+25FWJddjrO28bk2C+l2DbGJiKUacpVpMuCEXerNL+JgLU+0hNBs8oa3QPKUkn8BLG3eIPa/QVxVlej"
    "eY6OnkV8kZ0pTfQCM897i400E/RctIQn3FdCf0187li5Ns4eBv8sgWBh2GXv6GmXZ2/eG4i/oxBi1NkRqcUGZZSwtLnTiQJ2aHRt"
    "dg3Bq0UHS87u5m6jhqsO7OVgOJwMGDbo6q0ADjdfymGNwB5qDy2Xoo+quj1W3J6aDEiOZ6bK8aVb29/ZcZS7WsfNDLIULJaVu6cn"
    "h93j7vEH8HryXtJQGIedqL0btV8nZfut/7+uXwJwCsxPiUcVmsMhof2BVqbhPByaFnsSvO1A8Xy3FezCBO7Nwvz2oBZaADC3g8I/"
    "DqvPu70uP778/PeIdS+LvW5+skPO3kFZ0JPLT+MuHdKkMxgkH/6ivzGdHr3/ePX57GRw1tnP/+HHLP31E7Sr4dFPJ2l2ttPvvj+0"
    "X6P59+HBQXj7H7K28XY="
)
_EXAMPLE_SHA = "c458bebb994b3dbcfeb85bc996fb4a7b40a2cbea71aa942aab05859541e2baff"


class ProgramError(ValueError):
    """A program that cannot be encoded or loaded; the message says why."""


def encode(ep: ExportedProgram) -> tuple[str, str]:
    """``(program, sha256)``: the text a Program node holds for ``ep``, and its hash."""
    bad = [k for k, v in ep.constants.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise ProgramError(f"the program holds {len(bad)} non-tensor constant(s) ({bad[0]}), which cannot be "
                           "saved without pickling")
    from torch._export.serde import serialize as serde  # here: importing it loads dynamo (seconds at startup)

    art = serde.serialize(ep, serialize_state_dict=False, serialize_constants=False, serialize_example_inputs=False)
    first: dict[int, str] = {}  # a weight shared under several names (a block called twice) is one tensor
    weights = [[k, str(v.dtype).removeprefix("torch."), list(v.shape), isinstance(v, nn.Parameter),
                bool(v.requires_grad), first.setdefault(id(v), k)] for k, v in ep.state_dict.items()]
    on_meta = [k for k, v in ep.constants.items() if v.is_meta]
    if on_meta:
        raise ProgramError(f"the program's constant {on_meta[0]} is on the meta device: it has no values to save")
    constants = {k: v.detach().contiguous().cpu() for k, v in ep.constants.items()}
    payload = {"format": FORMAT, "program": art.exported_program.decode("utf-8"), "weights": weights,
               "constants": base64.b64encode(save_tensors(constants)).decode("ascii") if constants else ""}
    text = base64.b64encode(zlib.compress(json.dumps(payload).encode("utf-8"), 9)).decode("ascii")
    return text, hashlib.sha256(text.encode("ascii")).hexdigest()


@lru_cache(maxsize=32)
def _payload(text: str, sha256: str) -> dict[str, Any]:
    if hashlib.sha256(text.encode("ascii")).hexdigest() != sha256:
        raise ProgramError("the program does not match its sha256: the graph file was damaged or edited")
    try:
        payload = json.loads(zlib.decompress(base64.b64decode(text, validate=True)))
    except (ValueError, zlib.error) as exc:
        raise ProgramError(f"the program is not an encoded program: {exc}") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ProgramError(f"the program's format is {payload.get('format') if isinstance(payload, dict) else '?'}, "
                           f"this Torch Studio reads format {FORMAT}")
    return payload


def load_program(text: str, sha256: str) -> fx.GraphModule:
    """The program as a module on the current default device, its weights zero (the node's weights are
    loaded into it like any node's). ProgramError when it cannot be loaded."""
    payload = _payload(text, sha256)
    device = torch.empty(0).device  # build_module's torch.device context: meta for analysis
    state: dict[str, torch.Tensor] = {}
    for name, dtype, shape, is_param, grad, *alias in payload["weights"]:
        if alias and alias[0] != name:
            state[name] = state[alias[0]]  # the same tensor under another name: counted and trained once
            continue
        value = torch.zeros(shape, dtype=getattr(torch, dtype))
        state[name] = nn.Parameter(value, requires_grad=grad) if is_param else value
    constants = load_tensors(base64.b64decode(payload["constants"])) if payload["constants"] else {}
    constants = {k: v.to(device) for k, v in constants.items()}
    from torch._export.serde import serialize as serde

    artifact = serde.SerializedArtifact(payload["program"].encode("utf-8"), state, constants, {})  # type: ignore[arg-type]
    try:
        module = serde.deserialize(artifact).module(check_guards=False)
    except Exception as exc:  # the deserialiser raises many kinds for a program it cannot read
        raise ProgramError(f"the program cannot be loaded: {type(exc).__name__}: {str(exc)[:200]}") from None
    # The input check would refuse a batch below the example's (the captured range starts at 2); the node's
    # shape rule checks every other size
    for key, hook in list(module._forward_pre_hooks.items()):
        if getattr(hook, "__name__", "") == "_check_input_constraints_pre_hook":
            del module._forward_pre_hooks[key]
            module._forward_pre_hooks_with_kwargs.pop(key, None)
    return module


class ExportedProgramModule(nn.Module):
    """A Program node: runs its exported program, always returning a tuple (one item per output).

    The program was captured in evaluation mode and keeps that behaviour: ``train()`` switches this
    module's flag only (an unlifted program refuses ``train()``), gradients flow as in any module."""

    # model.py copies the loader beside this class: it runs with torch (its program deserialiser) and safetensors
    model_py_helpers: ClassVar[tuple[str, ...]] = ("FORMAT", "ProgramError", "_payload", "load_program")
    model_py_imports: ClassVar[tuple[str, ...]] = (
        "import base64", "import hashlib", "import json", "import zlib", "from functools import lru_cache",
        "from safetensors.torch import load as load_tensors")

    def __init__(self, program: str, sha256: str, source: str = "", in_shapes: str = "[[1]]",
                 out_shapes: str = "[[1]]") -> None:
        super().__init__()
        self.program = load_program(program, sha256)
        self._device = torch.device("cpu")  # where the captured graph's own tensors (arange, full...) are made
        self._retarget(torch.empty(0).device)

    def _retarget(self, device: torch.device) -> None:
        """The graph records the device its ops create tensors on (the capture's CPU): moved to ``device``
        when the inputs arrive elsewhere (meta for analysis, a GPU for training)."""
        if device == self._device:
            return
        for n in self.program.graph.nodes:  # aten.zeros(..., device=cpu), aten.to.device(x, cpu, torch.bool)
            n.args = tuple(device if isinstance(a, torch.device) else a for a in n.args)
            n.kwargs = {k: device if isinstance(v, torch.device) else v for k, v in n.kwargs.items()}
        self.program.recompile()
        self._device = device

    def train(self, mode: bool = True) -> ExportedProgramModule:
        self.training = mode
        return self

    def forward(self, *xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if xs and xs[0].device != self._device:
            self._retarget(xs[0].device)
        out = self.program(*xs)
        return tuple(out) if isinstance(out, tuple | list) else (out,)


def _example() -> Example:
    """A one-input, two-output program with a weight and a constant (see _EXAMPLE_PROGRAM)."""
    return Example((4, 4), {"program": _EXAMPLE_PROGRAM, "sha256": _EXAMPLE_SHA, "source": "example",
                            "in_shapes": "[[4, 4]]", "out_shapes": "[[4, 4], [4, 4]]"})


@builder(TYPE, example=_example())
def _build(p: Params, xs: list[Shape]) -> Call:
    _payload(p["program"], p["sha256"])  # a damaged program is refused here, where the node is named
    return Call(ExportedProgramModule, (), {k: p[k] for k in ("program", "sha256", "source", "in_shapes",
                                                              "out_shapes")})


@lru_cache(maxsize=256)
def _count(program: str, sha256: str, shapes: tuple[Shape, ...]) -> int:
    with torch.device("meta"):
        module = ExportedProgramModule(program, sha256)
        xs = [torch.empty(s) for s in shapes]
    with FlopCounterMode(display=False) as counter:
        module(*xs)
    return counter.get_total_flops()


@flop_rule(TYPE)
def _flops(p: Params, xs: list[Shape], out: Shape) -> int:
    return _count(p["program"], p["sha256"], tuple(tuple(x) for x in xs))


@module_rule(ExportedProgramModule)
def _import(m: ExportedProgramModule, xs: list[fx.Node]) -> Mapped:
    """A built Program node imports back as itself (its encoding is kept in the module's call)."""
    call = built_call(m)
    if call is None:
        raise Unmappable("an ExportedProgramModule that no Program node built")
    return Mapped(TYPE, dict(call.kwargs), xs)
