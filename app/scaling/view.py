"""The Scaling dock's widgets: the dim to vary and its sizes (or a generating model's
prompt lengths), Run sweep and Cancel, a status line and the log-log plot
(widgets/scaling_plot.py). Widgets, signals and setters only: app/scaling/controller.py
decides."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from widgets.scaling_plot import ScalingPlot

NO_MODEL = "load a model, pick a dim and sizes"


class ScalingPanel(QWidget):
    run_requested = Signal()
    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.dim = QComboBox()
        self.dim.setEditable(True)
        # wide enough for a dim's name ("sequence", "batch_size"): an editable combo box
        # otherwise starts narrow and clips it ("equence" at 1600 px)
        self.dim.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.dim.setMinimumContentsLength(9)
        self.dim.setToolTip("A symbolic dim of the model's inputs (or an input's name)")
        self.values = QLineEdit("64,128,256,512")
        self.values.setToolTip("Sizes to time and profile, comma-separated")
        self.run_button = QPushButton("Run sweep")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.status = QLabel(NO_MODEL)
        self.status.setWordWrap(True)
        self.plot = ScalingPlot()
        row = QHBoxLayout()
        row.addWidget(QLabel("Vary"))
        row.addWidget(self.dim)
        row.addWidget(QLabel("over"))
        row.addWidget(self.values, 1)
        row.addWidget(self.run_button)
        row.addWidget(self.cancel_button)
        layout = QVBoxLayout()  # set once filled (tests/test_widget_items.py)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(row)
        layout.addWidget(self.status)
        layout.addWidget(self.plot, 1)
        self.setLayout(layout)
        self.run_button.clicked.connect(self.run_requested)
        self.cancel_button.clicked.connect(self.cancel_requested)

    # what the user picked ----------------------------------------------------------------
    def dim_text(self) -> str:
        return self.dim.currentText()

    def values_text(self) -> str:
        return self.values.text()

    def status_text(self) -> str:
        return self.status.text()

    # setters ---------------------------------------------------------------------------
    def set_dims(self, dims: list[str]) -> None:
        """The dims to pick from, the first picked."""
        self.dim.clear()
        self.dim.addItems(dims)

    def set_values(self, text: str) -> None:
        self.values.setText(text)

    def set_status(self, text: str) -> None:
        self.status.setText(text)

    def set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)

    def set_sweep(self, data: dict[str, Any]) -> None:
        """A sweep's points and growth fits (`SweepResult.to_json()`)."""
        self.plot.set_sweep(data)

    def set_prompt_sweep(
        self, points: list[dict[str, Any]], fit: tuple[float, float, float] | None = None
    ) -> None:
        """A prompt sweep's points (`PromptPoint.to_json()`s) and TTFT's fit."""
        self.plot.set_prompt_sweep(points, fit)
