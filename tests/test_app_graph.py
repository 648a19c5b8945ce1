"""The Graph dock in the whole window: the graph job run through the one runner when the
dock comes into view (live timing paused and resumed), the live profile painted on the
nodes, a node picked in the graph picked in the op table and back, fusion outlined in the
view as loaded, and the exports (SVG, Model Explorer node data) written whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("PySide6")
from PySide6.QtCore import QPointF, Qt
from pytestqt.qtbot import QtBot

from app.graph.controller import GraphController
from app.shell.workbench import Workbench
from tests.conftest import DEMO_TRANSFORMER

TIMEOUT_MS = 120_000


def test_the_graph_dock_draws_the_model_shown_with_its_live_figures(
    qtbot: QtBot, tmp_path: Path
) -> None:
    wb = Workbench(session_path=str(tmp_path / "g.opscope"), usable=["cpu"])
    qtbot.addWidget(wb.window)
    wb.window.show()
    wb.start(str(DEMO_TRANSFORMER))
    graph = wb.room(GraphController)
    dock = graph.view
    view = dock.view
    try:
        qtbot.waitUntil(lambda: wb.controller.samples > 20, timeout=TIMEOUT_MS)
        wb.window.dock("Graph").raise_()
        # the graph as loaded is drawn first (#53), then the whole result
        qtbot.waitUntil(lambda: view.result is not None and not graph.running, timeout=TIMEOUT_MS)
        assert view.scene_ is not None and view.scene_.kind == "run"
        assert dock.status.text().endswith("on CPUExecutionProvider"), dock.status.text()
        qtbot.waitUntil(lambda: wb.running, timeout=5_000)  # resumed after the layout
        # the live profile on the nodes: every node it timed has a colour and a share
        qtbot.waitUntil(lambda: bool(wb.controller.last_profile), timeout=TIMEOUT_MS)
        qtbot.waitUntil(lambda: bool(view.painted.colors), timeout=TIMEOUT_MS)
        profiled = {s.name for s in wb.controller.last_profile.ops}
        drawn = set(view.canvas.items_by_name)
        assert profiled <= drawn, profiled - drawn  # the profile names the graph as run
        top = max(wb.controller.last_profile.ops, key=lambda s: s.share)
        assert view.painted.values[top.name] == f"{top.share:.1%}"

        # the op table's memory columns, from the graph as run
        from widgets.op_table_model import COL

        model = wb.window.op_table.model
        row = model.row_of(top.name)
        assert model.data(model.index(row, COL["out"])).endswith("B")
        assert model.data(model.index(row, COL["weights"])).endswith("B")

        # picked in the graph: its op table row; picked in the table: the graph's node
        item = view.canvas.items_by_name[top.name]
        view.canvas.centre_on(top.name)
        pos = view.canvas.mapFromScene(item.box.center())
        assert view.canvas.name_at(QPointF(pos)) == top.name
        qtbot.mouseClick(view.canvas.viewport(), Qt.MouseButton.LeftButton, pos=pos)
        assert view.picked == top.name
        assert wb.window.op_table.selected_op() == top.name
        other = next(s.name for s in wb.controller.last_profile.ops if s.name != top.name)
        table = wb.window.op_table
        row = table.proxy.mapFromSource(table.model.index(table.model.row_of(other), 0)).row()
        table.view.selectRow(row)  # as a user's click on the row
        assert view.picked == other

        # the memory strip: one step per node as it ran, its peak, a click picks the node
        strip = view.strip
        assert strip.isVisible() and strip.summary.startswith("activations: peak")
        assert set(strip.names) <= drawn and top.name in strip.names
        view._strip_picked(strip.names[0])
        assert view.picked == strip.names[0]
        assert wb.window.op_table.selected_op() in (strip.names[0], None)
        view.overlay_combo.setCurrentText("weight bytes")
        assert any(v.endswith("B") for v in view.painted.values.values())
        view.overlay_combo.setCurrentText("time share")

        # the view as loaded: a fused node's origins outlined with it
        fused = {k: v for k, v in view.result["fused"].items() if v}
        assert fused, "the demo transformer is fused by ONNX Runtime"
        view.view_combo.setCurrentText("as loaded")
        run_node, origins = next(iter(fused.items()))
        assert view.select_node(run_node)
        assert view.picked == origins[-1] and set(view._group(view.picked)) == set(origins)
        tip = view._tip(origins[0])
        assert origins[0] in tip and "in " in tip

        # hover text and search
        assert "out " in view._tip(top.name) or view.view_combo.currentText() == "as loaded"
        view.search.setText("MatMul")
        assert view.found and all("matmul" in n.lower() or "MatMul" in
                                  view.scene_.facts[n]["op"] for n in view.found)  # fmt: skip

        # exports, written whole
        svg, explorer = tmp_path / "g.svg", tmp_path / "g.json"
        graph.save_image(str(svg))
        assert svg.read_text().startswith("<?xml") and "</svg>" in svg.read_text()
        view.overlay_combo.setCurrentText("time share")
        graph.save_explorer(str(explorer))
        data = json.loads(explorer.read_text())
        (laid,) = data.values()
        assert laid["results"] and all("value" in r for r in laid["results"].values())
        assert "gradient" in laid
        assert not list(tmp_path.glob(".*part*"))

        # FP32 against INT8: their graphs as run differ, so the change overlay compares
        # them on the model as loaded, each through the node that replaced it
        panel = wb.window.config_panel
        panel.precision.setCurrentIndex(panel.precision.findData("int8-dynamic"))
        qtbot.waitUntil(
            lambda: (
                view.result is not None
                and view.result["config"]["precision"] == "int8-dynamic"
                and not graph.running
            ),
            timeout=TIMEOUT_MS,
        )
        before = wb.controller.last_profile
        wb.client.profile_now()  # as Run > Profile Now: the INT8 run's operators
        qtbot.waitUntil(
            lambda: (
                wb.controller.last_profile is not before
                and any(
                    view.result["views"]["run"]["precision"].get(s.name) == "INT8"
                    for s in wb.controller.last_profile.ops
                )
            ),
            timeout=TIMEOUT_MS,
        )
        graph.refresh_runs()
        fp32 = next(
            i for i in range(dock.compare.count()) if "fp32" in dock.compare.itemText(i).lower()
        )
        picked = dock.compare.itemText(fp32)  # as every run picker: id, kind, model, inputs
        assert picked.startswith("run ") and " · live · " in picked and ".onnx" in picked
        dock.compare.setCurrentIndex(fp32)
        dock.compare.activated.emit(fp32)  # as the user's pick
        qtbot.waitUntil(
            lambda: dock.status.text().startswith("compared with run"), timeout=TIMEOUT_MS
        )
        assert view.view_combo.currentText() == "as loaded"
        assert view.overlay_combo.currentText() == "change"
        ratios = [v for v in view.painted.values.values() if v.endswith("x")]
        assert len(ratios) > 10, view.painted.values  # MatMuls matched across the two graphs

    finally:
        wb.shutdown()
