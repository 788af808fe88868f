"""Recurrent layers over a batch-first sequence: LSTM and GRU (their output sequence; the final states stay inside)."""

from __future__ import annotations

from ..catalog import Params, ParamSpec, Shape, layer
from ..errors import ShapeError
from ._rules import need_dim, need_rank

CAT = "Recurrent"


def _params() -> list[ParamSpec]:
    return [
        ParamSpec("input_size", "int", None, "Features per step (empty: taken from the input).", minimum=1,
                  optional=True),
        ParamSpec("hidden_size", "int", 32, "Features of the hidden state.", minimum=1),
        ParamSpec("num_layers", "int", 1, "Recurrent layers stacked.", minimum=1),
        ParamSpec("bias", "bool", True, "Learn biases."),
        ParamSpec("dropout", "float", 0.0, "Dropout between stacked layers while training.", minimum=0.0,
                  maximum=1.0),
        ParamSpec("bidirectional", "bool", False, "Also run backwards; the output holds both directions."),
    ]


def _recurrent(p: Params, xs: list[Shape]) -> Shape:
    (x,) = xs
    need_rank(x, 3, "a sequence LxF (batch first)")
    need_dim(x, 2, p["input_size"], "input features")
    if x[1] < 1:
        raise ShapeError("expects at least one step")
    return (x[0], x[1], p["hidden_size"] * (2 if p["bidirectional"] else 1))


layer("LSTM", CAT, "Long short-term memory over a batch-first sequence: the output at every step.", _params(),
      prefix="lstm", key_params=("hidden_size", "num_layers"))(_recurrent)
layer("GRU", CAT, "Gated recurrent unit over a batch-first sequence: the output at every step.", _params(),
      prefix="gru", key_params=("hidden_size", "num_layers"))(_recurrent)
