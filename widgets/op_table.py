"""Per-operator table: time, share, bound, bandwidth, FLOP rate and intensity of each node
or op type.

The model and its columns live in widgets/op_table_model.py. Refreshing keeps sort,
filter, selection (at the same height in the view) and both scrolls; Freeze holds a pass
while it is read; the header says how profiled time compares with timed latency.
"""

from __future__ import annotations

from PySide6.QtCore import QItemSelectionModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from engine.api import Contention, OpStat, Roofs
from widgets.models.op_rows import overhead_note
from widgets.op_table_model import (
    COL,
    COLUMN_CHARS,
    COLUMNS,
    NAME_ROLE,
    SHARE_COL,
    SORT_ROLE,
    OpFilterProxy,
    OpTableModel,
    human_bytes,
)
from widgets.share_bar import ShareBarDelegate

__all__ = ["COL", "COLUMNS", "NAME_ROLE", "SORT_ROLE", "OpTable", "OpTableModel", "human_bytes"]


class ElideRightDelegate(QStyledItemDelegate):
    """Op types keep their start ("SkipLayerNorm…"): the view elides names on the left."""

    def initStyleOption(
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        super().initStyleOption(option, index)
        option.textElideMode = Qt.TextElideMode.ElideRight


class OpTable(QWidget):
    """Filterable, sortable per-node / per-op-type view of one profiling pass."""

    op_selected = Signal(str)  # the row's name (node name, or op type per op type); user only
    selection_shown = Signal(str)  # the selected row's name, "" for none; after any change
    phase_changed = Signal(str)  # a generating model's phase picked (prefill, decode)

    MODES = ("per node", "per op type")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._nodes: list[OpStat] = []
        self._op_types: list[OpStat] = []
        self._quiet = False  # True while selection changes are ours, not the user's
        self._held: tuple[list[OpStat], list[OpStat]] | None = None  # data while frozen
        self._held_overhead = ""
        self._overhead = ""  # the header's word on profiler overhead
        self._pass_info = ""  # how many inferences the pass profiled, what it covered

        self.model = OpTableModel(self)
        self.proxy = OpFilterProxy(self)
        self.proxy.setSourceModel(self.model)

        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter by name or op type")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.textChanged.connect(self._on_filter)
        self.mode_combo = QComboBox()
        self.mode_combo.addItems(self.MODES)
        self.mode_combo.setToolTip("One row per graph node, or one per op type (summed)")
        self.mode_combo.currentIndexChanged.connect(self._show_mode)
        self.summary_label = QLabel()
        self.summary_label.setWordWrap(True)
        self.freeze_button = QToolButton()
        self.freeze_button.setText("Freeze")
        self.freeze_button.setCheckable(True)
        self.freeze_button.setToolTip(
            "Hold this pass's numbers while you read them: new profiling passes wait until "
            "you release it (selection, sort and scroll are kept across passes anyway)"
        )
        self.freeze_button.toggled.connect(self._freeze_toggled)
        self.phase_combo = QComboBox()  # shown for a generating model's phases
        self.phase_combo.setToolTip(
            "A generating model's phase: prefill (the prompt in one pass) or decode (one "
            "token per pass), profiled apart"
        )
        self.phase_combo.hide()
        self.phase_combo.currentTextChanged.connect(self._phase_picked)

        self.view = QTableView()
        self.view.setModel(self.proxy)
        self.view.setSortingEnabled(True)
        self.view.sortByColumn(COL["time (ms)"], Qt.SortOrder.DescendingOrder)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.view.setAlternatingRowColors(True)
        self.view.setWordWrap(False)
        self.view.setTextElideMode(Qt.TextElideMode.ElideLeft)  # a node's own name is last
        self.view.verticalHeader().hide()
        self.view.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        self.view.setItemDelegateForColumn(SHARE_COL, ShareBarDelegate(self.view))
        header = self.view.horizontalHeader()
        # Fixed widths (the user may drag them): the name no longer stretches, so time and
        # share, right after it, stay in view however the dock is resized (at 1024 px too)
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        char = self.fontMetrics().horizontalAdvance("0")
        for title, chars in COLUMN_CHARS.items():
            self.view.setColumnWidth(COL[title], chars * char)
        self._name_min = COLUMN_CHARS["name"] * char
        self._name_dragged = False  # the user set the name's width: leave it
        header.sectionResized.connect(self._section_resized)
        self.view.setItemDelegateForColumn(COL["op type"], ElideRightDelegate(self.view))
        self.view.selectionModel().selectionChanged.connect(self._on_selection)

        bar = QHBoxLayout()
        bar.addWidget(self.filter_edit, 1)
        bar.addWidget(self.phase_combo)
        bar.addWidget(self.mode_combo)
        bar.addWidget(self.freeze_button)
        layout = QVBoxLayout()
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.summary_label)
        layout.addWidget(self.view, 1)
        self.setLayout(layout)
        self._update_summary()

    # ------------------------------------------------------------------------------- API
    def set_fp32_nodes(self, names: list[str]) -> None:
        """Mark the nodes an INT8 variant kept in FP32 ([FP32] after the name)."""
        self.model.set_fp32_nodes(set(names))

    def set_ops(
        self,
        nodes: list[OpStat],
        op_types: list[OpStat],
        coverage: float | None = None,
        overhead: float | None = None,
        contention: Contention | None = None,
    ) -> None:
        """New data (a profiling pass); keeps sort, filter, selection (by name, at the same
        height in the view) and both scroll positions. Held while frozen. `coverage` and
        `overhead` (an OpProfile's) let the header say how profiled time compares with
        timed latency; `contention`, that the pass ran on a busy machine."""
        note = overhead_note(nodes, coverage, overhead, contention)
        if self.frozen:
            self._held = (list(nodes), list(op_types))
            self._held_overhead = note
            self._update_summary()
            return
        self._nodes, self._op_types = list(nodes), list(op_types)
        self._overhead = note
        self._show_mode()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_name()

    def _fit_name(self) -> None:
        """The name takes the width the other columns leave (never below its minimum), so
        a wide window shows whole names and a narrow one keeps time and share in view."""
        if self._name_dragged:
            return
        name = COL["name"]
        others = sum(
            self.view.columnWidth(c)
            for c in range(len(COLUMNS))
            if c != name and not self.view.isColumnHidden(c)
        )
        width = max(self._name_min, self.view.viewport().width() - others)
        self._fitting = True
        try:
            self.view.setColumnWidth(name, width)
        finally:
            self._fitting = False

    def _section_resized(self, index: int, _old: int, _new: int) -> None:
        if index == COL["name"] and not getattr(self, "_fitting", False):
            self._name_dragged = True  # the user dragged it
        elif index != COL["name"] and not getattr(self, "_fitting", False):
            self._fit_name()

    def set_pass_info(self, text: str) -> None:
        """'20 profiled inferences, 97% of run time covered', after the totals."""
        self._pass_info = text
        self._update_summary()

    def set_roofs(self, roofs: Roofs | None) -> None:
        """The machine's roofs, for the bound column."""
        self.model.set_roofs(roofs)

    def set_node_memory(self, memory: dict[str, tuple[float | None, float | None]]) -> None:
        """Each node's output and weight bytes (the graph as run), for the out and weights
        columns."""
        self.model.set_node_memory(memory)

    @property
    def frozen(self) -> bool:
        return self.freeze_button.isChecked()

    def _freeze_toggled(self, on: bool) -> None:
        if not on and self._held is not None:
            (nodes, types), self._held = self._held, None
            self._nodes, self._op_types = nodes, types
            self._overhead = self._held_overhead
            self._show_mode()
        self._update_summary()

    def set_phases(self, names: list[str]) -> None:
        """The phases to pick from (none: the picker hides); the current one is kept."""
        current = self.phase
        self.phase_combo.blockSignals(True)
        try:
            self.phase_combo.clear()
            self.phase_combo.addItems(names)
            if current in names:
                self.phase_combo.setCurrentText(current)
            elif "decode" in names:
                self.phase_combo.setCurrentText("decode")
        finally:
            self.phase_combo.blockSignals(False)
        self.phase_combo.setVisible(bool(names))

    @property
    def phase(self) -> str | None:
        return self.phase_combo.currentText() or None if self.phase_combo.count() else None

    def _phase_picked(self, name: str) -> None:
        if name:
            self.phase_changed.emit(name)

    def select_op(self, name: str) -> bool:
        """Select and reveal the row called `name` (quietly: no op_selected). False when it
        is not shown (another mode, or hidden by the filter)."""
        if not self._select_quietly(name):
            return False
        self.view.scrollTo(self.proxy.mapFromSource(self.model.index(self.model.row_of(name), 0)))
        return True

    def _select_quietly(self, name: str) -> bool:
        row = self.model.row_of(name)
        proxy_index = self.proxy.mapFromSource(self.model.index(row, 0)) if row >= 0 else None
        if proxy_index is None or not proxy_index.isValid():
            return False
        self._quiet = True
        try:
            self.view.selectionModel().select(
                proxy_index,
                QItemSelectionModel.SelectionFlag.ClearAndSelect
                | QItemSelectionModel.SelectionFlag.Rows,
            )
            self.view.setCurrentIndex(proxy_index)
        finally:
            self._quiet = False
        return True

    def selected_op(self) -> str | None:
        rows = self.view.selectionModel().selectedRows()
        return str(rows[0].data(NAME_ROLE)) if rows else None

    @property
    def mode(self) -> str:
        return self.MODES[self.mode_combo.currentIndex()]

    def set_mode(self, mode: str) -> None:
        self.mode_combo.setCurrentIndex(self.MODES.index(mode))

    # ----------------------------------------------------------------------------- internals
    def _show_mode(self, *_: object) -> None:
        selected = self.selected_op()
        scroll = self.view.verticalScrollBar().value()
        hscroll = self.view.horizontalScrollBar().value()
        current = self.view.selectionModel().selectedRows()
        height = self.view.visualRect(current[0]).top() if current else None
        per_type = self.mode == "per op type"
        self._quiet = True
        try:
            self.model.set_rows(self._op_types if per_type else self._nodes)
        finally:
            self._quiet = False
        self.view.setColumnHidden(COL["op type"], per_type)
        kept = selected is not None and self._select_quietly(selected)
        self.view.verticalScrollBar().setValue(scroll)
        if kept and height is not None:  # the selected row stays where the eye left it
            rows = self.view.selectionModel().selectedRows()
            if rows:
                moved = self.view.visualRect(rows[0]).top() - height
                bar = self.view.verticalScrollBar()
                bar.setValue(bar.value() + moved // max(1, self.view.rowHeight(0)))
        self.view.horizontalScrollBar().setValue(hscroll)
        self._update_summary()
        self.selection_shown.emit(self.selected_op() or "")

    def _on_filter(self, text: str) -> None:
        self.proxy.set_needle(text)
        self._update_summary()
        self.selection_shown.emit(self.selected_op() or "")

    def _on_selection(self, *_: object) -> None:
        if self._quiet:
            return
        name = self.selected_op()
        if name is not None:
            self.op_selected.emit(name)
        self.selection_shown.emit(name or "")

    def _update_summary(self) -> None:
        total = sum(s.time_ms for s in self._nodes)
        nodes = len(self._nodes)
        shown = self.proxy.rowCount()
        what = "op types" if self.mode == "per op type" else "nodes"
        if self.mode == "per op type":
            head = f"{len(self._op_types)} op types · {nodes} nodes"
        else:
            head = f"{nodes} nodes"
        if self.proxy.rowCount() != self.model.rowCount():
            visible = sum(
                float(self.proxy.index(r, COL["time (ms)"]).data(SORT_ROLE)) for r in range(shown)
            )
            head = f"{shown} of {self.model.rowCount()} {what} ({visible:.3f} ms)"
        text = f"{head} · total {total:.3f} ms" + (
            f" · {self._pass_info}" if self._pass_info else ""
        )
        if self._overhead:
            text += f"\n{self._overhead}"
        if self.frozen:
            text += "\nfrozen" + (": a newer pass is waiting" if self._held else "")
        self.summary_label.setText(text)
