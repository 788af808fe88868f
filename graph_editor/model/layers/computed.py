"""A tensor computed from the node's own learned tensors each forward, not from the input (issue 23).

SwinV2's attention scale ``clamp(logit_scale, max=log(100)).exp()``, BEiT's and EVA's qkv bias
``cat((q_bias, zeros_like(v_bias), v_bias))``, a relative-position bias from an MLP over a fixed table
(SwinV2, ViT-RelPos): the value is the same for every sample, yet it is trained, so it cannot be a Constant
frozen at import. The node holds the learned tensors as its weights and the steps that compute the value
from them (ATen ops from a fixed list, and the fixed tensors they read) as its ``recipe``.
"""

from __future__ import annotations

from ..catalog import INT_LIMIT, Params, ParamSpec, Shape, layer
from ..errors import ShapeError
from ._rules import prod


@layer("Computed", "Imported", "A tensor computed from its own learned tensors each forward, not from the "
       "input (a clamped, exponentiated scale; a bias joined from parts; a bias from an MLP over a fixed "
       "table); trained like any weight; batch dimension 1, so it broadcasts against a batch.", [
           ParamSpec("shape", "ints", [1, 16], "Shape after the batch dimension of 1, e.g. 3,1,1.", minimum=1),
           ParamSpec("recipe", "str", "", "The learned tensors, the fixed tensors and the steps (ATen ops) that "
                     "compute the value, encoded (JSON and safetensors, zlib, base64); an import writes it."),
       ], inputs=(), prefix="computed", key_params=("shape",), display="Computed Tensor")
def computed(p: Params, xs: list[Shape]) -> Shape:
    if xs:
        raise ShapeError("takes no input")
    if prod(p["shape"]) > INT_LIMIT:
        raise ShapeError(f"holds {prod(p['shape']):.3g} values, beyond any device", field="shape")
    if not p["recipe"]:
        raise ShapeError("has no recipe: an import writes the steps that compute it", field="recipe")
    return (1, *p["shape"])
