"""Record the memory timeline of real training steps on the CPU, attributed to graph node and phase.

Forward hooks open a ``torch.profiler.record_function("node:<id>")`` scope around each graph
node's module; the profiler (``profile_memory=True``) records every allocation and free with the
scopes around it. An allocation inside a node's scope belongs to that node (forward); one inside
the autograd engine's ``evaluate_function`` belongs to the node whose forward op has the same
``sequence_nr`` (backward); one inside ``Optimizer.*`` to the optimizer; one in a top-level
autograd-recorded op outside every node (the loss) to the loss. Frees are paired with their
allocation by address, so the live bytes of each node are known at every moment.

:func:`record_steps` runs the steps and returns a :class:`MemoryTrace`: ``summary()`` (the peak,
live bytes by node at the peak, the attributed share, a timeline of at most ``max_points`` points)
for an event, ``save(path)`` the full record (JSON) for the run directory. CPU only: CUDA's
allocator history is another path.
"""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile, record_function

from graph_editor.autograd.capture import tensors_in

from ..callbacks import Callback

if TYPE_CHECKING:
    from ..protocol.events import Event

NODE = "node:"
BACKWARD = "autograd::engine::evaluate_function: "
OPTIMIZER = "Optimizer."
LOSS, OPT, AUTOGRAD, UNKNOWN = "(loss)", "(optimizer)", "(autograd)", "(unattributed)"
UNATTRIBUTED = "unattributed"
PHASES = ("forward", "loss", "backward", "optimizer", UNATTRIBUTED)   # the timeline's bands by phase


@dataclass
class Alloc:
    t_ns: int
    nbytes: int          # + allocation, - free
    node: str
    phase: str           # forward, backward, optimizer, loss, or "" when unattributed


