"""LSTM and GRU over a batch-first sequence; the node gives the output sequence (the module's first result)."""

from __future__ import annotations

from typing import Any

import torch
from torch import fx, nn

from ...analysis.per_node import flop_rule
from ...importer.rules import Mapped, Unmappable, module_rule
from ..modules import Call, Example, Params, Shape, builder, or_input

_GATES = {"LSTM": 4, "GRU": 3}


class Recurrent(nn.Module):
    """``nn.LSTM`` or ``nn.GRU`` (batch first) returning only its output sequence ``[B, L, H * directions]``."""

    def __init__(self, cell: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 dropout: float = 0.0, bidirectional: bool = False) -> None:
        super().__init__()
        self.cell = cell
        rnn = nn.LSTM if cell == "LSTM" else nn.GRU
        self.rnn = rnn(input_size, hidden_size, num_layers, bias=bias, batch_first=True, dropout=dropout,
                       bidirectional=bidirectional)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]

    def extra_repr(self) -> str:
        return f"cell={self.cell!r}"


def _build(cell: str) -> Any:
    def build(p: Params, xs: list[Shape]) -> Call:
        return Call(Recurrent, (cell, or_input(p["input_size"], xs[0][-1]), p["hidden_size"]), {
            "num_layers": p["num_layers"], "bias": p["bias"], "dropout": p["dropout"],
            "bidirectional": p["bidirectional"]})
    build.__qualname__ = f"recurrent_builder({cell!r})"
    return build


for _cell in _GATES:
    builder(_cell, example=Example((4, 3), {"hidden_size": 5, "num_layers": 2, "bidirectional": True}))(_build(_cell))


def _flops(gates: int) -> Any:
    def count(p: Params, xs: list[Shape], out: Shape) -> int:
        """What FlopCounterMode counts (on meta; the fused CPU LSTM kernel hides them): at each step of each
        layer and direction, the input and the hidden state times the gates' weights."""
        batch, steps, features = xs[0]
        hidden, directions = p["hidden_size"], 2 if p["bidirectional"] else 1
        total = 0
        for layer in range(p["num_layers"]):
            inp = features if layer == 0 else hidden * directions
            total += directions * steps * 2 * batch * (inp + hidden) * gates * hidden
        return total
    return count


for _cell, _gates in _GATES.items():
    flop_rule(_cell)(_flops(_gates))


def _params_of(m: nn.LSTM | nn.GRU) -> dict[str, Any]:
    if not m.batch_first:
        raise Unmappable(f"{type(m).__name__} with batch_first=False (the sequence leads, not the batch)")
    if getattr(m, "proj_size", 0):
        raise Unmappable(f"LSTM with proj_size={m.proj_size}")
    return {"input_size": m.input_size, "hidden_size": m.hidden_size, "num_layers": m.num_layers,
            "bias": m.bias, "dropout": float(m.dropout), "bidirectional": m.bidirectional}


@module_rule(nn.LSTM, nn.GRU)
def _import_rnn(m: nn.LSTM | nn.GRU, xs: list[fx.Node]) -> Mapped:
    if len(xs) != 1:
        raise Unmappable(f"{type(m).__name__} called with an initial state; only rnn(x) maps")
    return Mapped("LSTM" if isinstance(m, nn.LSTM) else "GRU", _params_of(m), xs, prefix="rnn.")


@module_rule(Recurrent)
def _import_recurrent(m: Recurrent, xs: list[fx.Node]) -> Mapped:
    return Mapped(m.cell, _params_of(m.rnn), xs)
