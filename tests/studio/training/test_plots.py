"""Growing buffers and the crosshair readout of the live plots."""

from __future__ import annotations

import numpy as np
import pytest

from studio.training.plot_theme import DARK, LIGHT, PALETTE, plot_theme
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
    item = plot.curve("train")
    # peak decimation: about two points per pixel, not a million, and the curve's extremes kept
    shown_x, shown_y = item.getData()
    assert len(shown_x) < 4 * 600 and shown_y.max() == 1.0 and shown_y.min() == np.exp(-999_999 / 2e5)
    # zoomed in on 100 steps, the curve is drawn from its points there, not from the decimated whole
    plot.getPlotItem().vb.setXRange(1000, 1100, padding=0)
    shown_x, _ = item.getData()
    assert shown_x[0] == 999 and shown_x[-1] == 1101 and np.array_equal(np.diff(shown_x), np.ones(102))
    plot.getPlotItem().vb.enableAutoRange(x=True)          # following the data again: the whole curve
    assert item.getData()[0][0] == 0 and item.getData()[0][-1] == 999_999
    text = plot.show_readout(500_000)
    assert text.splitlines() == ["x = 500000", f"train: {format_value(np.exp(-2.5))}", "val: 0.5"]
    plot.clear_curves()
    assert plot.curve_names() == [] and plot.readout_at(1) == ""


