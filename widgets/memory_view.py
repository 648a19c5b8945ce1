"""The Memory dock's view of a memory report (engine/run/memory_job.py): a few lines (weights
by dtype, the activation peak, what the session holds, the load broken down), the
activation memory alive while each node ran (as run, and as loaded dashed) with the peak
ringed, and the tensors alive at the peak. It only draws: widgets/models/memory_summary.py
says what, without Qt."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from widgets import theme
from widgets.models.memory_summary import alive_rows, summary_lines, timeline

RUN, LOADED, PEAK = "#4c8bf5", "#8a8f98", "#d1495b"
RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter


class MemoryView(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = QLabel("")
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.plot = pg.PlotWidget(background=theme.plot_background(self))
        item = self.plot.getPlotItem()
        item.setLabel("left", "activations alive", units="B")
        item.setLabel("bottom", "node, in executed order")
        item.showGrid(x=False, y=True, alpha=theme.grid_alpha(self))
        item.setMenuEnabled(False)
        self.legend = item.addLegend(offset=(-10, 10))
        self.run_curve = item.plot(pen=pg.mkPen(RUN, width=2), name="as run", stepMode=None)
        self.loaded_curve = item.plot(
            pen=pg.mkPen(LOADED, width=1, style=Qt.PenStyle.DashLine), name="as loaded"
        )
        self.peak = pg.ScatterPlotItem(size=12, pen=pg.mkPen(PEAK, width=2), brush=None)
        item.addItem(self.peak)
        self.alive = QTableWidget(0, 3)
        self.alive.setHorizontalHeaderLabels(["alive at the peak", "size", "made by"])
        self.alive.verticalHeader().setVisible(False)
        self.alive.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.alive.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.alive.setMaximumHeight(150)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.summary)
        layout.addWidget(self.plot, 1)
        layout.addWidget(self.alive)
        self.names: list[str] = []
        self.report: dict[str, Any] | None = None

    def set_report(self, report: dict[str, Any] | None) -> None:
        self.report = report
        if report is None:
            self.summary.setText("")
            for curve in (self.run_curve, self.loaded_curve):
                curve.setData([], [])
            self.peak.setData([])
            self.alive.setRowCount(0)
            return
        self.summary.setText("\n".join(summary_lines(report)))
        acts = report["activations"]
        run = acts.get("as_run") or acts.get("as_loaded")
        x, y, self.names = timeline(run)
        self.run_curve.setData(x, y)
        lx, ly, _ = timeline(acts.get("as_loaded") if acts.get("as_run") else None)
        self.loaded_curve.setData(lx, ly)
        if y.size:
            i = int(np.argmax(y))
            self.peak.setData([float(x[i])], [float(y[i])])
        rows = alive_rows(run)
        self.alive.setRowCount(len(rows))
        for r, cells in enumerate(rows):
            for c, text in enumerate(cells):
                cell = QTableWidgetItem(text)
                if c == 1:
                    cell.setTextAlignment(
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                    )
                self.alive.setItem(r, c, cell)
        self.plot.getPlotItem().enableAutoRange()
