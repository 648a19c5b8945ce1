"""Issue 53: at 1600x1000 the LLM Serving dock's bar chart sat below its table, out of
view until the dock was scrolled; at 1024x700 both were. The table (its header and the
three layouts) and the chart lie whole in the dock's visible area at both sizes, the form
scrolling inside its own share instead. No engine is started."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QDockWidget, QScrollArea, QWidget
from pytestqt.qtbot import QtBot

from app.llm_serving.controller import LLMServingController
from app.llm_serving.view import LLMServingPanel
from app.shell.workbench import Workbench
from tests.conftest import DEMO_LLM

SIZES = ((1600, 1000), (1024, 700))
STATUS = (
    "simulated 8 requests in 5.2 s · simulated p99 within the SLOs: colocated ×2, chunked "
    "128 ×2 · best goodput colocated ×2 (28.88/s, 100%) · served in fp32 · LLM calibration "
    "from 2026-12-06 19:48, reused (15 points; repeat spread up to 599% (prefill 16))"
)


@pytest.fixture
def wb(first_start: Workbench) -> Workbench:
    if not (DEMO_LLM / "genai_config.json").is_file():
        pytest.skip("the demo LLM is built at set-up (make demo-llm)")
    return first_start  # a first start: no saved layout


def shown_dock(wb: Workbench, qtbot: QtBot, size: tuple[int, int]) -> LLMServingPanel:
    """The window at `size` as a generating model opens it: the dock raised, the status
    line long (a real simulation's)."""
    w = wb.window
    w.resize(*size)
    w.show()
    qtbot.waitUntil(w.isVisible)
    w.show_generation(True)
    controller = wb.room(LLMServingController)
    controller.model_changed(str(DEMO_LLM))
    w.dock("LLM Serving").raise_()
    view = controller.view
    assert isinstance(view, LLMServingPanel)
    view.set_status(STATUS)
    qtbot.wait(150)
    return view


def visible_area(widget: QWidget) -> tuple[QWidget, QRect]:
    """The viewport of the dock's scroll area that `widget` sits in, and its rect."""
    area = widget.parentWidget()
    while area is not None and not (
        isinstance(area, QScrollArea) and isinstance(area.parentWidget(), QDockWidget)
    ):
        area = area.parentWidget()
    assert isinstance(area, QScrollArea)
    return area.viewport(), area.viewport().rect()


def in_view(widget: QWidget, height: int | None = None) -> None:
    """`widget` (or its top `height` px) lies whole inside the dock's visible area."""
    viewport, shown = visible_area(widget)
    top_left = widget.mapTo(viewport, QPoint(0, 0))
    rect = QRect(top_left, widget.size())
    if height is not None:
        rect.setHeight(height)
    assert widget.isVisible() and shown.contains(rect), (type(widget).__name__, rect, shown)


@pytest.mark.parametrize("size", SIZES)
def test_the_table_and_the_chart_are_both_in_view(
    wb: Workbench, qtbot: QtBot, size: tuple[int, int]
) -> None:
    view = shown_dock(wb, qtbot, size)
    rows = view.table.verticalHeader().defaultSectionSize()
    header = view.table.horizontalHeader().height()
    assert view.table.height() >= header + 3 * rows  # the three layouts' rows
    in_view(view.table, header + 3 * rows)
    in_view(view.plot)
    assert view.plot.width() >= 250 and view.plot.height() >= 140
    # the table's first columns (the layout and its TTFT) are not scrolled off either
    assert view.table.viewport().width() >= 200
    # the buttons in view too; the settings and the status scroll in their own share
    for button in (view.simulate_button, view.real_button):
        in_view(button)
    form = view.status.parentWidget()
    while form is not None and not isinstance(form, QScrollArea):
        form = form.parentWidget()
    assert isinstance(form, QScrollArea) and view.isAncestorOf(form)
    assert form.height() >= 60


def test_the_form_and_results_share_a_splitter_with_sane_sizes(wb: Workbench, qtbot: QtBot) -> None:
    """At 1600x1000 the dock is about 700 px wide: the form above the results, the results
    side by side; each part keeps a usable share."""
    view = shown_dock(wb, qtbot, SIZES[0])
    sizes = view.sides.sizes()
    assert len(sizes) == 2 and min(sizes) >= 60, sizes
    results = view.results.sizes()
    assert len(results) == 2 and min(results) >= 140, results


def test_the_arrangement_follows_the_docks_shape() -> None:
    """Qt-free: a short dock puts the chart beside the table, a tall one under it; a
    narrow dock puts the form above the results, a wide one beside them."""
    from widgets.models.llm_serving_arrangement import arrange

    kw = {"table_min": 138, "chart_min": (280, 150), "handle": 4, "form_width": 240}
    bottom_1600 = arrange(700, 358, form_min=100, **kw)  # type: ignore[arg-type]
    assert bottom_1600.sides_vertical and not bottom_1600.results_vertical
    assert bottom_1600.sides[1] >= 150 and bottom_1600.sides[0] >= 100
    assert bottom_1600.results[1] >= 280 and sum(bottom_1600.results) + 4 <= 700
    bottom_1024 = arrange(1010, 160, form_min=100, **kw)  # type: ignore[arg-type]
    assert not bottom_1024.sides_vertical and not bottom_1024.results_vertical
    assert sum(bottom_1024.sides) + 4 <= 1010 and bottom_1024.sides[0] >= 240
    tall = arrange(1200, 700, **kw)  # type: ignore[arg-type]
    assert not tall.sides_vertical and tall.results_vertical
    assert tall.results[0] >= 138 and tall.results[1] >= 150
    narrow = arrange(400, 800, **kw)  # type: ignore[arg-type]
    assert narrow.sides_vertical and narrow.results_vertical
