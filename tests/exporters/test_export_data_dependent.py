"""A graph whose Module node computes from the data's values (``.item()``, a boolean mask's count)
exports to ONNX with that computation kept, not frozen at the example batch's value: onnxruntime
agrees with PyTorch on batches of other sizes and scales than the one the export traced."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from exporters import export, from_graph
from tests.graph_editor.compile_graphs import item_graph
from tests.graph_editor.test_data_dependent import positive_count_graph

pytestmark = pytest.mark.export


@pytest.mark.parametrize("make", [item_graph, positive_count_graph], ids=["item", "mask_count"])
def test_a_value_read_exports_and_follows_the_data(tmp_path, make):
    import onnxruntime as ort

    source = from_graph(make(), verify_batch=2)
    model = source.module.eval()
    report = export(source, "onnx", tmp_path / "m.onnx")
    assert report.ok, report.to_text()
    session = ort.InferenceSession(str(tmp_path / "m.onnx"))
    gen = torch.Generator().manual_seed(3)
    for batch, scale in ((5, 1.0), (3, 100.0), (4, -3.0)):   # the value read differs from the traced one
        x = torch.randn((batch, 1, 8, 8), generator=gen) * scale
        with torch.no_grad():
            want = model(x).numpy()
        got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
        assert np.abs(got - want).max() <= 1e-5 * max(1.0, float(np.abs(want).max())), (batch, scale)
