"""The latency plot's parts on their own (widgets/latency_*.py): what each keeps, without
the widget's timer."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor
from pytestqt.qtbot import QtBot

from widgets.latency_markers import ChangeMarkers, SloLine
from widgets.latency_pacing import MIN_PAINT_HZ
from widgets.latency_plot import LatencyPlot

FG, BG = QColor("black"), QColor("white")


def _lines(plot: pg.PlotItem) -> list[pg.InfiniteLine]:
    return [i for i in plot.items if isinstance(i, pg.InfiniteLine)]


def test_crowded_markers_stagger_their_labels_and_go_with_their_data(qtbot: QtBot) -> None:
    top, bottom = pg.PlotItem(), pg.PlotItem()
    markers = ChangeMarkers(top, bottom)
    for t in (0.0, 1.0, 2.0, 3.0, 30.0):  # 1 s apart in a 60 s window: crowded
        markers.add(t, f"at {t:g}", 60.0, FG, BG)
    heights = [line.label.orthoPos for line in _lines(top)]
    assert heights == [0.97, 0.86, 0.75, 0.97, 0.97]  # the fifth stands apart: back on top
    assert len(_lines(bottom)) == 5 and not any(hasattr(line, "label") for line in _lines(bottom))
    markers.drop_before(2.5)
    assert markers.shown == [(3.0, "at 3"), (30.0, "at 30")]
    assert (
        [line.value() for line in _lines(top)]
        == [3.0, 30.0]
        == [line.value() for line in _lines(bottom)]
    )
    markers.clear()
    assert markers.shown == [] and not _lines(top) and not _lines(bottom)


def test_the_slo_line_sits_in_the_axis_units_and_hides_without_a_target(qtbot: QtBot) -> None:
    plot = pg.PlotItem()
    slo = SloLine(plot)
    assert slo.set(250.0, np.log10) == 250.0
    (line,) = _lines(plot)
    assert line.value() == np.log10(250.0) and line.isVisible()
    assert line.label.format == "SLO p99 250 ms"
    assert slo.set(0.0, np.log10) is None and not line.isVisible()
    assert slo.set(None, np.log10) is None and len(_lines(plot)) == 1


def test_the_frame_rate_stays_within_the_cpu_budget(qtbot: QtBot) -> None:
    plot = LatencyPlot(capacity=100, paint_hz=10.0, cpu_budget=0.02)
    qtbot.addWidget(plot)
    assert plot.paint_hz == 10.0  # nothing painted yet: the most it may
    plot._frame_s = 0.004  # 4 ms a frame: 2% of a core affords 5 a second
    assert plot.paint_hz == 5.0
    plot._frame_s = 0.5
    assert plot.paint_hz == MIN_PAINT_HZ
