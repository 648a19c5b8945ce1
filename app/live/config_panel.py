"""The knobs: engine, provider, precision, fusion, batch, threads, spinning. Edits are
debounced into one `config_changed(RunConfig)`; variant builds show progress with a cancel
button. The panel reads each backend's declared capabilities: choices the selected engine
does not have are greyed out, and switching engines moves a knob to its nearest
equivalent (ONNX Runtime fusion levels -> torch.compile). It knows no engine by name."""

from __future__ import annotations

import dataclasses

from PySide6.QtCore import QSignalBlocker, QTimer, Signal
from PySide6.QtGui import QStandardItemModel
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

from engine.api import PRECISION_LABELS, Capabilities, RunConfig, backends, provider_label
from widgets.spin_boxes import special

DEBOUNCE_MS = 350
PROVIDER_LABELS = {"auto": "Auto", "cpu": "CPU", "cuda": "CUDA", "tensorrt": "TensorRT"}


def fit_to_engine(config: RunConfig) -> RunConfig:
    """`config` with every knob its engine lacks moved to the nearest equivalent."""
    return backends.get(config.engine).capabilities.fit(config)


def _default_caps() -> Capabilities:
    return backends.get(backends.DEFAULT).capabilities


def _fusion_labels() -> dict[str, str]:
    """Every fusion value some backend offers, each with its first backend's label."""
    labels: dict[str, str] = {}
    for backend in backends.all_backends():
        for key in backend.capabilities.fusions:
            labels.setdefault(key, backend.capabilities.fusion_labels.get(key, key))
    return labels


