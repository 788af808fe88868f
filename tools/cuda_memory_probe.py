"""What a real CUDA training step allocates that the fake-tensor prediction does not see.

    python tools/cuda_memory_probe.py [--out FILE.json]

Needs a CUDA GPU. For each case (template, batch, precision, channels_last, cuDNN benchmark) it runs
the trainer's own step (``trainer.loop.make_train_step``, the spec's default AdamW) three times and
reports, beside :func:`trainer.memory.prediction.predict_memory`'s peak and parts:

* ``peak``: ``torch.cuda.max_memory_allocated`` over the three steps (what the prediction test checks);
* ``persistent_extra``: bytes allocated after the steps beyond the weights, gradients and optimizer
  state (the cuBLAS/cuBLASLt workspaces, which PyTorch takes from the caching allocator and keeps);
* per op of the third step, measured by a dispatch mode: ``spike`` (the op's own peak above both what
  was live before and after it: a kernel workspace, allocated and freed inside the op) and ``grow``
  (what stayed allocated beyond its outputs on the op's first call);
* for the backward capture, every tensor the real forward saved (by saved-tensor hooks, one entry per
  storage) against what :func:`graph_editor.autograd.capture.capture_autograd` lists on fake CUDA, as
  multisets of (shape, dtype) with the differences.

The figures fed ``trainer.memory.prediction``'s CUDA terms; ``docs/gpu.md`` records a run.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graph_editor.autograd.capture import capture_autograd, tensors_in  # noqa: E402
from graph_editor.building import build_module, example_input  # noqa: E402
from graph_editor.model import load_graph  # noqa: E402
from trainer.loop import make_train_step  # noqa: E402
from trainer.memory.prediction import predict_memory  # noqa: E402
from trainer.optim import make_optimizer  # noqa: E402
from trainer.spec import OptimSpec  # noqa: E402

TEMPLATES = ROOT / "assets" / "templates"
DEV = torch.device("cuda")


class OpMemory(TorchDispatchMode):
    """Per op: live bytes before and after, and the allocator's peak inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        before = torch.cuda.memory_allocated(DEV)
        torch.cuda.reset_peak_memory_stats(DEV)
        out = func(*args, **(kwargs or {}))
        after = torch.cuda.memory_allocated(DEV)
        peak = torch.cuda.max_memory_allocated(DEV)
        outs = sum(t.untyped_storage().nbytes() for t in tensors_in(out) if t.device.type == "cuda")
        shapes = [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)][:3]
        self.rows.append({"op": str(func), "shapes": shapes, "before": before, "after": after,
                          "spike": max(peak - max(before, after), 0), "grow": after - before - outs})
        return out


