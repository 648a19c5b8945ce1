"""The Graph dock's widgets: the graph view (widgets/graph_view.py) with a row of this
room's controls (a run to compare with, Export, Refresh, Cancel) and its status line.
Widgets, signals and setters only: app/graph/controller.py decides."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QLabel,
    QMenu,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from widgets.graph_view import GraphView

NO_MODEL = "load a model: its graph is laid out here, with the live profile on it"


class GraphPanel(QWidget):
    refresh_requested = Signal()
    cancel_requested = Signal()
    expand_requested = Signal()
    compare_picked = Signal(object)  # a run id; None: none
    node_selected = Signal(str)
    export_image_requested = Signal(str)
    export_explorer_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.view = GraphView()
        self.status = QLabel(NO_MODEL)
        self.status.setMinimumWidth(1)  # long words never widen the window
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setToolTip("Lay the graph out again for the config shown")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.compare = QComboBox()
        self.compare.setToolTip(
            "Another run of this session: the 'change' overlay colours "
            "each node by its time against that run's"
        )
        self.compare.addItem("compare with…", None)
        self.export_button = QToolButton()
        self.export_button.setText("Export")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.export_button)
        menu.addAction("View as SVG or PNG…", self._ask_image)
        menu.addAction("Overlay as Model Explorer node data…", self._ask_explorer)
        self.export_button.setMenu(menu)
        # the view's row of controls, and one of words with this dock's buttons: the graph
        # gets the rest (and the window keeps to 1024 px)
        self.view.foot.addWidget(self.status, 1)
        for w in (self.compare, self.export_button, self.refresh_button, self.cancel_button):
            self.view.foot.addWidget(w)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.view, 1)
        self.refresh_button.clicked.connect(self.refresh_requested)
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.view.expand_requested.connect(self.expand_requested)
        self.view.node_selected.connect(self.node_selected)
        self.compare.activated.connect(lambda i: self.compare_picked.emit(self.compare.itemData(i)))

    # setters ---------------------------------------------------------------------------
    def set_status(self, text: str) -> None:
        self.status.setText(text)
        self.status.setToolTip(text)  # whole where the dock is too narrow for it

    def set_running(self, running: bool) -> None:
        self.refresh_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)

    def set_result(self, result: dict[str, Any] | None) -> None:
        self.view.set_result(result)

    def result(self) -> dict[str, Any] | None:
        return self.view.result

    def has_scene(self) -> bool:
        return self.view.scene_ is not None

    def set_figures(self, ops: list[Any], roofs: Any) -> None:
        self.view.set_figures(ops, roofs)

    def node_memory(self) -> dict[str, Any]:
        return dict(self.view.node_memory())

    def set_baseline(self, stats: list[Any] | None, name: str = "", replaced: Any = None) -> None:
        if stats is None:
            self.view.set_baseline(None)
        elif replaced is None:
            self.view.set_baseline(stats, name)
        else:
            self.view.set_baseline(stats, name, replaced)

    def stand_in(self) -> Any:
        return self.view.stand_in

    def show_change_overlay(self, on_loaded: bool) -> None:
        """The 'change' overlay, on the model as loaded when `on_loaded`."""
        self.view.overlay_combo.setCurrentText("change")
        if on_loaded:
            self.view.view_combo.setCurrentText("as loaded")

    def overlay(self) -> str:
        return self.view.overlay_combo.currentText()

    def explorer_values(self) -> Mapping[str, float | str]:
        return self.view.explorer_values()

    def set_compare_runs(self, runs: list[tuple[str, int]]) -> None:
        """The runs to compare with (label, run id); the one picked stays picked."""
        current = self.compare.currentData()
        self.compare.blockSignals(True)
        self.compare.clear()
        self.compare.addItem("compare with…", None)
        for label, run_id in runs:
            self.compare.addItem(label, run_id)
        i = self.compare.findData(current)
        self.compare.setCurrentIndex(max(i, 0))
        self.compare.blockSignals(False)

    def select_node(self, name: str) -> bool:
        return self.view.select_node(name)

    def render_image(self, path: str) -> None:
        self.view.render_image(path)

    # the file dialogs ------------------------------------------------------------------
    def _ask_image(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Export Graph View", "graph.svg", "SVG (*.svg);;PNG (*.png)"
        )
        if path:
            self.export_image_requested.emit(path)

    def _ask_explorer(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Export for Model Explorer", "opscope_overlay.json", "JSON (*.json)"
        )
        if path:
            self.export_explorer_requested.emit(path)
