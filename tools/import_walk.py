"""Walk real classification models through the importer (issue 16's proof).

Every classification builder of ``torchvision.models`` and one or two small variants of the most used
timm families, built without weights. For each model: import it, then check that

- the graph has exactly the module's parameter count,
- its FLOPs equal ``FlopCounterMode``'s on the module,
- the graph built back with the imported weights gives the module's outputs (max abs diff < 1e-5),
- its ONNX export passes its proof (``onnx.checker`` and onnxruntime against PyTorch).

Prints one row per model (ok/failed, the first cause, seconds of the import, seconds in all) and
imported/total per source. ``tests/graph_editor/importer/test_import_zoo.py`` runs the same checks in CI on
the cheap ones; this walk checks them all::

    python tools/import_walk.py [--only NAME ...] [--skip-onnx] [--source torchvision|timm]
    python tools/import_walk.py --only swin_t maxvit_t --no-strict  # Program nodes where no layer maps
    python tools/import_walk.py --timm --results walk.jsonl  # every timm family (tools/timm_families.py)

Strict (the default) asks for catalog layers only; ``--no-strict`` keeps what does not map as Program
nodes (the module's own exported program) and prints how many each model has: a model imports strictly
when it has none. All-zero parameters are re-drawn before the round trip, and outputs are compared
relative to their largest value.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from graph_editor.analysis.per_node import analyze
from graph_editor.building import build_module
from graph_editor.importer.module_import import ImportResult, import_module

TOLERANCE = 1e-5
AUX_HEADS = ("googlenet", "inception_v3")
# timm's small variants of the families the issue names; (name, per-sample input shape or None = its default)
TIMM_MODELS: dict[str, list[str]] = {
    "resnet": ["resnet18", "resnet50d"],
    "efficientnet": ["efficientnet_b0"],
    "mobilenetv3": ["mobilenetv3_small_100", "mobilenetv3_large_100"],
    "convnext": ["convnext_atto"],
    "regnet": ["regnetx_002", "regnety_002"],
    "vit": ["vit_tiny_patch16_224"],
    "deit": ["deit_tiny_patch16_224"],
    "mixer": ["mixer_s32_224"],
    "ghostnet": ["ghostnet_100"],
    "lcnet": ["lcnet_050"],
}


@dataclass(frozen=True)
class Case:
    """One model to walk: where it comes from, its name and the per-sample input it takes."""

    source: str  # "torchvision" or "timm"
    name: str
    shape: tuple[int, int, int]
    family: str = ""

    @property
    def id(self) -> str:
        return f"{self.source}:{self.name}"

    def build(self) -> nn.Module:
        """The model with freshly initialised weights (never downloaded; all-zero ones re-drawn), in eval mode,
        seeded."""
        torch.manual_seed(0)
        if self.source == "torchvision":
            import torchvision

            # googlenet and inception_v3 only use their auxiliary heads while training: leave them out, so
            # that every parameter of the module is one of the traced (eval mode) graph's
            extra = {"aux_logits": False, "init_weights": True} if self.name in AUX_HEADS else {}
            model = torchvision.models.get_model(self.name, weights=None, **extra)
        else:
            import timm

            model = timm.create_model(self.name, pretrained=False)
        redraw_zeros(model)  # outputs of all-zero weights prove nothing
        return model.eval()


def build_without_weights(case: Case) -> nn.Module:
    """``case``'s model with its parameters and buffers on the meta device: shapes without memory or
    initialisation time, for the counts. Builders that compute with tensors while constructing
    (torchvision's RegNet widths) cannot run under ``torch.device("meta")``; for them each parameter
    and buffer is moved to meta as it is registered, so the rest of the builder runs on the CPU."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with torch.device("meta"):
                return case.build()
        except (NotImplementedError, RuntimeError):
            pass
        with _weights_on_meta():
            return case.build()


@contextlib.contextmanager
def _weights_on_meta() -> Iterator[None]:
    register_parameter, register_buffer = nn.Module.register_parameter, nn.Module.register_buffer

    def parameter(self: nn.Module, name: str, param: nn.Parameter | None) -> None:
        if param is not None and not param.is_meta:
            param = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        register_parameter(self, name, param)

    def buffer(self: nn.Module, name: str, tensor: torch.Tensor | None, persistent: bool = True) -> None:
        register_buffer(self, name, tensor.to("meta") if tensor is not None else None, persistent)

    nn.Module.register_parameter, nn.Module.register_buffer = parameter, buffer  # type: ignore[method-assign]
    try:
        yield
    finally:
        nn.Module.register_parameter, nn.Module.register_buffer = register_parameter, register_buffer


def torchvision_cases() -> list[Case]:
    """Every classification builder in ``torchvision.models``, at its smallest documented input."""
    import torchvision

    cases = []
    for name in torchvision.models.list_models(module=torchvision.models):
        weights = torchvision.models.get_model_weights(name)
        meta = next(iter(weights)).meta
        size = int(meta.get("min_size", (32, 32))[0])
        if name.startswith("vit_"):  # built without weights, a ViT's position embeddings are for 224x224
            size = 224                 # (vit_h_14's min_size, 518, is its SWAG weights')
        elif name.startswith(("swin_", "maxvit")):  # windows fix the smallest size
            size = max(size, 224)
        cases.append(Case("torchvision", name, (3, size, size), name.split("_")[0].rstrip("0123456789")))
    return cases


def timm_case(name: str) -> Case:
    """One timm model at its default input size, its family the timm module that registers it."""
    import timm

    family = next((m for m in timm.list_modules() if name in timm.list_models(module=m)), "")
    cfg = timm.get_pretrained_cfg(name)
    size = tuple(cfg.input_size) if cfg is not None and cfg.input_size else (3, 224, 224)
    return Case("timm", name, (int(size[0]), int(size[1]), int(size[2])), family)


def redraw_zeros(model: nn.Module) -> int:
    """Re-draw every all-zero parameter (N(0, 0.02), seeded): mixer, gMLP, ResMLP and Sequencer output
    exactly 0 at initialisation, and a round trip comparing zeros proves nothing. Returns how many."""
    gen = torch.Generator().manual_seed(2)
    redrawn = 0
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() and not p.is_meta and not bool(p.any()):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
                redrawn += 1
    return redrawn


def timm_cases() -> list[Case]:
    """The timm family subset, each at its default input size."""
    import timm

    cases = []
    for family, names in TIMM_MODELS.items():
        for name in names:
            size = tuple(timm.get_pretrained_cfg(name).input_size)
            cases.append(Case("timm", name, (int(size[0]), int(size[1]), int(size[2])), family))
    return cases


@dataclass
class Outcome:
    case: Case
    ok: bool = False
    cause: str = ""
    import_s: float = 0.0
    import_cpu_s: float = 0.0  # CPU seconds of the import, every thread: what a busy machine does not inflate
    total_s: float = 0.0
    onnx_cpu_s: float = 0.0  # CPU seconds of the ONNX export and its proof, every thread
    programs: int = 0  # Program nodes in the imported graph (0 under strict): strictly imported when 0
    checks: list[str] = field(default_factory=list)


class CheckFailed(Exception):
    """One of the proof's checks failed; the message says which and by how much."""


def module_flops(model: nn.Module, shape: tuple[int, ...], batch: int = 1) -> int:
    """``FlopCounterMode``'s count for one forward pass, on the meta device (no memory, no time)."""
    meta = _on_meta(model)
    # With autograd on (meta: it costs nothing): under no_grad, FlopCounterMode's module tracker fails on a
    # parameter passed into a submodule as an input (timm PiT's class token: "Expected gradient function")
    with FlopCounterMode(display=False) as counter:
        meta(torch.empty((batch, *shape), device="meta"))
    return int(counter.get_total_flops())


def _on_meta(model: nn.Module) -> nn.Module:
    import copy

    clone = copy.deepcopy(model) if not any(p.is_meta for p in model.parameters()) else model
    return clone.to("meta")


def check_counts(model: nn.Module, result: ImportResult, shape: tuple[int, ...]) -> list[str]:
    """Parameters exact, FLOPs equal to ``FlopCounterMode``'s at batch 1."""
    analysis = analyze(result.graph, batch=1)
    own = sum(p.numel() for p in model.parameters())
    if analysis.total_params != own:
        raise CheckFailed(f"parameters: the graph has {analysis.total_params}, the module {own}")
    flops = module_flops(model, shape)
    if analysis.total_flops != flops:
        worst = sorted(analysis.nodes, key=lambda n: -n.flops)[:1]
        raise CheckFailed(f"FLOPs: the graph counts {analysis.total_flops}, FlopCounterMode {flops}"
                          f" (largest node {worst[0].id if worst else '-'})")
    return [f"params {own}", f"flops {flops}"]


def check_outputs(model: nn.Module, result: ImportResult, shape: tuple[int, ...]) -> nn.Module:
    """The graph built back with the imported weights gives the module's outputs; returns the built module."""
    built = build_module(result.graph)
    built.load_state_dict(result.state_dict, strict=True)
    built.eval()
    x = torch.randn((2, *shape), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want, got = model(x), built(x)
    want = want[0] if isinstance(want, tuple | list) else want  # (logits, aux): the graph's output is the first
    diff, scale = float((want - got).abs().max()), float(want.abs().max())
    if scale == 0:
        raise CheckFailed("the module's outputs are all zero: the round trip compares nothing")
    if not diff <= TOLERANCE * scale:  # relative to the output's size, so small outputs prove as much as large
        raise CheckFailed(f"outputs differ by {diff:.3g} after the round trip ({diff / scale:.3g} of the largest)")
    return built


def check_onnx(result: ImportResult, built: nn.Module, name: str) -> str:
    """The ONNX export of the imported graph with its weights passes the exporter's proof."""
    from exporters.api import export
    from exporters.options import ExportOptions
    from exporters.source import ExportSource, random_inputs

    graph = result.graph
    source = ExportSource(graph, built, random_inputs(graph, 2, 0), name, f"imported {name}")
    with tempfile.TemporaryDirectory() as tmp:
        # the file a user's one-click export writes, proven as it is; only the latency figures are left out
        report = export(source, "onnx", Path(tmp) / f"{name}.onnx", ExportOptions(timing_runs=0))
    if not report.ok:
        failed = next((c for c in report.checks if not c.passed), None)
        raise CheckFailed(f"ONNX proof: {failed.name}: {failed.detail}" if failed else "ONNX proof failed")
    with torch.inference_mode():
        scale = float(source.reference(source.samples).abs().max())
    diff = float(report.metrics["max_abs_diff"])
    return f"onnx ok (max abs diff {diff:.2g}, outputs to {scale:.3g}: {diff / max(scale, 1e-30):.2g} of the largest)"


def walk_one(case: Case, *, onnx: bool = True, outputs: bool = True, strict: bool = True) -> Outcome:
    """Every check on one model; the first failure is the outcome's cause. ``strict``: every op must map
    to a catalog layer; without it, what does not is kept as Program nodes (counted)."""
    out = Outcome(case)
    start = time.perf_counter()
    try:
        model = case.build()
        t, cpu = time.perf_counter(), time.process_time()
        result = import_module(model, case.shape, name=case.name, strict=strict)
        out.import_s, out.import_cpu_s = time.perf_counter() - t, time.process_time() - cpu
        out.programs = sum(1 for n in result.graph if n.type == "Program")
        out.checks += check_counts(model, result, case.shape)
        if outputs:
            built = check_outputs(model, result, case.shape)
            out.checks.append("outputs ok")
            if onnx:
                cpu = time.process_time()
                try:
                    out.checks.append(check_onnx(result, built, case.name))
                finally:
                    out.onnx_cpu_s = time.process_time() - cpu
        out.ok = True
    except Exception as exc:  # the walk reports every failure and goes on
        out.cause = f"{type(exc).__name__}: {exc}"
    out.total_s = time.perf_counter() - start
    return out


def _first_line(text: str, width: int = 110) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    line = " | ".join(lines[:3])
    return line if len(line) <= width else line[: width - 1] + "…"


def walk(cases: list[Case], *, onnx: bool = True, outputs: bool = True, strict: bool = True) -> Iterator[Outcome]:
    for case in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield walk_one(case, onnx=onnx, outputs=outputs, strict=strict)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="model names to walk (default: all)")
    parser.add_argument("--source", choices=["torchvision", "timm"], default=None)
    parser.add_argument("--skip-onnx", action="store_true", help="leave the ONNX proof out")
    parser.add_argument("--skip-outputs", action="store_true",
                        help="parameters and FLOPs only: no round trip with real weights (implies --skip-onnx)")
    parser.add_argument("--no-strict", action="store_true",
                        help="keep what no catalog layer maps as Program nodes (counted) instead of failing")
    parser.add_argument("--timm", action="store_true",
                        help="every timm architecture family (its smallest variant up to 100M parameters), not strict, "
                             "with a per-family summary")
    parser.add_argument("--results", type=Path, default=Path("import_walk_timm.jsonl"),
                        help="--timm: the JSON-lines file of choices and outcomes; a walk started again continues it")
    parser.add_argument("--per-model-timeout", type=int, default=900, help="--timm: seconds a model may take (0: none)")
    parser.add_argument("--largest-first", action="store_true",
                        help="--timm: walk the largest families first (a second walk on the same --results file)")
    parser.add_argument("--save-choices", action="store_true",
                        help="--timm: write each family's chosen model to tools/timm_families.json (the tests' list)")
    parser.add_argument("--retry-failed", action="store_true", help="--timm: walk again what the --results file holds as failed")
    parser.add_argument("--report", action="store_true",
                        help="--timm: print the --results file as the markdown table of docs/import.md, walk nothing")
    parser.add_argument("--full-errors", action="store_true", help="print each failure's whole message")
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    if args.timm:
        import timm_families  # beside this file: on sys.path when run as a script

        return timm_families.main(args.results, onnx=not (args.skip_onnx or args.skip_outputs),
                                  timeout=args.per_model_timeout, only=args.only,
                                  largest_first=args.largest_first, save_choices=args.save_choices,
                                  report=args.report, retry_failed=args.retry_failed)
    cases = [*(torchvision_cases() if args.source in (None, "torchvision") else []),
             *(timm_cases() if args.source in (None, "timm") else [])]
    if args.only:
        cases = [c for c in cases if c.name in args.only]
    results: list[Outcome] = []
    print(f"{'model':<42} {'family':<22} {'result':<7} {'programs':>8} {'import s':>8} {'total s':>8}  cause or checks")
    for outcome in walk(cases, onnx=not (args.skip_onnx or args.skip_outputs), outputs=not args.skip_outputs,
                        strict=not args.no_strict):
        results.append(outcome)
        print(f"{outcome.case.id:<42} {outcome.case.family:<22} {'ok' if outcome.ok else 'failed':<7} {outcome.programs:8d} "
              f"{outcome.import_s:8.1f} {outcome.total_s:8.1f}  "
              f"{_first_line(outcome.cause) if outcome.cause else ', '.join(outcome.checks)}", flush=True)
        if args.full_errors and outcome.cause:
            print("    " + outcome.cause.replace("\n", "\n    "), flush=True)
    for source in ("torchvision", "timm"):
        mine = [r for r in results if r.case.source == source]
        if mine:
            print(f"{source}: imported {sum(r.ok for r in mine)}/{len(mine)}")
    if results:
        exact = [r for r in results if r.ok]
        print(f"exact {len(exact)}/{len(results)}, strictly (no Program node) {sum(r.programs == 0 for r in exact)}"
              f"/{len(results)}")
        slowest = max(results, key=lambda r: r.import_s)
        print(f"slowest import: {slowest.case.id} {slowest.import_s:.1f} s")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
