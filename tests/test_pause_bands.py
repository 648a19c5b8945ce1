"""widgets/pause_bands.py: the shaded bands of profiling passes stay as many as the pause
log keeps (its last MAX_PAUSES), however long the app runs live (issue 54's hour soak:
each band the log dropped stayed in both plots, ~60 KB of Qt items a pass)."""

from __future__ import annotations

import pyqtgraph as pg

from widgets.models.pauses import MAX_PAUSES
from widgets.pause_bands import PauseBands


def _regions(plot: pg.PlotItem) -> int:
    return sum(isinstance(item, pg.LinearRegionItem) for item in plot.items)


def test_bands_of_pauses_the_log_dropped_leave_the_plots(qapp: object) -> None:
    glw = pg.GraphicsLayoutWidget()
    latency, throughput = glw.addPlot(), glw.addPlot(row=1, col=0)
    bands = PauseBands(latency, throughput, "w")
    passes = MAX_PAUSES + 40
    for n in range(1, passes + 1):  # a profiling pass every 30 s, all data still retained
        t = 30.0 * n
        bands.begin(t, "profiling")
        bands.log.samples_from(t + 3.0)
        bands.update(0.0, t + 3.0, 0.0, 0.0)
    assert len(bands.log.pauses) == MAX_PAUSES
    assert _regions(latency) == MAX_PAUSES
    assert _regions(throughput) == MAX_PAUSES
    labels = [i for i in latency.items if isinstance(i, pg.TextItem)]
    assert len(labels) == MAX_PAUSES
    assert {b[0] for b in bands.bands()} == {30.0 * n for n in range(41, passes + 1)}
