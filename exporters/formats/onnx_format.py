"""ONNX through the dynamo exporter, proven with ``onnx.checker`` and onnxruntime.

The batch dimension is dynamic (named ``batch``); verification runs a batch size other than the
traced one. Models whose weights pass ``EXTERNAL_DATA_BYTES`` keep them in a ``.data`` file beside
the ``.onnx`` (protobuf cannot hold more than 2 GB).
"""

from __future__ import annotations

import contextlib
import json
import logging
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..errors import ExportError
from ..locate import batch_dims, export_program, node_title, onnx_node_owner, raise_at_node
from ..options import DEFAULT_OPSET, ExportOptions
from ..preprocessing import METADATA_KEY, Preprocessing
from ..registry import Format, Written, export_format
from ..report import Check, accuracy_check, compare_outputs, latencies
from ..source import ExportSource

if TYPE_CHECKING:
    import onnx

EXTERNAL_DATA_BYTES = 1_500_000_000
MIN_OPSET = 7
INPUT_NAME, OUTPUT_NAME = "input", "logits"
CLASSES_KEY = "torch_studio.classes"


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence the exporter's chatter (missing torchvision ops, deprecations); errors still raise."""
    logs = [logging.getLogger(name) for name in ("torch.onnx", "onnxscript")]
    levels = [log.level for log in logs]
    for log in logs:
        log.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for log, level in zip(logs, levels, strict=True):
            log.setLevel(level)


def onnx_program(module: torch.nn.Module, args: tuple[torch.Tensor, ...], opset: int,
                 names: bool = True) -> torch.onnx.ONNXProgram:
    """The ``torch.onnx.ONNXProgram`` of ``module`` with a dynamic batch dimension."""
    kwargs: dict[str, Any] = {"input_names": [INPUT_NAME], "output_names": [OUTPUT_NAME]} if names else {}
    with quiet():
        model = captured(module, args)
        if model is module:  # the exporter's own capture strategies (strict, refined shapes) take it
            kwargs["dynamic_shapes"] = batch_dims(args, module=module)
        program = torch.onnx.export(model, args, dynamo=True, opset_version=opset, optimize=True, verbose=False,
                                    **kwargs)
    if program is None:  # only the legacy exporter returns nothing
        raise RuntimeError("torch.onnx.export returned no program")
    return program


def captured(module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> torch.export.ExportedProgram | torch.nn.Module:
    """``module`` captured with a dynamic batch, a contiguous copy before every reshape of a tensor whose
    layout is not contiguous; ``module`` itself where this capture fails.

    The exporter decomposes the program again, and its passes disagree on the strides of some outputs:
    ``scaled_dot_product_attention`` with a mask comes out of one in the kernel's (batch, tokens, heads)
    layout, so the reshape after the heads' transpose becomes a view there, and a later pass, seeing
    the plain layout, cannot apply that view (maxvit: ``Cannot view a tensor with shape [16*s31, 64, 2,
    32] ... as (16*s31, 8, 8, 64)``). The copy makes the reshape's input contiguous in every pass; ONNX
    has no strides, and the optimiser drops the copy from the file."""
    try:
        program = export_program(module, args)
    except Exception:
        return module
    graph = program.graph
    for node in list(graph.nodes):
        source = node.args[0] if node.target is torch.ops.aten.reshape.default else None
        value = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
        if isinstance(value, torch.Tensor) and not value.is_contiguous():
            with graph.inserting_before(node):
                copy = graph.call_function(torch.ops.aten.clone.default, (source,),
                                           {"memory_format": torch.contiguous_format})
            copy.meta = {**node.meta, "val": value.clone(memory_format=torch.contiguous_format)}
            node.replace_input_with(source, copy)
    program.graph_module.recompile()
    return program


def param_bytes(module: torch.nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in [*module.parameters(), *module.buffers()])


@export_format
class OnnxFormat(Format):
    name = "onnx"
    title = "ONNX"
    suffix = ".onnx"
    menu_text = "Export &ONNX"
    tip = "Export to ONNX and prove it with onnx.checker and onnxruntime"
    shortcut = "Ctrl+E"
    toolbar = True
    order = 10
    figures = (("opset", "ONNX opset"),)
    latency = "onnxruntime_ms"
    requires = ("onnx", "onnxscript", "onnxruntime")
    install_hint = "Install them with: pip install onnx onnxscript onnxruntime"

    def write(self, source: ExportSource, path: Path, options: ExportOptions) -> Written:
        opset = options.opset or DEFAULT_OPSET
        import onnx

        if not MIN_OPSET <= opset <= onnx.defs.onnx_opset_version():
            raise ExportError(f"opset {opset} is outside what this onnx supports "
                              f"({MIN_OPSET}..{onnx.defs.onnx_opset_version()})")
        example = source.example(options.example_batch)
        try:
            program = onnx_program(source.model, (example,), opset)
        except Exception as exc:
            raise_at_node(f"ONNX (opset {opset})", source.module, source.graph, example,
                          lambda m, args: onnx_program(m, args, opset, names=False), exc)
        _check_opset(program.model_proto, opset, source)
        program.model.metadata_props[METADATA_KEY] = source.prep.to_json()
        program.model.metadata_props[CLASSES_KEY] = json.dumps(source.prep.classes)
        external = options.external_data
        if external is None:
            external = param_bytes(source.module) > EXTERNAL_DATA_BYTES
        if path.exists():
            path.unlink()
        data = path.with_name(path.name + ".data")
        data.unlink(missing_ok=True)
        with quiet():
            program.save(str(path), external_data=external)
        files = [path] + ([data] if external and data.exists() else [])
        notes = [f"weights in external data file {data.name}"] if external else []
        return Written(files, {"opset": opset, "example_batch": options.example_batch,
                               "onnx_nodes": len(program.model_proto.graph.node)}, notes)

    def verify(self, source: ExportSource, written: Written, options: ExportOptions,
               ) -> tuple[list[Check], dict[str, object]]:
        checks, figures = verify_onnx(written.files[0], source.reference, source.samples, options, source.labels)
        if checks[0].passed:
            checks.append(_metadata_check(written.files[0], source))
        return checks, figures


def _metadata_check(path: Path, source: ExportSource) -> Check:
    """The file's metadata_props hold the preprocessing and class names it was written with."""
    import onnx

    props = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
    try:
        read = Preprocessing.from_dict(json.loads(props.get(METADATA_KEY, "")))
    except ValueError as exc:
        return Check("metadata", False, f"{METADATA_KEY} is missing or unreadable ({exc})")
    same = read == source.prep and json.loads(props.get(CLASSES_KEY, "null")) == source.prep.classes
    return Check("metadata", same, f"metadata_props hold the preprocessing and {len(read.classes)} class names"
                 if same else "metadata_props differ from the preprocessing the model was written with")


def _check_opset(model: onnx.ModelProto, opset: int, source: ExportSource) -> None:
    """The exporter falls back to its own opset when it cannot convert down: refuse that, naming
    the nodes whose operators the requested opset does not have."""
    got = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), opset)
    if got == opset:
        return
    import onnx

    missing: dict[str, str] = {}
    for node in model.graph.node:
        try:
            onnx.defs.get_schema(node.op_type, opset, node.domain)
        except onnx.defs.SchemaError:
            owner = onnx_node_owner(node) or "?"
            missing.setdefault(owner, node.op_type)
    if not missing:
        raise ExportError(f"ONNX: the model could not be converted to opset {opset} (it needs opset {got})")
    owner, op = next(iter(missing.items()))
    first = onnx.defs.get_schema(op, onnx.defs.onnx_opset_version(), "").since_version
    others = f" (and {len(missing) - 1} more node(s))" if len(missing) > 1 else ""
    raise ExportError(f"ONNX opset {opset} cannot express node {node_title(source.graph, owner)}: its operator "
                      f"{op} needs opset {first} or later{others}; use --opset {max(first, 17)} or later",
                      node=None if owner == "?" else owner)


