"""The Computed node's PyTorch side: its recipe, module, builder, FLOP rule and import rule.

A recipe is the text a graph file holds for the node: a safetensors blob (its fixed tensors, e.g. a
coordinates table or a gather index), whose metadata is the JSON of the node's tensors (name, learned or
fixed, dtype, shape) and its steps, each an ATen op from :data:`OPS` with its arguments (numbers, lists,
dtypes, earlier values by index), zlib-compressed and base64-encoded. Loading runs no code: the ops are
looked up in that fixed table, never by a name read from the file. The learned tensors are the node's
weights (in the weights file and checkpoints like any node's), so training changes them and the value
follows at every forward, as in the module it was imported from.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import operator
import zlib
from functools import lru_cache
from typing import Any, ClassVar

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors
from torch import fx, nn
from torch.utils.flop_counter import FlopCounterMode

from ...analysis.per_node import flop_rule
from ...importer.rules import Mapped, module_rule
from ..modules import Call, Example, Params, Shape, builder

RECIPE_FORMAT = 1


@lru_cache(maxsize=1)
def recipe_ops() -> dict[str, Any]:
    """The ops a recipe may use, by name: element-wise, shape, gather and linear-algebra ops that a weight
    computed from parameters is made of (what make_fx records for SwinV2's, BEiT's, EVA's and ViT-RelPos' code)."""
    A = torch.ops.aten
    ops: dict[str, Any] = {str(op): op for op in (
    A.add.Tensor, A.add.Scalar, A.sub.Tensor, A.sub.Scalar, A.rsub.Scalar, A.mul.Tensor, A.mul.Scalar,
    A.div.Tensor, A.div.Scalar, A.neg.default, A.exp.default, A.log.default, A.log1p.default, A.log2.default,
    A.sign.default, A.abs.default, A.sqrt.default, A.rsqrt.default, A.pow.Tensor_Scalar, A.reciprocal.default,
    A.clamp.default, A.clamp_min.default, A.clamp_max.default, A.sigmoid.default, A.tanh.default, A.relu.default,
    A.gelu.default, A.silu.default, A._softmax.default, A.mm.default, A.addmm.default, A.bmm.default, A.t.default,
    A.view.default, A._unsafe_view.default, A.reshape.default, A.permute.default, A.transpose.int,
    A.unsqueeze.default, A.squeeze.dim, A.squeeze.dims, A.expand.default, A.clone.default, A.cat.default,
    A.stack.default, A.slice.Tensor, A.select.int, A.index.Tensor, A.index_select.default, A.zeros_like.default,
    A.ones_like.default, A.full_like.default, A._to_copy.default, A.repeat.default, A.flatten.using_ints,
    A.sum.dim_IntList, A.mean.dim, A.linalg_vector_norm.default, A.split.Tensor, A.unbind.int, A.alias.default,
    A.lift_fresh_copy.default, A.detach.default,
    )}
    ops["getitem"] = operator.getitem  # picks one value of a multi-output op (split, unbind)
    return ops


OPS = recipe_ops()


class RecipeError(ValueError):
    """A recipe that cannot be read or does not describe the node; the message says why."""


class Recipe:
    """What a Computed node computes: ``tensors`` ``[name, "learned" | "fixed", dtype, shape]`` are values
    0..T-1, step k's output is value T+k, ``out`` the value returned (as ``[1, *shape]``)."""

    __slots__ = ("tensors", "steps", "out", "fixed")

    def __init__(self, tensors: list[list[Any]], steps: list[list[Any]], out: int,
                 fixed: dict[str, torch.Tensor]) -> None:
        self.tensors, self.steps, self.out, self.fixed = tensors, steps, out, fixed


def encode_recipe(recipe: Recipe) -> str:
    meta = json.dumps({"format": RECIPE_FORMAT, "tensors": recipe.tensors, "steps": recipe.steps, "out": recipe.out})
    raw = save_tensors({k: v.detach().contiguous().cpu() for k, v in recipe.fixed.items()}, metadata={"recipe": meta})
    return base64.b64encode(zlib.compress(raw, 9)).decode("ascii")