def _contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two #rrggbb colours."""
    def lum(h: str) -> float:
        c = [int(h[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = (v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in c)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_a_flat_series_gets_a_range_about_its_value_and_a_changing_one_its_own(qtbot):
    plot = CurvePlot("Learning rate", "lr")
    qtbot.addWidget(plot)
    plot.resize(400, 300)
    plot.show()
    plot.append("lr", range(50), [0.003] * 50)          # a constant schedule
    plot.refresh()
    _, (y0, y1) = plot.getPlotItem().vb.viewRange()
    assert y0 == pytest.approx(0.0027) and y1 == pytest.approx(0.0033)   # not -0.5..0.5, where 0.003 reads as 0
    plot.append("lr", [50, 51], [0.001, 0.0005])         # it changes: the ordinary auto-range again
    plot.refresh()
    _, (y0, y1) = plot.getPlotItem().vb.viewRange()
    assert y0 < 0.0005 < 0.003 < y1 < 0.0035
    plot.clear_curves()
    plot.append("flat zero", [0, 1], [0.0, 0.0])
    plot.refresh()
    _, (y0, y1) = plot.getPlotItem().vb.viewRange()
    assert y1 - y0 == pytest.approx(1.0) and y0 < 0 < y1


@pytest.mark.parametrize("legend", ["top", "bottom"])
def test_the_crosshair_readout_never_covers_the_legend(qtbot, legend):
    plot = CurvePlot("Loss", "loss", legend=legend)
    qtbot.addWidget(plot)
    plot.resize(400, 260)
    plot.show()
    x = np.arange(500, dtype=float)
    plot.append("train", x, np.exp(-x / 100))
    plot.append("val", x[::50], np.exp(-x[::50] / 90))
    plot.refresh()
    qtbot.waitExposed(plot)
    for at in (20, 250, 480):                     # left, middle, right under the legend
        plot.show_readout(at)
        readout, box = plot.readout.sceneBoundingRect(), plot.legend.sceneBoundingRect()
        assert not readout.intersects(box), (at, readout, box)


def test_palette_is_readable_on_the_dark_background_and_never_black_there():
    shown = [DARK.curve(c) for c in PALETTE]
    assert "#000000" not in shown and len(set(shown)) == len(PALETTE)
    assert min(_contrast(c, DARK.background) for c in shown) >= 4.5
    assert _contrast(LIGHT.curve("#F0E442"), LIGHT.background) >= 3   # Okabe-Ito yellow is 1.3:1 on white
    light = [LIGHT.curve(c) for c in PALETTE]
    assert min(_contrast(c, LIGHT.background) for c in light) >= 3 and len(set(light)) == len(PALETTE)
    assert LIGHT.curve("#000000") == "#000000" and DARK.curve("#d55e00") == "#d55e00"
    with pytest.raises(ValueError, match="'purple'; known: light, dark"):
        plot_theme("purple")


def test_plot_switches_theme_live(qtbot):
    plot = CurvePlot("Memory", "MiB")
    qtbot.addWidget(plot)
    plot.resize(400, 300)
    plot.show()
    plot.add_curve("peak", "#000000")
    plot.add_curve("val", "#0072B2", symbols=True)
    plot.append("peak", [0, 10], [1, 2])
    plot.append("val", [0, 10], [2, 1])
    plot.refresh()
    plot.show_readout(5)
    corner = (5, 5)
    assert plot.grab().toImage().pixelColor(*corner).name() == "#ffffff"
    assert plot.curve_color("peak") == "#000000"
    plot.set_plot_theme("dark")
    assert plot.grab().toImage().pixelColor(*corner).name() == DARK.background
    assert plot.curve_color("peak") == DARK.curve("#000000").lower() and plot.curve_color("val") == "#3388d8"
    assert plot.curve("val").opts["symbolBrush"].color().name() == "#3388d8"
    axis = plot.getPlotItem().getAxis("left")
    assert axis.textPen().color().name() == DARK.text and axis.pen().color().name() == DARK.axis
    assert DARK.text.lstrip("#") in plot.getPlotItem().titleLabel.item.toHtml()
    assert all(DARK.text.lstrip("#") in label.item.toHtml() for _s, label in plot.legend.items)
    assert plot.legend.opts["brush"].color().getRgb() == DARK.panel
    assert plot.readout.color.name() == DARK.text and plot.readout.fill.color().getRgb() == DARK.panel
    plot.add_curve("late", "#000000")            # a curve declared after the switch is themed too
    assert plot.curve_color("late") == DARK.curve("#000000").lower()
    plot.set_plot_theme(LIGHT)
    assert plot.curve_color("peak") == "#000000" and plot.grab().toImage().pixelColor(*corner).name() == "#ffffff"
    assert all("222222" in label.item.toHtml() for _s, label in plot.legend.items)


def test_the_legend_moves_off_the_curves(qtbot):
    from PySide6.QtWidgets import QApplication

    plot = CurvePlot("Accuracy", "fraction correct", legend="top")
    qtbot.addWidget(plot)
    plot.resize(420, 260)
    plot.show()
    QApplication.processEvents()
    xs = np.arange(1, 201, dtype=float)
    plot.append("train", xs, 1 - np.exp(-xs / 20))      # rises into the top right, where the legend starts
    plot.append("val", xs[::20], 1 - np.exp(-xs[::20] / 25))
    plot.refresh()
    QApplication.processEvents()
    assert plot.legend_corner != (True, True)
    right, top = plot.legend_corner
    assert not top                                       # the curves keep the top edge; the legend goes below
    plot.clear_curves()
    plot.append("loss", xs, np.exp(-xs / 20))            # falls into the bottom right: the legend goes up
    plot.refresh()
    assert plot.legend_corner[1] is True


def test_the_legend_covers_neither_the_curves_nor_a_level_line(qtbot, tmp_path):
    """The dashboard's memory plot: the worker's RSS and peak flat near the top, the predicted peak a
    dashed line near 0 with its label. The legend sat in the bottom-right corner over the dashed line
    (lines were not counted); half-way up the right edge it covers nothing."""
    from PySide6.QtWidgets import QApplication

    plot = CurvePlot("Memory", "MiB", legend="bottom")
    qtbot.addWidget(plot)
    plot.resize(420, 240)
    plot.show()
    QApplication.processEvents()
    xs = np.arange(3, 20, dtype=float)
    plot.append("rss", xs, np.full(xs.shape, 740.0))
    plot.append("peak_rss", xs, np.full(xs.shape, 970.0))
    plot.set_level("predicted", 7.3, "predicted tensors 7.3 MiB")
    plot.refresh()
    QApplication.processEvents()
    plot.grab().save(str(tmp_path / "memory_legend.png"))
    vb = plot.getPlotItem().vb
    box = vb.mapSceneToView(plot.legend.sceneBoundingRect()).boundingRect()
    for y in (740.0, 970.0, 7.3):
        assert not (box.top() <= y <= box.bottom()), (y, box, plot.legend_corner)


def _inked(plot: CurvePlot, colour: str) -> int:
    """Pixels of the plot drawn in ``colour`` (the curve's own, antialiasing aside)."""
    from PySide6.QtGui import QColor, QImage

    image = plot.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    bgra = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine() // 4, 4)
    want = QColor(colour)
    far = np.abs(bgra[:, :image.width(), :3].astype(int) - [want.blue(), want.green(), want.red()]).sum(axis=2)
    return int((far < 30).sum())


def test_a_curve_s_first_point_is_drawn_before_its_second_comes(qtbot):
    """A run's first learning rate, throughput or memory sample was an empty plot beside a loss curve of
    several points (a line through one point draws nothing): one point is a dot, two are a line."""
    plot = CurvePlot("Learning rate", "lr", theme="light")
    qtbot.addWidget(plot)
    plot.resize(400, 300)
    plot.show()
    plot.add_curve("lr", "#009E73")
    plot.legend.hide()                                     # its sample line is in the curve's colour too
    colour = plot.curve_color("lr")
    plot.append("lr", [1], [0.003])
    plot.refresh()
    assert _inked(plot, colour) >= 9                       # a dot of 6 px
    plot.append("lr", [2], [0.002])
    plot.refresh()
    assert plot.curve("lr").opts["symbol"] is None and _inked(plot, colour) > 50   # a line, no dots
