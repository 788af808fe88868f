"""Growing buffers and the crosshair readout of the live plots."""

from __future__ import annotations

import numpy as np
import pytest

from studio.training.plots import CurvePlot, SeriesBuffer, format_value


def test_buffer_grows_and_keeps_every_point():
    b = SeriesBuffer(capacity=16)
    for i in range(100):
        b.append(i, i * 2)
    b.extend(np.arange(100, 1000), np.arange(100, 1000) * 2)
    assert len(b) == 1000
    assert np.array_equal(b.x, np.arange(1000)) and np.array_equal(b.y, np.arange(1000) * 2)
    with pytest.raises(ValueError, match="differ in length"):
        b.extend([1, 2], [1])


def test_nearest_y():
    b = SeriesBuffer()
    assert b.y_at(3) is None
    b.extend([0, 10, 20], [1.0, 2.0, 3.0])
    assert b.y_at(-5) == 1.0 and b.y_at(4) == 1.0 and b.y_at(6) == 2.0 and b.y_at(99) == 3.0


def test_format_value():
    assert format_value(0.123456) == "0.1235"
    assert format_value(3e-5) == "3.000e-05"


def test_plot_draws_a_million_points_downsampled_with_readout(qtbot):
    plot = CurvePlot("Loss", "loss")
    qtbot.addWidget(plot)
    plot.resize(600, 400)
    plot.show()
    x = np.arange(1_000_000, dtype=float)
    plot.append("train", x, np.exp(-x / 2e5))
    plot.append("val", [0, 500_000], [1.0, 0.5])
    assert plot.point_count() == 1_000_002
    plot.refresh()
    item = plot._items["train"]
    assert item.opts["autoDownsample"] and item.opts["clipToView"] and item.opts["downsampleMethod"] == "peak"
    # once the view has its range, peak downsampling keeps a few points per pixel, not a million
    qtbot.waitUntil(lambda: len(item.getData()[0]) < 20_000, timeout=3000)
    text = plot.show_readout(500_000)
    assert text.splitlines() == ["x = 500000", f"train: {format_value(np.exp(-2.5))}", "val: 0.5"]
    plot.clear_curves()
    assert plot.curve_names() == [] and plot.readout_at(1) == ""
