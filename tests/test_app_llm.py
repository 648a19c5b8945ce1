"""A generating model in the window: opened like any model, timed whole generations live,
the Generation dock's TTFT/TPOT figures, both phases profiled (the op table switches
between them, the roofline draws both), prompt and output lengths changed live."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("PySide6")
from pytestqt.qtbot import QtBot

from app.shell.workbench import Workbench
from engine.session.store import open_session_file
from tests.conftest import ROOT

TIMEOUT_MS = 90_000
DEMO_LLM = ROOT / "resources" / "models" / "demo_llm"


def test_a_generating_model_runs_live_with_both_phases(qtbot: QtBot, tmp_path: Path) -> None:
    wb = Workbench(session_path=str(tmp_path / "llm.opscope"), usable=["cpu"])
    qtbot.addWidget(wb.window)
    wb.window.show()
    wb.start(str(DEMO_LLM))
    w = wb.window
    try:
        qtbot.waitUntil(lambda: wb.controller.samples > 10, timeout=TIMEOUT_MS)
        assert w.config_panel.config().engine == "genai"  # the folder picked its engine
        assert w.generation_dock.isVisible()
        qtbot.waitUntil(lambda: wb.generation.stats.total > 10, timeout=TIMEOUT_MS)
        figures = wb.generation.stats.figures()
        assert figures is not None and figures.ttft_p50_ms > figures.tpot_p50_ms > 0
        assert figures.tpot_count == 31 * figures.generations  # 32 new tokens each
        assert w.generation.ttft.text().startswith("p50 ") and 0 < figures.prefill_share < 1
        assert w.model_label.text().endswith("attention_mask, 4 layers' KV cache")  # one item
        qtbot.waitUntil(lambda: set(wb.generation.phases) == {"prefill", "decode"},
                        timeout=TIMEOUT_MS)  # fmt: skip
        table = w.op_table
        assert table.phase_combo.isVisible()
        table.phase_combo.setCurrentText("decode")
        assert "decode passes" in table.summary_label.text()
        table.phase_combo.setCurrentText("prefill")
        assert "prefill passes" in table.summary_label.text()
        kinds = {op.op_type.split()[0] for op in wb.controller.roof_ops or []}
        assert kinds == {"prefill", "decode"}  # both phases on the roofline
        w.generation.prompt_len.setValue(48)  # applied at once (no keyboard tracking)
        qtbot.waitUntil(
            lambda: any(label == "prompt 48, 32 new" for _, label in w.latency.markers),
            timeout=TIMEOUT_MS,
        )
        qtbot.waitUntil(lambda: wb.generation.stats.prompt_len == 48, timeout=TIMEOUT_MS)
        qtbot.waitUntil(lambda: wb.generation.stats.total > 3, timeout=TIMEOUT_MS)
        w.generation.prompt_len.setValue(4000)  # capped by the model's context
        assert w.generation.prompt_len.value() == 2047
    finally:
        wb.shutdown()
    with open_session_file(tmp_path / "llm.opscope") as reader:
        runs = reader.runs()
        shapes = [g.prompt_len for r in runs if (g := reader.generation(r.id)) is not None]
        assert shapes[:2] == [128, 48] and runs[0].kind == "live"
        first = reader.generation(runs[0].id)
        assert first is not None and first.ttft_ns.size == runs[0].samples > 10


def test_the_demo_llm_opens_from_the_file_menu(qtbot: QtBot, tmp_path: Path) -> None:
    """File > Demo Models lists every bundled demo; the LLM's entry (its genai_config.json,
    as a file dialog would give it) opens the folder on the generation engine."""
    wb = Workbench(session_path=str(tmp_path / "demo.opscope"), usable=["cpu"])
    qtbot.addWidget(wb.window)
    wb.start(str(ROOT / "resources" / "models" / "demo_cnn.onnx"))
    try:
        qtbot.waitUntil(lambda: wb.controller.samples > 3, timeout=TIMEOUT_MS)
        file_menu = next(a.menu() for a in wb.window.menuBar().actions() if a.text() == "&File")
        demos = next(a.menu() for a in file_menu.actions() if a.text() == "&Demo Models")
        entries = {a.text(): a for a in demos.actions()}
        assert set(entries) == {
            "Demo &Transformer (ONNX)",
            "Demo &CNN (ONNX)",
            "Demo &LLM (generation)",
        }
        entries["Demo &LLM (generation)"].trigger()
        qtbot.waitUntil(lambda: wb.window.config_panel.config().engine == "genai",
                        timeout=TIMEOUT_MS)  # fmt: skip
        qtbot.waitUntil(lambda: "demo_llm" in wb.window.model_label.text(), timeout=TIMEOUT_MS)
    finally:
        wb.shutdown()


def test_the_scaling_dock_sweeps_a_generating_models_prompt(
    qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For a generating model the Scaling dock offers "prompt tokens" first: the prompt sweep
    job (as `opscope generate --sweep-prompt`) runs through the one runner with live timing
    paused, draws TTFT and TPOT against the prompt with TTFT's quadratic fit, and records
    each length's generation run; Cancel keeps the lengths done."""
    from app.scaling import controller as scaling
    from app.scaling.controller import PROMPT_DIM, ScalingController

    monkeypatch.setattr(scaling, "POINT_S", 0.5)  # whole generations: 0.5 s a length

    wb = Workbench(session_path=str(tmp_path / "llm.opscope"), usable=["cpu"])
    qtbot.addWidget(wb.window)
    wb.window.show()
    wb.start(str(DEMO_LLM))
    dock = wb.room(ScalingController).view
    try:
        qtbot.waitUntil(lambda: wb.generation.stats.total > 3, timeout=TIMEOUT_MS)
        assert dock.dim.currentText() == PROMPT_DIM
        assert dock.values.text() == "128,256,512,1024"  # within the context, 32 new tokens
        dock.values.setText("16,64,128")
        dock.run_button.click()
        qtbot.waitUntil(lambda: not wb.running, timeout=5_000)  # the sweep gets the cores
        qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=TIMEOUT_MS)
        assert "the quadratic term (attention over the prompt) is" in dock.status.text(), (
            dock.status.text()
        )
        assert set(dock.plot.lines) == {"TTFT p50", "TPOT p50", "fit"}
        ttft = dock.plot.lines["TTFT p50"][1]
        assert ttft[-1] > ttft[0] > 0  # a longer prompt's prefill takes longer
        qtbot.waitUntil(lambda: wb.running, timeout=5_000)  # resumed
        wb.recording.flush()
        with open_session_file(wb.recording.path) as reader:
            prompts = [g.prompt_len for r in reader.runs() if r.kind == "generate"
                       if (g := reader.generation(r.id)) is not None]  # fmt: skip
            assert prompts == [16, 64, 128]
        dock.values.setText("16,32,48,64,96,128,256,512")
        dock.run_button.click()
        qtbot.waitUntil(lambda: dock.status.text().startswith("prompt "), timeout=TIMEOUT_MS)
        dock.cancel_button.click()
        qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=TIMEOUT_MS)
        assert dock.status.text() == "sweep cancelled: the points done are in the session"
        qtbot.waitUntil(lambda: wb.running, timeout=5_000)
        wb.recording.flush()
        with open_session_file(wb.recording.path) as reader:
            runs = [r for r in reader.runs() if r.kind == "generate"]
            assert 4 <= len(runs) < 3 + 8 and runs[-1].status in ("ok", "cancelled")
        dock.values.setText("16,64,4000")  # past the context: one line, nothing timed
        dock.run_button.click()
        qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=TIMEOUT_MS)
        assert dock.status.text() == (
            "sweep failed: --sweep-prompt: 4000 prompt + 32 new tokens exceed the model's "
            "context of 2048 tokens"
        )
    finally:
        wb.shutdown()


def test_a_restored_layout_hides_a_generating_models_docks(qtbot: QtBot, tmp_path: Path) -> None:
    """A layout saved while a generating model ran showed its Generation and LLM Serving
    docks at the next start with no model (or a CNN) loaded; they now wait for one."""
    from app.shell.main_window import LAYOUT_VERSION

    wb = Workbench(session_path=str(tmp_path / "llm.opscope"), usable=["cpu"])
    qtbot.addWidget(wb.window)
    w = wb.window
    try:
        w.show()
        docks = (w.generation_dock, w.dock("LLM Serving"))
        for dock in docks:
            dock.show()
        assert all(d.isVisible() for d in docks)
        w.settings.setValue("window/state", w.saveState(LAYOUT_VERSION))  # as on quitting
        w.restore_layout()  # as at the next start
        assert not any(d.isVisible() for d in docks)
        assert w.ops_dock.isVisible()  # the rest of the layout as saved
    finally:
        wb.shutdown()
