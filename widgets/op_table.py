"""Per-operator table: time, share, bandwidth, FLOP rate and intensity of each node or op type.

A model over `OpStat` rows behind a sort/filter proxy. Sorting uses the raw numbers (a sort
role), refreshing keeps sort, filter, selection and scroll, and the top three rows by time
are bold and tinted so the offenders stand out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QItemSelectionModel,
    QModelIndex,
    QPersistentModelIndex,
    QRect,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtGui import QColor, QFont, QPainter, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from engine.measure.op_stats import OpStat
from widgets import theme

SORT_ROLE = Qt.ItemDataRole.UserRole + 1  # the raw value (float or lower-case str)
NAME_ROLE = Qt.ItemDataRole.UserRole + 2  # the row's OpStat name, whatever the column
MISSING = "–"
TOP_N = 3
_Index = QModelIndex | QPersistentModelIndex


def human_bytes(n: float) -> str:
    """Decimal units, like GB/s: 950 B, 1.2 kB, 3.4 MB, 5.6 GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def _num(fmt: str) -> Callable[[float | None], str]:
    return lambda v: MISSING if v is None else format(v, fmt)


@dataclass(frozen=True)
class Column:
    title: str
    value: Callable[[OpStat], Any]
    text: Callable[[Any], str]
    tip: str
    numeric: bool = True


COLUMNS: tuple[Column, ...] = (
    Column(
        "name",
        lambda s: s.name,
        str,
        "Node name in the profiled graph (subgraph nodes qualified by their parent)",
        numeric=False,
    ),
    Column("op type", lambda s: s.op_type, str, "ONNX operator type", numeric=False),
    Column(
        "provider",
        lambda s: s.provider,
        str,
        "Execution provider that ran it, as the profile reports it",
        numeric=False,
    ),
    Column(
        "time (ms)",
        lambda s: s.time_ms,
        _num(".3f"),
        "Mean self time per inference over the profiled inferences (ms)",
    ),
    Column(
        "share",
        lambda s: s.share,
        lambda v: f"{100 * v:.1f}%",
        "Share of the summed node time per inference",
    ),
    Column(
        "bytes",
        lambda s: s.bytes,
        human_bytes,
        "Bytes moved per inference: inputs + weights + outputs",
    ),
    Column(
        "GB/s",
        lambda s: s.gbps,
        _num(".2f"),
        "Achieved memory bandwidth: (input + weight + output bytes) / time",
    ),
    Column(
        "GFLOP/s",
        lambda s: s.gflops,
        _num(".2f"),
        "Achieved compute rate: FLOPs (op-type FLOP model) / time; – when the op type "
        "has no FLOP model",
    ),
    Column(
        "FLOP/B",
        lambda s: s.intensity,
        _num(".2f"),
        "Arithmetic intensity: FLOPs / bytes moved. Low means memory-bound, high means "
        "compute-bound (compare with the machine's ridge point on the roofline)",
    ),
    Column(
        "calls",
        lambda s: s.calls,
        str,
        "Executions per inference (per node) or nodes of this type (per op type)",
    ),
)
COL = {c.title: i for i, c in enumerate(COLUMNS)}
SHARE_COL = COL["share"]


class OpTableModel(QAbstractTableModel):
    """OpStat rows; DisplayRole is formatted text, SORT_ROLE the raw value."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rows: list[OpStat] = []
        self._top: set[str] = set()
        self._fp32: set[str] = set()  # nodes an INT8 variant kept in FP32

    def set_rows(self, rows: list[OpStat]) -> None:
        self.beginResetModel()
        self._rows = list(rows)
        ranked = sorted(self._rows, key=lambda s: -s.time_ms)
        self._top = {s.name for s in ranked[:TOP_N]}
        self.endResetModel()

    @property
    def rows(self) -> list[OpStat]:
        return self._rows

    def set_fp32_nodes(self, names: set[str]) -> None:
        self.beginResetModel()
        self._fp32 = set(names)
        self.endResetModel()

    def kept_fp32(self, name: str) -> bool:
        """A node INT8 kept in FP32 (or one ONNX Runtime fused it into: 'mm/Fusion')."""
        return name in self._fp32 or name.split("/")[0] in self._fp32

    def is_top(self, name: str) -> bool:
        return name in self._top

    def row_of(self, name: str) -> int:
        return next((i for i, s in enumerate(self._rows) if s.name == name), -1)

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 (Qt signature)
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        stat, column = self._rows[index.row()], COLUMNS[index.column()]
        value = column.value(stat)
        if role == Qt.ItemDataRole.DisplayRole:
            text = column.text(value)
            if index.column() == 0 and self.kept_fp32(stat.name):
                return f"{text}  [FP32]"
            return text
        if role == SORT_ROLE:
            if not column.numeric:
                return str(value).lower()
            return float("-inf") if value is None else float(value)
        if role == NAME_ROLE:
            return stat.name
        if role == Qt.ItemDataRole.TextAlignmentRole:
            align = Qt.AlignmentFlag
            return int(
                (align.AlignRight if column.numeric else align.AlignLeft) | align.AlignVCenter
            )
        if role == Qt.ItemDataRole.FontRole and stat.name in self._top:
            font = QFont()
            font.setBold(True)
            return font
        if role == Qt.ItemDataRole.BackgroundRole and stat.name in self._top:
            tint = QColor(theme.P90)
            tint.setAlpha(45)
            return tint
        if role == Qt.ItemDataRole.ForegroundRole and self.kept_fp32(stat.name):
            return QColor(theme.WARN)
        if role == Qt.ItemDataRole.ToolTipRole:
            kept = "\nkept in FP32 to meet the accuracy target" if self.kept_fp32(stat.name) else ""
            return (
                f"{stat.name}{kept}\n{stat.op_type} on {stat.provider or '?'}\n"
                f"mean {stat.time_ms:.4f} ms · p50 {stat.p50_ms:.4f} ms · "
                f"p99 {stat.p99_ms:.4f} ms\n{100 * stat.share:.2f}% of node time"
            )
        return None

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation != Qt.Orientation.Horizontal or not 0 <= section < len(COLUMNS):
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section].title
        if role == Qt.ItemDataRole.ToolTipRole:
            return COLUMNS[section].tip
        return None


class OpFilterProxy(QSortFilterProxyModel):
    """Case-insensitive substring match on name or op type; sorts by SORT_ROLE."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._needle = ""
        self.setSortRole(SORT_ROLE)
        self.setDynamicSortFilter(True)

    def set_needle(self, text: str) -> None:
        self.beginFilterChange()
        self._needle = text.strip().lower()
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, source_row: int, source_parent: _Index) -> bool:
        if not self._needle:
            return True
        model = self.sourceModel()
        assert isinstance(model, OpTableModel)
        stat = model.rows[source_row]
        return self._needle in stat.name.lower() or self._needle in stat.op_type.lower()


