"""How a model's time grows with input size: per op type (the heaviest ones) and in total,
on log-log axes ticked at the sizes measured (plain numbers), each line labelled with its
fitted exponent k (time ~ size^k) and its error bar, a doubtful fit marked (!)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget

from widgets import theme
from widgets.models.growth_text import flags_of, k_text

COLORS = ("#4c8bf5", "#d1495b", "#2ca58d", "#e0a325", "#9b6bd3", "#8a8f98")
TOP = 5
DASH = Qt.PenStyle.DashLine


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
        self.plot.setLabel("left", "time (ms)")
        self.plot.showGrid(x=True, y=True, alpha=theme.grid_alpha(self))
        for name in ("left", "bottom"):
            self.plot.getAxis(name).setPen(fg)
            self.plot.getAxis(name).setTextPen(fg)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.glw)
        self.lines: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def _clear(self) -> None:
        self.plot.clear()
        self.legend.clear()
        self.lines = {}
        self.plot.getAxis("bottom").setTicks(None)

    def _size_ticks(self, x: np.ndarray, labels: list[str]) -> None:
        """The x axis ticked at the sizes measured, in plain numbers (pyqtgraph's own log
        ticks read '10^2.1' and overlap)."""
        ticks = [(math.log10(v), text) for v, text in zip(x, labels, strict=True) if v > 0]
        self.plot.getAxis("bottom").setTicks([ticks, []])

    def set_sweep(self, data: dict[str, Any]) -> None:
        """A `opscope sweep --json` result."""
        self._clear()
        points = data.get("points") or []
        if not points:
            return
        dim = data["vary"]["dim"]
        self.plot.setLabel("left", "time per inference (ms)")
        self.plot.setLabel("bottom", dim)
        x = np.array([float(p["value"]) if isinstance(p["value"], int | float) else i + 1
                      for i, p in enumerate(points)])  # fmt: skip
        self._size_ticks(x, [str(p["value"]) for p in points])
        growth = data.get("growth") or {}
        fits = growth.get("fits") or {}
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
            fit = fits.get(name)
            said = "" if fit is None and (k is None or k != k) else f" k={k_text(fit, k)}"
            self.legend.addItem(item, f"{name}{said}" + (" (!)" if flags_of(fit) else ""))
            self.lines[name] = (x, y)

    def set_prompt_sweep(
        self, points: list[dict[str, Any]], fit: tuple[float, float, float] | None = None
    ) -> None:
        """A generating model's prompt sweep (`PromptPoint.to_json()`s): TTFT and TPOT p50
        against the prompt length, and TTFT's fit a + b*L + c*L^2 once the sweep ends."""
        self.plot.clear()
        self.legend.clear()
        self.lines = {}
        if not points:
            return
        self.plot.setLabel("left", "p50 (ms): TTFT a generation, TPOT a token")
        self.plot.setLabel("bottom", "prompt tokens")
        x = np.array([float(p["prompt_len"]) for p in points])
        self._size_ticks(x, [str(p["prompt_len"]) for p in points])
        series = [
            ("TTFT p50", [p["ttft_p50_ms"] for p in points]),
            ("TPOT p50", [p["tpot_p50_ms"] for p in points]),
        ]
        for i, (name, ys) in enumerate(series):
            y = np.array(ys, dtype=float)
            item = self.plot.plot(x, y, pen=pg.mkPen(COLORS[i], width=2), symbol="o",
                                  symbolSize=6, symbolBrush=COLORS[i])  # fmt: skip
            self.legend.addItem(item, name)
            self.lines[name] = (x, y)
        if fit is not None and len(x) > 1:
            a, b, c = fit
            fx = np.geomspace(x.min(), x.max(), 50)
            fy = a + b * fx + c * fx**2
            item = self.plot.plot(fx, fy, pen=pg.mkPen(COLORS[2], width=1.5, style=DASH))
            share = c * x.max() ** 2 / fy[-1] if fy[-1] > 0 else float("nan")
            self.legend.addItem(item, f"fit a+bL+cL² (L² {share:.0%} at {x.max():.0f})")
            self.lines["fit"] = (fx, fy)
