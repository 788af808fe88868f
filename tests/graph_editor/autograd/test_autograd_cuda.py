"""capture_autograd for the 'cuda' device kind: fake CUDA tensors, with and without a GPU.

Without a GPU (a CUDA build of PyTorch on a CPU machine, as here and in CI) the forward runs as fake
CUDA tensors and builds the graph CUDA builds; what differs from the CPU's graph, and why, is pinned
down node by node. With a GPU (``cuda`` marker) the fake CUDA step is checked against a real one.
"""

from __future__ import annotations

import collections

import pytest
import torch
import torch.nn.functional as F

from graph_editor.autograd.capture import capture_autograd
from graph_editor.building import build_module, example_input
from graph_editor.model.serialize import load_graph
from tests.graph_editor.graph_testing import TEMPLATES

no_gpu_cuda_build = pytest.mark.skipif(not torch.backends.cuda.is_built() or torch.cuda.is_available(),
                                       reason="a CUDA build of PyTorch without a CUDA device")


def _per_owner(capture) -> dict[str, int]:
    return {s.owner: s.saved_bytes for s in capture.summaries()}


def _names(capture) -> collections.Counter:
    return collections.Counter(n.name for n in capture.nodes)


@no_gpu_cuda_build
def test_without_a_gpu_the_forward_runs_as_fake_cuda_and_differs_from_the_cpu_where_cuda_does():
    graph = load_graph(TEMPLATES / "digits_cnn.graph.json")
    cpu = capture_autograd(graph, 16, device_kind="cpu", use_cache=False)
    cuda = capture_autograd(graph, 16, device_kind="cuda", use_cache=False)
    assert cpu.device == "fake-cpu" and cuda.device == "fake-cuda" and "backward not run" in cuda.note
    assert all(t.dtype != "" for n in cuda.nodes for t in n.saved)
    # batch norm: cuDNN's kernel on CUDA (where cuDNN is there), ATen's on the CPU; same bytes
    bn = "CudnnBatchNormBackward0" if torch.backends.cudnn.is_available() else "NativeBatchNormBackward0"
    assert _names(cpu)["NativeBatchNormBackward0"] == 3 and _names(cuda)[bn] == 3
    # dropout: CUDA's fused kernel saves a bool mask (1 byte), the CPU multiplies by a float mask (4 bytes)
    assert _names(cuda)["NativeDropoutBackward0"] == 1 and "NativeDropoutBackward0" not in _names(cpu)
    (mask,) = [t for n in cuda.by_owner()["dropout"] for t in n.saved if t.dtype == "bool"]
    elements = mask.shape[0] * mask.shape[1]
    a, b = _per_owner(cpu), _per_owner(cuda)
    assert a["dropout"] - b["dropout"] == 3 * elements
    assert {k: v for k, v in a.items() if k != "dropout"} == {k: v for k, v in b.items() if k != "dropout"}
    assert cpu.saved_bytes - cuda.saved_bytes == 3 * elements
    assert len(cpu.nodes) == len(cuda.nodes)


@pytest.mark.slow
@no_gpu_cuda_build
def test_resnet_on_fake_cuda_saves_what_the_cpu_saves_with_cudnn_batch_norm():
    graph = load_graph(TEMPLATES / "resnet18_cifar.graph.json")
    cpu = capture_autograd(graph, 2, device_kind="cpu", use_cache=False)
    cuda = capture_autograd(graph, 2, device_kind="cuda", use_cache=False)
    assert cuda.device == "fake-cuda" and _per_owner(cpu) == _per_owner(cuda)
    diff = (_names(cpu) - _names(cuda)) + (_names(cuda) - _names(cpu))
    assert set(diff) <= {"NativeBatchNormBackward0", "CudnnBatchNormBackward0"}


@no_gpu_cuda_build
def test_bf16_for_cuda_needs_the_device_and_falls_back_to_the_cpu_saying_why():
    graph = load_graph(TEMPLATES / "digits_cnn.graph.json")
    captured = capture_autograd(graph, 8, "bf16", "cuda", use_cache=False)
    assert captured.device == "fake-cpu" and captured.device_kind == "cuda"
    assert "bf16 autocast needs a CUDA device" in captured.note
    assert captured.saved_bytes == capture_autograd(graph, 8, "bf16", "cpu", use_cache=False).saved_bytes


@pytest.mark.slow
@no_gpu_cuda_build
def test_attention_without_a_gpu_takes_the_unfused_path_and_says_so():
    graph = load_graph(TEMPLATES / "vit_tiny.graph.json")
    cuda = capture_autograd(graph, 2, device_kind="cuda", use_cache=False)
    assert cuda.device == "fake-cuda" and "unfused path" in cuda.note
    assert _names(cuda)["SafeSoftmaxBackward0"] == 12       # one per encoder block: the math path's softmax


def _cuda_step_saved_and_live(graph, batch: int, precision: str) -> tuple[int, int]:
    """A real CUDA forward's saved tensors, and the bytes it allocated that are still live when backward
    starts (the allocator's count, in its 512-byte blocks). Saved: the bytes of each storage that a
    saved-tensor hook saw, once, less the parameters, buffers and the input (the capture counts those
    elsewhere)."""
    torch.manual_seed(0)
    dev = torch.device("cuda")
    module = build_module(graph, batch=batch, device="cpu").to(dev)
    x, y = example_input(graph, batch).to(dev), torch.zeros(batch, dtype=torch.int64, device=dev)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    with torch.autocast("cuda", dtype=dtype, enabled=precision != "fp32"):   # warm-up: cuBLAS/cuDNN workspaces
        F.cross_entropy(module(x), y).backward()
    module.zero_grad(set_to_none=True)
    owned = {t.untyped_storage().data_ptr() for t in (*module.parameters(), *module.buffers(), x)}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        if st.data_ptr() not in owned:
            saved[st.data_ptr()] = st.nbytes()
        return t

    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated(dev)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
            torch.autocast("cuda", dtype=dtype, enabled=precision != "fp32"):
        loss = F.cross_entropy(module(x), y)
    torch.cuda.synchronize()
    live = torch.cuda.memory_allocated(dev) - before - 512   # less the loss's own block
    loss.backward()
    return sum(saved.values()), live


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("template", "batch", "precision"), [("digits_cnn", 64, "fp32"),
                                                                ("resnet18_cifar", 32, "fp32"),
                                                                ("resnet18_cifar", 32, "bf16")])
def test_fake_cuda_capture_matches_a_real_cuda_step(template, batch, precision):
    graph = load_graph(TEMPLATES / f"{template}.graph.json")
    captured = capture_autograd(graph, batch, precision, "cuda", use_cache=False)
    assert captured.device == "fake-cuda" and "backward not run" not in captured.note
    saved, live = _cuda_step_saved_and_live(graph, batch, precision)
    assert abs(captured.saved_bytes - saved) <= 0.001 * saved, (captured.saved_bytes, saved)
    # What else the forward leaves allocated, beyond the saved tensors of resnet18_cifar at batch 32 on an
    # H200 (torch 2.11): under bf16 autocast 1.5 to 3.5 MB (1.6-3.6%), in fp32 nothing in round 3's first
    # GPU session and 2.36 MB (1.55%) in its third; varying from run to run, not attributed to a tensor
    # yet (docs/gpu.md). The saved bytes themselves match within 0.1% (above).
    slack = 0.05
    assert abs(captured.saved_bytes - live) <= slack * live, (captured.saved_bytes, live)
