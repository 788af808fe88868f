"""The layer catalog's shape rules are typed: what a rule takes and gives is readable from its signature
(and mypy checks the bodies of ``graph_editor/model/layers/*`` strictly)."""

from __future__ import annotations

import inspect
import typing

import pytest

from graph_editor.model import Graph, InputSpec, all_layers
from graph_editor.model.catalog import Params, Shape
from graph_editor.model.errors import CommandError


def test_every_shape_rule_is_annotated_with_params_shapes_and_what_it_returns():
    rules = {spec.infer: spec for spec in all_layers()}
    assert len(rules) > 50
    loose = []
    for rule, spec in rules.items():
        hints = typing.get_type_hints(rule)
        first, second = list(inspect.signature(rule).parameters)
        returns = list[Shape] if spec.multi_output else Shape
        if (hints.get(first), hints.get(second), hints.get("return")) != (Params, list[Shape], returns):
            loose.append(f"{rule.__module__}.{rule.__qualname__} ({spec.type})")
    assert loose == [], f"shape rules without (p: Params, xs: list[Shape]) -> Shape | list[Shape]: {loose}"


def test_an_eps_a_batch_norm_divides_by_must_be_positive_and_zero_is_refused_by_name():
    """StdConv2d standardises its filters with ``F.batch_norm``: eps 0 passed the catalog and failed in the forward
    ("batch_norm eps must be positive during training"; found by the random-graph fuzzer)."""
    for type_ in ("StdConv2d", "BatchNorm2d", "BatchNorm1d"):
        graph = Graph(InputSpec((3, 8, 8) if type_ != "BatchNorm1d" else (6,)), 2, {"name": type_})
        with pytest.raises(CommandError, match=r"node 'n0', field 'eps': eps must be >= 1e-12, got 0"):
            graph.chain(("Input", "input"), (type_, "n0", {"eps": 0.0}))
