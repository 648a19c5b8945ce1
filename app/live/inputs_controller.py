"""The loaded model's inputs: the dims the user set (a new run, marked on the curve, like
any config change), the calibration and evaluation files (remembered per model in
QSettings, checked before use: a bad file is one line in the banner, the app stays up),
and the concrete shapes each run used, shown in the Model panel."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QSettings

if TYPE_CHECKING:
    from app.host.engine_client import EngineClient
    from app.live.live_controller import LiveController
    from app.shell.main_window import MainWindow

from engine.api import (
    GenerationStarted,
    ModelInfo,
    ModelLoaded,
    OpScopeError,
    RunStarted,
    SymbolicDim,
    describe_inputs,
    editable_dims,
)

CARRY_KEY = "models/carry_settings"
TITLES = {"calibration": "calibration data", "inputs": "evaluation inputs",
          "tokenizer": "tokenizer"}  # fmt: skip
ATTRS = {"calibration": "calibration", "inputs": "evaluation", "tokenizer": "tokenizer"}
DATA_ERROR_KEY = "data-file"  # the banner's key for a refused data file


def data_key(path: str, which: str) -> str:
    """The QSettings key of a model's data file ('calibration' or 'inputs'), keyed by the
    model's resolved path."""
    digest = hashlib.sha1(str(Path(path).resolve()).encode()).hexdigest()[:16]
    return f"model_data/{digest}/{which}"


class InputsController(QObject):
    """Wires `window.inputs` (an InputPanel) to the engine client."""

    def __init__(self, window: MainWindow, client: EngineClient, live: LiveController) -> None:
        super().__init__()
        self.window = window
        self.client = client
        self.live = live  # the LiveController: a rebuild's warnings wait for its run
        self.settings: QSettings = window.settings
        self.panel = window.inputs
        self.info: ModelInfo | None = None
        self.model_path: str | None = None
        self.dims: dict[str, int] = {}
        self.editable: list[SymbolicDim] = []
        self.calibration: str | None = None
        self.evaluation: str | None = None
        self.tokenizer: str | None = None
        self.panel.carry.setChecked(bool(self.settings.value(CARRY_KEY, False, type=bool)))
        self.panel.carry_toggled.connect(lambda on: self.settings.setValue(CARRY_KEY, bool(on)))
        self.panel.dims_changed.connect(self.set_dims)
        self.panel.calibration_chosen.connect(lambda p: self.set_file("calibration", p))
        self.panel.eval_chosen.connect(lambda p: self.set_file("inputs", p))
        self.panel.tokenizer_chosen.connect(lambda p: self.set_file("tokenizer", p))
        client.events.connect(self.on_events)

    @property
    def carry(self) -> bool:
        return bool(self.panel.carry.isChecked())

    def for_new_model(self, path: str) -> dict[str, Any]:
        """What to load `path` with: its remembered data files; its dims at their defaults."""
        self.model_path, self.dims, self.info = path, {}, None
        self.calibration = self._remembered(path, "calibration")
        self.evaluation = self._remembered(path, "inputs")
        self.tokenizer = self._remembered(path, "tokenizer")
        self.panel.calibration.set_path(self.calibration)
        self.panel.evaluation.set_path(self.evaluation)
        self.panel.tokenizer.set_path(self.tokenizer)
        self.panel.set_sizes_from_file(self.evaluation is not None)
        self.window.notices.clear(DATA_ERROR_KEY)
        return {
            "dims": {},
            "calibration": self.calibration,
            "inputs": self.evaluation,
            "tokenizer": self.tokenizer,
        }

    def _remembered(self, model: str, which: str) -> str | None:
        value = self.settings.value(data_key(model, which))
        if isinstance(value, str) and value and Path(value).exists():
            return value
        return None

    # panel -> engine -----------------------------------------------------------------
    def set_dims(self, dims: dict[str, int]) -> None:
        if dims == self.dims or self.info is None:
            return
        changed = [d for d in self.editable if dims.get(d.name) != self.dims.get(d.name)]
        self.dims = dict(dims)
        label = ", ".join(
            f"{d.name} {dims.get(d.name, d.default)}" + ("" if d.name in dims else " (default)")
            for d in changed
        )
        self._send(label or "input size", rebuilds=True)

    def set_file(self, which: str, path: str | None) -> None:
        """A calibration ('calibration'), evaluation ('inputs') or tokenizer ('tokenizer')
        file picked, or cleared."""
        title = TITLES[which]
        if path == getattr(self, ATTRS[which]):
            return  # the same file again: nothing changes
        if path is not None and self.info is not None:
            from engine.api import check_data_file, check_tokenizer

            try:
                if which == "tokenizer":
                    check_tokenizer(path, self.info)
                else:
                    check_data_file(path, self.info)
            except OpScopeError as exc:
                self.window.notify("error", f"{title} not used: {exc}", key=DATA_ERROR_KEY)
                return
        self.window.notices.clear(DATA_ERROR_KEY)
        if which == "calibration":
            self.calibration = path
            self.panel.calibration.set_path(path)
            rebuilds = self.client.last_config.precision in ("int8", "int8-static")
        elif which == "tokenizer":
            self.tokenizer = path
            self.panel.tokenizer.set_path(path)
            rebuilds = self.evaluation is None  # (the user's data need no tokenizer)
        else:
            self.evaluation = path
            self.panel.evaluation.set_path(path)
            self.panel.set_sizes_from_file(path is not None)
            rebuilds = True
        if self.model_path is not None:
            self.settings.setValue(data_key(self.model_path, which), path or "")
        name = Path(path).name if path else ("beside the model" if which == "tokenizer"
                                             else "generated")  # fmt: skip
        self._send(f"{title}: {name}", rebuilds)

    def _send(self, label: str, rebuilds: bool) -> None:
        if self.model_path is None:
            return
        if rebuilds:
            self.live.build_started(label)
        self.client.set_inputs(
            self.dims, self.evaluation, self.calibration, label, tokenizer=self.tokenizer
        )

    # engine -> view ------------------------------------------------------------------
    def on_events(self, batch: list[Any]) -> None:
        for ev in batch:
            if isinstance(ev, ModelLoaded):
                if self.info is None or ev.info.path != self.info.path:
                    self.editable = editable_dims(ev.info)
                    self.panel.set_dims(self.editable, self.dims)
                self.info = ev.info
            elif isinstance(ev, GenerationStarted):  # its prompt length is the Generation dock's
                self.editable = []
                self.panel.set_dims([], {})
            elif isinstance(ev, RunStarted) and self.info is not None:
                shapes = {k: shape for k, (shape, _) in ev.inputs.items()}
                self.window.show_inputs(describe_inputs(self.info, shapes, self.dims))
