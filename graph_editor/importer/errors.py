"""The importer's errors: every op that does not map, grouped so that the root cause leads.

An op is described by what it calls (``F.batch_norm``, ``nn.LSTM``), the class whose ``forward`` made
it (``timm BatchNormAct2d``) and where it is: the module path and the one user frame the tracer
recorded (outside torch and this package), as ``at swin_transformer.py:287 `code` ``.
"""

from __future__ import annotations

import linecache
import os
import re
import sys
import traceback
from dataclasses import dataclass
from types import FrameType

import torch
from torch import fx

from ..model import GraphError

TORCH_DIR = os.path.dirname(torch.__file__) + os.sep  # with the separator: torchvision is not torch
HERE = os.path.dirname(__file__) + os.sep


@dataclass(frozen=True)
class Unsupported:
    """One traced op that has no catalog equivalent."""

    node: str  # the fx node's name
    op: str  # what it calls, e.g. "torch.sin" or "nn.LSTM"
    where: str  # module path and source line
    reason: str
    owner: str = ""  # the class whose forward made it, e.g. "timm BatchNormAct2d"

    def __str__(self) -> str:
        head = " ".join(p for p in (self.node, f"({self.op})" if self.op else "", self.where) if p)
        return f"{head}: {self.reason}"


class ModuleImportError(GraphError):
    """The module cannot be imported; ``unsupported`` lists every op at fault.

    The message leads with the root cause (the call and the class it is in that account for most of
    the ops), then lists each kind of op once: ``F.batch_norm x49 inside timm BatchNormAct2d``, with
    the first place it happens, instead of one line per occurrence.
    """

    def __init__(self, unsupported: list[Unsupported], header: str = "") -> None:
        self.unsupported = unsupported
        groups = group_unsupported(unsupported)
        if not header and groups:
            count, first = len(groups[0]), groups[0][0]
            inside = f" inside {first.owner}" if first.owner else ""
            header = f"{len(unsupported)} op(s) have no Torch Studio layer"
            if count > 1 or len(groups) > 1:
                header += f"; the root cause: {first.op or first.node}{inside} (x{count}): {first.reason}"
        lines = "\n".join(f"  {_group_line(g)}" for g in groups)
        super().__init__(f"{header}:\n{lines}" if unsupported else header)


def group_unsupported(unsupported: list[Unsupported]) -> list[list[Unsupported]]:
    """The ops grouped by what they call, the class they are in and why they fail (a parameter's name
    left out), the root cause first, then in order of first appearance."""
    groups: dict[tuple[str, str, str], list[Unsupported]] = {}
    for u in unsupported:
        key = (u.op, u.owner, re.sub(r"'[^']*'", "'…'", u.reason)) if u.op else (u.node, "", u.reason)
        groups.setdefault(key, []).append(u)
    ordered = list(groups.values())
    # The root cause is the first op that fails for itself: a parameter read fails only because the
    # call it feeds has no layer (timm's BatchNormAct2d traced into: F.batch_norm and its weights).
    root = next((g for g in ordered if g[0].op != "get_attr"), None)
    return [root, *(g for g in ordered if g is not root)] if root else ordered


def _group_line(group: list[Unsupported]) -> str:
    first = group[0]
    if len(group) == 1:
        return str(first)
    inside = f" inside {first.owner}" if first.owner else ""
    where = f"{first.node} {first.where}".strip()
    return f"{first.op} x{len(group)}{inside} (first: {where}): {first.reason}"


def user_line(exc: BaseException) -> str:
    """`` at file.py:12 `code` ``: the innermost frame of the traceback outside torch and this package."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith(TORCH_DIR) and not f.filename.startswith(HERE)]
    if not frames:
        return ""
    f = frames[-1]
    return f" at {os.path.basename(f.filename)}:{f.lineno} `{(f.line or '').strip()}`"


def describe(gm: fx.GraphModule, n: fx.Node) -> str:
    if n.op == "call_module":
        cls = type(gm.get_submodule(str(n.target)))
        return re.sub(r"^torch\.nn\.modules\.\w+\.", "nn.", f"{cls.__module__}.{cls.__qualname__}")
    if n.op == "call_method":
        return f"Tensor.{n.target}"
    if n.op == "call_function":
        t = n.target
        mod = getattr(t, "__module__", None) or "torch"
        mod = {"_operator": "operator", "torch._C._VariableFunctions": "torch", "torch._C._nn": "F",
               "torch.nn.functional": "F"}.get(mod, mod)
        return f"{mod}.{getattr(t, '__name__', t)}"
    return n.op


def owner(n: fx.Node) -> str:
    """The class whose ``forward`` made ``n`` (its own class for a module call), as
    ``timm BatchNormAct2d``, ``torchvision EncoderBlock`` or ``nn.LSTM``; empty at the top level."""
    stack = list((n.meta.get("nn_module_stack") or {}).values())
    cls = stack[-1][1] if stack else None
    if not isinstance(cls, type):
        return str(cls or "")
    package = cls.__module__.split(".")[0]
    return f"nn.{cls.__qualname__}" if package == "torch" else f"{package} {cls.__qualname__}"


def user_frame() -> str:
    """The innermost caller outside torch and this package, as fx formats a stack trace frame."""
    f: FrameType | None = sys._getframe(2)
    while f is not None and (f.f_code.co_filename.startswith(TORCH_DIR) or f.f_code.co_filename.startswith(HERE)):
        f = f.f_back
    if f is None:
        return ""
    code = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return f'File "{f.f_code.co_filename}", line {f.f_lineno}, in {f.f_code.co_name}\n    {code}'


def where(n: fx.Node) -> str:
    stack = n.meta.get("nn_module_stack") or {}
    path = next(reversed(stack.values()))[0] if stack else ""
    if n.op == "call_module":
        path = str(n.target)
    frames = re.findall(r'File "([^"]+)", line (\d+), in [^\n]*\n\s*(.*)', n.stack_trace or "")
    user = [f for f in frames if not f[0].startswith(TORCH_DIR) and not f[0].startswith(HERE)]
    parts = []
    if path:
        parts.append(f"in {path}")
    if user:
        file, line, code = user[-1]
        parts.append(f"at {os.path.basename(file)}:{line} `{code.strip()}`")
    return " ".join(parts) or "in forward"
