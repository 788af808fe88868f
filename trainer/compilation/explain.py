"""The compile check: where ``torch.compile`` breaks a graph's model into pieces, on the graph's nodes.

:func:`explain_graph` builds the graph and runs ``torch._dynamo.explain`` on it: the number of
graphs dynamo captures, every graph break with its reason and hints, and the node each break is
in. The node comes from the break's user stack: a frame in the built GraphModule's generated
``forward`` reads ``x = self.<node id>(...)``; a frame resumed inside a module (its
``forward``'s own line) is matched to the node whose class holds that line (an opaque Module
node's class, say). Inputs are on the ``meta`` device where dynamo can run the model there (no
memory, about half the time); a model that reads a tensor's value (``.item()``, the commonest
break) cannot, and is explained on a small random CPU batch instead.

``explain`` resets dynamo's caches before and after, so it never runs inside a compiling worker:
:func:`explain_in_subprocess` runs ``python -m trainer.compilation.explain GRAPH --json`` and reads its report.

:func:`frames_in_text` and :func:`node_of` also serve the worker, which forwards dynamo's
graph-break and recompile log records during a compiled run (:mod:`trainer.compilation.log`).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from graph_editor.model import Graph, GraphError, Problem, load_graph, save_graph

Frame = tuple[str, int, str]  # file, line, code
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in \w+\n\s*(.*)')
_CALL = re.compile(r"\bself\.(\w+)\(")


@dataclass
class GraphBreak:
    """One place dynamo stops its graph: why, what to do about it, and where."""

    reason: str
    node: str | None = None
    where: str = ""  # the innermost user frame: file:line `code`
    hints: list[str] = field(default_factory=list)
    explanation: str = ""
    count: int = 1  # breaks with this reason at this place (resumed frames report one again)

    def __str__(self) -> str:
        head = f"node '{self.node}': " if self.node else ""
        return f"{head}graph break: {self.reason}" + (f" ({self.where})" if self.where else "")


@dataclass
class Explanation:
    """What ``torch._dynamo.explain`` found for a graph's model."""

    graph_count: int
    break_count: int
    breaks: list[GraphBreak]
    ops_per_graph: list[int]
    inputs: str  # "meta", or "cpu" with why meta could not run it
    batch: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Explanation:
        return cls(**{**d, "breaks": [GraphBreak(**b) for b in d.get("breaks", [])]})

    def problems(self) -> list[Problem]:
        """The breaks as warnings on their nodes, for the Problems dock."""
        out = []
        for b in self.breaks:
            hint = f" Hint: {b.hints[0]}" if b.hints else ""
            where = f" at {b.where}" if b.where and not b.node else ""
            out.append(Problem(b.node, f"torch.compile graph break: {b.reason}{where}.{hint}", severity="warning"))
        return out

    def text(self) -> str:
        lines = [f"{self.graph_count} graph(s), {self.break_count} graph break(s) "
                 f"(explained on {self.inputs} inputs, batch {self.batch}, {self.seconds:.2f} s)"]
        for b in self.breaks:
            lines.append(f"  {b.node or '(no node)'}: {b.reason}" + (f" x{b.count}" if b.count > 1 else ""))
            if b.where:
                lines.append(f"      at {b.where}")
            lines += [f"      hint: {h}" for h in b.hints]
        return "\n".join(lines)


def explain_graph(graph: Graph, batch: int = 2) -> Explanation:
    """Build ``graph`` and explain its compiled forward in this process (see the module doc)."""
    import torch

    from graph_editor.building import build_module, example_input

    t0 = time.perf_counter()
    inputs = "meta"
    try:
        model = build_module(graph, batch=batch, device="meta").train()
        result = torch._dynamo.explain(model)(example_input(graph, batch, device="meta"))
    except Exception as exc:  # a value read on meta (.item()) and its kin: real tensors then
        if isinstance(exc, GraphError):
            raise
        inputs = f"cpu (meta: {_first_line(exc)})"
        torch.manual_seed(0)
        model = build_module(graph, batch=batch, device="cpu").train()
        result = torch._dynamo.explain(model)(example_input(graph, batch))
    owners = _class_lines(model)
    breaks: dict[tuple[str, str], GraphBreak] = {}
    for info in result.break_reasons:
        frames = [(f.filename, int(f.lineno or 0), (f.line or "").strip()) for f in info.user_stack]
        reason, explanation, hints = split_reason(info.reason)
        found = GraphBreak(reason, node_of(frames, model, owners), _where(frames), hints, explanation)
        key = (reason, found.where)
        if key in breaks:
            breaks[key].count += 1
            breaks[key].node = breaks[key].node or found.node
        else:
            breaks[key] = found
    return Explanation(result.graph_count, result.graph_break_count, list(breaks.values()),
                       [len(ops) for ops in result.ops_per_graph or []], inputs, batch,
                       round(time.perf_counter() - t0, 3))


