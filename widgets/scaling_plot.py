"""How a model's time grows with input size: per op type (the heaviest ones) and in total,
on log-log axes, each line labelled with its fitted exponent k (time ~ size^k)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QVBoxLayout, QWidget

from widgets import theme

COLORS = ("#4c8bf5", "#d1495b", "#2ca58d", "#e0a325", "#9b6bd3", "#8a8f98")
TOP = 5


class ScalingPlot(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.glw = pg.GraphicsLayoutWidget()
        self.glw.setBackground(theme.plot_background(self))
        fg = theme.plot_foreground(self)
        self.legend = pg.LegendItem(colCount=3, verSpacing=-6)
        self.legend.setLabelTextColor(fg)
        self.glw.ci.addItem(self.legend, row=0, col=0)
        self.plot: pg.PlotItem = self.glw.addPlot(row=1, col=0)
        self.plot.setLogMode(x=True, y=True)
        self.plot.setLabel("left", "time per inference (ms)")
        self.plot.showGrid(x=True, y=True, alpha=theme.grid_alpha(self))
        for name in ("left", "bottom"):
            self.plot.getAxis(name).setPen(fg)
            self.plot.getAxis(name).setTextPen(fg)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.glw)
        self.lines: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def set_sweep(self, data: dict[str, Any]) -> None:
        """A `opscope sweep --json` result."""
        self.plot.clear()
        self.legend.clear()
        self.lines = {}
        points = data.get("points") or []
        if not points:
            return
        dim = data["vary"]["dim"]
        self.plot.setLabel("bottom", dim)
        x = np.array([float(p["value"]) if isinstance(p["value"], int | float) else i + 1
                      for i, p in enumerate(points)])  # fmt: skip
        growth = data.get("growth") or {}
        last = points[-1]["op_types"]
        heavy = sorted(last, key=lambda k: -last[k])[:TOP]
        series = [("total", [p["latency_ms"] for p in points], growth.get("total"))]
        series += [
            (t, [p["op_types"].get(t, np.nan) for p in points], growth.get("op_types", {}).get(t))
            for t in heavy
        ]
        for i, (name, ys, k) in enumerate(series):
            y = np.array(ys, dtype=float)
            pen = pg.mkPen(COLORS[i % len(COLORS)], width=2.5 if name == "total" else 1.5)
            item = self.plot.plot(x, y, pen=pen, symbol="o", symbolSize=5,
                                  symbolBrush=COLORS[i % len(COLORS)])  # fmt: skip
            k_text = "" if k is None or k != k else f" k={k:.2f}"
            self.legend.addItem(item, f"{name}{k_text}")
            self.lines[name] = (x, y)
