"""`opscope report`: one self-contained HTML file that opens offline, with figures, and
with every text from the (untrusted) session file escaped."""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from engine.analysis.report import ReportError, baseline_pairs, default_output, write_report
from engine.errors import SessionFileError
from tests.built_once import Built, built_once, demo_session_once
from tests.recorded_sessions import opscope, tampered_copy

EVIL_MODEL = "<script>alert(1)</script>.onnx"
EVIL_NODE = "<img src=x onerror=alert(2)>$\\frac{"  # also broken mathtext for matplotlib
EVIL_TELEMETRY = "<b>gpu_util</b>"


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The report (written by the CLI, default output name) of a demo session whose model
    name, node name, telemetry name, marker and meta were rewritten by an attacker;
    run 1 also gets telemetry. Written once per test run (tests/built_once.py)."""
    src = demo_session_once(tmp_path_factory)[0]

    def write(folder: Path) -> Built:
        t0 = 1_800_000_000_000_000_000
        sql: list[tuple[str, tuple[object, ...]]] = [
            ("UPDATE models SET name = ?", (EVIL_MODEL,)),
            (
                "UPDATE ops SET name = ? WHERE run_id = 1 AND kind = 'node' AND rank = 0",
                (EVIL_NODE,),
            ),
            ("UPDATE meta SET value = ? WHERE key = 'host'", ("<iframe src=//evil>",)),
            ("UPDATE runs SET timing_origin_ns = ? WHERE id = 1", (t0,)),
            (
                "INSERT INTO markers (run_id, wall_ns, kind, label, text) VALUES (?, ?, ?, ?, ?)",
                (1, t0, "note", "<u>label</u>", "<a href=http://evil.example>x</a>"),
            ),
        ]
        for i in range(50):
            sql.append(
                (
                    "INSERT INTO telemetry (run_id, wall_ns, name, value) VALUES (?, ?, ?, ?)",
                    (1, t0 + i * 20_000_000, EVIL_TELEMETRY, 40.0 + i % 7),
                )
            )
            sql.append(
                (
                    "INSERT INTO telemetry (run_id, wall_ns, name, value) VALUES (?, ?, ?, ?)",
                    (1, t0 + i * 20_000_000, "cpu_percent", 90.0 - i % 5),
                )
            )
        session = tampered_copy(src, folder / "hostile.opscope", sql)
        proc = opscope("report", session)
        assert proc.returncode == 0, proc.stderr
        out = folder / "hostile.html"
        assert out.is_file() and str(out) in proc.stdout
        return out, {}

    return built_once(tmp_path_factory, "hostile-report", write)[0].read_text(encoding="utf-8")


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text of <style> elements."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.styles: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        if self.tags and self.tags[-1][0] == "style":
            self.styles.append(data)


def test_report_is_self_contained(hostile_report: str) -> None:
    page = hostile_report
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    parser = Tags()
    parser.feed(page)
    names = {tag for tag, _ in parser.tags}
    assert {"html", "table", "svg", "figure"} <= names
    assert not names & {
        "script",
        "link",
        "iframe",
        "img",
        "object",
        "embed",
        "base",
        "u",
        "metadata",
    }  # none of ours fetch anything; none of theirs got through
    for tag, attrs in parser.tags:
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)  # no event handlers
            if name.startswith("xmlns"):
                continue  # SVG's namespace names are identifiers, never fetched
            assert not re.match(r"\s*(?:(?:https?|javascript):|//)", value or "", re.I), (
                tag,
                name,
                value,
            )
    assert parser.styles and not any("url(" in css or "@import" in css for css in parser.styles)
    assert "<script" not in page.lower()


def test_report_has_every_section_and_figures(hostile_report: str) -> None:
    page = hostile_report
    for title in (
        "Environment",
        "Runs",
        "Latency",
        "Top ops",
        "Telemetry",
        "Comparison",
        "Notes and markers",
    ):
        assert f"<h2>{title}</h2>" in page
    # ECDF + 4 timed runs + 3 profiled runs' op bars + 4 telemetry figures (CLI runs
    # recorded with --session keep telemetry; run 1 also has the injected rows)
    assert page.count("<svg") == 1 + 4 + 3 + 4
    assert "data:image" not in page  # vector figures, inline
    assert "Run 2 vs run 1: per-op differences" in page
    assert "Run 4 vs run 1: per-op differences" in page
    assert "batch 1 → 8" in page  # run 3 against run 1: what changed
    assert "cpu_percent" in page


def test_report_escapes_text_from_the_file(hostile_report: str) -> None:
    page = hostile_report
    for evil in (
        EVIL_MODEL,
        EVIL_NODE,
        EVIL_TELEMETRY,
        "<iframe src=//evil>",
        "<u>label</u>",
        "<a href=http://evil.example>",
    ):
        assert evil not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;.onnx" in page
    assert "&lt;img src=x onerror=alert(2)&gt;$\\frac{" in page  # the table and the bar chart
    assert page.count("&lt;img src=x onerror=alert(2)&gt;") >= 2
    assert "&lt;b&gt;gpu_util&lt;/b&gt;" in page


def test_write_report_bad_input(tmp_path: Path) -> None:
    with pytest.raises(SessionFileError, match="file not found"):
        write_report(str(tmp_path / "missing.opscope"), str(tmp_path / "r.html"))
    text = tmp_path / "notes.opscope"
    text.write_text("not a database")
    with pytest.raises(SessionFileError, match="not an OpScope session"):
        write_report(str(text), str(tmp_path / "r.html"))
    assert not (tmp_path / "r.html").exists()
    assert default_output("/a/b/s.opscope") == "/a/b/s.html"
    assert default_output("odd.html") == "odd.html.html"
    with pytest.raises(ReportError, match="overwrite the session"):
        write_report(str(text), str(text))
    assert text.read_text() == "not a database"


def test_figures_leave_matplotlib_alone() -> None:
    import matplotlib

    from engine.analysis import report_plots

    before = matplotlib.rcParams.copy()  # copy() reads without resolving the backend
    had_pyplot = "matplotlib.pyplot" in sys.modules
    rows = [{"name": "a$b$", "op_type": "MatMul", "time_ms": 1.0}]
    svg = report_plots.ops_bar_svg(1, rows)
    assert svg.startswith("<svg") and "a$b$" in svg  # a dollar sign, not mathtext
    assert matplotlib.rcParams.copy() == before
    assert ("matplotlib.pyplot" in sys.modules) == had_pyplot


def test_each_run_is_compared_with_the_first_run_of_its_model() -> None:
    from types import SimpleNamespace

    runs = [
        SimpleNamespace(id=i, model_sha256=sha, model_name=None)
        for i, sha in enumerate(["a", "b", "a", "b", "a"], start=1)
    ]
    pairs = [(b.id, c.id) for b, c in baseline_pairs(runs)]  # type: ignore[arg-type]
    assert pairs == [(1, 3), (2, 4), (1, 5)]
