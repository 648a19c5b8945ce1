"""The report laid out for reading: the ECDF's legend covers nothing (and matplotlib never
gives up on the layout), the runs table keeps a row to a line or two, a note repeated on
every comparison row is said once, the memory rows name their input shapes."""

from __future__ import annotations

import html
import re
import warnings
from typing import Any

import numpy as np
import pytest

from engine.analysis import report_plots


@pytest.mark.parametrize("runs", [3, 12, 30, 60])
def test_the_ecdf_legend_covers_neither_plot_nor_title(runs: int) -> None:
    """Inside the axes (lower right) it covered the curves; ~30 runs collapsed the axes
    ('constrained_layout not applied') and the legend ran over the title."""
    rng = np.random.default_rng(0)
    series = [
        (
            f"run {i}: all-MiniLM-L6-v2.onnx INT8 static b{i % 8 + 1} fusion all",
            rng.lognormal(1, 0.2, 400),
        )
        for i in range(runs)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the collapse is a UserWarning
        with report_plots._figure(*report_plots.ecdf_size(runs), "test") as fig:
            report_plots._ecdf(fig, series)
            fig.canvas.draw()
            renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
            (ax,) = fig.axes
            legends = [*fig.legends, *filter(None, [ax.get_legend()])]
            assert len(legends) == 1
            box = legends[0].get_window_extent(renderer)
            assert not box.overlaps(ax.get_window_extent(renderer))
            assert not box.overlaps(ax.title.get_window_extent(renderer))
            assert len(legends[0].get_texts()) == runs
            assert ax.get_window_extent(renderer).height > 120  # pixels: a readable plot
        svg = report_plots.ecdf_svg(series)
    assert svg.startswith("<svg")


@pytest.mark.parametrize("n", [301, 1611, 10_007])
def test_binned_percentiles_are_numpys_per_bin(n: int) -> None:
    """The vectorised bins give what a percentile call per bin gave (that loop cost
    seconds per telemetry figure)."""
    rng = np.random.default_rng(n)
    x = np.sort(rng.random(n)) * 100
    y = rng.lognormal(0, 1, n)
    centres, p50, p99 = report_plots.binned(x, y, bins=300)
    edges = np.linspace(0, n, 301).astype(np.int64)
    for i in range(300):
        chunk = y[edges[i] : edges[i + 1]]
        assert centres[i] == pytest.approx(x[edges[i] : edges[i + 1]].mean())
        assert [p50[i], p99[i]] == pytest.approx(np.percentile(chunk, [50, 99]))


def test_the_memory_rows_name_their_input_shapes() -> None:
    """The memory row had no input shapes: a report at sequence 512 read like one at 128."""
    from engine.analysis.memory_report import memory_section
    from engine.session.memory_rows import MemoryRow, checked_report
    from tests.test_session_read_hostile import memory_report

    raw = memory_report() | {"inputs": {"input_ids": [1, 512], "attention_mask": [1, 512]}}
    row = MemoryRow(1, None, "/m/model.onnx", None, checked_report(raw))
    page = memory_section([row])
    head = page[page.index("<thead>") : page.index("</thead>")]
    assert "<th>inputs</th>" in head
    assert "<td>input_ids 1x512, attention_mask 1x512</td>" in page
    assert "(inputs input_ids 1x512, attention_mask 1x512)" in page  # the chart's caption


@pytest.fixture(scope="module")
def recorded_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    """Two real runs of the demo CNN (bench, recorded by the CLI), the second renamed to a
    long model name and moved to another day."""
    import dataclasses

    from engine.session.reader import SessionReader
    from tests.conftest import DEMO_CNN
    from tests.recorded_sessions import QUICK, record

    path = tmp_path_factory.mktemp("runs") / "runs.opscope"
    record(path, ["bench", DEMO_CNN, *QUICK, "--min-runs", "20"])
    with SessionReader.open(path) as reader:
        (run,) = reader.runs()
    long_name = "sentence-transformers_all-MiniLM-L6-v2_quantized_int8_static.onnx"
    other = dataclasses.replace(run, id=2, model_name=long_name, started_at="2026-11-30T09:15:02")
    return [run, other]


def _cells(page: str) -> list[list[str]]:
    body = page[page.index("<tbody>") : page.index("</tbody>")]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in body.split("<tr>")[1:]]


def test_the_runs_table_keeps_a_row_to_two_lines(recorded_runs: list[Any]) -> None:
    """Cells could break at any character (`overflow-wrap:anywhere`): squeezed to one
    character wide, dates, names and configs wrapped into 6-8-line rows."""
    from engine.analysis.report import CSS
    from engine.analysis.report_runs import runs_section
    from engine.analysis.run_table import COLUMNS

    assert "anywhere" not in CSS and "overflow-wrap:break-word" in CSS
    assert ".tok{white-space:nowrap}" in CSS and ".wide{overflow-x:auto}" in CSS
    page = runs_section(recorded_runs)
    assert '<div class="wide"><table class="runs">' in page
    names = [c.name for c in COLUMNS]
    heads = re.findall(r"<th((?: [^>]*)?)>(.*?)</th>", page)
    rows = _cells(page)
    assert len(heads) == len(names) and all(len(r) == len(names) for r in rows)
    text = [[html.unescape(re.sub(r"<[^>]+>", "", c)) for c in r] for r in rows]
    started = [r[names.index("started")] for r in text]
    assert started[1] == "11-30 09:15" and len(started[0]) == 11  # two days: month-day time
    model = [r[names.index("model")] for r in text]
    assert model[0] == "demo_cnn.onnx" and len(model[1]) <= 28 and "…" in model[1]
    assert model[1].startswith("sentence-trans") and model[1].endswith(".onnx")
    config = rows[0][names.index("config")]
    assert '<span class="tok">fusion=all</span>' in config and "batch=" in config
    for (attrs, name), column in zip(heads, zip(*text, strict=True), strict=True):
        c = COLUMNS[names.index(name.split(" (")[0])]
        if c.numeric:
            continue  # td.r never wraps
        width = int(re.search(r"min-width:(\d+)ch", attrs).group(1))  # type: ignore[union-attr]
        for cell in column:  # at most two lines at the column's narrowest
            assert len(cell) <= 2 * width or width == 30, (name, cell, width)


def test_a_note_on_every_row_is_said_once() -> None:
    """Every comparison row repeated "the baseline run was flagged unstable (its windows
    differ by >10%)": said once below the table, each row marked with its number."""
    from engine.analysis.report import footnoted

    unstable = "the baseline run was flagged unstable (its windows differ by >10%)"
    rows = [
        ("2", "1", [unstable, "no verdict: the candidate was measured busy"]),
        ("3", "1", [unstable, "inputs differ <b>"]),
        ("4", "1", []),
    ]
    out, notes = footnoted(rows)
    assert notes.count("flagged unstable") == 1 and "<li>" in notes
    cells = [str(r[-1]) for r in out]
    assert all("flagged unstable" not in c for c in cells)
    assert cells[0].endswith('<sup class="fn">[1]</sup>') and "measured busy" in cells[0]
    assert "inputs differ &lt;b&gt;" in cells[1] and "[1]" in cells[1]
    assert cells[2] == "-"
