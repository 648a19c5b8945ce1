"""The memory strip under the graph: activation memory alive while each node runs, over
one inference, in the order the nodes ran (the graph job's liveness pass), with its peak
marked and the picked node's place shown. A click picks the node at that step."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget

from widgets.models.memory_summary import peak_text

HEIGHT = 74


class MemoryStrip(pg.PlotWidget):
    picked = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, background="w")
        self.setFixedHeight(HEIGHT)
        self.setMenuEnabled(False)
        self.setMouseEnabled(x=False, y=False)
        self.hideButtons()
        item = self.getPlotItem()
        item.hideAxis("bottom")
        item.getAxis("left").setWidth(46)
        item.getAxis("left").setTickFont(self.font())
        self.curve = self.plot(
            [],
            [],
            stepMode="center",
            fillLevel=0,
            brush=(70, 130, 180, 90),
            pen=pg.mkPen("#4682b4", width=1),
        )
        self.peak = pg.ScatterPlotItem(size=8, brush=pg.mkBrush("#d73027"), pen=None)
        self.addItem(self.peak)
        self.cursor = pg.InfiniteLine(angle=90, pen=pg.mkPen("#1f6feb", width=2))
        self.cursor.hide()
        self.addItem(self.cursor)
        self.names: list[str] = []
        self.values = np.zeros(0)
        self.summary = ""
        self.scene().sigMouseClicked.connect(self._clicked)
        self.setToolTip("Activation memory alive while each node runs (one inference)")

    def set_memory(self, memory: dict[str, Any] | None) -> None:
        """A liveness result (`timeline`, `peak_bytes`, `at_node`), or None: nothing."""
        timeline = (memory or {}).get("timeline") or []
        self.names = [str(t["node"]) for t in timeline]
        self.values = np.array([float(t["bytes"]) for t in timeline]) / 1e6
        if not self.names:
            self.curve.setData([], [])
            self.peak.setData([], [])
            self.summary = ""
            self.hide()
            return
        self.show()
        x = np.arange(len(self.names) + 1, dtype=float)
        self.curve.setData(x, self.values)
        at = memory.get("at_node") if memory else None
        i = self.names.index(at) if at in self.names else int(np.argmax(self.values))
        self.peak.setData([i + 0.5], [self.values[i]])
        self.summary = f"activations: peak {peak_text(memory or {}, self.names[i])}"
        self.setToolTip(
            f"{self.summary}. Activation memory alive while each node runs, over "
            "one inference; click to pick a node"
        )
        self.getPlotItem().setXRange(0, len(self.names), padding=0)

    def show_node(self, name: str) -> None:
        if name in self.names:
            self.cursor.setValue(self.names.index(name) + 0.5)
            self.cursor.show()
        else:
            self.cursor.hide()

    def _clicked(self, event: Any) -> None:
        if not self.names:
            return
        pos = self.getPlotItem().vb.mapSceneToView(event.scenePos())
        i = int(pos.x())
        if 0 <= i < len(self.names):
            self.picked.emit(self.names[i])
