"""Element-wise activations and (log-)softmax."""

from __future__ import annotations

from ..catalog import ParamSpec, layer
from ._rules import norm_dim

CAT = "Activation"


def _same(p, xs):
    return xs[0]


for _type, _doc in [
    ("ReLU", "Rectified linear unit, max(x, 0)."),
    ("ReLU6", "ReLU clipped at 6 (MobileNet)."),
    ("SiLU", "x * sigmoid(x), also called swish."),
    ("Hardswish", "Piecewise-linear swish (MobileNetV3)."),
    ("Hardsigmoid", "Piecewise-linear sigmoid, relu6(x + 3) / 6 (MobileNetV3's squeeze-excite gates)."),
    ("Sigmoid", "Logistic function 1 / (1 + exp(-x))."),
    ("Tanh", "Hyperbolic tangent."),
]:
    layer(_type, CAT, _doc, prefix=_type.lower())(_same)

layer("LeakyReLU", CAT, "ReLU with a small slope for negative inputs.", [
    ParamSpec("negative_slope", "float", 0.01, "Slope for x < 0.", minimum=0.0),
], prefix="leakyrelu")(_same)

layer("GELU", CAT, "Gaussian error linear unit (transformers).", [
    ParamSpec("approximate", "choice", "none", "Exact, or the tanh approximation.", choices=("none", "tanh")),
], prefix="gelu")(_same)


def _softmax(p, xs):
    norm_dim(p["dim"], len(xs[0]))
    return xs[0]


_DIM = ParamSpec("dim", "int", -1, "Dimension that sums to one (batch is 0).")
layer("Softmax", CAT, "Normalises to probabilities along a dimension.", [_DIM], prefix="softmax")(_softmax)
layer("LogSoftmax", CAT, "Log of softmax, numerically stable.", [_DIM], prefix="logsoftmax")(_softmax)
