"""Shaded, labelled bands where timing paused (a profiling pass): on the latency plot and
on the throughput plot under it, so a drop to 0 samples/s reads as "profiling", not as a
stall. The pauses themselves are widgets/models/pauses.py's PauseLog."""

from __future__ import annotations

import time

import pyqtgraph as pg
from PySide6.QtGui import QColor

from widgets import theme
from widgets.models.pauses import Pause, PauseLog

LABEL_GAP = 0.12  # of the visible time span: labels closer than this to the last are hidden


class PauseBands:
    """One band per pause in each plot (items reused while the pause lasts)."""

    def __init__(self, latency: pg.PlotItem, throughput: pg.PlotItem, fg: QColor | str) -> None:
        self.log = PauseLog()
        self._plots = (latency, throughput)
        self._fg = fg
        self._items: dict[int, tuple[pg.LinearRegionItem, pg.LinearRegionItem, pg.TextItem]] = {}
        self._open_since = 0.0  # monotonic time the open pause began here

    def begin(self, t_s: float, label: str, relabel: bool = False) -> None:
        if not (relabel and self.log.pauses and self.log.pauses[-1].end_s is None):
            self._open_since = time.monotonic()
        self.log.begin(t_s, label, relabel)
        kept = {id(p) for p in self.log.pauses}  # the log keeps its last MAX_PAUSES only:
        for key in [k for k in self._items if k not in kept]:  # a dropped pause's band goes
            self._remove_items(key)

    def update(self, first_t: float, last_t: float, y_bottom: float, x_left: float) -> None:
        """Place the bands; an open pause reaches to now (its end is not known yet)."""
        for gone in self.log.forget_before(first_t):
            self._remove(gone)
        shown = -float("inf")  # where the last label sits: labels never pile up
        gap = LABEL_GAP * max(last_t - x_left, 1e-9)
        for pause in self.log.pauses:
            end = pause.end_s
            if end is None:
                end = max(last_t, pause.start_s) + (time.monotonic() - self._open_since)
            items = self._items.get(id(pause))
            if items is None:
                items = self._make(pause)
            items[0].setRegion((pause.start_s, end))
            items[1].setRegion((pause.start_s, end))
            x = max(pause.start_s, x_left)  # in view, not cut
            items[2].setPos(x, y_bottom)
            if items[2].textItem.toPlainText() != pause.label:  # relabelled while it lasts
                items[2].setText(pause.label)
            items[2].setVisible(x - shown >= gap)  # a pass close behind another: its band only
            if x - shown >= gap:
                shown = x

    def bands(self) -> list[tuple[float, float | None, str]]:
        return [(p.start_s, p.end_s, p.label) for p in self.log.pauses]

    def clear(self) -> None:
        for pause in list(self.log.pauses):
            self._remove(pause)
        self.log.clear()

    def _make(self, pause: Pause) -> tuple[pg.LinearRegionItem, pg.LinearRegionItem, pg.TextItem]:
        color = QColor(theme.MARKER)
        color.setAlpha(40)
        regions = []
        for plot in self._plots:
            region = pg.LinearRegionItem(
                (pause.start_s, pause.start_s), movable=False, brush=pg.mkBrush(color)
            )
            for line in region.lines:
                line.setPen(pg.mkPen(None))
            region.setZValue(-50)
            plot.addItem(region, ignoreBounds=True)
            regions.append(region)
        # at the foot of the plot: the config markers' labels sit at its top
        text = pg.TextItem(pause.label, color=self._fg, anchor=(0, 1))
        self._plots[0].addItem(text, ignoreBounds=True)
        items = (regions[0], regions[1], text)
        self._items[id(pause)] = items
        return items

    def _remove(self, pause: Pause) -> None:
        self._remove_items(id(pause))

    def _remove_items(self, key: int) -> None:
        items = self._items.pop(key, None)
        if items is None:
            return
        self._plots[0].removeItem(items[0])
        self._plots[1].removeItem(items[1])
        self._plots[0].removeItem(items[2])