def split_reason(text: str) -> tuple[str, str, list[str]]:
    """Dynamo's reason text -> (first line, its Explanation line, its Hint lines)."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    if len(lines) > 1 and lines[0].startswith("Encountered graph break when attempting"):
        lines = lines[1:]  # the generic head of a log record; the cause is the next line
    reason = lines[0] if lines else "unknown"
    explanation = " ".join(ln.removeprefix("Explanation:").strip() for ln in lines if ln.startswith("Explanation:"))
    hints = [ln.removeprefix("Hint:").strip() for ln in lines if ln.startswith("Hint:")]
    return reason, explanation, hints


def frames_in_text(text: str) -> list[Frame]:
    """The ``File "...", line N, in f`` frames (with their code line) of a traceback-like text."""
    return [(f, int(line), code.strip()) for f, line, code in _FRAME.findall(text)]


def node_of(frames: list[Frame], model: Any, owners: dict[str, list[tuple[str, int, int]]] | None = None) -> str | None:
    """The graph node a break's frames are in: the generated forward's ``self.<id>(...)`` call, else the
    one node whose module class holds the innermost frame's line."""
    names = {name for name, _ in model.named_children()}
    for file, _, code in reversed(frames):
        m = _CALL.search(code)
        if file.startswith("<eval_with_key>") and m and m.group(1) in names:
            return m.group(1)
    owners = owners if owners is not None else _class_lines(model)
    for file, line, _ in reversed(frames):
        hits = [node for node, start, end in owners.get(os.path.realpath(file), []) if start <= line < end]
        if len(hits) == 1:
            return hits[0]
    return None


def _class_lines(model: Any) -> dict[str, list[tuple[str, int, int]]]:
    """Source file -> (node id, first line, end line) of each node module's class."""
    out: dict[str, list[tuple[str, int, int]]] = {}
    for name, module in model.named_children():
        try:
            lines, start = inspect.getsourcelines(type(module))
            path = os.path.realpath(inspect.getsourcefile(type(module)) or "")
        except (OSError, TypeError):
            continue
        out.setdefault(path, []).append((name, start, start + len(lines)))
    return out


def _where(frames: list[Frame]) -> str:
    if not frames:
        return ""
    file, line, code = frames[-1]
    return f"{os.path.basename(file)}:{line} `{code}`" if code else f"{os.path.basename(file)}:{line}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


class ExplainError(RuntimeError):
    """The compile check could not run; the message says why (the subprocess's own error)."""


def explain_in_subprocess(graph: Graph | str | os.PathLike[str], batch: int = 2, timeout: float = 600,
                          cwd: str | None = None) -> Explanation:
    """Run the compile check in a fresh ``python -m trainer.compilation.explain`` (dynamo's caches are reset there,
    never in the caller). ``graph`` is a Graph (written to a temporary file) or a graph file."""
    with tempfile.TemporaryDirectory(prefix="torch-studio-explain-") as tmp:
        if isinstance(graph, Graph):
            path = os.path.join(tmp, "graph.graph.json")
            save_graph(graph, path)
        else:
            path = os.fspath(graph)
        try:
            done = subprocess.run(explain_command(path, batch), capture_output=True, text=True, timeout=timeout,
                                  cwd=cwd)
        except subprocess.TimeoutExpired:
            raise ExplainError(f"the compile check took more than {timeout:.0f} s") from None
    return read_explanation(done.returncode, done.stdout, done.stderr)


def explain_command(path: str, batch: int = 2) -> list[str]:
    """The compile check of the graph file ``path`` as a command line (the studio starts it as a QProcess,
    :func:`explain_in_subprocess` as a subprocess); its answer is read by :func:`read_explanation`."""
    return [sys.executable, "-m", "trainer.compilation.explain", path, "--batch", str(batch), "--json"]


def read_explanation(returncode: int, stdout: str, stderr: str) -> Explanation:
    """The answer of :func:`explain_command`'s process; :class:`ExplainError` with the child's own error
    line when it failed or wrote no explanation."""
    if returncode != 0:
        lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        raise ExplainError(lines[-1].removeprefix("error: ") if lines else f"exit status {returncode}")
    try:
        return Explanation.from_dict(json.loads(stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError, TypeError, KeyError) as exc:
        raise ExplainError(f"the compile check wrote no explanation: {_first_line(exc)}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.compilation.explain", description=__doc__.splitlines()[0])
    parser.add_argument("graph")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # Module nodes import their classes as the studio does
    try:
        result = explain_graph(load_graph(args.graph), max(1, args.batch))
    except GraphError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result.to_dict()) if args.json else result.text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
