"""The session window's Studies tab: what a session holds beside its runs, read-only, as
plain text whatever the file says: each LLM serving study (a title row, then a row per
layout, worded as `opscope session show` and the report word it) and each memory report
(as the Memory dock words it)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.api import LLM_STUDY_HEAD, SessionReader, llm_study_cells, llm_study_title
from widgets.models.memory_summary import summary_lines


def studies_tab(reader: SessionReader) -> QWidget | None:
    """The tab, or None when the session holds no study and no memory report."""
    studies, memory = reader.llm_studies(), reader.memory()
    if not studies and not memory:
        return None
    tab = QWidget()
    layout = QVBoxLayout()
    if studies:
        layout.addWidget(QLabel(f"LLM serving studies ({len(studies)})"))
        rows = sum(1 + len(s.rows) for s in studies)
        table = QTableWidget(rows, len(LLM_STUDY_HEAD))
        table.setObjectName("llm_studies")
        table.setHorizontalHeaderLabels(list(LLM_STUDY_HEAD))
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.verticalHeader().setVisible(False)
        at = 0
        for s in studies:
            table.setItem(at, 0, QTableWidgetItem(llm_study_title(s)))
            table.setSpan(at, 0, 1, len(LLM_STUDY_HEAD))
            at += 1
            for row in s.rows:
                for col, text in enumerate(llm_study_cells(row)):
                    item = QTableWidgetItem(text)
                    if 2 <= col <= 8:
                        item.setTextAlignment(
                            Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                        )
                    table.setItem(at, col, item)
                at += 1
        table.resizeColumnsToContents()
        layout.addWidget(table, 1)
    for m in memory:
        name = (m.model_path or "-").replace("\\", "/").rsplit("/", 1)[-1]
        config = {"config": m.config.to_json()} if m.config else {}
        try:
            lines = summary_lines({**m.report, **config})
        except (KeyError, TypeError):  # a figure the wording needs is not known
            lines = ["(some of its figures are not known)"]
        label = QLabel(f"Memory report {m.id}: {name}\n" + "\n".join(lines))
        label.setTextFormat(Qt.TextFormat.PlainText)
        label.setWordWrap(True)
        layout.addWidget(label)
    layout.addStretch(0)
    tab.setLayout(layout)  # set once filled (see tests/test_widget_items.py)
    return tab
