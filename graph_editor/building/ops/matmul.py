"""MatMul: the matrix product of two tensors (``q @ k.transpose(-2, -1)``, ``attn @ v``)."""

from __future__ import annotations

import math
import operator
from typing import Any

import torch
from torch import fx, nn

from ...analysis.per_node import flop_rule
from ...importer.rules import Mapped, Unmappable, function_rule, module_rule, plain, tensor
from ..modules import Call, Example, Params, Shape, builder


class MatMul(nn.Module):
    """``a @ b`` over the last two dims; the dims before them broadcast."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


@builder("MatMul", example=Example((2, 4, 4)))
def _matmul(p: Params, xs: list[Shape]) -> Call:
    return Call(MatMul)


module_rule(MatMul)(plain("MatMul"))


@flop_rule("MatMul")
def _matmul_flops(p: Params, xs: list[Shape], out: Shape) -> int:
    # FlopCounterMode counts the bmm (or mm) torch.matmul lowers to: 2 * batch * M * K * N
    return 2 * math.prod(out[:-2]) * out[-2] * xs[0][-1] * out[-1]


def _rank(x: fx.Node) -> int | None:
    value = x.meta.get("val")
    return value.dim() if isinstance(value, torch.Tensor) else None


@function_rule(operator.matmul, operator.imatmul, torch.matmul, torch.bmm, methods=("matmul", "bmm"))
def _f_matmul(input: Any, other: Any, *, out: Any = None) -> Mapped:
    a, b = tensor(input, "left operand"), tensor(other, "second operand")
    for name, x in (("left", a), ("right", b)):
        rank = _rank(x)
        if rank == 2 and x.op == "get_attr":
            continue  # a parameter [K, N] is a Parameter node [1, K, N]: it broadcasts alike (x @ self.w)
        if rank is not None and rank < 3:
            raise Unmappable(f"a matrix product whose {name} operand is {rank}-D with its batch: the catalog's "
                             "MatMul multiplies matrices per sample (a Linear maps x @ W)")
    return Mapped("MatMul", {}, [a, b])
