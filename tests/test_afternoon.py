"""The afternoon as a test (#29): one window, one session file, the features strung
together as a user's afternoon strings them (tests/afternoon.py): a model, a new input
size, INT8 to a target, a load run and the What-if, a tune, a sweep, the demo LLM's
serving study, Save As, Quit. Both files pass integrity_check, every run ran the shape
the window showed, and Quit leaves no process behind."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("PySide6")
from pytestqt.qtbot import QtBot

from tests import afternoon
from tests.conftest import DEMO_TRANSFORMER, ROOT

DEMO_LLM = ROOT / "resources" / "models" / "demo_llm"


def test_an_afternoon_in_one_window_holds(
    qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.shell.workbench as workbench_mod
    from app.shell.workbench import Workbench

    if not (DEMO_LLM / "genai_config.json").is_file():
        pytest.skip("the demo LLM is built at set-up (make demo-llm)")
    quits: list[bool] = []
    monkeypatch.setattr(workbench_mod, "quit_app", lambda: quits.append(True))
    wb = Workbench(session_path=str(tmp_path / "afternoon.opscope"), usable=["cpu"])
    qtbot.addWidget(wb.window)
    wb.window.resize(1024, 700)
    wb.window.show()
    plan = afternoon.Plan(DEMO_TRANSFORMER, DEMO_LLM, tmp_path)

    def wait(cond, ms):  # type: ignore[no-untyped-def]
        qtbot.waitUntil(cond, timeout=ms)

    try:
        a = afternoon.run(wb, wait, plan, quit_app=wb.shutdown)
    finally:
        wb.shutdown()
    # where the time went, step by step (shown with -s, and on a failure)
    print("\n" + "\n".join(f"{s:7.1f} s  {name}: {outcome[:70]}" for name, s, outcome in a.steps))
    done = {name: outcome for name, _, outcome in a.steps}
    assert "x64, size set" in a.shown_shape
    assert "REAL run at poisson:100" in done["load run and What-if"]
    assert "best: trial" in done["tune 2 trials"]
    assert done["demo LLM serving study"].startswith("3 layouts")
    assert done["LLM trace with a prefix cache"].startswith("dropped: True; 3 layouts"), done
    assert "hit" in done["LLM trace with a prefix cache"], done
    assert done["memory"].startswith("measured on CPUExecutionProvider"), done["memory"]
    assert "nodes as run" in done["graph"] and done["graph"].endswith(
        "0 profiled node(s) missing; top node picked in the table: True"
    ), done["graph"]
    assert quits == [True]
    c = afternoon.checks(a)
    assert c["autosave integrity_check"] == "ok" and c["Save As copy integrity_check"] == "ok"
    kinds = c["runs by kind"]
    assert kinds.get("bench", 0) >= 2 and kinds.get("profile", 0) >= 2, kinds  # tune, sweep
    assert kinds.get("load", 0) == 1 and kinds.get("live", 0) >= 3, kinds
    assert c["runs at another shape than the window showed"] == []
    assert c["memory reports"] == 1
    # in the same file as the runs: the synthetic study, then the trace with a prefix cache
    assert c["LLM serving studies"] == [("simulate", 3), ("simulate", 3)]
    assert c["LLM studies' traffic and prefix cache"][1][0].startswith("trace:"), c
    assert c["LLM studies' traffic and prefix cache"][1][1] == 16, c
    assert c["processes left after Quit"] == [] and c["engine hosts alive after Quit"] == []