def state_bytes(model: torch.nn.Module, opt: torch.optim.Optimizer) -> int:
    seen: set[int] = set()
    total = 0
    tensors = [*model.parameters(), *model.buffers(), *(p.grad for p in model.parameters() if p.grad is not None)]
    tensors += [v for st in opt.state.values() for v in st.values() if isinstance(v, torch.Tensor)]
    for t in tensors:
        if t.device.type == "cuda" and t.untyped_storage().data_ptr() not in seen:
            seen.add(t.untyped_storage().data_ptr())
            total += -(-t.untyped_storage().nbytes() // 512) * 512
    return total


def step_case(name: str, batch: int, precision: str, channels_last: bool, benchmark: bool) -> dict:
    torch.backends.cudnn.benchmark = benchmark
    g = load_graph(TEMPLATES / f"{name}.graph.json")
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated(DEV)
    torch.manual_seed(0)
    model = build_module(g, device=DEV)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = make_optimizer(model, OptimSpec())
    step, _ = make_train_step(model, opt, device=DEV, precision=precision, label_smoothing=0.0)
    fmt = torch.channels_last if channels_last and len(g.input_spec.shape) == 3 else torch.contiguous_format

    def batch_xy() -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(batch, *g.input_spec.shape, device=DEV).contiguous(memory_format=fmt)
        return x, torch.zeros(batch, dtype=torch.long, device=DEV)

    torch.cuda.reset_peak_memory_stats(DEV)
    for _ in range(2):
        step(*batch_xy())
    torch.cuda.synchronize(DEV)
    mode = OpMemory()
    x, y = batch_xy()
    with mode:
        step(x, y)
    torch.cuda.synchronize(DEV)
    del x, y
    peak = torch.cuda.max_memory_allocated(DEV) - base   # the op mode resets the peak: re-measure cleanly
    torch.cuda.reset_peak_memory_stats(DEV)
    for _ in range(2):
        step(*batch_xy())
    torch.cuda.synchronize(DEV)
    steady_peak = torch.cuda.max_memory_allocated(DEV) - base
    extra = torch.cuda.memory_allocated(DEV) - base - state_bytes(model, opt)
    spikes = sorted(mode.rows, key=lambda r: -r["spike"])[:12]
    by_op: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for r in mode.rows:
        by_op[r["op"]][0] += 1
        by_op[r["op"]][1] = max(by_op[r["op"]][1], r["spike"])
    pred = predict_memory(g, batch, "adamw", precision if precision != "fp16" else "fp32",
                          channels_last=channels_last, device="cuda")
    del model, opt, step
    torch.cuda.empty_cache()
    return {"case": [name, batch, precision, channels_last, benchmark], "measured_peak_steps_4_5": steady_peak,
            "measured_peak_step_3": peak, "persistent_extra": extra, "predicted": pred.peak_bytes,
            "predicted_parts": pred.parts, "top_spikes": spikes,
            "max_spike_by_op": {k: v for k, v in by_op.items() if v[1] > 0}}


def saved_case(name: str, batch: int, precision: str) -> dict:
    g = load_graph(TEMPLATES / f"{name}.graph.json")
    torch.manual_seed(0)
    module = build_module(g, batch=batch, device="cpu").to(DEV)
    x, y = example_input(g, batch).to(DEV), torch.zeros(batch, dtype=torch.int64, device=DEV)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    with torch.autocast("cuda", dtype=dtype, enabled=precision != "fp32"):
        F.cross_entropy(module(x), y).backward()
    module.zero_grad(set_to_none=True)
    params = {p.untyped_storage().data_ptr() for p in module.parameters()} | {x.untyped_storage().data_ptr()}
    real: list[tuple] = []
    seen: set[int] = set()

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in seen and ptr not in params:
            seen.add(ptr)
            real.append((tuple(t.shape), str(t.dtype).removeprefix("torch."), t.untyped_storage().nbytes(),
                         tuple(t.stride())))
        return t

    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated(DEV)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
            torch.autocast("cuda", dtype=dtype, enabled=precision != "fp32"):
        loss = F.cross_entropy(module(x), y)
    torch.cuda.synchronize()
    live = torch.cuda.memory_allocated(DEV) - before - 512
    loss.backward()
    cap = capture_autograd(g, batch, precision, "cuda", use_cache=False)
    fake = [(tuple(t.shape), t.dtype.removeprefix("torch."), t.bytes) for n in cap.nodes for t in n.saved if t.bytes]
    rc = collections.Counter((s, d) for s, d, _, _ in real)
    fc = collections.Counter((s, d) for s, d, _ in fake)
    return {"case": [name, batch, precision], "live_after_forward": live, "captured_saved_bytes": cap.saved_bytes,
            "real_hooked_bytes": sum(b for _, _, b, _ in real), "fake_bytes": sum(b for _, _, b in fake),
            "only_real": [[list(k), v] for k, v in (rc - fc).items()],
            "only_fake": [[list(k), v] for k, v in (fc - rc).items()],
            "real_nbytes_over_shape": [r for r in real if r[2] > 2 * _numel_bytes(r)][:10],
            "capture_nodes": collections.Counter(n.name for n in cap.nodes).most_common()}


def _numel_bytes(r: tuple) -> int:
    n = 1
    for s in r[0]:
        n *= s
    return n * {"float32": 4, "bfloat16": 2, "float16": 2, "bool": 1, "uint8": 1, "int64": 8}.get(r[1], 4)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="cuda_memory_probe.json")
    args = parser.parse_args()
    print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(), "cudnn", torch.backends.cudnn.version())
    results: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "steps": [], "saved": []}
    cases = [("resnet18_cifar", 32, "fp32", False, False), ("resnet18_cifar", 128, "fp32", False, False),
             ("resnet18_cifar", 32, "fp32", True, True), ("resnet18_cifar", 128, "bf16", True, True),
             ("digits_cnn", 64, "fp32", True, True), ("mlp", 64, "fp32", False, False),
             ("vit_tiny", 8, "bf16", False, True)]
    for case in cases:
        try:
            r = step_case(*case)
        except Exception as exc:      # a probe: report and go on to the next case
            r = {"case": list(case), "error": f"{type(exc).__name__}: {exc}"}
        results["steps"].append(r)
        print(json.dumps({k: v for k, v in r.items() if k not in ("top_spikes", "max_spike_by_op")}))
    for case in (("resnet18_cifar", 32, "bf16"), ("resnet18_cifar", 32, "fp32"), ("digits_cnn", 64, "bf16")):
        try:
            r = saved_case(*case)
        except Exception as exc:
            r = {"case": list(case), "error": f"{type(exc).__name__}: {exc}"}
        results["saved"].append(r)
        print(json.dumps({k: v for k, v in r.items() if k != "capture_nodes"}))
    Path(args.out).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
