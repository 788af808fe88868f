"""A built module as fake CPU tensors: the structure and bytes of a real CPU step, without memory.

Plain ``meta`` tensors run forward and backward, but they take other paths than a real device
(attention unfused, autocast ignored), so graphs and byte counts from them differ by 17-31%.
``FakeTensorMode`` with fake *cpu* tensors reproduces the CPU graph and its bytes exactly. A module
cannot be built inside the mode (initialisers call ``aten._local_scalar_dense``, which fake tensors
refuse), so it is built on ``meta`` and then, inside the mode, every parameter and buffer is given an
empty tensor of its shape on the fake device.

Typical use, by the autograd capture and the memory prediction::

    module = build_module(graph, batch=b, device="meta")
    with fake_cpu(module, channels_last=cl) as mode:
        x, y = fake_batch(graph, b)               # fake cpu tensors, inside the mode
        loss = F.cross_entropy(module(x), y)
        loss.backward()                           # a real CPU step's autograd graph, no memory

``fake_cpu`` restores the module's own parameters and buffers on exit, so a user's real module can
be inspected without being changed. ``empty_parameters`` is the same swap without the mode, e.g. on
``meta`` as the fallback where fake tensors refuse an op.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch._subclasses import FakeTensorMode

from ..model import Graph

__all__ = ["empty_parameters", "fake_batch", "fake_cpu", "fake_cpu_mode", "is_fake"]


def fake_cpu_mode() -> FakeTensorMode:
    """A fresh fake mode; tensors made inside it are fake (shape, dtype, device, no storage).

    An op with no fake kernel raises instead of running on real zero-filled copies of its inputs
    (PyTorch's fallback), which for a large model allocates its whole size in host memory."""
    return FakeTensorMode(allow_non_fake_inputs=False, allow_fallback_kernels=False)


def is_fake(t: torch.Tensor) -> bool:
    return isinstance(t, torch._subclasses.fake_tensor.FakeTensor)


@contextmanager
def empty_parameters(module: nn.Module, device: torch.device | str = "cpu", *,
                     channels_last: bool = False) -> Iterator[nn.Module]:
    """Give every parameter and buffer of ``module`` an uninitialised tensor of its shape and dtype on
    ``device`` (fake when a fake mode is active) for the duration of the block.

    Parameters stay parameters with their ``requires_grad``; a tensor shared by two modules stays
    shared. ``channels_last`` lays out 4-D weights as the trainer does for convnets. The original
    tensors are put back on exit.
    """
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    made: dict[int, torch.Tensor] = {}
    # _parameters holds Parameters, _buffers tensors: one entry type covers both tables
    saved: list[tuple[dict[str, Any], str, torch.Tensor]] = []

    def empty_like(t: torch.Tensor) -> torch.Tensor:
        if id(t) not in made:
            layout = fmt if t.dim() == 4 else torch.contiguous_format
            e = torch.empty(t.shape, dtype=t.dtype, device=device, memory_format=layout)
            made[id(t)] = nn.Parameter(e, requires_grad=t.requires_grad) if isinstance(t, nn.Parameter) else e
        return made[id(t)]

    try:
        for mod in module.modules():
            tables: tuple[dict[str, Any], dict[str, Any]] = (mod._parameters, mod._buffers)
            for table in tables:
                for name, t in list(table.items()):
                    if t is not None:
                        saved.append((table, name, t))
                        table[name] = empty_like(t)
        yield module
    finally:
        for table, name, t in reversed(saved):
            table[name] = t


@contextmanager
def fake_cpu(module: nn.Module, *, channels_last: bool = False,
             device: torch.device | str = "cpu") -> Iterator[FakeTensorMode]:
    """Enter a fake mode with ``module``'s parameters and buffers as empty fake CPU tensors.

    Yields the mode; everything created in the block (inputs, activations, gradients) is fake. The
    module's own tensors come back on exit. ``device="cuda"`` fakes CUDA tensors instead (no GPU
    needed), for what differs by device kind; some CUDA-only kernels may refuse them.
    """
    mode = fake_cpu_mode()
    with mode, empty_parameters(module, device, channels_last=channels_last):
        yield mode


def fake_batch(graph: Graph | tuple[int, ...], batch: int, *,
               dtype: torch.dtype | None = None, device: torch.device | str = "cpu",
               channels_last: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """An input batch and its labels of the graph's input spec (or a per-sample shape), made on
    ``device``: call it inside :func:`fake_cpu` for fake tensors, or with ``device="meta"``.

    Values are never read (fake and meta tensors have none): inputs are empty, labels zeros.
    """
    if isinstance(graph, Graph):
        shape = tuple(graph.input_spec.shape)
        dtype = dtype or getattr(torch, graph.input_spec.dtype)
    else:
        shape = tuple(graph)
        dtype = dtype or torch.float32
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    fmt = torch.channels_last if channels_last and len(shape) == 3 and dtype.is_floating_point \
        else torch.contiguous_format
    if dtype.is_floating_point:
        x = torch.empty((batch, *shape), dtype=dtype, device=device, memory_format=fmt)
    else:
        x = torch.zeros((batch, *shape), dtype=dtype, device=device)
    y = torch.zeros(batch, dtype=torch.int64, device=device)
    return x, y
