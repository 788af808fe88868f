"""A learnable tensor as a node: its module holds one ``nn.Parameter`` of shape ``[1, *shape]`` and
returns it. An imported module's parameter read directly in ``forward`` (a class token, a position
embedding, a layer scale) becomes such a node, carrying its value. A Constant node is the same for a
tensor that is not learned (a buffer, or what the importer computed from sizes: an attention mask, a
position table): its values live in the graph (``values``), not in the weights. ExpandBatch repeats such a
batch-1 tensor to the batch of another input, as ``cls_token.expand(x.shape[0], -1, -1)`` does
before the class token joins the patch tokens."""

from __future__ import annotations

import base64
import binascii
import operator
import zlib
from typing import Any, ClassVar

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors
from torch import fx, nn

from ...analysis.per_node import zero_flops
from ...importer.rules import Mapped, Unmappable, module_rule
from ..modules import Call, Example, Params, Shape, builder


class LearnedTensor(nn.Module):
    """A learnable tensor of shape ``[1, *shape]`` (batch dimension 1: it broadcasts over a batch)."""

    def __init__(self, shape: list[int], init: str = "trunc_normal", std: float = 0.02) -> None:
        super().__init__()
        self.init, self.std = init, std
        self.value = nn.Parameter(torch.empty(1, *shape))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.value.is_meta:
            return
        with torch.no_grad():
            if self.init == "zeros":
                nn.init.zeros_(self.value)
            elif self.init == "ones":
                nn.init.ones_(self.value)
            elif self.init == "normal":
                nn.init.normal_(self.value, std=self.std)
            else:
                nn.init.trunc_normal_(self.value, std=self.std, a=-2 * self.std, b=2 * self.std)

    def forward(self) -> torch.Tensor:
        return self.value

    def extra_repr(self) -> str:
        return f"shape={list(self.value.shape[1:])}, init={self.init!r}"


@builder("Parameter", example=Example((5, 8), {"shape": [5, 8], "init": "normal", "std": 0.5}))
def _parameter(p: Params, xs: list[Shape]) -> Call:
    return Call(LearnedTensor, (list(p["shape"]),), {"init": p["init"], "std": p["std"]})


zero_flops("Parameter")


@module_rule(LearnedTensor)
def _import_learned(m: LearnedTensor, xs: list[fx.Node]) -> Mapped:
    return Mapped("Parameter", {"shape": list(m.value.shape[1:]), "init": m.init, "std": m.std}, xs)


def import_parameter(value: torch.Tensor) -> tuple[Mapped, torch.Tensor]:
    """A tensor parameter read in ``forward`` as a Parameter node and its value keyed for the node's
    module. A leading dimension of 1 is the node's batch dimension; any other shape gets one in front,
    which broadcasting does not notice (``x * gamma`` with gamma ``[D]`` reads ``[1, D]``)."""
    if not isinstance(value, nn.Parameter):
        raise Unmappable("reads a buffer (a tensor that is not learned) directly; only parameters map to nodes")
    if value.dim() == 0:
        raise Unmappable("reads a scalar parameter; a Parameter node holds a tensor of at least one dimension")
    data = value.detach()
    if value.dim() < 2 or value.shape[0] != 1:
        data = data.unsqueeze(0)
    return Mapped("Parameter", {"shape": [int(d) for d in data.shape[1:]], "init": "zeros"}, []), data


# ------------------------------------------------------------------ Constant
def encode_values(value: torch.Tensor) -> str:
    """The text a Constant node's ``values`` holds for ``value``: safetensors, zlib-compressed, base64."""
    raw = save_tensors({"value": value.detach().contiguous().cpu()})
    return base64.b64encode(zlib.compress(raw, 9)).decode("ascii")


def decode_values(text: str, shape: list[int], dtype: str, fill: float = 0.0) -> torch.Tensor:
    """A Constant node's tensor ``[1, *shape]`` on the default device; ValueError naming ``values`` where the
    text is damaged or holds another shape or dtype."""
    want, kind = (1, *shape), getattr(torch, dtype)
    device = torch.empty(0).device  # build_module's device context: meta for analysis
    if not text:
        return torch.full(want, fill, dtype=kind, device=device)
    try:
        value = load_tensors(zlib.decompress(base64.b64decode(text, validate=True)))["value"]
    except (binascii.Error, zlib.error, SafetensorError, KeyError, ValueError) as exc:
        raise ValueError(f"values cannot be read ({type(exc).__name__}: {str(exc)[:80]}); an import writes them "
                         "(safetensors, zlib, base64)") from None
    if tuple(value.shape) != want or value.dtype != kind:
        raise ValueError(f"values hold {str(value.dtype).removeprefix('torch.')} {list(value.shape)}, the node says "
                         f"{dtype} {list(want)}")
    return value.to(device)


