"""INT8 in the window (issue #50): the fastest kind picked against a target every check
meets, the badge naming the metric, the worst output and what the samples were, and a
tokenizer picked in the Inputs panel (a wrong one refused in one line)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("PySide6")
from pytestqt.qtbot import QtBot

from app.shell.workbench import Workbench
from tests.conftest import DEMO_TRANSFORMER
from tests.tiny_tokenizer import tiny_tokenizer

TIMEOUT_MS = 120_000
WORDS = ["the", "a", "model", "runs", "fast", "slow", "on", "data", "text", "real", "of"]


def _tokenizer(path: Path, words: int) -> Path:
    return tiny_tokenizer(path, WORDS, words)


def test_int8_in_the_window_says_its_metric_data_and_takes_a_tokenizer(
    qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wb = Workbench(session_path=str(tmp_path / "live.opscope"), usable=["cpu"])
    qtbot.addWidget(wb.window)
    wb.window.show()
    wb.start(str(DEMO_TRANSFORMER))
    try:
        w, panel = wb.window, wb.window.config_panel
        qtbot.waitUntil(lambda: wb.controller.samples > 10, timeout=TIMEOUT_MS)
        index = panel.precision.findData("int8")
        assert index >= 0 and "fastest" in panel.precision.itemText(index)
        panel.precision.setCurrentIndex(index)
        qtbot.waitUntil(lambda: "token-id rows" in w.accuracy.text(), timeout=TIMEOUT_MS)
        lines = w.accuracy.text().split("\n")
        assert lines[0].startswith(("meets 0.99", "misses 0.99")), lines
        assert any(line.startswith("worst: logits") for line in lines), lines
        assert any(line.startswith("int8-") or "int8-" in line for line in lines), lines

        # a tokenizer whose ids the model's embedding cannot hold: one line, nothing used
        big = _tokenizer(tmp_path / "big" / "tokenizer.json", 5000)
        wb.inputs.set_file("tokenizer", str(big))
        assert "not this model's tokenizer" in w.banner.text.text()
        assert "\n" not in w.banner.text.text() and wb.inputs.tokenizer is None

        small = _tokenizer(tmp_path / "small" / "tokenizer.json", 200)
        monkeypatch.setattr(
            "app.live.input_panel.QFileDialog.getOpenFileName", lambda *a: (str(small), "")
        )
        w.inputs.tokenizer.button.click()
        assert w.inputs.tokenizer.name.text() == "tokenizer.json"
        qtbot.waitUntil(lambda: "texts through small/tokenizer.json" in w.accuracy.text(),
                        timeout=TIMEOUT_MS)  # fmt: skip
        assert wb.inputs.for_new_model(str(DEMO_TRANSFORMER))["tokenizer"] == str(small)
        assert "--tokenizer" in wb.client.job_inputs().argv()
    finally:
        wb.shutdown()