@lru_cache(maxsize=64)
def decode_recipe(text: str) -> Recipe:
    """The recipe ``text`` holds; RecipeError naming what is wrong where it is damaged or uses an op outside
    :data:`OPS`."""
    try:
        raw = zlib.decompress(base64.b64decode(text, validate=True))
        fixed = load_tensors(raw)
        meta = json.loads(_metadata(raw)["recipe"])
    except (binascii.Error, zlib.error, SafetensorError, KeyError, ValueError, TypeError) as exc:
        raise RecipeError(f"recipe cannot be read ({type(exc).__name__}: {str(exc)[:80]}); an import writes it") \
            from None
    if meta.get("format") != RECIPE_FORMAT:
        raise RecipeError(f"recipe's format is {meta.get('format')}, this reads format {RECIPE_FORMAT}")
    unknown = sorted({s[0] for s in meta["steps"] if s[0] not in recipe_ops()})
    if unknown:
        raise RecipeError(f"recipe uses {unknown[0]}, which is not among the ops a Computed node may run")
    names = [t[0] for t in meta["tensors"]]
    bad = [n for n in names if not n.isidentifier() or n in _reserved() or names.count(n) > 1]
    missing = [t[0] for t in meta["tensors"] if t[1] == "fixed" and t[0] not in fixed]
    if bad or missing:
        raise RecipeError(f"recipe's tensor {(bad or missing)[0]!r} is " + ("not a usable name" if bad else
                                                                              "fixed but holds no values"))
    return Recipe(meta["tensors"], meta["steps"], int(meta["out"]), fixed)


def _metadata(raw: bytes) -> dict[str, str]:
    """The safetensors header's ``__metadata__`` (the JSON header after its 8-byte length)."""
    size = int.from_bytes(raw[:8], "little")
    return dict(json.loads(raw[8:8 + size])["__metadata__"])


@lru_cache(maxsize=1)
def _reserved() -> frozenset[str]:
    """The names a module already has (a tensor named ``forward`` or ``training`` would shadow them)."""
    return frozenset(dir(nn.Module()))


# ------------------------------------------------------------------ arguments
def encode_arg(a: Any, index: dict[fx.Node, int]) -> Any:
    """An op argument as JSON: an earlier value ``{"ref": k}``, a dtype, the device (whichever the node runs
    on), a number (infinities named), a list; ValueError for anything else."""
    if isinstance(a, fx.Node):
        return {"ref": index[a]}
    if a is None or isinstance(a, bool | int | str):
        return a
    if isinstance(a, float):
        return a if math.isfinite(a) else {"float": str(a)}
    if isinstance(a, list | tuple):
        return [encode_arg(x, index) for x in a]
    if isinstance(a, torch.dtype):
        return {"dtype": str(a).removeprefix("torch.")}
    if isinstance(a, torch.device):
        return {"device": ""}
    if isinstance(a, torch.layout | torch.memory_format):
        return {type(a).__name__.removeprefix("torch."): str(a).removeprefix("torch.")}
    raise ValueError(f"an argument of type {type(a).__name__} cannot be written to a recipe")


class _Ref:
    __slots__ = ("k",)

    def __init__(self, k: int) -> None:
        self.k = k


class _Device:
    """Stands for the device the node runs on, in a recipe's arguments."""


def _decode_arg(a: Any) -> Any:
    if isinstance(a, list):
        return [_decode_arg(x) for x in a]
    if not isinstance(a, dict):
        return a
    (kind, value), = a.items()
    if kind == "ref":
        return _Ref(int(value))
    if kind == "float":
        return float(value)
    if kind == "device":
        return _Device
    if kind in ("dtype", "layout", "memory_format") and isinstance(getattr(torch, value, None),
                                                                    torch.dtype | torch.layout | torch.memory_format):
        return getattr(torch, value)
    raise RecipeError(f"recipe holds an argument {a!r} it cannot read")


def _resolve(a: Any, values: list[Any], device: torch.device) -> Any:
    if isinstance(a, _Ref):
        return values[a.k]
    if a is _Device:
        return device
    if isinstance(a, list):
        return [_resolve(x, values, device) for x in a]
    return a


