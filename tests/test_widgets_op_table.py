"""OpTable: numeric sorting, filtering, op-type mode, selection through refreshes."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from engine.measure.op_stats import OpStat
from engine.measure.roofline import simple_roofs
from widgets.op_table import COL, COLUMNS, NAME_ROLE, SORT_ROLE, OpTable, human_bytes


def stat(
    name: str,
    op_type: str,
    time_ms: float,
    *,
    gbps: float | None = 1.0,
    flops: int | None = 1000,
    nbytes: int = 2_400_000,
    calls: int = 1,
) -> OpStat:
    return OpStat(
        name=name,
        op_type=op_type,
        provider="CPUExecutionProvider",
        calls=calls,
        time_ms=time_ms,
        p50_ms=time_ms,
        p99_ms=time_ms * 1.5,
        share=time_ms / 121.5,
        bytes=nbytes,
        gbps=gbps,
        flops=flops,
        gflops=None if flops is None else 2.0,
        intensity=None if flops is None else 0.5,
    )


NODES = [
    stat("/layer.0/attn/MatMul", "MatMul", 9.0),
    stat("/layer.0/attn/Softmax", "Softmax", 10.0),
    stat("/layer.1/mlp/MatMul", "MatMul", 100.0),
    stat("/layer.1/Add", "Add", 2.5, gbps=None, flops=None),
]
TYPES = [
    stat("MatMul", "MatMul", 109.0, calls=2),
    stat("Softmax", "Softmax", 10.0),
    stat("Add", "Add", 2.5, gbps=None, flops=None),
]


@pytest.fixture
def table(qtbot: QtBot) -> OpTable:
    widget = OpTable()
    qtbot.addWidget(widget)
    widget.resize(1000, 400)
    widget.show()
    widget.set_ops(NODES, TYPES)
    return widget


def shown(table: OpTable, column: str = "name") -> list[str]:
    proxy = table.proxy
    return [proxy.index(r, COL[column]).data() for r in range(proxy.rowCount())]


def test_default_sort_is_by_time_numerically(table: OpTable) -> None:
    # a text sort would give 9.000, 2.500, 100.000, 10.000
    assert shown(table, "time (ms)") == ["100.000", "10.000", "9.000", "2.500"]
    table.view.sortByColumn(COL["time (ms)"], Qt.SortOrder.AscendingOrder)
    assert shown(table, "time (ms)") == ["2.500", "9.000", "10.000", "100.000"]


def test_missing_values_show_a_dash_and_sort_last(table: OpTable) -> None:
    table.view.sortByColumn(COL["GB/s"], Qt.SortOrder.DescendingOrder)
    assert shown(table, "GB/s")[-1] == "–"
    assert shown(table, "GFLOP/s")[-1] == "–"
    assert shown(table, "FLOP/B")[-1] == "–"


def test_cells_are_formatted_and_sort_on_raw_values(table: OpTable) -> None:
    first = table.proxy.index(0, COL["bytes"])
    assert first.data() == "2.4 MB" and first.data(SORT_ROLE) == 2_400_000.0
    share = table.proxy.index(0, COL["share"])
    assert share.data() == "82.3%"
    assert human_bytes(950) == "950 B" and human_bytes(1234) == "1.23 kB"
    assert human_bytes(5.6e9) == "5.6 GB"


def test_top_three_by_time_stand_out(table: OpTable) -> None:
    fonts = [table.proxy.index(r, 0).data(Qt.ItemDataRole.FontRole) for r in range(4)]
    assert [f is not None and f.bold() for f in fonts] == [True, True, True, False]
    tint = table.proxy.index(0, 3).data(Qt.ItemDataRole.BackgroundRole)
    assert tint is not None
    assert table.proxy.index(3, 3).data(Qt.ItemDataRole.BackgroundRole) is None


def test_filter_matches_name_or_op_type_case_insensitively(table: OpTable) -> None:
    table.filter_edit.setText("matmul")
    assert sorted(shown(table)) == ["/layer.0/attn/MatMul", "/layer.1/mlp/MatMul"]
    table.filter_edit.setText("SOFTMAX")
    assert shown(table) == ["/layer.0/attn/Softmax"]
    table.filter_edit.setText("layer.1")
    assert shown(table) == ["/layer.1/mlp/MatMul", "/layer.1/Add"]
    assert "2 of 4 nodes" in table.summary_label.text()
    table.filter_edit.clear()
    assert len(shown(table)) == 4
    assert table.summary_label.text() == "4 nodes · total 121.500 ms"


def test_op_type_mode(table: OpTable) -> None:
    table.set_mode("per op type")
    assert shown(table) == ["MatMul", "Softmax", "Add"]
    assert table.view.isColumnHidden(COL["op type"])
    assert shown(table, "calls") == ["2", "1", "1"]
    assert table.summary_label.text().startswith("3 op types · 4 nodes")
    table.set_mode("per node")
    assert len(shown(table)) == 4 and not table.view.isColumnHidden(COL["op type"])


def test_selection_sort_and_filter_survive_a_refresh(table: OpTable, qtbot: QtBot) -> None:
    table.view.sortByColumn(COL["name"], Qt.SortOrder.AscendingOrder)
    table.filter_edit.setText("layer")
    assert table.select_op("/layer.1/mlp/MatMul")
    refreshed = [stat(s.name, s.op_type, s.time_ms * 2) for s in NODES]
    with qtbot.assertNotEmitted(table.op_selected):
        table.set_ops(refreshed, TYPES)
    assert table.selected_op() == "/layer.1/mlp/MatMul"
    assert table.filter_edit.text() == "layer"
    assert shown(table) == sorted(s.name for s in NODES)
    assert shown(table, "time (ms)")[0] == "18.000"  # the new numbers are shown
    # gone from the new data: nothing selected, nothing emitted
    table.set_ops([s for s in refreshed if "mlp" not in s.name], TYPES)
    assert table.selected_op() is None


def test_user_click_emits_op_selected(table: OpTable, qtbot: QtBot) -> None:
    index = table.proxy.index(1, COL["time (ms)"])  # second row by time: the Softmax
    rect = table.view.visualRect(index)
    with qtbot.waitSignal(table.op_selected, timeout=2000) as blocker:
        QTest.mouseClick(table.view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert blocker.args == ["/layer.0/attn/Softmax"]
    assert table.selected_op() == "/layer.0/attn/Softmax"


def test_select_op_is_programmatic_and_quiet(table: OpTable, qtbot: QtBot) -> None:
    with qtbot.assertNotEmitted(table.op_selected):
        assert table.select_op("/layer.1/Add")
    assert table.selected_op() == "/layer.1/Add"
    assert table.view.currentIndex().data(NAME_ROLE) == "/layer.1/Add"
    assert not table.select_op("no such node")
    table.filter_edit.setText("softmax")
    assert not table.select_op("/layer.1/Add")  # hidden by the filter


def test_header_tooltips_explain_each_metric(table: OpTable) -> None:
    tips = {
        c.title: table.model.headerData(i, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole)
        for i, c in enumerate(COLUMNS)
    }
    assert all(tips.values())
    assert "bandwidth" in tips["GB/s"] and "bytes" in tips["GB/s"]
    assert "intensity" in tips["FLOP/B"].lower()


def test_share_delegate_paints(table: OpTable, qtbot: QtBot) -> None:
    image = table.view.viewport().grab().toImage()
    rect = table.view.visualRect(table.proxy.index(0, COL["share"]))
    # the 82% bar: the left part of the top share cell is tinted, not the plain background
    bar = image.pixelColor(rect.left() + 10, rect.center().y())
    blank = image.pixelColor(rect.right() - 2, rect.top() + 1)
    assert bar != blank


def many(n: int, scale: float = 1.0) -> list[OpStat]:
    return [
        stat(f"/backbone/stage{i // 10}/block{i}/conv/Conv", "Conv", scale * (1 + (i * 7) % 13))
        for i in range(n)
    ]


def test_a_refresh_keeps_the_selected_row_in_place_and_both_scrolls(
    qtbot: QtBot,
) -> None:
    """A new pass re-sorts by the new times: the selected row stays selected and at the
    same height in the view, and the view does not jump back to the left."""
    table = OpTable()
    qtbot.addWidget(table)
    table.resize(520, 300)  # narrower than the columns: a horizontal scroll bar
    table.show()
    table.set_ops(many(60), [])
    name = "/backbone/stage3/block33/conv/Conv"
    assert table.select_op(name)
    table.view.horizontalScrollBar().setValue(table.view.horizontalScrollBar().maximum())
    hscroll = table.view.horizontalScrollBar().value()
    row = table.view.selectionModel().selectedRows()[0]
    top = table.view.visualRect(row).top()
    assert hscroll > 0
    refreshed = [stat(x.name, "Conv", 14.0 - x.time_ms) for x in many(60)]  # order reversed
    refreshed[33] = stat(name, "Conv", 7.05)  # and this row moves to the middle
    table.set_ops(refreshed, [])
    assert table.selected_op() == name
    row = table.view.selectionModel().selectedRows()[0]
    assert table.view.visualRect(row).top() == top
    assert table.view.horizontalScrollBar().value() == hscroll


def test_freeze_holds_new_passes_until_released(table: OpTable) -> None:
    table.freeze_button.setChecked(True)
    table.set_ops([stat(s.name, s.op_type, s.time_ms * 2) for s in NODES], TYPES)
    assert shown(table, "time (ms)")[0] == "100.000"  # the held pass is not shown yet
    assert "newer pass is waiting" in table.summary_label.text()
    table.freeze_button.setChecked(False)
    assert shown(table, "time (ms)")[0] == "200.000"
    assert "frozen" not in table.summary_label.text()


def test_names_elide_on_the_left_with_the_full_name_on_hover(table: OpTable) -> None:
    assert table.view.textElideMode() == Qt.TextElideMode.ElideLeft
    index = table.proxy.index(0, COL["name"])
    assert index.data(Qt.ItemDataRole.ToolTipRole).startswith("/layer.1/mlp/MatMul")
    assert table.proxy.index(0, COL["provider"]).data() == "CPU"


def test_time_column_is_in_view_at_1024_px(qtbot: QtBot) -> None:
    """The op table's share of a 1024 px window (its dock beside the roofline): time and
    share are still on screen."""
    table = OpTable()
    qtbot.addWidget(table)
    table.resize(512, 300)
    table.show()
    table.set_ops(NODES, TYPES)
    for title in ("name", "time (ms)", "share"):
        rect = table.view.visualRect(table.proxy.index(0, COL[title]))
        assert rect.right() <= table.view.viewport().width(), title


def test_bound_column_reads_the_roofs(table: OpTable) -> None:
    assert table.proxy.index(0, COL["bound"]).data() == "–"  # peaks not measured yet
    table.set_roofs(simple_roofs(10.0, 100.0))  # ridge 10 FLOP/B; stats: 0.5 FLOP/B, 2 GFLOP/s
    cell = table.proxy.index(0, COL["bound"])
    assert cell.data() == "DRAM 40%"  # 2 of the 5 GFLOP/s the bandwidth roof allows
    tip = cell.data(Qt.ItemDataRole.ToolTipRole)
    assert "below their ridge point" in tip and "streams from DRAM" in tip
    add = next(r for r in range(4) if table.proxy.index(r, 0).data() == "/layer.1/Add")
    assert table.proxy.index(add, COL["bound"]).data() == "overhead"  # no FLOPs, no GB/s


def test_ops_no_roof_explains_read_overhead() -> None:
    """A Reshape moves no data and a 3 us op at 1% of its roof is fixed per-op cost: the
    bound column says 'overhead', never 'L2 94%' or 'compute 2%', and the tip says why."""
    from widgets.models.op_rows import bound_text, bound_tip

    roofs = simple_roofs(10.0, 100.0)
    reshape = stat("/r", "Reshape", 0.003, gbps=154.0, flops=None)
    assert bound_text(reshape, roofs) == "overhead"
    assert "moves no data" in bound_tip(reshape, roofs)
    tiny = stat("/ln", "SkipLayerNormalization", 0.003, gbps=0.1, flops=None, nbytes=300)
    assert bound_text(tiny, roofs) == "overhead"
    tip = bound_tip(tiny, roofs)
    assert "fixed cost" in tip and "3 µs" in tip and "1%" in tip
    slow = stat("/big", "SkipLayerNormalization", 30.0, gbps=0.1, flops=None)
    assert bound_text(slow, roofs) == "DRAM 1%"  # slow for 30 ms: a finding, not overhead


def test_provisional_roofs_are_said_in_every_bound_tip() -> None:
    import dataclasses

    from widgets.models.op_rows import bound_tip

    why = "measured busy (other processes used 1.90 of 2 CPUs over 6.0 s)"
    roofs = dataclasses.replace(simple_roofs(10.0, 100.0), caveat=why)
    tip = bound_tip(stat("/mm", "MatMul", 1.0), roofs)
    assert tip.endswith(f"These roofs are PROVISIONAL: {why}.")
    assert "PROVISIONAL" not in bound_tip(stat("/mm", "MatMul", 1.0), simple_roofs(10.0, 100.0))


def test_ops_above_their_roof_say_so() -> None:
    """An op at 3x what the roofs allow: never 'DRAM 308%', and the tip says why."""
    from widgets.models.op_rows import bound_text, bound_tip

    fast = stat("conv_q", "QLinearConv", 1.0)  # 0.5 FLOP/B at 2 GFLOP/s
    roofs = simple_roofs(1.3, 100.0)  # the bandwidth roof allows 0.65 GFLOP/s at 0.5 FLOP/B
    assert bound_text(fast, roofs) == "DRAM >roof"
    tip = bound_tip(fast, roofs)
    assert "busier machine" in tip and "3.08x" in tip


def test_header_explains_profiler_overhead(table: OpTable) -> None:
    """19.9 ms of node time covering 95% of profiled runs that were 2x the timed ones."""
    from widgets.models.op_rows import overhead_note

    nodes = [stat("a", "Conv", 12.0), stat("b", "Conv", 7.9)]
    note = overhead_note(nodes, coverage=0.95, overhead=1.05)
    assert note.startswith("profiled total 19.9 ms vs timed mean 10.2 ms")
    assert "profiler adds per-op overhead" in note
    assert overhead_note(nodes, None, None) == ""
    table.set_ops(nodes, [], coverage=0.95, overhead=1.05)
    assert "timed mean 10.2 ms" in table.summary_label.text()
