"""One place per layer family: every catalog type is complete, proven on its example, and every
registry refuses a second entry for a key.

The per-type tests are parametrised over the catalog at collection time, so a layer type added to
``model/layers/<family>.py`` and ``building/ops/<family>.py`` is built, inferred, counted, written and
imported here without anyone listing it.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from graph_editor.analysis import analyze
from graph_editor.analysis.per_node import flop_rule, flop_types, zero_flops
from graph_editor.building import build_module
from graph_editor.building.examples import catalog_graph, code_types, example_graph, examples
from graph_editor.building.modules import NO_MODULE, Example, builder, builder_types, built_call, get_builder
from graph_editor.building.ops.module_ref import FALLBACK_TYPES  # the importer's fallback is their rule
from graph_editor.importer import import_module
from graph_editor.importer.rules import (
    CALL_RULES,
    METHOD_RULES,
    MODULE_RULES,
    call_rule,
    function_rule,
    module_rule,
)
from graph_editor.model import all_layers, validate
from graph_editor.model.catalog import layer
from graph_editor.model.registry import DuplicateError, Registry
from graph_editor.model.serialize import MIGRATIONS, migration

TYPES = sorted(examples())
BATCH = 2


def example_input(example: Example, batch: int = BATCH, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    shape = (batch, *example.shape)
    if example.codes_below is not None:
        return torch.randint(0, example.codes_below, shape, generator=gen).to(getattr(torch, example.dtype))
    return torch.randn(shape, generator=gen).to(getattr(torch, example.dtype))


def layer_inputs(type_: str, x: torch.Tensor) -> list[torch.Tensor]:
    """What the example graph feeds the node ``layer``: the input, once per wire."""
    graph = example_graph(type_)
    return [x] * len(graph.in_edges("layer"))


@pytest.mark.slow
def test_every_catalog_type_is_complete():
    """Builder, FLOP rule (or a declared zero), example, import rule and writer: all missing ones at once."""
    missing = []
    for spec in all_layers():
        t = spec.type
        if t not in builder_types():
            missing.append(f"{t}: no builder")
        if t not in flop_types():
            missing.append(f"{t}: no FLOP rule (declare zero_flops({t!r}) if it does no counted work)")
        if t in NO_MODULE:
            continue
        if t not in TYPES:
            missing.append(f"{t}: no example input")
            continue
        graph = example_graph(t)
        inf = validate(graph, BATCH)
        module = get_builder(t)(inf.params["layer"], [inf.shapes[e.src] for e in inf.in_edges["layer"]])
        if type(module) not in MODULE_RULES and type(module) not in CALL_RULES and t not in FALLBACK_TYPES:
            missing.append(f"{t}: no import rule for {type(module).__qualname__}")
        call = built_call(module)
        if call is None:
            missing.append(f"{t}: no source writer")
        else:
            call.source()  # raises when an argument is not a literal
    assert not missing, "\n".join(missing)
    assert {s.type for s in all_layers()} == builder_types()


@pytest.mark.parametrize("type_", TYPES)
def test_layer_type_shapes_flops_params_and_source_agree_with_pytorch(type_):
    example = examples()[type_]
    graph = example_graph(type_)
    inf = validate(graph, BATCH)
    assert inf.ok, [str(p) for p in inf.problems]
    torch.manual_seed(0)
    layer_module = build_module(graph, inference=inf).get_submodule("layer").eval()
    xs = layer_inputs(type_, example_input(example))
    with torch.no_grad():
        out = layer_module(*xs)
    outs = out if isinstance(out, tuple) else (out,)  # a layer with several outputs returns a tuple
    assert [tuple(o.shape) for o in outs] == inf.port_shapes.get("layer", [inf.shapes["layer"]]), \
        "the shape rule disagrees with PyTorch"
    stats = analyze(graph, BATCH).by_id()["layer"]
    assert stats.params == sum(p.numel() for p in layer_module.parameters())
    # Counted as the template tests count: on meta (where attention runs the counted SDPA kernel), training mode.
    on_meta = build_module(graph, inference=inf, device="meta").get_submodule("layer")
    with FlopCounterMode(display=False) as counter:
        on_meta(*[x.to("meta") for x in xs])
    assert stats.flops == counter.get_total_flops(), "the FLOP rule disagrees with FlopCounterMode"
    # The source writer, derived from the builder, constructs an equal module.
    code = built_call(layer_module).source()
    written = eval(code, {"nn": nn, "torch": torch, type(layer_module).__name__: type(layer_module)})
    assert type(written) is type(layer_module)
    written.load_state_dict(layer_module.state_dict())
    with torch.no_grad():
        again = written.eval()(*xs)
    assert all(torch.equal(a, b) for a, b in zip(again if isinstance(again, tuple) else (again,), outs,
                                                  strict=True)), code


@pytest.mark.parametrize("type_", TYPES)
def test_layer_type_imports_back_as_itself(type_):
    example = examples()[type_]
    graph = example_graph(type_)
    torch.manual_seed(1)
    built = build_module(graph).eval()
    result = import_module(built, example.shape)
    node = result.graph.nodes["layer"]
    if type_ in FALLBACK_TYPES:  # a Module node's class has no rule: it comes back as its own program
        assert node.type == "Program"
    else:
        assert node.type == type_
        spec = node.spec
        assert spec is not None
        wanted = spec.check_params(example.params)
        assert {k: node.params.get(k, spec.param(k).default) for k in example.params} == {
            k: wanted[k] for k in example.params}
    again = build_module(result.graph).eval()
    again.load_state_dict(result.state_dict)  # strict: every weight found its node
    x = example_input(example, batch=3, seed=2)
    with torch.no_grad():
        assert torch.equal(again(x), built(x))


def test_the_catalog_graph_holds_every_float_type_and_validates():
    graph = catalog_graph()
    assert validate(graph, BATCH).ok
    assert {n.type for n in graph} | set(code_types()) >= set(TYPES)


def _dummy(*args, **kwargs):
    raise AssertionError("a refused registration must never be called")


@pytest.mark.parametrize("register, key", [
    (lambda: builder("Linear")(_dummy), "'Linear'"),
    (lambda: flop_rule("Conv2d")(_dummy), "'Conv2d'"),
    (lambda: zero_flops("ReLU"), "'ReLU'"),
    (lambda: module_rule(nn.Linear)(_dummy), "torch.nn.modules.linear.Linear"),
    (lambda: call_rule(nn.MultiheadAttention)(_dummy), "MultiheadAttention"),
    (lambda: function_rule(F.relu)(_dummy), "relu"),
    (lambda: function_rule(methods=("flatten",))(_dummy), "'flatten'"),
    (lambda: layer("Linear", "Core", "a second Linear")(_dummy), "'Linear'"),
    (lambda: migration(1)(_dummy), "schema migration for 1"),
], ids=["builder", "flop_rule", "zero_flops", "module_rule", "call_rule", "function_rule", "method_rule",
        "catalog", "migration"])
def test_every_registry_refuses_a_duplicate(register, key):
    def state() -> tuple:
        return (dict(MODULE_RULES.items()), dict(METHOD_RULES.items()), sorted(flop_types()),
                sorted(builder_types()), dict(MIGRATIONS.items()))

    before = state()
    with pytest.raises(ValueError, match="already registered") as info:
        register()
    assert key in str(info.value)
    assert state() == before


def test_a_refused_registration_registers_none_of_its_keys():
    reg: Registry[str, int] = Registry("a thing")
    reg.add("a", 1)
    with pytest.raises(DuplicateError, match=r"a thing for 'a' is already registered"):
        reg.add_all(["b", "a"], 2)
    assert list(reg) == ["a"] and reg["a"] == 1
