"""The op table's data: its columns, the OpStat rows model and the filter/sort proxy.

Sorting uses the raw numbers (a sort role); the top three rows by time are bold and tinted
so the offenders stand out; the bound column reads the machine's roofs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
)
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import QWidget

from engine.api import OpStat, Roofs
from widgets import theme
from widgets.models.op_rows import (
    bound_sort_key,
    bound_text,
    bound_tip,
    short_provider,
)

SORT_ROLE = Qt.ItemDataRole.UserRole + 1  # the raw value (float or lower-case str)
NAME_ROLE = Qt.ItemDataRole.UserRole + 2  # the row's OpStat name, whatever the column
_Index = QModelIndex | QPersistentModelIndex
MISSING = "–"
TOP_N = 3


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
        "Node name in the profiled graph (subgraph nodes qualified by their parent); long "
        "names are cut on the left, the full name is in the tooltip",
        numeric=False,
    ),
    Column("op type", lambda s: s.op_type, str, "ONNX operator type", numeric=False),
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
        "bound",
        lambda s: s.intensity,
        str,
        "Which roof limits the op (memory below the ridge point, compute above it) and the "
        "share of that roof it reaches; ops without a FLOP model are measured against the "
        "bandwidth roof; 'overhead': no roof explains its time (it only reshapes, or it is so "
        "small that a kernel's fixed cost dominates)",
        numeric=False,
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
        "bytes",
        lambda s: s.bytes,
        lambda v: MISSING if v is None else human_bytes(v),
        "Bytes moved per inference: inputs + weights + outputs",
    ),
    Column(
        "calls",
        lambda s: s.calls,
        _num("d"),
        "Executions per inference (per node) or nodes of this type (per op type)",
    ),
    Column(
        "provider",
        lambda s: s.provider,
        short_provider,
        "Execution provider that ran it, as the profile reports it",
        numeric=False,
    ),
    Column(
        "out",
        lambda s: None,
        human_bytes,
        "Output activation bytes per inference, at the shapes the profile saw (from the "
        "graph as run: – until the Graph tab has read it, or where a shape is unknown)",
    ),
    Column(
        "weights",
        lambda s: None,
        human_bytes,
        "Weight bytes the node reads per call (from the graph as run: – until the Graph tab "
        "has read it)",
    ),
)
COL = {c.title: i for i, c in enumerate(COLUMNS)}
COLUMN_CHARS = {  # widths in digits; the name gets what a 1024 px window leaves
    "name": 24,
    "op type": 13,
    "time (ms)": 9,
    "share": 11,
    "bound": 14,
    "GB/s": 8,
    "GFLOP/s": 9,
    "FLOP/B": 8,
    "bytes": 9,
    "calls": 6,
    "provider": 8,
    "out": 8,
    "weights": 8,
}
SHARE_COL = COL["share"]
MEMORY_COLS = {COL["out"]: 0, COL["weights"]: 1}  # column -> its place in node_memory
BOUND_COL = COL["bound"]


class OpTableModel(QAbstractTableModel):
    """OpStat rows; DisplayRole is formatted text, SORT_ROLE the raw value."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rows: list[OpStat] = []
        self._top: set[str] = set()
        self._fp32: set[str] = set()  # nodes an INT8 variant kept in FP32
        self.roofs: Roofs | None = None  # the machine's roofs, for the bound column
        self.node_memory: dict[str, tuple[float | None, float | None]] = {}  # out, weights

    def set_roofs(self, roofs: Roofs | None) -> None:
        """The roofs the bound column measures against (None: not measured yet)."""
        if roofs == self.roofs:
            return
        self.roofs = roofs
        if self._rows:
            self.dataChanged.emit(
                self.index(0, BOUND_COL), self.index(len(self._rows) - 1, BOUND_COL)
            )

    def set_node_memory(self, memory: dict[str, tuple[float | None, float | None]]) -> None:
        """Each node's output and weight bytes (the graph as run), for their columns."""
        self.node_memory = dict(memory)
        if self._rows:
            first, last = min(MEMORY_COLS), max(MEMORY_COLS)
            self.dataChanged.emit(self.index(0, first), self.index(len(self._rows) - 1, last))

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
        if index.column() in MEMORY_COLS:
            value = self.node_memory.get(stat.name, (None, None))[MEMORY_COLS[index.column()]]
            if role == Qt.ItemDataRole.DisplayRole:
                return MISSING if value is None else human_bytes(value)
        if index.column() == BOUND_COL and role in (
            Qt.ItemDataRole.DisplayRole,
            SORT_ROLE,
            Qt.ItemDataRole.ToolTipRole,
        ):
            if role == Qt.ItemDataRole.DisplayRole:
                return bound_text(stat, self.roofs)
            if role == SORT_ROLE:
                return bound_sort_key(stat, self.roofs)
            return bound_tip(stat, self.roofs)
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