def verify_onnx(path: Path, module: Callable[[torch.Tensor], torch.Tensor], inputs: torch.Tensor,
                options: ExportOptions, labels: torch.Tensor | None = None) -> tuple[list[Check], dict[str, object]]:
    """Prove an ONNX file computes what ``module`` (a module, or a source's ``reference``) computes on
    ``inputs``: checker, dynamic batch,
    onnxruntime parity; figures: max abs diff, top-1 agreement, both latencies."""
    import onnx
    import onnxruntime as ort

    checks: list[Check] = []
    try:
        onnx.checker.check_model(str(path), full_check=True)
        checks.append(Check("onnx.checker", True, "the model is valid ONNX (full check with shape inference)"))
    except Exception as exc:
        return [Check("onnx.checker", False, f"{type(exc).__name__}: {_first_line(exc)}")], {}
    model = onnx.load(str(path), load_external_data=False)
    dim0 = model.graph.input[0].type.tensor_type.shape.dim[0] if model.graph.input else None
    dynamic = dim0 is not None and bool(dim0.dim_param)
    checks.append(Check("dynamic batch", dynamic, f"input dim 0 is '{dim0.dim_param}'" if dim0 is not None and dynamic
                        else "input dim 0 is fixed: other batch sizes will fail"))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: inputs.numpy()}
    try:
        got = session.run(None, feed)[0]
    except Exception as exc:
        checks.append(Check("onnxruntime parity", False, f"onnxruntime failed on batch {len(inputs)}: "
                                                         f"{_first_line(exc)}"))
        return checks, {}
    expected = _eager(module, inputs)
    comp = compare_outputs(expected, got, options.rtol, options.atol)
    checks.append(comp.check(f"onnxruntime parity (batch {len(inputs)})", options.rtol, options.atol))
    accuracy: dict[str, float] = {}
    if labels is not None and len(labels) == len(inputs):  # labelled raw samples of a run
        check, accuracy = accuracy_check(expected, got, labels)
        checks.append(check)
    figures: dict[str, object] = {**accuracy, "verify_batch": len(inputs), "max_abs_diff": comp.max_abs_diff,
                                  "top1_agreement": comp.top1_agreement,
                                  **latencies(options.timing_runs, onnxruntime_ms=lambda: session.run(None, feed),
                                              pytorch_eager_ms=lambda: _eager(module, inputs))}
    return checks, figures


def _eager(module: Callable[[torch.Tensor], torch.Tensor], inputs: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return module(inputs)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