class ConfigPanel(QWidget):
    """Edits a RunConfig; never talks to the engine itself."""

    config_changed = Signal(object)  # RunConfig: the user changed it (it is to run)
    config_shown = Signal(object)  # RunConfig: what `config()` gives changed, by any way
    cancel_requested = Signal()

    def __init__(self, usable_providers: list[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._config = RunConfig()
        self._min_cosine = self._config.min_cosine
        self._min_token_agreement = self._config.min_token_agreement
        self._debounce = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self._debounce.timeout.connect(self._emit)

        self.engine = QComboBox()
        for backend in backends.all_backends():
            self.engine.addItem(backend.capabilities.label, backend.capabilities.name)
        self._model_path: str | None = None
        self._update_engine_items()
        self.engine.setToolTip(
            "Inference engine. "
            + " ".join(b.capabilities.summary for b in backends.all_backends())
            + " Each change is a new run on the same curve."
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
        for key, label in _fusion_labels().items():
            self.fusion.addItem(label, key)
        self.fusion.setToolTip(_default_caps().fusion_help)
        self.batch = QSpinBox(minimum=1, maximum=4096)
        self.batch.setToolTip(
            "Samples per inference (fills the model's symbolic batch "
            "dimension). Throughput is reported in samples/s."
        )
        self.threads = special(QSpinBox(minimum=0, maximum=256), "default")
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
        self.progress.setTextVisible(False)  # a bar clips its text: the message is above it
        self.progress_text = QLabel("")
        self.progress_text.setWordWrap(True)
        self.cancel = QPushButton("Cancel")
        self.cancel.setToolTip("Stop building this variant; the running config continues.")
        self.cancel.clicked.connect(self.cancel_requested)
        row = QHBoxLayout()
        row.addWidget(self.progress, 1)
        row.addWidget(self.cancel)
        column = QVBoxLayout()
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.progress_text)
        column.addLayout(row)
        self.progress_row = QWidget()
        self.progress_row.setLayout(column)
        self.progress_row.setVisible(False)

        layout = QVBoxLayout()
        layout.addLayout(form)
        layout.addWidget(self.progress_row)
        layout.addStretch(1)
        self.setLayout(layout)
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
            min_cosine=self._min_cosine,
            min_token_agreement=self._min_token_agreement,
        )

    def set_config(self, config: RunConfig) -> None:
        """Show `config` without emitting a change."""
        self._config = config
        self._min_cosine = config.min_cosine
        self._min_token_agreement = config.min_token_agreement
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
        self.config_shown.emit(self.config())

    def set_model_kind(self, path: str) -> None:
        """The loaded model decides which engines can run it (each backend says); when the
        selected one cannot, the first that can is selected."""
        self._model_path = path
        self._update_engine_items()
        if not self._can_run(self.engine.currentData()):
            runs = next((b for b in backends.all_backends() if b.opens(path)), None)
            if runs is not None:
                _select(self.engine, runs.capabilities.name)

    def config_for_model(self, path: str) -> RunConfig:
        """The config to load `path` with: the current one, on the first engine that runs
        the file when the current engine cannot."""
        config = self.config()
        if not backends.get(config.engine).opens(path):
            runs = next((b for b in backends.all_backends() if b.opens(path)), None)
            if runs is not None:
                config = runs.capabilities.fit(config)
                self.set_config(config)
        return config

    def _can_run(self, name: str) -> bool:
        backend = backends.get(name)
        return backend.capabilities.missing() is None and (
            (self._model_path is None and name == backends.DEFAULT)
            or (self._model_path is not None and backend.opens(self._model_path))
        )

    def _update_engine_items(self) -> None:
        for i in range(self.engine.count()):
            item = _items(self.engine).item(i)
            if item is None:
                continue
            backend = backends.get(self.engine.itemData(i))
            missing = backend.capabilities.missing()
            ok = self._can_run(backend.capabilities.name)
            item.setEnabled(ok)
            item.setToolTip(
                ""
                if ok
                else f"Needs {missing}"
                if missing
                else "Cannot run this model file; open one it runs first"
            )

    def _engine_changed(self) -> None:
        """Move the other knobs to what this engine has, then apply (debounced)."""
        caps = backends.get(self.engine.currentData()).capabilities
        fitted = caps.fit(self.config())
        blockers = [QSignalBlocker(w) for w in (self.provider, self.precision, self.fusion)]
        _select(self.provider, fitted.provider)
        _select(self.precision, fitted.precision)
        _select(self.fusion, fitted.fusion)
        del blockers
        self._show_engine_choices(caps.name)
        self._changed()

    def _show_engine_choices(self, engine: str) -> None:
        caps = backends.get(engine).capabilities
        for knob, combo in (
            ("precision", self.precision),
            ("fusion", self.fusion),
            ("provider", self.provider),
        ):
            for i in range(combo.count()):
                item = _items(combo).item(i)
                if item is not None:
                    item.setEnabled(combo.itemData(i) in caps.choices(knob))
        default_labels = _fusion_labels()
        for i in range(self.fusion.count()):
            key = self.fusion.itemData(i)
            self.fusion.setItemText(i, caps.fusion_labels.get(key, default_labels[key]))
        self.spinning.setEnabled(caps.spinning)
        self.fusion.setToolTip(caps.fusion_help)

    def set_provider_used(self, name: str, requested: str) -> None:
        short = provider_label(name)
        if name != requested:
            self.provider_used.setText(
                f"<b style='color:#d9822b'>{short}</b> (asked for {provider_label(requested)})"
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
        self.progress.setToolTip(message)
        self.progress_text.setText(message or "working…")

    def hide_progress(self) -> None:
        self.progress_row.setVisible(False)

    def set_min_cosine(self, value: float) -> None:
        """The accuracy INT8 must keep (the window's Min cosine box): a change rebuilds
        an INT8 config to meet it; other precisions just carry it."""
        self._min_cosine = float(value)
        if self._config.precision.startswith("int8") or _weights(self._config):
            self._changed()  # rebuilt to meet it (a no-op when it did not change)
        else:
            self._config = dataclasses.replace(self._config, min_cosine=self._min_cosine)
            self.config_shown.emit(self.config())

    def set_min_token_agreement(self, value: float) -> None:
        """The share of FP32's next tokens a generating model's weights must keep (the
        window's Min token agreement box): a change rebuilds int8/int4 weights to meet it."""
        self._min_token_agreement = float(value)
        if _weights(self._config):
            self._changed()
        else:
            self._config = dataclasses.replace(self._config, min_token_agreement=float(value))
            self.config_shown.emit(self.config())

    def _changed(self) -> None:
        self._debounce.start()
        self.config_shown.emit(self.config())  # at once: a job started now runs what is shown

    def _emit(self) -> None:
        config = self.config()
        if config != self._config:
            self._config = config
            self.config_changed.emit(config)
            self.config_shown.emit(config)


def _select(combo: QComboBox, key: str) -> None:
    index = combo.findData(key)
    if index >= 0:
        combo.setCurrentIndex(index)


def usable_providers() -> list[str]:
    """Providers worth offering: CPU always; CUDA/TensorRT only with a GPU present (the
    ONNX Runtime backend's own answer)."""
    from engine.api import backends

    return list(backends.get(backends.DEFAULT).capabilities.usable_providers())


def _items(combo: QComboBox) -> QStandardItemModel:
    """A combo box's items, whose flags enable or disable each choice."""
    model = combo.model()
    assert isinstance(model, QStandardItemModel)  # what QComboBox makes for itself
    return model


def _weights(config: RunConfig) -> bool:
    """A generating model's weight-only precision: searched to meet the accuracy target."""
    return config.precision.endswith("-weights")
