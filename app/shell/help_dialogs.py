"""Help menu pages: the keyboard shortcuts, read from the window's actions themselves (so
the list cannot go stale), and a short guide to reading the window."""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QMainWindow,
    QMenu,
    QTableWidget,
    QTableWidgetItem,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

GUIDE = """
<h3>How to read this window</h3>
<p><b>Latency</b> (centre): every timed inference as a thin line, with the rolling
p50, p90 and p99 over the last samples. Below it, <b>samples/s</b> per half second.
Violet dashed lines mark a config change. A shaded band labelled <i>profiling</i> is a
profiling pass: timing pauses for it (samples/s drops to 0), and no line is drawn across
the gap. Double-click the plot (or press F) to follow the latest samples again.</p>
<p><b>Operators</b> (bottom): one row per graph node (or per op type) from the last
profiling pass: mean time per inference, its share of the summed node time, and which roof
limits it (<i>bound</i>: memory or compute, and the % of that roof reached). The profiler
adds a per-op cost, so the profiled total is larger than the timed latency; the header says
by how much. Use the times to compare ops, the latency plot for the latency. Freeze holds a
pass while you read it.</p>
<p><b>Roofline</b>: each op at its arithmetic intensity (FLOP per byte moved) and achieved
GFLOP/s, under the machine's bandwidth roof (slanted) and compute roof (flat). Points left
of the ridge are memory-bound, right of it compute-bound; the further below its roof, the
more an op leaves on the table. Point size is the op's share of time; colours are per op
type and the same in every launch. Selecting a row rings its point, and clicking a point
selects its row.</p>
<p><b>Configuration</b> (left): precision, graph fusion, batch, threads and provider.
A change applies by itself a moment after you make it (there is no Apply button): the
session is rebuilt and a violet line marks the change. INT8 is checked against FP32 (cosine
on the worst output) before it is shown as accurate.</p>
<p><b>Three p50s, three windows of samples</b>: the numbers above the plot and in the
status bar are over the last samples (the count is shown); the Runs dock's <i>run p50</i>
is over every sample of that run.</p>
<p><b>Status bar</b>: model, the provider actually used (ONNX Runtime may fall back to
CPU), the rolling numbers and the session file everything is recorded into.</p>
"""


def shortcut_rows(window: QMainWindow) -> list[tuple[str, str, str]]:
    """(where, action, shortcut) for every action of the window that has a shortcut:
    the menus' (with their menu path) and the docks' own buttons."""
    rows: list[tuple[str, str, str]] = []
    seen: set[int] = set()

    def walk(menu: QMenu, path: str) -> None:
        for action in menu.actions():
            sub = action.menu()
            if isinstance(sub, QMenu):
                walk(sub, f"{path} > {_plain(sub.title())}")
            elif not action.isSeparator():
                seen.add(id(action))
                _add(rows, path, action)

    for top in window.menuBar().actions():
        menu = top.menu()
        if isinstance(menu, QMenu):
            walk(menu, _plain(menu.title()))
    for action in window.findChildren(QAction):
        if id(action) not in seen and not action.shortcut().isEmpty():
            owner = action.parent()
            where = owner.objectName() if isinstance(owner, QWidget) else ""
            _add(rows, where or "window", action)
    return rows


def _add(rows: list[tuple[str, str, str]], where: str, action: QAction) -> None:
    keys = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
    if keys:
        rows.append((where, _plain(action.text()), keys))


def _plain(text: str) -> str:
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&").rstrip("…").strip()


def shortcuts_dialog(window: QMainWindow) -> QDialog:
    rows = shortcut_rows(window)
    dialog = QDialog(window)
    dialog.setWindowTitle("Keyboard Shortcuts")
    table = QTableWidget(len(rows), 3)
    table.setHorizontalHeaderLabels(["menu", "action", "shortcut"])
    table.verticalHeader().hide()
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    for r, cells in enumerate(rows):
        for c, text in enumerate(cells):
            table.setItem(r, c, QTableWidgetItem(text))
    table.resizeColumnsToContents()
    _finish(dialog, table)
    dialog.resize(560, 520)
    return dialog


def guide_dialog(window: QMainWindow) -> QDialog:
    dialog = QDialog(window)
    dialog.setWindowTitle("How to Read This Window")
    text = QTextBrowser()
    text.setHtml(GUIDE)
    _finish(dialog, text)
    dialog.resize(640, 560)
    return dialog


def _finish(dialog: QDialog, body: QWidget) -> None:
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
    buttons.rejected.connect(dialog.reject)
    layout = QVBoxLayout(dialog)
    layout.addWidget(body)
    layout.addWidget(buttons)
