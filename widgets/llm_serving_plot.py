"""Two small bar charts side by side: TTFT p99 and TPOT p99 of each layout, simulated
(filled) and real (outlined, just below it), with the SLO as a dashed line. Bars run
horizontally, so the layouts' names read on one shared axis however narrow the dock."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QWidget

from widgets import theme
from widgets.models.llm_serving_table import ChartData

SIM = "#4c8bf5"
REAL = "#e0a325"
WIDTH = 0.38


class _Bars:
    """One chart: its simulated and real bars, and its SLO line (items reused)."""

    def __init__(self, plot: pg.PlotItem, title: str, fg: object, names: bool) -> None:
        self.plot = plot
        plot.invertY(True)  # the first layout on top, as in the table
        plot.setTitle(title, color=fg, size="9pt")
        plot.setMenuEnabled(False)
        plot.setMouseEnabled(x=False, y=False)
        plot.hideButtons()
        small = QFont()
        small.setPointSize(8)
        for name in ("left", "bottom"):
            plot.getAxis(name).setPen(fg)
            plot.getAxis(name).setTextPen(fg)
            plot.getAxis(name).setTickFont(small)
        plot.showGrid(x=True, y=False, alpha=0.25)
        if not names:
            plot.getAxis("left").setStyle(showValues=False)
        self.sim = pg.BarGraphItem(x0=[], y=[], width=[], height=WIDTH, brush=SIM, pen=SIM)
        self.real = pg.BarGraphItem(
            x0=[],
            y=[],
            width=[],
            height=WIDTH,
            brush=pg.mkBrush(REAL + "66"),
            pen=pg.mkPen(REAL, width=2),
        )
        self.slo = pg.InfiniteLine(
            angle=90,
            movable=False,
            pen=pg.mkPen(theme.BAD, width=1, style=Qt.PenStyle.DashLine),
        )
        for item in (self.sim, self.real, self.slo):
            plot.addItem(item)
        self.slo.hide()

    def set(
        self, labels: list[str], sim: list[float], real: list[float], slo: float | None
    ) -> None:
        y = np.arange(len(labels), dtype=float)
        s, r = np.asarray(sim, float), np.asarray(real, float)
        ok_s, ok_r = np.isfinite(s), np.isfinite(r)
        sim_y = np.where(ok_r, y - WIDTH / 2, y)
        self.sim.setOpts(x0=np.zeros(int(ok_s.sum())), y=sim_y[ok_s], width=s[ok_s], height=WIDTH)
        self.real.setOpts(
            x0=np.zeros(int(ok_r.sum())), y=(y + WIDTH / 2)[ok_r], width=r[ok_r], height=WIDTH
        )
        self.plot.getAxis("left").setTicks([list(zip(y.tolist(), labels, strict=True))])
        top = max([v for v in (*s[ok_s], *r[ok_r]) if v > 0] or [1.0])
        if slo is not None:
            self.slo.setValue(slo)
            self.slo.show()
            top = max(top, slo)
        else:
            self.slo.hide()
        self.plot.setYRange(-0.6, max(len(labels) - 0.4, 0.6), padding=0)
        self.plot.setXRange(0, top * 1.1, padding=0)


class LLMServingPlot(pg.GraphicsLayoutWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setBackground(theme.plot_background(self))
        fg = theme.plot_foreground(self)
        self.ttft = _Bars(self.addPlot(row=0, col=0), "TTFT p99 (ms)", fg, names=True)
        self.tpot = _Bars(self.addPlot(row=0, col=1), "TPOT p99 (ms)", fg, names=False)
        self.tpot.plot.setYLink(self.ttft.plot)
        key = pg.LabelItem(
            f"<span style='color:{SIM}'>■</span> simulated&nbsp;&nbsp;&nbsp;"
            f"<span style='color:{REAL}'>□</span> real&nbsp;&nbsp;&nbsp;"
            f"<span style='color:{theme.BAD}'>- - -</span> SLO",
            color=fg,
            size="8pt",
        )
        self.ci.addItem(key, row=1, col=0, colspan=2)
        self.ci.layout.setRowStretchFactor(0, 1)
        self.setMinimumSize(280, 150)  # beside the table in a 1024x700 window's bottom dock

    def set_data(self, data: ChartData, slo_ttft: float | None, slo_tpot: float | None) -> None:
        self.ttft.set(data.labels, data.ttft_sim, data.ttft_real, slo_ttft)
        self.tpot.set(data.labels, data.tpot_sim, data.tpot_real, slo_tpot)
