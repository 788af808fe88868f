"""The layer catalog's shape rules are typed: what a rule takes and gives is readable from its signature
(and mypy checks the bodies of ``graph_editor/model/layers/*`` strictly)."""

from __future__ import annotations

import inspect
import typing

from graph_editor.model import all_layers
from graph_editor.model.catalog import Params, Shape


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
