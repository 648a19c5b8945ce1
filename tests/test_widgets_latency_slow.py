"""The latency plot at a slow rate, for real: batch 8 under load (0.8 inferences/s) used to
leave the plot empty; every inference is now a dot joined by a line, and the header says
which samples its figures are over."""

from __future__ import annotations

import numpy as np
from pytestqt.qtbot import QtBot

from widgets.latency_plot import LatencyPlot


def test_a_slow_run_draws_every_inference_as_a_dot_and_a_line(qtbot: QtBot) -> None:
    plot = LatencyPlot()
    qtbot.addWidget(plot)
    plot.resize(1000, 500)
    plot.show()
    lat = np.random.default_rng(0).gamma(8.0, 160.0, 40)  # ms: p50 about 1.27 s
    t = np.cumsum(lat / 1e3)
    plot.append(t, lat, 8)
    plot.paint_now()
    line = plot.lines._lines["latency"]
    assert line.dots is not None and line.dots.size() == t.size
    path = line.path
    joins = sum(not path.elementAt(i).isMoveTo() for i in range(path.elementCount()))
    assert joins == t.size - 1  # one line through every sample
    assert "over all 40 inferences (" in plot.stats_label.text()
    plot.append(t[-1] + np.arange(1, 3001) / 300, np.full(3000, 3.0), 1)  # fast again
    plot.paint_now()
    # the slow ones still in view (the view moved past the first), but the last: the fast
    # ones begin right after it
    assert line.dots is not None and line.dots.size() == t.size - 2
