"""Options common to every export (each format reads the ones it understands)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_OPSET = 20  # torch's own default for the dynamo exporter, and fully supported by onnxruntime
RTOL = 1e-3
ATOL = 1e-5


@dataclass
class ExportOptions:
    """``verify=False`` skips the proof (the report then says the file is unverified).

    ``example_batch`` is the batch traced during export; verification always runs a different
    batch size, which proves the batch dimension really is dynamic. ``timing_runs`` 0 leaves the
    latency figures out (the proof stands without them; timm's walk over every family uses it).
    """

    opset: int | None = None
    verify: bool = True
    external_data: bool | None = None  # ONNX: None = automatic above EXTERNAL_DATA_BYTES
    rtol: float = RTOL
    atol: float = ATOL
    example_batch: int = 2
    max_batch: int = 64   # ExecuTorch plans memory for this largest batch
    timing_runs: int = 10  # 0: no latency figures
