"""Issue 53: at 1024x700 the status bar's "machine BUSY ..." tail was cut off. The rate
is said in the longest wording that fits its width (the whole line at 1600 px, a shorter
one at 1024 px that still says p50, p99 and BUSY), the whole line in its tooltip. No
engine is started."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
from pytestqt.qtbot import QtBot

from app.shell.workbench import Workbench
from engine.api import Contention

BUSY = Contention(window_s=1.0, cpus=2, others_cpu=1.7, steal=0.0, own_cpu=1.0)
STATS = {"count": 200, "segment": 5000, "p50": 3.1416, "p99": 3.7071, "span_s": 0.634,
         "samples_per_s": 313.72, "unit": "inference"}  # fmt: skip
WHOLE = (
    "p50 3.14 ms · p99 3.71 ms over the last 200 inferences (634 ms) · 313.7 samples/s · "
    "machine BUSY (others 1.7 CPUs)"
)


@pytest.fixture
def wb(first_start: Workbench) -> Workbench:
    return first_start


def busy_status(wb: Workbench, qtbot: QtBot, size: tuple[int, int]) -> str:
    """The status bar at `size` with the figures of a busy machine; the rate as painted."""
    w = wb.window
    w.resize(*size)
    w.show()
    qtbot.waitUntil(w.isVisible)
    w.latency.shown_stats = dict(STATS)
    wb.controller.contention = BUSY
    wb.controller.model_name = "model.onnx"
    wb.update_status()
    qtbot.wait(100)
    label = w.status_rate
    assert label.text() == WHOLE
    shown = getattr(label, "shown_text", label.text)()  # what is painted
    width = label.fontMetrics().horizontalAdvance(shown)
    assert width <= label.contentsRect().width(), (shown, width, label.contentsRect().width())
    assert WHOLE in label.toolTip()  # nothing lost: the whole line on hover
    return str(shown)


def test_the_busy_rate_fits_1024_px(wb: Workbench, qtbot: QtBot) -> None:
    shown = busy_status(wb, qtbot, (1024, 700))
    assert "p50 3.14" in shown and "p99 3.71" in shown and "BUSY" in shown


def test_the_whole_rate_shows_at_1600_px(wb: Workbench, qtbot: QtBot) -> None:
    assert busy_status(wb, qtbot, (1600, 1000)) == WHOLE


def test_the_wordings_keep_the_figures_and_the_load() -> None:
    """Qt-free: each shorter wording keeps p50, p99 and BUSY; quiet, no BUSY; none yet."""
    from widgets.models.status_rate import rate_wordings

    wordings = rate_wordings(STATS, BUSY)
    assert wordings[0] == WHOLE
    assert [len(t) for t in wordings] == sorted((len(t) for t in wordings), reverse=True)
    for text in wordings:
        assert "p50 3.14" in text and "p99 3.71" in text and "BUSY" in text
    quiet = Contention(window_s=1.0, cpus=2, others_cpu=0.0, steal=0.0, own_cpu=1.0)
    assert all("BUSY" not in t for t in rate_wordings(STATS, quiet))
    assert rate_wordings({"count": 0}, BUSY) == ("waiting for samples…",)


def test_no_model_waits_for_no_samples(wb: Workbench) -> None:
    """A failed load leaves no model: the bar said "no model ... waiting for samples…"."""
    wb.controller.model_name = ""
    wb.update_status()
    assert wb.window.status_model.text() == "no model"
    assert "waiting" not in wb.window.status_rate.text()
    wb.controller.model_name = "model.onnx"
    wb.update_status()
    assert wb.window.status_rate.text() == "waiting for samples…"
