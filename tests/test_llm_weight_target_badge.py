"""The window's Accuracy badge on a generating model's weights: each check judged at its own
target, the engine's verdict as its first line (issue #51, item 2)."""

from __future__ import annotations

import pytest
from pytestqt.qtbot import QtBot

from engine.api import AccuracyResult
from widgets.accuracy_badge import AccuracyBadge


def _result(agree: float, cos: float) -> AccuracyResult:
    from engine.backends.genai.weight_target import Verdict, WeightTarget

    v = Verdict("INT4", agree, cos, WeightTarget(0.90, 0.98))
    return AccuracyResult("fp32", float("nan"), float("nan"), cos, agree, 128,
                          checks=v.checks(128, 0.99, "perplexity 50.3 (FP32 38.9)"),
                          data="8 texts of resources/eval_texts.txt")  # fmt: skip


@pytest.fixture
def badge(qtbot: QtBot) -> AccuracyBadge:
    widget = AccuracyBadge()
    qtbot.addWidget(widget)
    widget.set_tolerance(0.99)  # the encoders' min cosine: not what judges these checks
    return widget


def test_a_missed_token_agreement_is_red_and_says_the_target(badge: AccuracyBadge) -> None:
    badge.set_result(_result(0.55, 0.951))
    first = badge.text().splitlines()[0]
    assert first.startswith("INT4: 55% token agreement, below the 90% target")
    assert badge.state == "bad" and "on 8 texts" in badge.text()
    assert "below the 90% target" in badge.toolTip()


def test_met_targets_are_green_though_below_the_encoders_cosine(badge: AccuracyBadge) -> None:
    badge.set_result(_result(0.953, 0.985))  # 0.985 < 0.99, yet its own target is 0.98
    assert badge.state == "good"
    assert badge.text().startswith("INT4 meets the target: 95% token agreement (>= 90%)")
    badge.set_result(_result(0.95, 0.97))  # only the cosine misses: amber
    assert badge.state == "warn" and "logit cosine min 0.9700, below the 0.98" in badge.text()


def test_the_configuration_sets_the_token_agreement_and_rebuilds_llm_weights(
    qtbot: QtBot,
) -> None:
    from app.live.config_panel import ConfigPanel
    from engine.api import RunConfig

    panel = ConfigPanel(["cpu"])
    qtbot.addWidget(panel)
    panel.set_model_kind("/models/demo_llm/genai_config.json")
    panel.set_config(RunConfig(engine="genai", precision="int4-weights"))
    with qtbot.waitSignal(panel.config_changed, timeout=2000) as changed:
        panel.set_min_token_agreement(0.8)  # weights searched for it: a rebuild
    assert changed.args[0].min_token_agreement == 0.8
    with qtbot.waitSignal(panel.config_changed, timeout=2000) as changed:
        panel.set_min_cosine(0.95)
    assert (changed.args[0].min_cosine, changed.args[0].min_token_agreement) == (0.95, 0.8)
    panel.set_config(RunConfig(engine="genai", precision="fp32"))
    with qtbot.assertNotEmitted(panel.config_changed, wait=300):
        panel.set_min_token_agreement(0.7)  # carried, nothing to rebuild
    assert panel.config().min_token_agreement == 0.7


def test_a_new_model_keeps_the_token_agreement_target() -> None:
    from app.live.model_switch import config_for_new_model
    from engine.api import RunConfig

    current = RunConfig(engine="genai", precision="int4-weights", min_token_agreement=0.8)
    config, _ = config_for_new_model(current, False, "/models/other.onnx")
    assert config.precision == "fp32" and config.min_token_agreement == 0.8


def test_the_window_has_the_target_box_and_says_the_weight_search(qtbot: QtBot) -> None:
    from app.shell.main_window import MainWindow
    from engine.api import VariantReady

    win = MainWindow(["cpu"])
    qtbot.addWidget(win)
    win.token_agreement.setValue(0.85)
    assert win.config_panel.config().min_token_agreement == 0.85
    summary = "INT4 weights: none of 7 build(s) meets token agreement >= 90%"
    win.variant_ready(VariantReady("int4-weights", "/v", 1.0, False, 61,
                                   details={"weights": {"summary": summary}}))  # fmt: skip
    assert win.variant_label.text().endswith(summary)
