"""The config panel's engine selector: per-engine choices and moving knobs across engines."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from app.live.config_panel import ConfigPanel, fit_to_engine
from engine.backends import Capabilities
from engine.config import RunConfig


def enabled(combo: object, key: str) -> bool:
    c = combo  # a QComboBox backed by a QStandardItemModel
    return bool(c.model().item(c.findData(key)).isEnabled())  # type: ignore[attr-defined]


def test_fit_to_engine_moves_knobs_to_the_nearest_equivalent() -> None:
    ort = RunConfig(precision="int8-static", fusion="extended", provider="tensorrt", batch=4)
    on_torch = fit_to_engine(RunConfig(**{**ort.to_json(), "engine": "torch"}))
    assert (on_torch.precision, on_torch.fusion, on_torch.provider, on_torch.batch) == (
        "int8-dynamic",
        "all",
        "cuda",
        4,
    )
    back = fit_to_engine(RunConfig(engine="onnxruntime", precision="bf16", fusion="off"))
    assert (back.precision, back.fusion) == ("fp16", "off")
    assert fit_to_engine(RunConfig()) == RunConfig()


def test_engine_selector_follows_the_model_and_greys_out_what_the_engine_lacks(
    qtbot: QtBot, monkeypatch: object
) -> None:
    monkeypatch.setattr(Capabilities, "missing", lambda self: None)  # type: ignore[attr-defined]
    panel = ConfigPanel(["cpu"])
    qtbot.addWidget(panel)
    panel.set_config(RunConfig(precision="int8-static", fusion="basic"))
    assert not enabled(panel.engine, "torch")  # no PyTorch file loaded
    assert not enabled(panel.precision, "bf16") and enabled(panel.precision, "int8-static")
    panel.set_model_kind("/models/net.pt2")
    assert enabled(panel.engine, "torch")
    with qtbot.waitSignal(panel.config_changed, timeout=2000) as changed:
        panel.engine.setCurrentIndex(panel.engine.findData("torch"))
    config = changed.args[0]
    assert (config.engine, config.precision, config.fusion) == ("torch", "int8-dynamic", "all")
    assert enabled(panel.precision, "bf16") and not enabled(panel.precision, "int8-static")
    assert not enabled(panel.fusion, "extended") and not panel.spinning.isEnabled()
    assert panel.fusion.currentText() == "All (torch.compile)"
    assert panel.config_for_model("/models/other.onnx").engine == "onnxruntime"
    assert panel.engine.currentData() == "onnxruntime" and panel.spinning.isEnabled()


def test_without_torch_the_engine_says_how_to_get_it(qtbot: QtBot, monkeypatch: object) -> None:
    monkeypatch.setattr(  # type: ignore[attr-defined]
        Capabilities,
        "missing",
        lambda self: "torch: pip install 'opscope[torch]'" if self.requires else None,
    )
    panel = ConfigPanel(["cpu"])
    qtbot.addWidget(panel)
    panel.set_model_kind("/models/net.pt2")
    item = panel.engine.model().item(panel.engine.findData("torch"))
    assert not item.isEnabled() and "opscope[torch]" in item.toolTip()
