"""Graph -> ``torch.fx.GraphModule`` whose submodule names are the node ids."""

from __future__ import annotations

import operator

import torch
from torch import fx, nn

from ..model import Graph, GraphError, Problem, validate
from ..model.repeat import unrolled
from ..model.validate import Inference
from .modules import NO_MODULE, Shape, get_builder


class BuildError(GraphError):
    """The graph cannot be built; ``problems`` lists every reason, node by node."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        errors = [p for p in problems if p.severity == "error"]
        first = errors[0] if errors else None
        lines = "\n".join(f"  {p}" for p in errors)
        super().__init__(f"the graph has {len(errors)} problem(s):\n{lines}", node=first.node if first else None)

    def located(self) -> str:
        return self.message


def build_module(graph: Graph, *, batch: int = 1, device: torch.device | str | None = None,
                 inference: Inference | None = None) -> fx.GraphModule:
    """Build ``graph`` as a GraphModule. ``device="meta"`` builds without memory.

    Raises :class:`BuildError` when the graph does not validate. A block repeated N times is built as
    N copies (:func:`graph_editor.model.repeat.unrolled`).
    """
    root, g, built = build_parts(graph, batch=batch, device=device, inference=inference)
    gm = fx.GraphModule(root, g, class_name=_class_name(built))
    gm.meta["node_types"] = {n.id: n.type for n in built}
    return gm


def build_parts(graph: Graph, *, batch: int = 1, device: torch.device | str | None = None,
                inference: Inference | None = None) -> tuple[nn.Module, fx.Graph, Graph]:
    """What :func:`build_module` joins: a module with one child per node (named by its id), the fx graph
    that calls them, and the graph they were built from (repeats unrolled). The check builds only these:
    making the GraphModule writes and compiles its Python source, 0.3 s of held GIL on a 20,000-layer
    chain, a frozen window while the check ran in the background."""
    graph, inference = unrolled_for_build(graph, inference)
    inf = inference or validate(graph, batch)
    if not inf.ok:
        raise BuildError(inf.problems)
    root = nn.Module()
    g = fx.Graph()
    values: dict[tuple[str, str], fx.Node] = {}  # (node id, output port) -> its value
    output: fx.Node | None = None
    used = {(e.src, e.src_port) for e in graph.edges}
    with torch.device(device) if device is not None else _nullcontext():
        for node_id in inf.order:
            node = graph.nodes[node_id]
            edges = inf.in_edges.get(node_id) or graph.in_edges(node_id)
            args = tuple(values[(e.src, e.src_port)] for e in edges)
            if node.type == "Input":
                values[(node_id, "out")] = g.placeholder(node_id)
                continue
            if node.type == "Output":
                output = args[0]
                continue
            spec = node.spec
            assert spec is not None and node.type not in NO_MODULE
            make = get_builder(node.type)
            if make is None:
                raise BuildError([Problem(node_id, f"layer type '{node.type}' has no PyTorch builder")])
            if hasattr(root, node_id):
                raise BuildError([Problem(node_id, f"the id '{node_id}' is a name PyTorch modules reserve; "
                                                   "rename the node", field="id")])
            try:
                module = make(inf.params.get(node_id) or spec.check_params(node.params),
                              _known([inf.edge_shape(e) for e in edges]))
            except torch.OutOfMemoryError:     # the weights do not fit the device: not the graph's fault
                raise
            except (ValueError, RuntimeError, TypeError) as exc:  # torch's own checks, e.g. heads vs embed_dim
                raise BuildError([Problem(node_id, f"PyTorch refuses this {node.type}: {exc}")]) from None
            root.add_module(node_id, module)
            result = g.call_module(node_id, args)
            if not spec.multi_output:
                values[(node_id, "out")] = result
                continue
            # The module returns a tuple; each output read downstream is one item of it.
            for i, port in enumerate(spec.outputs_for(node.params)):
                if (node_id, port) in used:
                    values[(node_id, port)] = g.create_node("call_function", operator.getitem, (result, i),
                                                            name=f"{node_id}_{port}")
    assert output is not None
    g.output(output)
    return root, g, graph


def _class_name(graph: Graph) -> str:
    name = str(graph.metadata.get("name", "StudioNet"))
    cleaned = "".join(ch for ch in name.title() if ch.isalnum())
    return cleaned if cleaned and cleaned[0].isalpha() else "StudioNet"


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def example_input(graph: Graph, batch: int = 1, device: torch.device | str = "cpu") -> torch.Tensor:
    """A random input batch of the graph's input spec (integer codes for an int64 input)."""
    shape = (batch, *graph.input_spec.shape)
    dtype = getattr(torch, graph.input_spec.dtype)
    if dtype == torch.int64:
        return torch.zeros(shape, dtype=dtype, device=device)
    return torch.randn(shape, device=device).to(dtype)


def _known(shapes: list[Shape | None]) -> list[Shape]:
    """Input shapes of a node that validated: every one is known (an unknown one was reported upstream)."""
    assert all(s is not None for s in shapes), "a node is built only once its input shapes are known"
    return [s for s in shapes if s is not None]


def unrolled_for_build(graph: Graph, inference: Inference | None) -> tuple[Graph, Inference | None]:
    """The graph with its repeated blocks written out (a given inference was of the drawn graph: dropped)."""
    try:
        full = unrolled(graph)
    except GraphError as exc:
        raise BuildError([Problem(None, exc.message, field="repeat")]) from None
    return (graph, inference) if full is graph else (full, None)
