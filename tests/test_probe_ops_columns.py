"""A session whose `ops` table lacks the optional `calls` or `bytes` column (written by
another version, or edited): the note says those figures show as "-", and they do, in the
report, the compare and the read-only session window; the file is not refused (issue 54:
`report` said "-", then refused the file with "ops.calls is missing")."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from unittest.mock import MagicMock

import pytest

from engine.cli.main import main
from engine.session import open_session_file
from tests.session_material import record_demo_profile
from tests.session_mutations import drop_column, mutated_copy

if TYPE_CHECKING:
    from pytestqt.qtbot import QtBot


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ops") / "profile.opscope"
    record_demo_profile(path)
    return path


@pytest.mark.parametrize("column", ["calls", "bytes"])
def test_the_report_shows_a_missing_ops_column_as_a_dash_and_is_written(
    recorded: Path, tmp_path: Path, column: str, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = mutated_copy(recorded, tmp_path / "old.opscope", drop_column("ops", column))
    out = tmp_path / "report.html"
    assert main(["report", str(copy), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"lacks column ops.{column}" in err and "show as -" in err
    assert "error" not in err
    html = out.read_text()
    with open_session_file(copy) as reader:
        nodes, types = reader.ops(1, "node"), reader.ops(1, "op_type")
    assert nodes and all(getattr(s, column) is None for s in nodes + types)
    if column == "calls":  # the op types' "nodes" column
        assert f'<td>{types[0].op_type}</td><td class="r">-</td>' in html.replace("\n", "")
    else:  # the top nodes' "bytes" column, after ms and share
        assert '%</td><td class="r">-</td>' in html.replace("\n", "")


def test_compare_reads_a_file_without_ops_calls(recorded: Path, tmp_path: Path) -> None:
    copy = mutated_copy(recorded, tmp_path / "old.opscope", drop_column("ops", "calls"))
    assert main(["compare", f"{copy}:1", f"{copy}:1", "--json", str(tmp_path / "c.json")]) in (
        0,
        4,
    )


@pytest.mark.parametrize("column", ["calls", "bytes"])
def test_the_session_window_shows_a_missing_ops_column_as_a_dash(
    qtbot: QtBot, recorded: Path, tmp_path: Path, column: str
) -> None:
    pytest.importorskip("PySide6")
    from app.host.job_runner import JobRunner
    from app.sessions.session_window import SessionWindow
    from widgets.op_table_model import COLUMNS, MISSING

    copy = mutated_copy(recorded, tmp_path / "old.opscope", drop_column("ops", column))
    window = SessionWindow(copy, MagicMock(spec=JobRunner))
    qtbot.addWidget(window)
    window.table.selectRow(0)
    assert "missing" not in window.statusBar().currentMessage()
    model = window.ops.model
    assert model.rowCount() > 0
    col = next(i for i, c in enumerate(COLUMNS) if c.title == column)
    texts = {model.data(model.index(r, col)) for r in range(model.rowCount())}
    assert texts == {MISSING}, texts
    for c in range(len(COLUMNS)):  # every cell and tip renders (the roofline's bound too)
        for role in (0, 3):
            model.data(model.index(0, c), role)
    window.close()