class ShareBarDelegate(QStyledItemDelegate):
    """Draws the share as a horizontal bar behind its percentage text."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        text, opt.text = opt.text, ""
        widget = opt.widget
        style = widget.style() if widget is not None else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, widget)
        share = index.data(SORT_ROLE)
        share = min(max(float(share), 0.0), 1.0) if isinstance(share, float) else 0.0
        rect: QRect = opt.rect.adjusted(3, 4, -3, -4)
        painter.save()
        bar = QColor(theme.THROUGHPUT)
        bar.setAlpha(110)
        painter.fillRect(
            QRect(rect.left(), rect.top(), round(rect.width() * share), rect.height()), bar
        )
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        role = QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text
        painter.setPen(opt.palette.color(role))
        painter.setFont(opt.font)
        painter.drawText(
            rect.adjusted(0, 0, -2, 0),
            int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter),
            text,
        )
        painter.restore()


class OpTable(QWidget):
    """Filterable, sortable per-node / per-op-type view of one profiling pass."""

    op_selected = Signal(str)  # the row's name (node name, or op type per op type); user only
    phase_changed = Signal(str)  # a generating model's phase picked (prefill, decode)

    MODES = ("per node", "per op type")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._nodes: list[OpStat] = []
        self._op_types: list[OpStat] = []
        self._quiet = False  # True while selection changes are ours, not the user's

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
        self.view.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.view.verticalHeader().hide()
        self.view.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        self.view.setItemDelegateForColumn(SHARE_COL, ShareBarDelegate(self.view))
        header = self.view.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(COL["name"], QHeaderView.ResizeMode.Stretch)
        char = self.fontMetrics().horizontalAdvance("0")
        for title, chars in (
            ("op type", 16),
            ("provider", 21),
            ("time (ms)", 10),
            ("share", 13),
            ("bytes", 10),
            ("GB/s", 9),
            ("GFLOP/s", 10),
            ("FLOP/B", 9),
            ("calls", 7),
        ):
            self.view.setColumnWidth(COL[title], chars * char)
        self.view.selectionModel().selectionChanged.connect(self._on_selection)

        bar = QHBoxLayout()
        bar.addWidget(self.filter_edit, 1)
        bar.addWidget(self.phase_combo)
        bar.addWidget(self.mode_combo)
        bar.addWidget(self.summary_label)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.view, 1)
        self._update_summary()

    # ------------------------------------------------------------------------------- API
    def set_fp32_nodes(self, names: list[str]) -> None:
        """Mark the nodes an INT8 variant kept in FP32 ([FP32] after the name)."""
        self.model.set_fp32_nodes(set(names))

    def set_ops(self, nodes: list[OpStat], op_types: list[OpStat]) -> None:
        """New data (a profiling pass); keeps sort, filter, selection (by name) and scroll."""
        self._nodes, self._op_types = list(nodes), list(op_types)
        self._show_mode()

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
        self.view.scrollTo(proxy_index)
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
        per_type = self.mode == "per op type"
        self._quiet = True
        try:
            self.model.set_rows(self._op_types if per_type else self._nodes)
        finally:
            self._quiet = False
        self.view.setColumnHidden(COL["op type"], per_type)
        if selected is not None:
            self.select_op(selected)
        self.view.verticalScrollBar().setValue(scroll)
        self._update_summary()

    def _on_filter(self, text: str) -> None:
        self.proxy.set_needle(text)
        self._update_summary()

    def _on_selection(self, *_: object) -> None:
        if self._quiet:
            return
        name = self.selected_op()
        if name is not None:
            self.op_selected.emit(name)

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
        self.summary_label.setText(f"{head} · total {total:.3f} ms")
