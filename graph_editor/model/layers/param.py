"""A tensor as a node of its own: learnable (Parameter: a class token, a position embedding, a layer
scale) or fixed (Constant: an attention mask, a table computed from sizes, held in the graph itself).

Each has no input and one output of shape ``[1, *shape]``: its batch dimension is 1, so it
broadcasts against a batch (``tokens + pos_embed``) or is expanded to it before a concatenation.
"""

from __future__ import annotations

from ..catalog import INT_LIMIT, Params, ParamSpec, PortSpec, Shape, fmt_shape, layer
from ..errors import ShapeError
from ._rules import prod

INITS = ("zeros", "ones", "normal", "trunc_normal")
DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


@layer("Parameter", "Transformer", "A learnable tensor of a given shape (class token 1x1xD, position "
       "embedding 1xNxD); batch dimension 1, so it broadcasts against a batch.", [
           ParamSpec("shape", "ints", [1, 16], "Shape after the batch dimension of 1, e.g. 1,192.", minimum=1),
           ParamSpec("init", "choice", "trunc_normal", "How its values start.", choices=INITS),
           ParamSpec("std", "float", 0.02, "Standard deviation of a normal start.", minimum=0.0),
       ], inputs=(), prefix="param", key_params=("shape", "init"))
def parameter(p: Params, xs: list[Shape]) -> Shape:
    if xs:
        raise ShapeError("takes no input")
    if prod(p["shape"]) > INT_LIMIT:
        raise ShapeError(f"holds {prod(p['shape']):.3g} values, beyond any device", field="shape")
    return (1, *p["shape"])


@layer("Constant", "Transformer", "A fixed tensor, not learned (an attention mask, a position table computed "
       "from sizes), held in the graph itself; batch dimension 1, so it broadcasts against a batch.", [
           ParamSpec("shape", "ints", [1, 16], "Shape after the batch dimension of 1, e.g. 49,49.", minimum=1),
           ParamSpec("dtype", "choice", "float32", "Element type.", choices=DTYPES),
           ParamSpec("fill", "float", 0.0, "Every element's value where values is empty."),
           ParamSpec("values", "str", "", "The elements, encoded (safetensors, zlib, base64; an import writes "
                     "them); empty: every element is fill."),
       ], inputs=(), prefix="const", key_params=("shape", "dtype"))
def constant(p: Params, xs: list[Shape]) -> Shape:
    if xs:
        raise ShapeError("takes no input")
    if prod(p["shape"]) > INT_LIMIT:
        raise ShapeError(f"holds {prod(p['shape']):.3g} values, beyond any device", field="shape")
    return (1, *p["shape"])


@layer("ExpandBatch", "Shape", "Repeats a tensor of batch 1 (a class token) to the batch of a second input, "
       "without copying: cls_token.expand(x.shape[0], -1, -1).", [],
       inputs=(PortSpec("in", doc="a tensor of batch 1"), PortSpec("like", doc="a tensor of the batch to reach")),
       prefix="expand_batch", display="Expand to Batch")
def expand_batch(p: Params, xs: list[Shape]) -> Shape:
    x, like = xs
    if x[0] not in (1, like[0]):
        raise ShapeError(f"expects a tensor of batch 1 (a Parameter) or of the batch of 'like' ({like[0]}), "
                         f"receives {fmt_shape(x, True)}")
    return (like[0], *x[1:])
