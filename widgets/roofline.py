"""The roofline: each op at (arithmetic intensity, achieved GFLOP/s) under the machine's
bandwidth roof and compute roof, on log-log axes.

Points are sized by the op's share of run time and coloured by op type (the same colour
for a type in every launch: widgets/models/op_colors.py), named in a legend; hovering shows
the op, clicking emits `op_clicked(name)`, `select_op(name)` rings a point ("" clears it).
Ops without a FLOP model (or with no FLOPs) cannot be placed on these axes and are counted
in the caption.
"""

from __future__ import annotations

import html
import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPen
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from engine.api import OpStat
from widgets import theme
from widgets.models.op_colors import op_type_color

ROOF = "#888888"
LEGEND_MAX = 8  # op types named in the legend
HIGHLIGHT = "#ff3b30"


def spot_size(share: float) -> int:
    """A point's diameter in whole pixels (6 to 40) from its share of the run time."""
    return round(6 + 34 * math.sqrt(min(max(share, 0.0), 1.0)))


class DecadeAxis(pg.AxisItem):
    """A log axis labelled at whole decades only, in one plain style (0.01, 0.1, 1, 10, 100,
    1k, 10k): pyqtgraph mixes "1" with "10^1" and labels minor ticks that then collide."""

    def logTickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        return [decade_label(v) if abs(v - round(v)) < 1e-6 else "" for v in values]


def decade_label(exponent: float) -> str:
    value = 10.0 ** round(exponent)
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= size:
            return f"{value / size:g}{unit}"
    return f"{value:g}"


