"""Input, Output, Linear, Identity, Scale, ScaleBy, Dropout, Dropout2d, DropPath and Embedding."""

from __future__ import annotations

from ..catalog import Params, ParamSpec, PortSpec, Shape, fmt_shape, layer
from ..errors import ShapeError
from ._rules import norm_dim, prod

CAT = "Core"


@layer("Input", "Input / Output", "The network's input; its shape and dtype come from the graph's input spec.",
       inputs=(), prefix="input")
def input_(p: Params, xs: list[Shape]) -> Shape:
    raise ShapeError("takes its shape from the graph's input spec")  # inference handles Input itself


@layer("Output", "Input / Output", "The network's output: logits, one per class.",
       outputs=(), prefix="output")
def output(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    return x


@layer("Linear", CAT, "Fully connected layer y = xW^T + b over the last dimension.", [
    ParamSpec("in_features", "int", None, "Input features (empty: taken from the input).", minimum=1, optional=True),
    ParamSpec("out_features", "int", 10, "Output features.", minimum=1),
    ParamSpec("bias", "bool", True, "Learn an additive bias."),
], prefix="fc", key_params=("out_features",))
def linear(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    if len(x) < 2:
        raise ShapeError("expects at least a 1-D input per sample")
    expected = p["in_features"]
    if expected is not None and x[-1] != expected:
        if len(x) > 2:
            flat = prod(x[1:])
            if flat == expected:   # the common slip: a feature map wired straight into a Linear
                raise ShapeError(f"expects {expected} input features but receives {fmt_shape(x)}: insert a "
                                 f"Flatten before it ({fmt_shape(x)} flattens to {flat}; without it Linear "
                                 f"reads only the last dim, {x[-1]})")
            raise ShapeError(f"expects {expected} input features, receives {fmt_shape(x)} (Linear reads the "
                             f"last dim, {x[-1]}; flattened it would be {flat})")
        raise ShapeError(f"expects {expected} input features, receives {x[-1]}")
    return (*x[:-1], p["out_features"])


@layer("Identity", CAT, "Passes its input through unchanged.", prefix="identity")
def identity(p: Params, xs: list[Shape]) -> Shape:
    return xs[0]


SCALE_INIT = 1e-5   # layer scale starts small: the catalog's default, the module's, and an import's without values


@layer("Scale", CAT, "Multiplies each channel by a learned factor (layer scale: ConvNeXt, CaiT, timm ViTs).", [
    ParamSpec("num_features", "int", None, "Channels (empty: taken from the input).", minimum=1, optional=True),
    ParamSpec("dim", "int", 1, "The channel dimension (batch is 0): 1 for CxHxW images, -1 for LxE tokens."),
    ParamSpec("init_value", "float", SCALE_INIT, "Initial factor of every channel (layer scale starts small)."),
], prefix="scale", key_params=("dim",))
def scale(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    if len(x) < 2:
        raise ShapeError("expects at least a 1-D input per sample")
    d = norm_dim(p["dim"], len(x))
    if d == 0:
        raise ShapeError(f"cannot scale along dim {p['dim']}: it is the batch dimension of "
                         f"{fmt_shape(x, batch=True)}", field="dim")
    n = p["num_features"]
    if n is not None and x[d] != n:
        raise ShapeError(f"expects {n} channels in dim {d}, receives {x[d]} ({fmt_shape(x)})", field="num_features")
    return x


@layer("ScaleBy", CAT, "Multiplies or divides by a fixed number, nothing learned: x * factor or x / factor "
       "(DeiT's two heads averaged, (x + x_dist) / 2; attention's q * scale).", [
    ParamSpec("factor", "float", 1.0, "The number every element is multiplied (or divided) by."),
    ParamSpec("divide", "bool", False, "Divide by the factor instead of multiplying (x / factor, as written)."),
], display="Scale by", prefix="scale_by", key_params=("factor", "divide"))
def scale_by(p: Params, xs: list[Shape]) -> Shape:
    if p["divide"] and p["factor"] == 0:
        raise ShapeError("divides by zero", field="factor")
    return xs[0]


@layer("Dropout", "Regularisation", "Zeroes elements with probability p while training.", [
    ParamSpec("p", "float", 0.5, "Drop probability.", minimum=0.0, maximum=1.0),
], prefix="dropout", key_params=("p",))
def dropout(p: Params, xs: list[Shape]) -> Shape:
    return xs[0]


@layer("Dropout2d", "Regularisation", "Zeroes whole channels with probability p while training.", [
    ParamSpec("p", "float", 0.5, "Drop probability.", minimum=0.0, maximum=1.0),
], prefix="dropout", key_params=("p",))
def dropout2d(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    if len(x) != 4:  # PyTorch reads a 3-D input as (N, C, L) only with a deprecation warning
        raise ShapeError(f"expects CxHxW input, receives {fmt_shape(x) or 'a scalar'}")
    return x


@layer("DropPath", "Regularisation", "Stochastic depth: while training, drops a whole sample's input (or the "
       "batch's) with probability p and scales the rest by 1 / (1 - p); passes through in eval.", [
    ParamSpec("p", "float", 0.1, "Drop probability.", minimum=0.0, maximum=1.0),
    ParamSpec("mode", "choice", "row", "Drop per sample ('row') or the whole batch at once ('batch').",
              choices=("row", "batch")),
], prefix="droppath", key_params=("p",))
def drop_path(p: Params, xs: list[Shape]) -> Shape:
    return xs[0]


@layer("Embedding", "Core", "Learned vectors for integer categories (e.g. categorical tabular columns).", [
    ParamSpec("num_embeddings", "int", 10, "Number of categories.", minimum=1),
    ParamSpec("embedding_dim", "int", 8, "Size of each vector.", minimum=1),
    ParamSpec("columns", "ints", None, "Input columns holding category codes (empty: the whole input).",
              minimum=0, optional=True),
], inputs=(PortSpec("in", doc="category codes, or a tabular row with codes in `columns`"),),
    prefix="embed", key_params=("num_embeddings", "embedding_dim"))
def embedding(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    cols = p["columns"]
    if not cols:
        return (*x, p["embedding_dim"])
    if len(x) != 2:
        raise ShapeError(f"expects a tabular row (1-D per sample) when columns are set, receives {fmt_shape(x)}")
    bad = [c for c in cols if c >= x[1]]
    if bad:
        raise ShapeError(f"column {bad[0]} does not exist: the input has {x[1]} columns")
    return (x[0], len(cols) * p["embedding_dim"])