@dataclass
class MemoryTrace:
    """The allocations and frees of the recorded steps, in time order, attributed."""

    events: list[Alloc] = field(default_factory=list)
    steps: int = 0
    snapshot: dict[str, Any] | None = None   # CUDA: the allocator's snapshot, saved for PyTorch's memory_viz

    def summary(self, max_points: int = 2000, top: int = 8) -> dict[str, Any]:
        """Peak (bytes above what lived when recording began), live bytes by node at the peak, the
        share of allocated bytes attributed to a node or phase, and a timeline: ``t_ms``, ``live``
        and the ``top`` nodes' live bytes (the rest summed as "other"), at most ``max_points`` long."""
        live, peak, peak_i = 0, 0, -1
        by_node: dict[str, int] = {}
        at_peak: dict[str, int] = {}
        allocated = attributed = 0
        for i, e in enumerate(self.events):
            live += e.nbytes
            by_node[e.node] = by_node.get(e.node, 0) + e.nbytes
            if e.nbytes > 0:
                allocated += e.nbytes
                attributed += e.nbytes if e.phase else 0
            if live > peak:
                peak, peak_i, at_peak = live, i, {k: v for k, v in by_node.items() if v > 0}
        ranked = [k for k, _ in sorted(at_peak.items(), key=lambda kv: -kv[1])][:top]
        peak_event = self.events[peak_i] if peak_i >= 0 else None
        return {"steps": self.steps, "peak_bytes": peak, "allocated_bytes": allocated,
                "attributed": attributed / allocated if allocated else 1.0,
                "peak_phase": peak_event.phase if peak_event else "",
                "peak_node": peak_event.node if peak_event else "",
                "at_peak": dict(sorted(at_peak.items(), key=lambda kv: -kv[1])),
                "timeline": self.timeline(ranked, max_points)}

    def timeline(self, nodes: list[str], max_points: int) -> dict[str, Any]:
        """Live bytes over time, total, of ``nodes`` (others as "other") and of each phase
        (:data:`PHASES`), thinned to at most ``max_points`` samples; each kept sample is the highest
        of its stretch (peaks survive)."""
        keys = [*nodes, "other"]
        if not self.events:
            return {"t_ms": [], "live": [], "nodes": {n: [] for n in keys}, "phases": {p: [] for p in PHASES}}
        t0 = self.events[0].t_ns
        index = {n: i for i, n in enumerate(nodes)}
        phase_index = {p: len(keys) + i for i, p in enumerate(PHASES)}
        cur = [0] * (len(keys) + len(PHASES))
        rows: list[tuple[float, int, list[int]]] = []
        live = 0
        for e in self.events:
            live += e.nbytes
            cur[index.get(e.node, len(nodes))] += e.nbytes
            cur[phase_index.get(e.phase or UNATTRIBUTED, phase_index[UNATTRIBUTED])] += e.nbytes
            rows.append(((e.t_ns - t0) / 1e6, live, list(cur)))
        stride = max(1, -(-len(rows) // max_points))
        kept = [max(rows[i:i + stride], key=lambda r: r[1]) for i in range(0, len(rows), stride)]
        return {"t_ms": [round(r[0], 4) for r in kept], "live": [r[1] for r in kept],
                "nodes": {k: [r[2][j] for r in kept] for j, k in enumerate(keys)},
                "phases": {p: [r[2][phase_index[p]] for r in kept] for p in PHASES}}

    def save(self, path: str | Path) -> Path:
        """The full record: every allocation and free (time, bytes, node, phase) and the summary. A CUDA
        recording also writes its allocator snapshot beside it (``<name>.pickle``, what
        ``torch.cuda.memory._dump_snapshot`` writes: PyTorch's memory_viz opens it); the record names it
        under ``cuda_snapshot``."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        body: dict[str, Any] = {"version": 1, "steps": self.steps, "summary": self.summary(),
                                "events": [[e.t_ns, e.nbytes, e.node, e.phase] for e in self.events]}
        if self.snapshot is not None:
            body["cuda_snapshot"] = save_snapshot(self.snapshot, p.with_suffix(".pickle")).name
        tmp = p.with_suffix(p.suffix + ".tmp")
        tmp.write_text(json.dumps(body), encoding="utf-8")
        tmp.replace(p)
        return p


def save_snapshot(snapshot: dict[str, Any], path: Path) -> Path:
    """The allocator snapshot pickled as ``torch.cuda.memory._dump_snapshot`` does (written whole, then
    renamed). Only written, never read back by the studio: nothing loaded from a file is unpickled."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as f:
        pickle.dump(snapshot, f)
    tmp.replace(path)
    return path


@contextmanager
def node_scopes(model: nn.Module) -> Iterator[None]:
    """A profiler scope ``node:<id>`` around each graph node's module while it runs forward."""
    open_scopes: list[Any] = []
    handles = []

    def pre(name: str) -> Callable:
        def hook(_m: nn.Module, _a: Any) -> None:
            scope = record_function(NODE + name)
            scope.__enter__()
            open_scopes.append(scope)
        return hook

    def post(_m: nn.Module, _a: Any, _o: Any) -> None:
        if open_scopes:
            open_scopes.pop().__exit__(None, None, None)

    for name, child in model.named_children():
        handles += [child.register_forward_pre_hook(pre(name)), child.register_forward_hook(post)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
        while open_scopes:
            open_scopes.pop().__exit__(None, None, None)


def cpu_profile() -> profile:
    """The profiler of a CPU recording. Kineto, its C++ side, reads its log level at the process's first
    profile and by default logs each recording's start and stop ("USDT: ... profiler_start") and, on a
    CUDA build of torch where no GPU driver is found, "ERROR ... gpuGetDeviceCount failed with code 35"
    as it asks for the GPUs of a CPU-only trace: lines in a CPU worker's log that say nothing about the
    run. Quiet (6: above its highest level) unless the user chose a level."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    return profile(activities=[ProfilerActivity.CPU], profile_memory=True)


def record_steps(model: nn.Module, step: Callable[[], Any], steps: int = 1) -> MemoryTrace:
    """Run ``step()`` ``steps`` times (1-2) under the profiler with node scopes; the attributed trace."""
    if not 1 <= steps <= 4:
        raise ValueError(f"steps: record 1 to 4 steps, got {steps}")
    with node_scopes(model), cpu_profile() as prof:
        for _ in range(steps):
            step()
    trace = parse(prof.profiler.kineto_results.experimental_event_tree())
    trace.steps = steps
    return trace


def parse(roots: list[Any]) -> MemoryTrace:
    """Attribute the profiler's allocation events (an ``experimental_event_tree``)."""
    seq_owner: dict[int, str] = {}
    allocs: list[tuple[int, int, int, list[Any]]] = []      # (time, ptr, bytes, ancestors)
    stack: list[tuple[Any, list[Any]]] = [(r, []) for r in roots]
    while stack:
        node, chain = stack.pop()
        kind = node.typed[0]
        if kind == _EventType.Allocation:
            f = node.extra_fields
            allocs.append((node.start_time_ns, f.ptr, f.alloc_size, chain))
            continue
        if kind == _EventType.TorchOp:
            seq = node.extra_fields.sequence_number
            if seq >= 0 and not any(a.name.startswith(BACKWARD) for a in chain):
                owner = next((a.name[len(NODE):] for a in reversed(chain) if a.name.startswith(NODE)), LOSS)
                seq_owner.setdefault(seq, owner)
        here = [*chain, node]
        stack.extend((c, here) for c in node.children)
    allocs.sort(key=lambda a: a[0])
    live: dict[int, tuple[str, str]] = {}
    trace = MemoryTrace()
    for t, ptr, nbytes, chain in allocs:
        if nbytes >= 0:
            node, phase = _attribute(chain, seq_owner)
            live[ptr] = (node, phase)
        else:
            node, phase = live.pop(ptr, (UNKNOWN, ""))
            if node == UNKNOWN:
                continue       # a block from before the recording: its bytes were never counted
        trace.events.append(Alloc(t, nbytes, node, phase))
    return trace


def _attribute(chain: list[Any], seq_owner: dict[int, str]) -> tuple[str, str]:
    for a in reversed(chain):
        name = a.name
        if name.startswith(BACKWARD):
            seq = a.extra_fields.sequence_number
            return (seq_owner.get(seq, AUTOGRAD) if seq >= 0 else AUTOGRAD), "backward"
        if name.startswith(OPTIMIZER):
            return OPT, "optimizer"
        if name.startswith(NODE):
            return name[len(NODE):], "forward"
    top = chain[0] if chain else None
    if top is not None and top.typed[0] == _EventType.TorchOp and top.extra_fields.sequence_number >= 0:
        return LOSS, "loss"
    return UNKNOWN, ""


def record_job_steps(model: nn.Module, step_fn: Callable[[torch.Tensor, torch.Tensor], Any],
                     batches: list[tuple[torch.Tensor, torch.Tensor]]) -> MemoryTrace:
    """Record the trainer's step over given batches (one step each)."""
    it = iter(batches)
    return record_steps(model, lambda: step_fn(*next(it)), len(batches))


StepFn = Callable[[torch.Tensor, torch.Tensor], Any]
Publish = Callable[[Callable[[], MemoryTrace] | None, int, int, str], None]   # (make trace, first, steps, error)
CUDA_MAX_ENTRIES = 200_000     # allocator history kept while recording (unbounded by default)


class LiveRecording(Callback):
    """A loop callback, the worker's ``record_memory``: the next ``steps`` training steps run under the profiler with
    node scopes; the profile is handed to ``publish`` (parsed off the training thread)."""

    def __init__(self, model: nn.Module, device: torch.device, *, publish: Publish,
                 start_step: Callable[[], int], steps: int = 2, opt: torch.optim.Optimizer | None = None) -> None:
        self.model, self.device, self.publish, self.opt = model, device, publish, opt
        self.start_step, self.steps = start_step, steps
        self.pending = False          # set by the command thread, read by the training thread
        self._left = 0
        self._first = 0
        self._open: list[Any] = []

    def request(self) -> None:
        self.pending = True

    def wrap_step(self, step_fn: StepFn) -> StepFn:
        def step(x: torch.Tensor, y: torch.Tensor) -> Any:
            if self._left == 0 and not self.pending:
                return step_fn(x, y)
            if self._left == 0:
                self.pending = False
                try:
                    self._begin()
                except Exception as exc:  # noqa: BLE001 - a recording that cannot start never stops training
                    self.publish(None, self.start_step() + 1, 0, f"cannot record: {type(exc).__name__}: {exc}")
                    return step_fn(x, y)
            ok = False
            try:
                out = step_fn(x, y)
                ok = True
            finally:
                self._left -= 1
                if self._left == 0 or not ok:
                    self._end(ok)
            return out
        return step

    def _begin(self) -> None:
        self._first, self._left = self.start_step() + 1, self.steps
        if self.device.type == "cuda":
            self._open = [CudaRecording(self.model, self.device, self.opt)]
            return
        scopes = node_scopes(self.model)
        scopes.__enter__()
        prof = cpu_profile()
        prof.__enter__()
        self._open = [scopes, prof]

    def _end(self, ok: bool) -> None:
        opened, self._open, self._left = self._open, [], 0
        if len(opened) == 1:                                  # CUDA
            try:
                make = opened[0].stop()
            except Exception as exc:  # noqa: BLE001 - reported, training goes on
                self.publish(None, self._first, 0, f"cannot record: {type(exc).__name__}: {exc}")
                return
        else:
            scopes, prof = opened
            prof.__exit__(None, None, None)
            scopes.__exit__(None, None, None)
            tree = prof.profiler.kineto_results

            def make() -> MemoryTrace:
                return parse(tree.experimental_event_tree())
        if ok:
            self.publish(make, self._first, self.steps, "")


class CudaRecording:
    """The CUDA path: the caching allocator's history (bounded by ``CUDA_MAX_ENTRIES``) with each
    allocation tagged by ``_set_memory_metadata``: ``fw:<node>`` in forward pre-hooks, ``bw:<node>``
    in the pre-hooks of the autograd nodes each module's forward made. ``stop()`` snapshots, stops
    the history and returns a function that parses the snapshot (off the training thread)."""

    def __init__(self, model: nn.Module, device: torch.device, opt: torch.optim.Optimizer | None = None) -> None:
        self.device, self.handles = device, []
        mem = torch.cuda.memory
        mem._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=CUDA_MAX_ENTRIES,
                                   device=device)
        for name, child in model.named_children():
            self.handles.append(child.register_forward_pre_hook(
                lambda _m, _a, tag="fw:" + name: mem._set_memory_metadata(tag)))
            self.handles.append(child.register_forward_hook(self._tag_backward(name)))
        if opt is not None:
            self.handles.append(opt.register_step_pre_hook(lambda *_a: mem._set_memory_metadata("opt:")))
            self.handles.append(opt.register_step_post_hook(lambda *_a: mem._set_memory_metadata("")))

    @staticmethod
    def _tag_backward(name: str) -> Callable:
        def hook(_m: nn.Module, _a: Any, out: Any) -> None:
            torch.cuda.memory._set_memory_metadata("fw:" + LOSS)
            todo = [t.grad_fn for t in tensors_in(out) if t.grad_fn is not None]
            seen: set[Any] = set()
            while todo:
                fn = todo.pop()
                # torch's Node ABC declares metadata() a method; a grad_fn exposes it as a dict attribute
                meta: dict[str, Any] = fn.metadata  # type: ignore[assignment]
                if fn in seen or meta.get("studio_tagged"):
                    continue
                seen.add(fn)
                meta["studio_tagged"] = True
                fn.register_prehook(lambda _g, tag="bw:" + name: torch.cuda.memory._set_memory_metadata(tag))
                todo.extend(n for n, _ in fn.next_functions if n is not None)
        return hook

    def stop(self) -> Callable[[], MemoryTrace]:
        mem = torch.cuda.memory
        for h in self.handles:
            h.remove()
        mem._set_memory_metadata("")
        snapshot = mem._snapshot(self.device)
        mem._record_memory_history(enabled=None, device=self.device)
        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        return lambda: parse_cuda(snapshot, index)


def parse_cuda(snapshot: dict[str, Any], index: int) -> MemoryTrace:
    """The allocator's trace entries as an attributed trace by their tags: ``fw:<node>`` (forward;
    ``fw:(loss)`` the loss), ``bw:<node>`` (backward), ``opt:`` (the optimizer step); untagged
    allocations are unattributed."""
    traces = snapshot.get("device_traces") or []
    entries = traces[index] if index < len(traces) else []
    live: dict[int, tuple[str, str]] = {}
    trace = MemoryTrace(snapshot=snapshot)
    for e in entries:
        action, addr, size = e.get("action"), e.get("addr"), int(e.get("size", 0))
        t_ns = int(e.get("time_us", 0)) * 1000
        if action == "alloc":
            kind, _, node = (e.get("user_metadata") or "").partition(":")
            phase = {"fw": "forward", "bw": "backward", "opt": "optimizer"}.get(kind, "")
            node = OPT if kind == "opt" else node or UNKNOWN
            if kind == "fw" and node == LOSS:
                phase = "loss"
            live[addr] = (node, phase)
            trace.events.append(Alloc(t_ns, size, node, phase))
        elif action == "free_completed" and addr in live:
            node, phase = live.pop(addr)
            trace.events.append(Alloc(t_ns, -size, node, phase))
    return trace


def publisher(run_dir: Path, emit: Callable[[Event], None], submit: Callable[[Callable[[], None]], None]) -> Publish:
    """What the worker does with a recording, on its recorder thread: parse it, write the full record
    to ``<run_dir>/memory/trace-step<N>.json``, then emit ``memory_trace`` with the summary."""
    from ..protocol import events as ev

    def publish(make: Callable[[], MemoryTrace] | None, first: int, steps: int, error: str) -> None:
        def write() -> None:
            if make is None:
                emit(ev.MemoryTimeline(step=first, steps=0, path="", error=error))
                return
            trace = make()
            trace.steps = steps
            path = trace.save(Path(run_dir) / "memory" / f"trace-step{first}.json")
            s = trace.summary()
            emit(ev.MemoryTimeline(step=first, steps=steps, path=str(path), peak_bytes=s["peak_bytes"],
                                   attributed=round(s["attributed"], 6), peak_phase=s["peak_phase"],
                                   peak_node=s["peak_node"], at_peak=s["at_peak"], timeline=s["timeline"]))
        submit(write)
    return publish


def read_trace(path: str | Path) -> dict[str, Any]:
    """A saved record: ``steps``, ``summary`` and ``events`` ([t_ns, bytes, node, phase] each)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("version") != 1:
        raise ValueError(f"{path}: not a memory trace of version 1")
    return data
