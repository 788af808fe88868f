"""Log-scale y labels that never run into each other (studio.training.log_axis): pyqtgraph labelled every
tick 2..9 of a decade, and near each decade (0.8, 0.9, 1; 0.08, 0.09, 0.1) they piled up on a short plot,
as the Runs overlay's log y showed a loss curve. The labels the axis really draws are measured."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtGui import QImage, QPainter

from studio.training.plots import CurvePlot

pytestmark = pytest.mark.qt


def drawn_labels(plot: CurvePlot) -> list[tuple[float, float, str]]:
    """(top, bottom, text) of each label the left axis draws, as its paint would."""
    axis = plot.getPlotItem().getAxis("left")
    image = QImage(10, 10, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        _axis, _ticks, texts = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return sorted((rect.top(), rect.bottom(), text) for rect, _flags, text in texts if text)


@pytest.mark.parametrize("top, low", [(1.2, 0.25), (2.3, 0.02), (0.9, 0.45)])
def test_log_y_labels_stand_apart_on_a_short_plot(qtbot, top, low):
    plot = CurvePlot("val loss", "", "step")
    qtbot.addWidget(plot)
    plot.resize(700, 260)
    plot.add_curve("a", "#0072B2")
    xs = np.arange(1, 301.0)
    plot.append("a", xs, top * np.exp(-xs / 50) + low)
    plot.getPlotItem().setLogMode(y=True)
    plot.refresh()
    plot.show()
    qtbot.waitExposed(plot)
    labels = drawn_labels(plot)
    assert len(labels) >= 3, labels          # still read as a scale: a decade and values either side
    assert any(text in ("1", "0.1") for _t, _b, text in labels), labels
    for (_t0, bottom, first), (top_next, _b1, second) in zip(labels, labels[1:], strict=False):
        assert top_next >= bottom, f"'{first}' and '{second}' overlap: {labels}"
