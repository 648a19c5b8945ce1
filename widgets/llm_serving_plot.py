"""Two small bar charts side by side: TTFT p99 and TPOT p99 of each layout, simulated
(filled) and real (outlined, beside it), with the SLO as a dashed line."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

from widgets import theme
from widgets.models.llm_serving_table import ChartData

SIM = "#4c8bf5"
REAL = "#e0a325"
WIDTH = 0.38


class _Bars:
    """One chart: its simulated and real bars, and its SLO line (items reused)."""

    def __init__(self, plot: pg.PlotItem, title: str, fg: object) -> None:
        self.plot = plot
        plot.setTitle(title, color=fg, size="9pt")
        plot.setMenuEnabled(False)
        plot.setMouseEnabled(x=False, y=False)
        plot.hideButtons()
        plot.showGrid(y=True, alpha=0.25)
        for name in ("left", "bottom"):
            plot.getAxis(name).setPen(fg)
            plot.getAxis(name).setTextPen(fg)
        plot.setLabel("left", "ms")
        self.sim = pg.BarGraphItem(x=[], height=[], width=WIDTH, brush=SIM, pen=SIM)
        self.real = pg.BarGraphItem(
            x=[], height=[], width=WIDTH, brush=pg.mkBrush(REAL + "66"), pen=pg.mkPen(REAL, width=2)
        )
        self.slo = pg.InfiniteLine(
            angle=0,
            movable=False,
            pen=pg.mkPen(theme.BAD, width=1, style=Qt.PenStyle.DashLine),
            label="SLO",
            labelOpts={"position": 0.97, "color": theme.BAD, "anchors": [(1, 1), (1, 1)]},
        )
        for item in (self.sim, self.real, self.slo):
            plot.addItem(item)
        self.slo.hide()

    def set(
        self, labels: list[str], sim: list[float], real: list[float], slo: float | None
    ) -> None:
        x = np.arange(len(labels), dtype=float)
        has_real = [math.isfinite(v) for v in real]
        sim_x = np.where(has_real, x - WIDTH / 2, x)
        s, r = np.asarray(sim, float), np.asarray(real, float)
        ok_s, ok_r = np.isfinite(s), np.isfinite(r)
        self.sim.setOpts(x=sim_x[ok_s], height=s[ok_s], width=WIDTH)
        self.real.setOpts(x=(x + WIDTH / 2)[ok_r], height=r[ok_r], width=WIDTH)
        self.plot.getAxis("bottom").setTicks([list(zip(x.tolist(), labels, strict=True))])
        top = max([v for v in (*s[ok_s], *r[ok_r]) if v > 0] or [1.0])
        if slo is not None:
            self.slo.setValue(slo)
            self.slo.show()
            top = max(top, slo)
        else:
            self.slo.hide()
        self.plot.setXRange(-0.6, max(len(labels) - 0.4, 0.6), padding=0)
        self.plot.setYRange(0, top * 1.15, padding=0)


class LLMServingPlot(pg.GraphicsLayoutWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setBackground(theme.plot_background(self))
        fg = theme.plot_foreground(self)
        self.ttft = _Bars(self.addPlot(row=0, col=0), "TTFT p99 (ms)", fg)
        self.tpot = _Bars(self.addPlot(row=0, col=1), "TPOT p99 (ms)", fg)
        legend = pg.LegendItem(offset=None, colCount=2)
        legend.setLabelTextColor(fg)
        legend.addItem(pg.BarGraphItem(x=[0], height=[1], width=1, brush=SIM, pen=SIM), "simulated")
        legend.addItem(
            pg.BarGraphItem(
                x=[0],
                height=[1],
                width=1,
                brush=pg.mkBrush(REAL + "66"),
                pen=pg.mkPen(REAL, width=2),
            ),
            "real",
        )
        self.ci.addItem(legend, row=1, col=0, colspan=2)
        self.setMinimumHeight(170)

    def set_data(self, data: ChartData, slo_ttft: float | None, slo_tpot: float | None) -> None:
        self.ttft.set(data.labels, data.ttft_sim, data.ttft_real, slo_ttft)
        self.tpot.set(data.labels, data.tpot_sim, data.tpot_real, slo_tpot)
