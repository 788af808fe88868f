"""Element-wise activations and (log-)softmax."""

from __future__ import annotations

from ..catalog import Params, ParamSpec, Shape, fmt_shape, layer
from ..errors import ShapeError
from ._rules import norm_dim

CAT = "Activation"


def _same(p: Params, xs: list[Shape]) -> Shape:
    return xs[0]


for _type, _doc in [
    ("ReLU", "Rectified linear unit, max(x, 0)."),
    ("ReLU6", "ReLU clipped at 6 (MobileNet)."),
    ("SiLU", "x * sigmoid(x), also called swish."),
    ("Hardswish", "Piecewise-linear swish (MobileNetV3)."),
    ("Hardsigmoid", "Piecewise-linear sigmoid, relu6(x + 3) / 6 (MobileNetV3's squeeze-excite gates)."),
    ("Sigmoid", "Logistic function 1 / (1 + exp(-x))."),
    ("Tanh", "Hyperbolic tangent."),
    ("Mish", "x * tanh(softplus(x)) (YOLOv4, some timm nets)."),
]:
    layer(_type, CAT, _doc, prefix=_type.lower())(_same)

layer("LeakyReLU", CAT, "ReLU with a small slope for negative inputs.", [
    ParamSpec("negative_slope", "float", 0.01, "Slope for x < 0.", minimum=0.0),
], prefix="leakyrelu")(_same)

layer("GELU", CAT, "Gaussian error linear unit (transformers).", [
    ParamSpec("approximate", "choice", "none", "Exact, or the tanh approximation.", choices=("none", "tanh")),
], prefix="gelu")(_same)


layer("ELU", CAT, "Exponential linear unit: x for x > 0, alpha * (exp(x) - 1) otherwise.", [
    ParamSpec("alpha", "float", 1.0, "Value the output tends to for very negative inputs (times -1).", minimum=0.0),
], prefix="elu")(_same)

layer("Softplus", CAT, "Smooth ReLU, log(1 + exp(beta * x)) / beta; linear above the threshold.", [
    ParamSpec("beta", "float", 1.0, "Sharpness (larger: closer to ReLU).", minimum=1e-6),
    ParamSpec("threshold", "float", 20.0, "Above beta * x > threshold the output is x (stability)."),
], prefix="softplus")(_same)


@layer("PReLU", CAT, "ReLU with a learned slope for negative inputs: one slope, or one per channel.", [
    ParamSpec("num_parameters", "int", 1, "Learned slopes: 1 (shared) or the number of channels (dim 1).",
              minimum=1),
    ParamSpec("init", "float", 0.25, "Initial slope."),
], prefix="prelu", key_params=("num_parameters",))
def prelu(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    n = p["num_parameters"]
    if n != 1:
        if len(x) < 2:
            raise ShapeError(f"with num_parameters {n} expects channels (dim 1), receives a scalar per sample",
                             field="num_parameters")
        if x[1] != n:
            raise ShapeError(f"has num_parameters {n} but its input has {x[1]} channels (dim 1 of "
                             f"{fmt_shape(x)}); use 1 or {x[1]}", field="num_parameters")
    return x


def _softmax(p: Params, xs: list[Shape]) -> Shape:
    norm_dim(p["dim"], len(xs[0]))
    return xs[0]


_DIM = ParamSpec("dim", "int", -1, "Dimension that sums to one (batch is 0).")
layer("Softmax", CAT, "Normalises to probabilities along a dimension.", [_DIM], prefix="softmax")(_softmax)
layer("LogSoftmax", CAT, "Log of softmax, numerically stable.", [_DIM], prefix="logsoftmax")(_softmax)
