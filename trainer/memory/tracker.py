"""The storage tracker under :func:`trainer.memory.prediction.predict_memory`: a dispatch mode that
records every new storage an op returns (fake tensors: no real memory) and, through
``weakref.finalize``, its free; each storage classed by kind (weights, gradients, optimizer state,
activations saved for backward, batch, transient) and attributed to the graph node and phase that
made it, by the hooks of :func:`attributed` on the model's children, the optimizer's step and the
saved-tensor hooks. ``predict_memory`` runs the step under it and reads its log."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakIdKeyDictionary

from graph_editor.autograd.capture import tensors_in

LOSS_NODE = "(loss)"          # the pseudo node of the loss and what follows the model's output

# Fused optimizer updates that PyTorch registers no fake kernel for. Each writes its tensor lists in
# place and returns nothing, so skipping it under fake tensors changes no storage. (Left to the fake
# mode, the op would fail: a fake mode that ran it on real zero-filled copies allocated a 45 GB model's
# worth of host memory, and the kernel killed the worker.)
_aten = torch.ops.aten
# The matrix products that run on cuBLAS on CUDA (linear layers dispatch to addmm or mm, attention's
# math path to bmm).
CUBLAS_OPS = frozenset({_aten.mm.default, _aten.addmm.default, _aten.bmm.default, _aten.baddbmm.default,
                        _aten.addmv.default, _aten.mv.default, _aten._addmm_activation.default})
IN_PLACE_UPDATES = frozenset({torch.ops.aten._fused_sgd_.default, torch.ops.aten._fused_sgd_.tensor_lr})


# ------------------------------------------------------------------------- the tracker
@dataclass
class Block:
    nbytes: int
    kind: str
    node: str
    phase: str


class StorageTracker(TorchDispatchMode):
    """Records each new storage an op returns and, through ``weakref.finalize``, its free.

    ``log`` holds (block key, +-bytes) while ``recording``; ``where`` is the (phase, node) the
    next allocation is attributed to (the backward's node comes from the running autograd node).
    """

    def __init__(self, round_to: int = 1) -> None:
        super().__init__()
        self.keys = WeakIdKeyDictionary()
        self.blocks: dict[int, Block] = {}
        self.alive: set[int] = set()
        self.live = 0
        self.round_to = round_to
        self.recording = False
        self.log: list[tuple[int, int]] = []
        self.phase, self.node = "setup", ""
        self.kind = "transient"      # the kind new storages get (weights while materialising, batch ...)
        self.cublas_threads: set[str] = set()   # "step", "autograd": where a cuBLAS product ran

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        if func in IN_PLACE_UPDATES:   # no fake kernel; updates its lists in place and allocates nothing
            return None
        out = func(*args, **(kwargs or {}))
        if func in CUBLAS_OPS:    # on CUDA, each thread that runs one keeps a cuBLAS workspace
            self.cublas_threads.add("autograd" if torch._C._current_autograd_node() is not None else "step")
        for t in tensors_in(out):
            self.track(t)
        scratch = _conv_scratch(func, args, out)
        if scratch:
            self.spike(scratch)
        return out

    def spike(self, nbytes: int) -> None:
        """A kernel's workspace: allocated and freed inside one op, invisible to fake tensors."""
        key = len(self.blocks)
        self.blocks[key] = Block(nbytes, "transient", self.node, self.phase)
        if self.recording:
            self.log += [(key, nbytes), (key, -nbytes)]

    def track(self, t: torch.Tensor) -> int | None:
        st = t.untyped_storage()
        key = self.keys.get(st)
        if key is not None:
            return key
        nbytes = st.nbytes()
        if self.round_to > 1:
            nbytes = -(-nbytes // self.round_to) * self.round_to
        key = len(self.blocks)
        running = torch._C._current_autograd_node()      # set while the engine runs a backward node
        if running is not None:
            self.phase = "backward"
        elif self.phase == "backward":
            self.phase, self.node = "loss", LOSS_NODE     # after the backward, before the optimizer step
        phase, node = self.phase, self.node
        if running is not None:
            node = _metadata(running).get("studio_node", LOSS_NODE)
        self.blocks[key] = Block(nbytes, self.kind, node, phase)
        self.keys[st] = key
        self.live += nbytes
        self.alive.add(key)
        if self.recording:
            self.log.append((key, nbytes))
        weakref.finalize(st, self._free, key)
        return key

    def _free(self, key: int) -> None:
        nbytes = self.blocks[key].nbytes
        self.live -= nbytes
        self.alive.discard(key)
        if self.recording:
            self.log.append((key, -nbytes))

    def mark(self, t: torch.Tensor | None, kind: str, *, only_from: str | None = None) -> None:
        """Class the storage of ``t`` as ``kind`` (when it is still of kind ``only_from``, if given)."""
        if t is None:
            return
        key = self.keys.get(t.untyped_storage())
        if key is None:
            key = self.track(t)
        block = self.blocks[key]
        if only_from is None or block.kind == only_from:
            block.kind = kind


def _conv_scratch(func: Any, args: tuple, out: Any) -> int:
    """The column buffer (im2col) of PyTorch's slow CPU convolution, which runs 2-D convolutions in
    a dtype oneDNN does not take on this CPU (bf16 without AVX512-BF16/AMX, say): one buffer of
    batch x in_channels/groups x kh x kw x output pixels, in forward and again in backward."""
    if func is torch.ops.aten.convolution.default:
        x, w, transposed, out_hw = args[0], args[1], args[6], out.shape[2:]
    elif func is torch.ops.aten.convolution_backward.default:
        x, w, transposed, out_hw = args[1], args[2], args[7], args[0].shape[2:]
    else:
        return 0
    if x.device.type != "cpu" or w.dim() != 4 or transposed or not _slow_cpu_conv(x.dtype):
        return 0
    return x.shape[0] * w.shape[1] * w.shape[2] * w.shape[3] * out_hw[0] * out_hw[1] * x.element_size()


def _slow_cpu_conv(dtype: torch.dtype) -> bool:
    if dtype == torch.bfloat16:
        return not torch.ops.mkldnn._is_mkldnn_bf16_supported()
    if dtype == torch.float16:
        return not torch.ops.mkldnn._is_mkldnn_fp16_supported()
    return False


# ------------------------------------------------------------------------- attribution hooks
def _metadata(fn: torch.autograd.graph.Node) -> dict[str, Any]:
    """An autograd node's metadata dict: a property at run time, which torch's typing declares a method."""
    md: dict[str, Any] = fn.metadata  # type: ignore[assignment]
    return md


def _stamp(outputs: Any, owner: str) -> None:
    """Give ``owner`` every autograd node reachable from ``outputs`` that no earlier module owns."""
    todo = [t.grad_fn for t in tensors_in(outputs) if t.grad_fn is not None]
    while todo:
        fn = todo.pop()
        md = _metadata(fn)
        if "studio_node" in md:
            continue
        md["studio_node"] = owner
        todo.extend(nxt for nxt, _ in fn.next_functions if nxt is not None)


@contextmanager
def attributed(model: nn.Module, opt: torch.optim.Optimizer, tracker: StorageTracker) -> Iterator[None]:
    """Forward hooks on each graph node's module set the phase and node; optimizer hooks mark the
    gradients (as the step starts) and the optimizer's state (as it ends)."""
    handles = []

    def pre(name: str) -> Callable:
        def hook(_m: nn.Module, _args: Any) -> None:
            tracker.phase, tracker.node = "forward", name
        return hook

    def post(name: str) -> Callable:
        def hook(_m: nn.Module, _args: Any, out: Any) -> None:
            _stamp(out, name)
            tracker.phase, tracker.node = "loss", LOSS_NODE
        return hook

    for name, child in model.named_children():
        handles.append(child.register_forward_pre_hook(pre(name)))
        handles.append(child.register_forward_hook(post(name)))

    def opt_pre(*_a: Any) -> None:
        for p in _params(opt):
            tracker.mark(p.grad, "gradients")
        tracker.phase, tracker.node = "optimizer", "(optimizer)"

    def opt_post(*_a: Any) -> None:
        for state in opt.state.values():
            for v in state.values():
                if isinstance(v, torch.Tensor):
                    tracker.mark(v, "optimizer")
        tracker.phase, tracker.node = "setup", ""

    handles.append(opt.register_step_pre_hook(opt_pre))
    handles.append(opt.register_step_post_hook(opt_post))

    def pack(t: torch.Tensor) -> torch.Tensor:
        tracker.mark(t, "activations", only_from="transient")
        return t

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            yield
    finally:
        for h in handles:
            h.remove()


def _params(opt: torch.optim.Optimizer) -> Iterator[torch.Tensor]:
    for group in opt.param_groups:
        yield from group["params"]
