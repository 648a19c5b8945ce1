"""The roofline, cache-aware: each op at (arithmetic intensity, achieved GFLOP/s) under the
machine's roofs on log-log axes: a bandwidth roof per memory level (L1, L2, L3 dashed, DRAM
solid) and the float32 and integer compute roofs (engine.api.Roofs). Each op is measured
against the level its working set fits in (the op table's bound column names it).

Points are sized by the op's share of run time and coloured by op type (the same colour
for a type in every launch: widgets/models/op_colors.py), named in a legend; hovering shows
the op, clicking emits `op_clicked(name)`, `select_op(name)` rings a point ("" clears it).
Ops without a FLOP model (or with no FLOPs) cannot be placed on these axes and are counted
in the caption, and so is a roof measured on a busy machine ("roofs PROVISIONAL: ...").
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

from engine.api import OpStat, Roofs
from widgets import theme
from widgets.models.op_colors import op_type_color

ROOF = "#888888"
DASH = Qt.PenStyle.DashLine
MAX_ROOFS = 5  # memory levels drawn (L1, L2, L3, DRAM and one spare); compute roofs alike
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
        solid, dashed = pg.mkPen(ROOF, width=2), pg.mkPen(ROOF, width=1, style=DASH)
        # reused pass after pass: DRAM and the float roof solid, caches and integers dashed
        self._roof_curves = [pg.PlotCurveItem(pen=solid if i in (0, MAX_ROOFS) else dashed)
                             for i in range(2 * MAX_ROOFS)]  # fmt: skip
        self._roof_labels = [pg.TextItem(color=ROOF, anchor=(0, 1)) for _ in range(2 * MAX_ROOFS)]
        self.scatter = pg.ScatterPlotItem(hoverable=True, tip=self._tip, pxMode=True)
        self.scatter.sigClicked.connect(self._on_clicked)
        self.highlight = pg.ScatterPlotItem(
            pen=pg.mkPen(HIGHLIGHT, width=3), brush=pg.mkBrush(0, 0, 0, 0), size=26
        )
        for it in (*self._roof_curves, self.scatter, self.highlight, *self._roof_labels):
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
        self._roofs: Roofs | None = None
        self._drawn_roofs: list[tuple[str, np.ndarray, np.ndarray]] = []
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

    def set_ops(self, ops: list[OpStat], roofs: Roofs | None) -> None:
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
        self._roofs = roofs
        self._draw_roofs(placed)
        view_key = (frozenset(self._pos), self._roofs)
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
        if self._roofs:  # the figures are on the roofs' labels and in the tooltip
            levels = ", ".join(m.name for m in self._roofs.memory)
            kinds = "fp32, int8" if self._roofs.int_compute else "fp32"
            text += f"  |  roofs: {levels}; {kinds}"
            tip = f"This machine's roofs: {self._roofs.describe()}"
            if self._roofs.caveat:  # measured busy or implausible: said, not hidden
                text += f"  |  roofs PROVISIONAL: {self._roofs.caveat}"
                tip += ("\nThey are not cached as this machine's roofs: the engine measures "
                        "them again when the machine is quiet.")  # fmt: skip
            self.caption.setToolTip(tip)
        else:
            text += "  |  roofs: measuring the machine's peaks…"
            self.caption.setToolTip("")
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
        """Each memory level's slanted roof up to the highest compute roof, each compute
        roof flat from where the fastest level meets it (log10 coordinates)."""
        self._drawn_roofs = []
        for i, curve in enumerate(self._roof_curves):
            curve.setData([], [])
            self._roof_labels[i].setText("")
        roofs = self._roofs
        if not roofs:
            return
        xs = [self._pos[o.name][0] for o in placed]
        computes = [("fp32", roofs.compute, "GFLOP/s")]
        if roofs.int_compute:
            computes.append(("int8", roofs.int_compute, "GOP/s"))
        if roofs.theoretical and roofs.theoretical > roofs.compute:
            computes.append(("fp32 theoretical", roofs.theoretical, "GFLOP/s"))
        top = math.log10(max(c for _, c, _ in computes))
        fastest = max(m.gbps for m in roofs.memory)
        ridges = [top - math.log10(m.gbps) for m in roofs.memory]
        lo = min([*xs, *ridges]) - 1.0
        hi = max([*xs, *ridges]) + 1.0
        # DRAM first (the solid pen); levels measured at one bandwidth share one line
        merged: dict[float, list[str]] = {}
        for m in [roofs.dram, *[m for m in roofs.memory if m is not roofs.dram]]:
            merged.setdefault(round(m.gbps, 1), []).append(m.name)
        for i, (gbps, names) in enumerate(list(merged.items())[:MAX_ROOFS]):
            g = math.log10(gbps)
            x, y = np.array([lo, top - g]), np.array([lo + g, top])
            name = "/".join(sorted(names))
            self._roof_curves[i].setData(x, y)
            self._drawn_roofs.append((name, x, y))
            label = self._roof_labels[i]
            label.setText(f"{name} {gbps:.3g} GB/s")
            at = lo + 0.6 + 0.35 * i  # labels stepped along the roofs, not on top of each other
            label.setPos(at, at + g)
        for j, (name, c, unit) in enumerate(computes):
            y0 = math.log10(c)
            x0 = y0 - math.log10(fastest)
            x, y = np.array([x0, hi]), np.array([y0, y0])
            self._roof_curves[MAX_ROOFS + j].setData(x, y)
            self._drawn_roofs.append((name, x, y))
            label = self._roof_labels[MAX_ROOFS + j]
            label.setText(f"{name} {c:.4g} {unit}")
            label.setPos(max(x0, hi - 2.5), y0)  # towards the right: clear of the slants

    def fit_view(self) -> None:
        """Show every point and the roofs' ridges (log10 coordinates, small margins)."""
        xs = [x for x, _ in self._pos.values()]
        ys = [y for _, y in self._pos.values()]
        for _name, rx, ry in self._drawn_roofs:
            slanted = ry[0] != ry[-1]  # a memory roof ends at its ridge; compute roofs start
            xs.append(float(rx[-1] if slanted else rx[0]))
            ys.append(float(ry[-1]))
        if not xs:
            return
        self.plot.getPlotItem().getViewBox().setRange(
            xRange=(min(xs) - 0.5, max(xs) + 0.5), yRange=(min(ys) - 0.3, max(ys) + 0.45), padding=0
        )

    def roofs(self) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """The roofs drawn: (name, log10 x, log10 y), memory levels (DRAM first), then the
        compute roofs; for tests and exports."""
        return list(self._drawn_roofs)

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
        if self._roofs:
            from engine.api import place

            p = place(o, self._roofs)
            if p.bound == "overhead":
                lines.append("overhead: its time is a kernel's fixed cost, not a roof")
            else:
                lines.append(
                    f"{p.bound}-bound: {p.label}"
                    + (f" of its roof ({p.level.name}, {p.compute_name})" if p.fraction else "")
                )
        return "\n".join(lines)