class FixedTensor(nn.Module):
    """A tensor that is not learned, ``[1, *shape]``: a buffer outside the state dict, since its values are the
    graph's own (a weights file or checkpoint need not carry them)."""

    value: torch.Tensor
    # model.py copies the decoder beside this class, so that it reads the values with torch and safetensors alone
    model_py_helpers: ClassVar[tuple[str, ...]] = ("decode_values",)
    model_py_imports: ClassVar[tuple[str, ...]] = (
        "import base64", "import binascii", "import zlib", "from safetensors import SafetensorError",
        "from safetensors.torch import load as load_tensors")

    def __init__(self, shape: list[int], dtype: str = "float32", fill: float = 0.0, values: str = "") -> None:
        super().__init__()
        self.register_buffer("value", decode_values(values, list(shape), dtype, fill), persistent=False)

    def forward(self) -> torch.Tensor:
        return self.value

    def extra_repr(self) -> str:
        return f"shape={list(self.value.shape[1:])}, dtype={self.value.dtype}"


_EXAMPLE_VALUES = encode_values(torch.arange(40, dtype=torch.float32).view(1, 5, 8))


@builder("Constant", example=Example((5, 8), {"shape": [5, 8], "values": _EXAMPLE_VALUES}))
def _constant(p: Params, xs: list[Shape]) -> Call:
    decode_values(p["values"], list(p["shape"]), p["dtype"], p["fill"])  # damaged values refused here, named
    return Call(FixedTensor, (list(p["shape"]),), {"dtype": p["dtype"], "fill": p["fill"], "values": p["values"]})


zero_flops("Constant")


@module_rule(FixedTensor)
def _import_fixed(m: FixedTensor, xs: list[fx.Node]) -> Mapped:
    return import_constant(m.value)


def import_constant(value: torch.Tensor) -> Mapped:
    """A tensor that is not learned (a buffer, a value computed from sizes) as a Constant node holding it, as
    ``[1, *shape]``: a leading 1 is the node's batch dimension, any other shape gets one in front."""
    if value.is_meta:
        raise Unmappable("reads a constant tensor whose values are on the meta device; a Constant node holds "
                         "values")
    data = value.detach()
    if data.dim() == 0:
        data = data.reshape(1, 1)
    elif data.dim() < 2 or data.shape[0] != 1:
        data = data.unsqueeze(0)
    dtype = str(data.dtype).removeprefix("torch.")
    return Mapped("Constant", {"shape": [int(d) for d in data.shape[1:]], "dtype": dtype,
                               "values": encode_values(data)}, [])


# ------------------------------------------------------------------ ExpandBatch
class ExpandToBatch(nn.Module):
    """A batch-1 tensor repeated (a view, no copy) to the batch of ``like``."""

    def forward(self, x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        return x.expand(like.shape[0], *x.shape[1:])


@builder("ExpandBatch", example=Example((5, 8)))
def _expand_batch(p: Params, xs: list[Shape]) -> Call:
    return Call(ExpandToBatch)


zero_flops("ExpandBatch")
module_rule(ExpandToBatch)(lambda m, xs: Mapped("ExpandBatch", {}, xs))


def batch_source(size: Any) -> fx.Node | None:
    """The tensor whose batch size a traced size is (``x.shape[0]``, ``x.size(0)``, ``x.size()[0]``), or None."""
    if not isinstance(size, fx.Node):
        return None
    if size.op == "call_method" and size.target == "size" and len(size.args) == 2 and size.args[1] == 0:
        return _node(size.args[0])
    if size.op == "call_function" and size.target is operator.getitem and size.args[1] == 0:
        inner = size.args[0]
        if isinstance(inner, fx.Node) and (
                inner.op == "call_function" and inner.target is getattr and inner.args[1] == "shape"
                or inner.op == "call_method" and inner.target == "size" and len(inner.args) == 1):
            return _node(inner.args[0])
    return None


def _node(arg: Any) -> fx.Node | None:
    return arg if isinstance(arg, fx.Node) else None


def expand_to_batch(x: fx.Node, batch: Any, sizes: list[Any]) -> Mapped | None:
    """``x.expand(like.shape[0], -1, ...)`` of a batch-1 ``x`` (a class token) as ExpandBatch, or None
    when it is not that (the batch kept, or sizes that change other dims)."""
    like = batch_source(batch)
    value = x.meta.get("val")
    if like is None or not isinstance(value, torch.Tensor) or value.dim() == 0 or value.shape[0] != 1:
        return None
    if any(isinstance(s, fx.Node) or s not in (-1, d) for s, d in zip(sizes, value.shape[1:], strict=False)):
        return None
    return Mapped("ExpandBatch", {}, [x, like])
