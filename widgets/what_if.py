"""The What-if view: the simulator's capacity curves (offered rate against p99 latency)
for the batching now in use and the one the sliders propose, the SLO as a line, the
prediction at the chosen rate, and what that prediction cannot promise (past capacity,
beyond the calibration, calibrated busy) in words. It draws what it is given; the app
computes it off the GUI thread."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from widgets import theme

CURRENT, PROPOSED, REAL = "#8a8f98", theme.THROUGHPUT, theme.BAD
MIN_PLOT_HEIGHT = 150  # px: the axis titles and the legend fit (90 px drew them over each other)


class WhatIfPlot(QWidget):
    """`set_curves(current, proposed)` (lists of capacity-curve points), `set_slo(ms)`,
    `set_rate(rate)`, `set_text(text)`, `set_flags(sentences)`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.text = QLabel("What if: calibrate to predict (the simulator needs batch times)")
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.PlainText)
        # what the answer cannot promise, one sentence a line (hidden when nothing)
        self.flags = QLabel("")
        self.flags.setWordWrap(True)
        self.flags.setTextFormat(Qt.TextFormat.PlainText)
        self.flags.setStyleSheet(f"color: {theme.BAD}")
        self.flags.hide()
        self.glw = pg.GraphicsLayoutWidget()
        self.glw.setBackground(theme.plot_background(self))
        fg = theme.plot_foreground(self)
        self.legend = pg.LegendItem(colCount=3, verSpacing=-6)
        self.glw.ci.addItem(self.legend, row=0, col=0)
        self.plot: pg.PlotItem = self.glw.addPlot(row=1, col=0)
        self.plot.setLabel("left", "p99 (ms)")
        self.plot.setLabel("bottom", "offered rate (requests/s)")
        self.plot.setLogMode(y=True)
        self.plot.showGrid(x=True, y=True, alpha=theme.grid_alpha(self))
        for name in ("left", "bottom"):
            self.plot.getAxis(name).setPen(fg)
            self.plot.getAxis(name).setTextPen(fg)
        self.legend.setLabelTextColor(fg)
        self.current = self.plot.plot(
            pen=pg.mkPen(CURRENT, width=1.5, style=Qt.PenStyle.DashLine), symbol="o",
            symbolSize=4, symbolBrush=CURRENT, name="current batching",
        )  # fmt: skip
        self.proposed = self.plot.plot(
            pen=pg.mkPen(PROPOSED, width=2), symbol="o", symbolSize=5, symbolBrush=PROPOSED,
            name="proposed",
        )  # fmt: skip
        self.real = self.plot.plot(
            pen=None, symbol="star", symbolSize=14, symbolBrush=REAL, symbolPen=REAL,
            name="real run",
        )  # fmt: skip
        # the max rate under the SLO: a point of the proposed curve (read off it)
        self.max_point = self.plot.plot(
            pen=None, symbol="d", symbolSize=11, symbolBrush=PROPOSED, symbolPen=theme.BAD,
        )  # fmt: skip
        self.legend.addItem(self.current, "batching in use")
        self.legend.addItem(self.proposed, "proposed")
        self.legend.addItem(self.real, "real run")
        # the last real load run against the prediction of the same traffic and batching
        self.check = QLabel("")
        self.check.setWordWrap(True)
        self.check.setTextFormat(Qt.TextFormat.PlainText)
        self.check.hide()
        self.slo_line = pg.InfiniteLine(
            angle=0, movable=False, pen=pg.mkPen(theme.BAD, width=1, style=Qt.PenStyle.DotLine),
            label="SLO", labelOpts={"position": 0.85, "color": theme.BAD},
        )  # fmt: skip
        self.rate_line = pg.InfiniteLine(
            angle=90, movable=False, pen=pg.mkPen(theme.MARKER, width=1),
            label="rate", labelOpts={"position": 0.95, "color": theme.MARKER},
        )  # fmt: skip
        self.plot.addItem(self.slo_line, ignoreBounds=True)
        self.plot.addItem(self.rate_line, ignoreBounds=True)
        self.slo_line.hide()
        self.points: dict[str, list[dict[str, Any]]] = {"current": [], "proposed": []}
        self.glw.setMinimumHeight(MIN_PLOT_HEIGHT)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.text)
        layout.addWidget(self.flags)
        layout.addWidget(self.check)
        layout.addWidget(self.glw, 1)

    def set_curves(
        self, current: list[dict[str, Any]] | None, proposed: list[dict[str, Any]] | None
    ) -> None:
        self.points = {"current": list(current or []), "proposed": list(proposed or [])}
        for item, points in ((self.current, current), (self.proposed, proposed)):
            x, y = _xy(points or [])
            item.setData(x, y)
        x, y = _xy([p for p in proposed or [] if p.get("max_rate")])
        self.max_point.setData(x, y)

    def set_slo(self, ms: float | None) -> None:
        if ms and ms > 0:
            self.slo_line.setValue(float(np.log10(ms)))
            self.slo_line.label.setFormat(f"SLO p99 {ms:g} ms")
            self.slo_line.show()
        else:
            self.slo_line.hide()

    def set_rate(self, rate: float) -> None:
        import shiboken6

        if not shiboken6.isValid(self.rate_line.label):  # the plot went (window closed)
            return
        self.rate_line.setValue(float(rate))
        self.rate_line.label.setFormat(f"offered {rate:,.0f}/s")

    def set_text(self, text: str) -> None:
        theme.set_text_if_changed(self.text, text)

    def set_flags(self, sentences: list[str]) -> None:
        """What the prediction cannot promise; an empty list hides the line."""
        text = "\n".join(f"! {s}" for s in sentences)
        theme.set_text_if_changed(self.flags, text)
        self.flags.setVisible(bool(text))

    def set_real(self, offered: float | None, p99_ms: float | None, text: str = "") -> None:
        """The last real run's point (offered rate, its p99) and how it compares with the
        prediction; None clears both (the model or config changed)."""
        ok = offered is not None and p99_ms is not None and p99_ms > 0
        self.real.setData([offered] if ok else [], [p99_ms] if ok else [])
        theme.set_text_if_changed(self.check, text)
        self.check.setVisible(bool(text))
        self.check.setStyleSheet("" if not text or "agree" in text else f"color: {theme.BAD}")

    def curves(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """(offered rate, p99 ms) of each curve as drawn (finite points)."""
        return {name: _xy(points) for name, points in self.points.items()}


def _xy(points: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """Offered rate and p99, the points with a finite p99 only."""
    x = np.asarray([p["offered_per_s"] for p in points], np.float64)
    y = np.asarray([p["p99_ms"] for p in points], np.float64)
    ok = np.isfinite(x) & np.isfinite(y) & (y > 0)
    return x[ok], y[ok]
