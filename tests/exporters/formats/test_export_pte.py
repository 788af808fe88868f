"""ExecuTorch .pte: lowered with XNNPACK, run in the ExecuTorch runtime, checked against PyTorch.

Skipped unless the ``edge`` extra (executorch) is installed.
"""

from __future__ import annotations

import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402

from exporters import ExportOptions, export, from_graph  # noqa: E402
from tests.exporters.export_graphs import ZOOS, template  # noqa: E402

pytestmark = pytest.mark.export


@pytest.mark.parametrize("name", ("lenet5", "conv_zoo", "tabular_zoo"))
def test_pte_runs_in_the_executorch_runtime_and_matches(tmp_path, name):
    from executorch.runtime import Runtime

    graph = ZOOS[name]() if name in ZOOS else template(name)
    source = from_graph(graph, verify_batch=3)
    report = export(source, "pte", tmp_path / "m.pte", ExportOptions(timing_runs=2, max_batch=16))
    assert report.ok, report.to_text()
    assert report.metrics["xnnpack_partitions"] >= 1 and report.metrics["executorch_ms"] > 0
    x = source.example(5, seed=3)
    method = Runtime.get().load_program(str(tmp_path / "m.pte")).load_method("forward")
    torch.testing.assert_close(method.execute([x])[0], source.reference(x), rtol=1e-3, atol=1e-5)
