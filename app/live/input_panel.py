"""The Inputs section of the Configuration panel: a box for each symbolic input dim of the
loaded model (height and width, sequence length; the batch is the Batch knob's), the
calibration and evaluation data files, and whether settings carry to a new model.

Edits are debounced into `dims_changed(dict)`; file picks are emitted as chosen. The
panel never talks to the engine; `app.live.inputs_controller` does."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from engine.api import MAX_DIM, SymbolicDim

DEBOUNCE_MS = 350


class _FileRow(QWidget):
    """'Calibration data…' with the chosen file's name and a clear button."""

    chosen = Signal(object)  # str path, or None when cleared

    def __init__(
        self,
        title: str,
        help_text: str,
        filter_text: str = "NumPy archives (*.npz)",
        default: str = "generated",
    ) -> None:
        super().__init__()
        self.title = title
        self.filter_text, self.default = filter_text, default
        self.path: str | None = None
        self.button = QPushButton(title + "…")
        self.button.setToolTip(help_text)
        self.button.clicked.connect(self.pick)
        self.name = QLabel(default)
        self.name.setToolTip(help_text)
        self.clear_button = QToolButton()
        self.clear_button.setText("×")
        self.clear_button.setToolTip("Back to generated data")
        self.clear_button.clicked.connect(lambda: self.chosen.emit(None))
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.button)
        row.addWidget(self.name, 1)
        row.addWidget(self.clear_button)
        self.set_path(None)

    def pick(self) -> None:
        start = str(Path(self.path).parent) if self.path else str(Path.home())
        path, _ = QFileDialog.getOpenFileName(self, self.title, start, self.filter_text)
        if path:
            self.chosen.emit(path)

    def set_path(self, path: str | None) -> None:
        self.path = path
        self.name.setText(Path(path).name if path else self.default)
        self.name.setToolTip(path or f"{self.default}: {self.button.toolTip()}")
        self.clear_button.setEnabled(path is not None)


class InputPanel(QGroupBox):
    """Input sizes and data files of the loaded model."""

    dims_changed = Signal(dict)  # name -> value, the dims set away from their default
    calibration_chosen = Signal(object)  # path or None
    eval_chosen = Signal(object)  # path or None
    tokenizer_chosen = Signal(object)  # path or None
    carry_toggled = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Inputs", parent)
        self._dims: list[SymbolicDim] = []
        self._boxes: dict[str, QSpinBox] = {}
        self._from_file = False  # evaluation inputs give the sizes
        self._debounce = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self._debounce.timeout.connect(lambda: self.dims_changed.emit(self.dims_set()))
        self.dims_form = QFormLayout()
        self.no_dims = QLabel("fixed by the model")
        self.no_dims.setToolTip("This model's inputs have no symbolic size to set")
        self.dims_form.addRow("Size", self.no_dims)
        self.calibration = _FileRow(
            "Calibration data",
            "Samples static INT8 calibrates on (.npz, one array per input, samples along "
            "the batch axis); remembered for this model. Without them, 64 generated samples "
            "that look like the inputs (texts through the tokenizer, natural images).",
        )
        self.calibration.chosen.connect(self.calibration_chosen)
        self.evaluation = _FileRow(
            "Evaluation inputs",
            "Real inputs (.npz) timed and compared with FP32 for accuracy; remembered for "
            "this model. Without them, accuracy on 64 generated samples that look like the "
            "inputs, timing on seeded inputs of the sizes above.",
        )
        self.evaluation.chosen.connect(self.eval_chosen)
        self.tokenizer = _FileRow(
            "Tokenizer",
            "The model's tokenizer.json: generated evaluation and calibration texts go "
            "through it. Without one, a tokenizer.json beside the model (or in its parent "
            "folder) is used, else token ids drawn as text uses them.",
            "Tokenizers (tokenizer.json);;JSON files (*.json)",
            "beside the model",
        )
        self.tokenizer.chosen.connect(self.tokenizer_chosen)
        self.carry = QCheckBox("Carry settings to a new model")
        self.carry.setToolTip(
            "Off: a newly opened model starts on FP32 defaults. On: it keeps the "
            "precision, fusion, batch and threads set now. Either way the window says which."
        )
        self.carry.toggled.connect(self.carry_toggled)
        layout = QVBoxLayout()
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(self.dims_form)
        layout.addWidget(self.calibration)
        layout.addWidget(self.evaluation)
        layout.addWidget(self.tokenizer)
        layout.addWidget(self.carry)
        self.setLayout(layout)

    def set_dims(self, dims: list[SymbolicDim], values: dict[str, int]) -> None:
        """A box per dim, showing `values` where set, else the default (no signal)."""
        while self.dims_form.rowCount():
            self.dims_form.removeRow(0)
        self._dims, self._boxes = list(dims), {}
        if not dims:
            self.no_dims = QLabel("fixed by the model")
            self.dims_form.addRow("Size", self.no_dims)
            return
        for d in dims:
            box = QSpinBox(minimum=1, maximum=MAX_DIM)
            box.setValue(values.get(d.name, d.default))
            box.setToolTip(
                f"The model's symbolic dim '{d.name}' (in {', '.join(d.inputs)}); "
                f"{d.default} when not set ({d.why}). A change is a new run on the curve."
            )
            box.valueChanged.connect(self._debounce.start)
            box.setEnabled(not self._from_file)
            self._boxes[d.name] = box
            self.dims_form.addRow(_label(d.name), box)

    def set_sizes_from_file(self, on: bool) -> None:
        """With evaluation inputs, the file's arrays give the sizes: the boxes rest."""
        self._from_file = on
        for box in self._boxes.values():
            box.setEnabled(not on)
            box.setStatusTip("sizes come from the evaluation inputs" if on else "")

    def dims_set(self) -> dict[str, int]:
        """The dims whose box differs from the default."""
        return {
            d.name: self._boxes[d.name].value()
            for d in self._dims
            if self._boxes[d.name].value() != d.default
        }


def _label(name: str) -> str:
    words = name.replace("_", " ").strip()
    return (words[:1].upper() + words[1:]) if words else name
