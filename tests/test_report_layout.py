"""The report laid out for reading: the ECDF's legend covers nothing (and matplotlib never
gives up on the layout), the runs table keeps a row to a line or two, a note repeated on
every comparison row is said once, the memory rows name their input shapes."""

from __future__ import annotations

import warnings

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