# ------------------------------------------------------------------ the module
class ComputedTensor(nn.Module):
    """A tensor computed from this module's own learned tensors (and fixed ones) at every forward, returned
    as ``[1, *shape]``: batch dimension 1, so it broadcasts against a batch."""

    # model.py copies the recipe's reader beside this class, so that it runs with torch and safetensors alone
    model_py_helpers: ClassVar[tuple[str, ...]] = (
        "RECIPE_FORMAT", "RecipeError", "Recipe", "recipe_ops", "_reserved", "_metadata", "decode_recipe", "_Ref",
        "_Device", "_decode_arg", "_resolve", "leading_one")
    model_py_imports: ClassVar[tuple[str, ...]] = (
        "import base64", "import binascii", "import json", "import operator", "import zlib",
        "from functools import lru_cache", "from typing import Any",
        "from safetensors import SafetensorError", "from safetensors.torch import load as load_tensors")

    def __init__(self, shape: list[int], recipe: str) -> None:
        super().__init__()
        self.shape, self.recipe = list(shape), recipe
        r = decode_recipe(recipe)
        device = torch.empty(0).device  # build_module's device context: meta for analysis
        self.names = [t[0] for t in r.tensors]
        for name, kind, dtype, size in r.tensors:
            if kind == "learned":
                self.register_parameter(name, nn.Parameter(torch.zeros(size, dtype=getattr(torch, dtype),
                                                                       device=device)))
            else:
                self.register_buffer(name, r.fixed[name].to(device), persistent=False)
        self.steps = [(recipe_ops()[op], _decode_arg(args), {k: _decode_arg(v) for k, v in kwargs.items()})
                      for op, args, kwargs in r.steps]
        self.out = r.out
        if not 0 <= self.out < len(self.names) + len(self.steps):
            raise RecipeError(f"recipe returns value {self.out}, beyond its {len(self.names) + len(self.steps)}")

    def forward(self) -> torch.Tensor:
        values: list[Any] = [getattr(self, n) for n in self.names]
        device = values[0].device if values else torch.empty(0).device
        for op, args, kwargs in self.steps:
            values.append(op(*_resolve(args, values, device), **{k: _resolve(v, values, device)
                                                                  for k, v in kwargs.items()}))
        return leading_one(values[self.out])

    def extra_repr(self) -> str:
        ops = ", ".join(str(op).removeprefix("aten.").rsplit(".", 1)[0] for op, _, _ in self.steps)
        return f"shape={self.shape}, tensors={self.names}, steps=[{ops}]"


def leading_one(value: torch.Tensor) -> torch.Tensor:
    """``value`` as ``[1, *shape]``, as a Parameter or Constant node holds it: a leading 1 is the node's batch
    dimension, any other shape gets one in front (which broadcasting does not notice)."""
    if value.dim() == 0:
        return value.reshape(1, 1)
    return value if value.dim() >= 2 and value.shape[0] == 1 else value.unsqueeze(0)


def _example_recipe() -> str:
    """BEiT's qkv bias for a width of 4: ``cat((q_bias, zeros_like(v_bias), v_bias)) * scale``, scale fixed."""
    tensors = [["q_bias", "learned", "float32", [4]], ["v_bias", "learned", "float32", [4]],
               ["scale", "fixed", "float32", [12]]]
    steps: list[list[Any]] = [["aten.zeros_like.default", [{"ref": 1}], {}],
             ["aten.cat.default", [[{"ref": 0}, {"ref": 3}, {"ref": 1}]], {}],
             ["aten.mul.Tensor", [{"ref": 4}, {"ref": 2}], {}]]
    return encode_recipe(Recipe(tensors, steps, 5, {"scale": torch.linspace(0.5, 2.0, 12)}))


@builder("Computed", example=Example((12,), {"shape": [12], "recipe": _example_recipe()}))
def _computed(p: Params, xs: list[Shape]) -> Call:
    got = _out_shape(p["recipe"])  # a damaged recipe, or one computing another shape, is refused here, named
    if got != (1, *p["shape"]):
        raise RecipeError(f"recipe computes {list(got[1:])} (after the batch dimension of 1), shape says "
                          f"{list(p['shape'])}")
    return Call(ComputedTensor, (list(p["shape"]), p["recipe"]))


@lru_cache(maxsize=256)
def _out_shape(recipe: str) -> tuple[int, ...]:
    with torch.device("meta"):
        return tuple(ComputedTensor([], recipe)().shape)


@lru_cache(maxsize=256)
def _count(shape: tuple[int, ...], recipe: str) -> int:
    with torch.device("meta"):
        module = ComputedTensor(list(shape), recipe)
    with FlopCounterMode(display=False) as counter:
        module()
    return counter.get_total_flops()


@flop_rule("Computed")
def _flops(p: Params, xs: list[Shape], out: Shape) -> int:
    return _count(tuple(p["shape"]), p["recipe"])


@module_rule(ComputedTensor)
def _import(m: ComputedTensor, xs: list[fx.Node]) -> Mapped:
    return Mapped("Computed", {"shape": list(m.shape), "recipe": m.recipe}, xs)
