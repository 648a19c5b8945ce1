"""The graph view as a user reads it (issue 53): Fit gives a readable view of a long graph,
Ctrl+F finds nodes inside collapsed repeats and says when nothing matches, the picked
node's properties in a side panel, tensor shapes on the edges, a hover tooltip, and node
counts that match the configuration's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("PySide6")
from PySide6.QtCore import QEvent, QPointF
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import QApplication, QToolTip
from pytestqt.qtbot import QtBot

from engine.events import drive
from engine.model.info import load_model
from engine.model.workload import Workload
from engine.run.graph_job import GraphRequest, graph_job
from tests.conftest import DEMO_TRANSFORMER
from widgets.graph_canvas import LABEL_LOD
from widgets.graph_view import GraphView

_RESULT: dict[str, Any] = {}


def _result() -> dict[str, Any]:
    """The demo transformer's graph as loaded (4 repeated layers), once per session."""
    if not _RESULT:
        req = GraphRequest(Workload(str(DEMO_TRANSFORMER)), as_run=False)
        _RESULT.update(drive(graph_job(req), lambda _: None))
    return _RESULT


def _view(qtbot: QtBot, size: tuple[int, int] = (1000, 700)) -> GraphView:
    view = GraphView()
    qtbot.addWidget(view)
    view.resize(*size)
    view.show()
    view.set_result(_result())
    QApplication.processEvents()
    return view


def test_fit_gives_a_readable_view_of_a_long_graph(qtbot: QtBot) -> None:
    view = _view(qtbot)
    canvas = view.canvas
    canvas.zoom(0.5)
    canvas.zoom(0.5)
    view.fit_button.click()  # was: the whole graph, a thin column of unreadable boxes
    assert canvas.transform().m11() >= LABEL_LOD
    seen = canvas.mapToScene(canvas.viewport().rect()).boundingRect()
    rect = canvas.scene().sceneRect()
    assert seen.top() <= rect.top() + 1  # from its top
    assert seen.width() >= min(rect.width(), seen.width())  # its width in view
    canvas.zoom(0.5)
    canvas.setFocus()
    qtbot.keyClick(canvas, "F")  # type: ignore[no-untyped-call]  # the key does the same
    assert canvas.transform().m11() >= LABEL_LOD


def test_find_reaches_inside_collapsed_repeats_and_says_when_nothing_matches(
    qtbot: QtBot,
) -> None:
    view = _view(qtbot)
    view.collapse_box.setChecked(True)
    assert view.scene_ is not None and view.scene_.collapsed
    inner = next(
        n["name"]
        for n in _result()["views"]["loaded"]["nodes"]
        if n["name"] not in view.canvas.items_by_name and n["op"] == "Softmax"
    )
    view.search.setText(inner)
    assert view.found and view.found[0] == inner  # the view expanded to show it
    assert inner in view.canvas.items_by_name
    assert view.find_note.text() == f"{len(view.found)} found"
    view.search.setText("no-such-node-anywhere")
    assert view.found == [] and view.find_note.text().startswith("no match for")
    # when only the collapsed form exists (a large graph), the blocks holding it are found
    result = dict(_result())
    loaded = dict(result["views"]["loaded"], layout=None)
    result["views"] = {"loaded": loaded}
    view.search.clear()
    view.set_result(result)
    assert view.scene_ is not None and view.scene_.collapsed
    view.search.setText("Softmax")
    assert view.found and all(view.scene_.block_of(n) is None for n in view.found)
    assert all(n in view.canvas.items_by_name for n in view.found)
    assert view.find_note.text().endswith("found")


def test_the_picked_node_shows_its_properties_and_edges_their_shapes(qtbot: QtBot) -> None:
    from widgets.graph_view import short_shape

    view = _view(qtbot)
    view.collapse_box.setChecked(False)
    nodes = _result()["views"]["loaded"]["nodes"]
    mm = next(n for n in nodes if n["op"] == "MatMul" and n["weights"])
    view._clicked(mm["name"])
    text = view.props.toPlainText()
    assert text.startswith(f"MatMul  {mm['name']}")
    tensors = _result()["views"]["loaded"]["tensors"]
    w = mm["weights"][0]
    dtype, shape = tensors[w]
    assert f"{w}: {dtype}[{'x'.join(str(d) for d in shape)}]" in text  # weights, shapes
    assert "out  " in text and "in   " in text
    # shapes on the edges, where known
    labels = view.canvas.edge_labels
    assert labels is not None and labels.labels
    known = {short_shape(s) for _d, s in tensors.values() if s is not None}
    assert all(t in known for _x, _y, t in labels.labels)
    assert short_shape(["batch_size_of_a_long_name", 128]) == "batch_s…×128"
    assert short_shape([]) == "scalar"


def test_hovering_a_node_shows_its_tooltip(qtbot: QtBot) -> None:
    view = _view(qtbot)
    canvas = view.canvas
    name = next(n for n in canvas.items_by_name if n in view.scene_.facts)  # type: ignore[union-attr]
    canvas.centre_on(name)
    pos = canvas.mapFromScene(canvas.items_by_name[name].box.center())
    assert canvas.name_at(QPointF(pos)) == name
    event = QHelpEvent(QEvent.Type.ToolTip, pos, canvas.viewport().mapToGlobal(pos))
    QApplication.sendEvent(canvas.viewport(), event)
    qtbot.waitUntil(QToolTip.isVisible, timeout=3000)
    assert name in QToolTip.text()


def test_node_counts_say_what_the_configuration_counts() -> None:
    from app.graph.controller import node_counts

    r = _result()
    _model, info = load_model(str(DEMO_TRANSFORMER))
    text = node_counts(r["views"])
    # the configuration line counts the model's nodes; the view draws input and output
    # boxes besides, and says so
    assert text.startswith(f"{info.nodes} nodes as loaded")
    n_io = len(info.inputs) + len(info.outputs)
    assert f"drawn besides: {n_io} input/output boxes" in text


def test_screenshots_of_the_view_at_both_window_sizes(qtbot: QtBot, tmp_path: Path) -> None:
    for w, h in ((1600, 1000), (1024, 700)):
        view = _view(qtbot, (w, h))
        view.fit_button.click()
        shot = tmp_path / f"graph_{w}.png"
        assert view.grab().save(str(shot))
        assert view.canvas.transform().m11() >= LABEL_LOD
        assert view.props.width() > 0 and view.canvas.width() > view.props.width()
        view.close()


def test_the_configuration_says_what_its_node_count_counts(qtbot: QtBot) -> None:
    from app.shell.main_window import MainWindow

    win = MainWindow(["cpu"])
    qtbot.addWidget(win)
    assert "input and output boxes" in win.variant_label.toolTip()