class RooflinePlot(QWidget):
    """Log-log roofline of one profiling pass; see the module docstring."""

    op_clicked = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.plot = pg.PlotWidget(
            background=theme.plot_background(self),
            axisItems={"bottom": DecadeAxis("bottom"), "left": DecadeAxis("left")},
        )
        item = self.plot.getPlotItem()
        item.setLabel("bottom", "arithmetic intensity (FLOP/byte)")
        item.setLabel("left", "GFLOP/s")
        for axis in ("bottom", "left"):
            item.getAxis(axis).setLogMode(True)
        item.showGrid(x=True, y=True, alpha=theme.grid_alpha(self))
        item.setMenuEnabled(False)
        pen = pg.mkPen(ROOF, width=2)
        self.bandwidth_roof = pg.PlotCurveItem(pen=pen)
        self.compute_roof = pg.PlotCurveItem(pen=pen)
        self.bandwidth_label = pg.TextItem(color=ROOF, anchor=(0, 1))
        self.compute_label = pg.TextItem(color=ROOF, anchor=(0, 1))
        self.scatter = pg.ScatterPlotItem(hoverable=True, tip=self._tip, pxMode=True)
        self.scatter.sigClicked.connect(self._on_clicked)
        self.highlight = pg.ScatterPlotItem(
            pen=pg.mkPen(HIGHLIGHT, width=3), brush=pg.mkBrush(0, 0, 0, 0), size=26
        )
        for it in (
            self.bandwidth_roof,
            self.compute_roof,
            self.scatter,
            self.highlight,
            self.bandwidth_label,
            self.compute_label,
        ):
            item.addItem(it)
        # the legend is a line of text under the plot: inside it, it hid points
        self.legend = QLabel()
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self._legend_types: list[str] = []
        self.caption = QLabel("no profile yet")
        self.caption.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot, 1)
        layout.addWidget(self.legend)
        layout.addWidget(self.caption)
        self._ops: dict[str, OpStat] = {}
        self._pos: dict[str, tuple[float, float]] = {}  # log10 coordinates
        # One brush per colour and one pen per foreground, reused pass after pass, and
        # sizes in whole pixels: pyqtgraph caches a rendered symbol per (size, pen, brush)
        # object, so fresh pens and brushes at every pass grew its symbol atlas (and the
        # window's memory) by a few hundred symbols a minute while profiling ran live.
        self._brushes: dict[str, QBrush] = {}
        self._pens: dict[str, QPen] = {}
        self._peaks: tuple[float, float] | None = None
        self.selected: str | None = None
        self._view_key: object = None
        self.plot.getPlotItem().getViewBox().disableAutoRange()

    def _brush(self, color: str) -> QBrush:
        brush = self._brushes.get(color)
        if brush is None:
            brush = self._brushes[color] = pg.mkBrush(QColor(color))
        return brush

    def _pen(self, color: QColor) -> QPen:
        key = color.name(QColor.NameFormat.HexArgb)
        pen = self._pens.get(key)
        if pen is None:
            pen = self._pens[key] = pg.mkPen(color, width=0.5)
        return pen

    def set_ops(
        self, ops: list[OpStat], peak_gbps: float | None, peak_gflops: float | None
    ) -> None:
        """Show one pass's ops; without peaks (not measured yet) the roofs stay hidden."""
        placed = [o for o in ops if o.intensity and o.gflops and o.intensity > 0 and o.gflops > 0]
        self._ops = {o.name: o for o in ops}
        self._pos = {
            o.name: (math.log10(o.intensity or 1), math.log10(o.gflops or 1)) for o in placed
        }
        self._set_legend(placed)
        pen = self._pen(theme.plot_foreground(self))
        spots = [
            {
                "pos": self._pos[o.name],
                "data": o.name,
                "size": spot_size(o.share),
                "brush": self._brush(op_type_color(o.op_type)),
                "pen": pen,
            }
            for o in placed
        ]
        self.scatter.setData(spots)
        self._peaks = (peak_gbps, peak_gflops) if peak_gbps and peak_gflops else None
        self._draw_roofs(placed)
        view_key = (frozenset(self._pos), self._peaks)
        if view_key != self._view_key:  # new ops or roofs: fit; else keep the user's zoom
            self._view_key = view_key
            self.fit_view()
        missing = len(ops) - len(placed)
        text = f"{len(placed)} ops placed"
        if missing:
            unmodelled = sum(1 for o in ops if o.flops is None)
            text += f", {missing} without FLOPs not shown"
            if unmodelled and unmodelled < missing:
                text += f" ({missing - unmodelled} move data only, {unmodelled} not modelled)"
            elif unmodelled:
                text += " (no FLOP model)"
            else:
                text += " (they move data only)"
        if self._peaks:
            gbps, gflops = self._peaks
            text += (
                f"  |  roofs {gbps:.1f} GB/s, {gflops:.1f} GFLOP/s "
                f"(ridge {gflops / gbps:.1f} FLOP/B)"
            )
        else:
            text += "  |  roofs: measuring the machine's peaks…"
        self.caption.setText(text)
        if self.selected and not self.select_op(self.selected):
            self.highlight.setData([])

    def _set_legend(self, placed: list[OpStat]) -> None:
        """The placed op types, largest total time first, at most LEGEND_MAX (the rest
        summed as 'other types'); rebuilt only when that list changes."""
        by_time: dict[str, float] = {}
        for o in placed:
            by_time[o.op_type] = by_time.get(o.op_type, 0.0) + o.time_ms
        types = sorted(by_time, key=lambda t: (-by_time[t], t))
        shown = types[:LEGEND_MAX]
        if len(types) > LEGEND_MAX:
            shown.append(f"+{len(types) - LEGEND_MAX} other types")
        if shown == self._legend_types:
            return
        self._legend_types = shown
        self.legend.setText(
            "&nbsp;&nbsp; ".join(
                f"<span style='color:{self._legend_color(t)}; font-size:14px'>●</span>"
                f"&nbsp;{html.escape(t)}"
                for t in shown
            )
        )

    @staticmethod
    def _legend_color(op_type: str) -> str:
        return ROOF if op_type.startswith("+") else op_type_color(op_type)

    def legend_entries(self) -> list[tuple[str, str]]:
        """(op type, colour) in the legend, in its order (largest time first)."""
        return [(t, self._legend_color(t)) for t in self._legend_types if not t.startswith("+")]

    def _draw_roofs(self, placed: list[OpStat]) -> None:
        xs = [self._pos[o.name][0] for o in placed]
        if not self._peaks:
            for curve in (self.bandwidth_roof, self.compute_roof):
                curve.setData([], [])
            self.bandwidth_label.setText("")
            self.compute_label.setText("")
            return
        gbps, gflops = self._peaks
        ridge = math.log10(gflops / gbps)
        lo = min([*xs, ridge]) - 1.0
        hi = max([*xs, ridge]) + 1.0
        top = math.log10(gflops)
        self.bandwidth_roof.setData(np.array([lo, ridge]), np.array([lo + math.log10(gbps), top]))
        self.compute_roof.setData(np.array([ridge, hi]), np.array([top, top]))
        self.bandwidth_label.setText(f"{gbps:.1f} GB/s")
        x = ridge - 1.0  # on the slanted roof, a decade left of the ridge (inside the view)
        self.bandwidth_label.setPos(x, x + math.log10(gbps))
        self.compute_label.setText(f"{gflops:.1f} GFLOP/s")
        self.compute_label.setPos(ridge, top)

    def fit_view(self) -> None:
        """Show every point and the roofs' ridge (log10 coordinates, small margins)."""
        xs = [x for x, _ in self._pos.values()]
        ys = [y for _, y in self._pos.values()]
        if self._peaks:
            gbps, gflops = self._peaks
            xs.append(math.log10(gflops / gbps))
            ys.append(math.log10(gflops))
        if not xs:
            return
        self.plot.getPlotItem().getViewBox().setRange(
            xRange=(min(xs) - 0.5, max(xs) + 0.5), yRange=(min(ys) - 0.3, max(ys) + 0.45), padding=0
        )

    def roofs(self) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """The two roof lines' (log10 x, log10 y) data, for tests and exports."""
        b = self.bandwidth_roof.getData()
        c = self.compute_roof.getData()
        return (b[0], b[1]), (c[0], c[1])

    def point_count(self) -> int:
        """How many ops are drawn."""
        return len(self.scatter.points())

    def select_op(self, name: str) -> bool:
        """Ring the op's point; False (and no ring) when it is not drawn ("": nothing
        selected, as when the table lost its selection)."""
        pos = self._pos.get(name)
        self.selected = name
        if pos is None:
            self.highlight.setData([])
            return False
        self.highlight.setData([{"pos": pos}])
        return True

    def _on_clicked(self, _item: Any, points: Any, _ev: Any = None) -> None:
        if len(points):
            name = str(points[0].data())
            self.select_op(name)
            self.op_clicked.emit(name)

    def _tip(self, x: float, y: float, data: Any) -> str:
        o = self._ops.get(str(data))
        if o is None:
            return ""
        lines = [
            o.name,
            f"{o.op_type} on {o.provider}",
            f"{o.time_ms:.3f} ms ({o.share:.1%} of run time)",
            f"{o.intensity or 0:.2f} FLOP/B, {o.gflops or 0:.2f} GFLOP/s, {o.gbps or 0:.2f} GB/s",
        ]
        if self._peaks:
            from engine.api import bound_of, peak_fraction

            frac = peak_fraction(o, *self._peaks)
            lines.append(
                f"{bound_of(o.intensity, *self._peaks)}-bound"
                + (f", {frac:.0%} of its roof" if frac is not None else "")
            )
        return "\n".join(lines)
