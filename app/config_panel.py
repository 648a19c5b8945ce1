"""The knobs: engine, provider, precision, fusion, batch, threads, spinning. Edits are
debounced into one `config_changed(RunConfig)`; variant builds show progress with a cancel
button. Choices the selected engine does not have are greyed out, and switching engines
moves a knob to its nearest equivalent (ONNX Runtime fusion levels -> torch.compile)."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

from PySide6.QtCore import QSignalBlocker, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine.backends.pytorch.load import is_torch_file
from engine.config import PRECISION_LABELS, RunConfig

DEBOUNCE_MS = 350
FUSION_LABELS = {
    "off": "Off (no graph optimizations)",
    "basic": "Basic (constant folding, redundant nodes)",
    "extended": "Extended (+ operator fusions)",
    "layout": "Layout (+ layout transforms)",
    "all": "All (everything ONNX Runtime has)",
}
TORCH_FUSION_LABELS = {"off": "Off (eager)", "all": "All (torch.compile)"}
PROVIDER_LABELS = {"auto": "Auto", "cpu": "CPU", "cuda": "CUDA", "tensorrt": "TensorRT"}
# What each engine offers, and where a knob goes when the engine changes.
ENGINE_CHOICES: dict[str, dict[str, tuple[str, ...]]] = {
    "onnxruntime": {
        "precision": ("fp32", "fp16", "int8-dynamic", "int8-static"),
        "fusion": tuple(FUSION_LABELS),
        "provider": ("auto", "cpu", "cuda", "tensorrt"),
    },
    "torch": {
        "precision": ("fp32", "bf16", "fp16", "int8-dynamic"),
        "fusion": ("off", "all"),
        "provider": ("auto", "cpu", "cuda"),
    },
}
NEAREST = {
    "bf16": "fp16",
    "int8-static": "int8-dynamic",
    "basic": "all",
    "extended": "all",
    "layout": "all",
    "tensorrt": "cuda",
}


def torch_available() -> bool:
    """Whether the optional torch extra is installed (checked without importing it)."""
    return importlib.util.find_spec("torch") is not None


def fit_to_engine(config: RunConfig) -> RunConfig:
    """`config` with every knob the engine lacks moved to its nearest equivalent."""
    choices = ENGINE_CHOICES[config.engine]
    changes: dict[str, str] = {}
    for knob in ("precision", "fusion", "provider"):
        value = getattr(config, knob)
        if value not in choices[knob]:
            value = NEAREST.get(value, choices[knob][0])
            changes[knob] = value if value in choices[knob] else choices[knob][0]
    return dataclasses.replace(config, **changes) if changes else config  # type: ignore[arg-type]


class ConfigPanel(QWidget):
    """Edits a RunConfig; never talks to the engine itself."""

    config_changed = Signal(object)  # RunConfig
    cancel_requested = Signal()

    def __init__(self, usable_providers: list[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._config = RunConfig()
        self._debounce = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self._debounce.timeout.connect(self._emit)

        self.engine = QComboBox()
        self.engine.addItem("ONNX Runtime", "onnxruntime")
        self.engine.addItem("PyTorch", "torch")
        self._torch_ok = torch_available()
        self._torch_model = False  # the loaded model is a PyTorch file
        self._update_engine_item()
        self.engine.setToolTip(
            "Inference engine. ONNX Runtime runs ONNX models, and PyTorch files (.pt2, .pt) "
            "exported to ONNX. PyTorch runs a PyTorch file natively: eager (fusion off) or "
            "torch.compile (fusion all). Each change is a new run on the same curve."
        )
        self.provider = QComboBox()
        for key in ["auto", *usable_providers]:
            self.provider.addItem(PROVIDER_LABELS[key], key)
        self.provider.setToolTip(
            "Execution provider. Only providers that really work on this machine are "
            "listed; the one ONNX Runtime actually used is shown below."
        )
        self.provider_used = QLabel("–")
        self.provider_used.setToolTip(
            "The provider ONNX Runtime actually obtained. It "
            "silently falls back to CPU when CUDA cannot load."
        )
        self.precision = QComboBox()
        for key, label in PRECISION_LABELS.items():
            self.precision.addItem(label, key)
        self.precision.setToolTip(
            "Model variant: FP16 (converted, I/O kept FP32), INT8 dynamic (weights INT8, "
            "activations quantized at run time) or INT8 static (calibrated QDQ). Each is "
            "checked against FP32 on the same inputs."
        )
        self.fusion = QComboBox()
        for key, label in FUSION_LABELS.items():
            self.fusion.addItem(label, key)
        self.fusion.setToolTip(
            "ONNX Runtime graph optimization level: how much it fuses "
            "and rewrites the graph before running it."
        )
        self.batch = QSpinBox(minimum=1, maximum=4096)
        self.batch.setToolTip(
            "Samples per inference (fills the model's symbolic batch "
            "dimension). Throughput is reported in samples/s."
        )
        self.threads = QSpinBox(minimum=0, maximum=256, specialValueText="default")
        self.threads.setToolTip("Intra-op threads. 'default' uses one per physical core.")
        self.spinning = QCheckBox("Spin-wait threads")
        self.spinning.setToolTip(
            "Intra-op thread spinning: lower latency on idle machines, "
            "but on small machines spinning threads steal cores."
        )
        form = QFormLayout()
        form.addRow("Engine", self.engine)
        form.addRow("Provider", self.provider)
        form.addRow("Running on", self.provider_used)
        form.addRow("Precision", self.precision)
        form.addRow("Fusion", self.fusion)
        form.addRow("Batch", self.batch)
        form.addRow("Threads", self.threads)
        form.addRow("", self.spinning)

        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.cancel = QPushButton("Cancel")
        self.cancel.setToolTip("Stop building this variant; the running config continues.")
        self.cancel.clicked.connect(self.cancel_requested)
        row = QHBoxLayout()
        row.addWidget(self.progress, 1)
        row.addWidget(self.cancel)
        self.progress_row = QWidget()
        self.progress_row.setLayout(row)
        self.progress_row.setVisible(False)

        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.progress_row)
        layout.addStretch(1)
        self.engine.currentIndexChanged.connect(self._engine_changed)
        for combo in (self.provider, self.precision, self.fusion):
            combo.currentIndexChanged.connect(self._changed)
        for spin in (self.batch, self.threads):
            spin.valueChanged.connect(self._changed)
        self.spinning.toggled.connect(self._changed)
        self.set_config(self._config)

    def config(self) -> RunConfig:
        return dataclasses.replace(
            self._config,
            engine=self.engine.currentData(),
            provider=self.provider.currentData(),
            precision=self.precision.currentData(),
            fusion=self.fusion.currentData(),
            batch=self.batch.value(),
            threads=self.threads.value(),
            spinning=self.spinning.isChecked(),
        )

    def set_config(self, config: RunConfig) -> None:
        """Show `config` without emitting a change."""
        self._config = config
        widgets = (
            self.engine,
            self.provider,
            self.precision,
            self.fusion,
            self.batch,
            self.threads,
            self.spinning,
        )
        blockers = [QSignalBlocker(w) for w in widgets]
        _select(self.engine, config.engine)
        _select(self.provider, config.provider)
        _select(self.precision, config.precision)
        _select(self.fusion, config.fusion)
        self.batch.setValue(config.batch)
        self.threads.setValue(config.threads)
        self.spinning.setChecked(config.spinning)
        self._show_engine_choices(config.engine)
        del blockers

    def set_model_kind(self, path: str) -> None:
        """The loaded model decides whether the PyTorch engine can run it (PyTorch files
        only); an ONNX model with PyTorch selected goes back to ONNX Runtime."""
        self._torch_model = is_torch_file(path)
        self._update_engine_item()
        if not self._torch_model and self.engine.currentData() == "torch":
            _select(self.engine, "onnxruntime")

    def config_for_model(self, path: str) -> RunConfig:
        """The config to load `path` with: the current one, on ONNX Runtime for ONNX."""
        config = self.config()
        if Path(path).suffix.lower() == ".onnx" and config.engine == "torch":
            config = fit_to_engine(dataclasses.replace(config, engine="onnxruntime"))
            self.set_config(config)
        return config

    def _update_engine_item(self) -> None:
        item = self.engine.model().item(self.engine.findData("torch"))
        if item is None:
            return
        item.setEnabled(self._torch_ok and self._torch_model)
        item.setToolTip(
            ""
            if self._torch_ok and self._torch_model
            else "Needs the torch extra: pip install 'opscope[torch]'"
            if not self._torch_ok
            else "Runs PyTorch files (.pt2, .pt); open one first"
        )

    def _engine_changed(self) -> None:
        """Move the other knobs to what this engine has, then apply (debounced)."""
        engine = self.engine.currentData()
        fitted = fit_to_engine(dataclasses.replace(self.config(), engine=engine))
        blockers = [QSignalBlocker(w) for w in (self.provider, self.precision, self.fusion)]
        _select(self.provider, fitted.provider)
        _select(self.precision, fitted.precision)
        _select(self.fusion, fitted.fusion)
        del blockers
        self._show_engine_choices(engine)
        self._changed()

    def _show_engine_choices(self, engine: str) -> None:
        choices = ENGINE_CHOICES[engine]
        for knob, combo in (
            ("precision", self.precision),
            ("fusion", self.fusion),
            ("provider", self.provider),
        ):
            for i in range(combo.count()):
                item = combo.model().item(i)
                if item is not None:
                    item.setEnabled(combo.itemData(i) in choices[knob])
        labels = TORCH_FUSION_LABELS if engine == "torch" else FUSION_LABELS
        for i in range(self.fusion.count()):
            key = self.fusion.itemData(i)
            self.fusion.setItemText(i, labels.get(key, FUSION_LABELS[key]))
        self.spinning.setEnabled(engine == "onnxruntime")
        self.fusion.setToolTip(
            "PyTorch: Off runs the module eagerly, All compiles it with torch.compile (the "
            "first inference compiles, which can take a while)."
            if engine == "torch"
            else "ONNX Runtime graph optimization level: how much it fuses and rewrites the graph "
            "before running it."
        )

    def set_provider_used(self, name: str, requested: str) -> None:
        short = name.replace("ExecutionProvider", "")
        if name != requested:
            self.provider_used.setText(
                f"<b style='color:#d9822b'>{short}</b> "
                f"(asked for {requested.replace('ExecutionProvider', '')})"
            )
        else:
            self.provider_used.setText(short)

    def show_progress(self, message: str, done: float, total: float | None) -> None:
        self.progress_row.setVisible(True)
        if total:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * min(done / total, 1.0)))
        else:
            self.progress.setRange(0, 0)  # busy indicator
        self.progress.setFormat(message or "working…")

    def hide_progress(self) -> None:
        self.progress_row.setVisible(False)

    def _changed(self) -> None:
        self._debounce.start()

    def _emit(self) -> None:
        config = self.config()
        if config != self._config:
            self._config = config
            self.config_changed.emit(config)


def _select(combo: QComboBox, key: str) -> None:
    index = combo.findData(key)
    if index >= 0:
        combo.setCurrentIndex(index)


def usable_providers() -> list[str]:
    """Providers worth offering: CPU always; CUDA/TensorRT only with a GPU present."""
    from engine.backends.ort.inference_session import gpu_present

    found = ["cpu"]
    if gpu_present():
        import onnxruntime as ort

        available = ort.get_available_providers()
        if "CUDAExecutionProvider" in available:
            found.append("cuda")
        if "TensorrtExecutionProvider" in available:
            found.append("tensorrt")
    return found
