"""LatencyPlot and its ring buffer: bounded memory, timer painting, percentiles, markers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from engine.measure.stats import rolling_percentiles
from widgets import latency_plot as lp
from widgets.latency_plot import LatencyPlot
from widgets.lines_item import column_starts
from widgets.models import latency_series
from widgets.models.latency_series import calm_top, follow_range
from widgets.models.ring_buffer import RingBuffer

PAINT_MS = 350  # > 3 ticks of the 10 Hz paint timer


@pytest.fixture
def plot(qtbot: QtBot) -> LatencyPlot:
    widget = LatencyPlot(capacity=1000, percentile_window=10)
    qtbot.addWidget(widget)
    widget.resize(900, 500)
    widget.show()
    return widget


def feed(
    plot: LatencyPlot, n: int, start: float = 0.0, dt: float = 0.01, batch: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    t = start + dt * np.arange(n)
    lat = 5.0 + np.sin(np.arange(n) / 7.0)
    plot.append(t, lat, batch)
    return t, lat


def double_click(widget: QWidget) -> None:
    """The events a real double click delivers (QTest.mouseDClick's sequence leaves
    pyqtgraph's scene waiting for another release)."""
    pos = QPointF(widget.rect().center())
    glob = QPointF(widget.mapToGlobal(widget.rect().center()))
    left, none = Qt.MouseButton.LeftButton, Qt.MouseButton.NoButton
    for kind, buttons in (
        (QEvent.Type.MouseButtonPress, left),
        (QEvent.Type.MouseButtonRelease, none),
        (QEvent.Type.MouseButtonDblClick, left),
        (QEvent.Type.MouseButtonRelease, none),
    ):
        QApplication.sendEvent(
            widget, QMouseEvent(kind, pos, glob, left, buttons, Qt.KeyboardModifier.NoModifier)
        )


# ---------------------------------------------------------------------------- ring buffer
def test_ring_buffer_matches_a_growing_array_across_wraps() -> None:
    ring = RingBuffer(capacity=50, columns=2)
    rng = np.random.default_rng(0)
    everything = np.empty(0)
    for _ in range(200):
        block = rng.random(int(rng.integers(1, 40)))
        ring.append([block, -block])
        everything = np.concatenate([everything, block])
        assert len(ring) == min(50, everything.size)
        np.testing.assert_array_equal(ring.view(0), everything[-50:])
        np.testing.assert_array_equal(ring.view(1), -everything[-50:])
    assert ring.total == everything.size


def test_ring_buffer_never_overwrites_the_previous_view() -> None:
    """A view handed to setData stays intact through the next append (even a compaction)."""
    ring = RingBuffer(capacity=10, columns=1)
    for k in range(1, 200):
        ring.append([np.arange(k % 7 + 1) + k])
        before = ring.view(0)
        kept = before.copy()
        ring.append([np.full(k % 10 + 1, -1.0)])
        np.testing.assert_array_equal(before, kept)


def test_ring_buffer_block_larger_than_capacity_keeps_the_newest() -> None:
    ring = RingBuffer(capacity=5, columns=1)
    ring.append([np.arange(12.0)])
    np.testing.assert_array_equal(ring.view(0), [7, 8, 9, 10, 11])


def test_ring_buffer_memory_is_resident_from_construction() -> None:
    """A live window's RSS must not creep as rows first reach untouched pages: the ring's
    memory is committed when it is made, and filling and wrapping it adds none."""
    import psutil

    proc = psutil.Process()
    before = proc.memory_info().rss
    ring = RingBuffer(capacity=400_000, columns=5)  # 48 MB, the size of the latency ring
    made = proc.memory_info().rss - before
    block = np.arange(50_000.0)
    for _ in range(30):  # 1.5M rows: fills the 3x region and wraps
        ring.append([block] * 5)
    filled = proc.memory_info().rss - before
    assert made > 0.8 * ring.nbytes
    # (a lazy ring would add all 48 MB here; the slack is the appends' freed temporaries and
    # whatever else the process allocates meanwhile (other tests' threads in a full suite):
    # 5 MB was seen alone, 14 MB in CI; half the ring still tells the two apart)
    assert filled - made < 0.5 * ring.nbytes
    assert len(ring) == ring.capacity


# ---------------------------------------------------------------------------- latency plot
def test_paint_timer_hands_data_to_the_curves(plot: LatencyPlot, qtbot: QtBot) -> None:
    feed(plot, 120)
    assert plot.drawn("latency")[0].size == 0  # nothing painted synchronously
    qtbot.waitUntil(lambda: plot.drawn("latency")[0].size > 0, timeout=2000)
    for name in ("latency", "p50", "p90", "p99"):
        x, y = plot.drawn(name)
        assert x.size == y.size == 120  # fewer points than pixel columns: all of them
    assert plot.drawn("throughput")[0].size > 0


def test_paint_is_decoupled_from_arrival(
    plot: LatencyPlot, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    original = plot.lines.set_line
    monkeypatch.setattr(
        plot.lines,
        "set_line",
        lambda name, *a: (name == "latency" and calls.append(1), original(name, *a)),
    )
    for i in range(50):  # 50 batches arrive before the event loop runs
        feed(plot, 10, start=i * 0.1)
    qtbot.wait(PAINT_MS)
    assert 1 <= len(calls) <= 2
    qtbot.wait(PAINT_MS)  # no new data: no new setData
    assert len(calls) <= 2


def test_ring_buffer_caps_memory_and_drops_the_oldest(plot: LatencyPlot, qtbot: QtBot) -> None:
    nbytes = plot._samples.nbytes
    feed(plot, 1000)
    t2, _ = feed(plot, 1000, start=10.0)
    t, _ = plot.samples()
    assert t.size == plot.capacity == 1000
    assert t[0] == t2[0] and t[-1] == t2[-1]  # every point of the first 1000 dropped
    assert plot._samples.nbytes == nbytes
    qtbot.wait(PAINT_MS)
    plot.show_all()  # everything, not only the followed window
    x, y = plot.drawn("latency")
    _, lat = plot.samples()
    assert x[0] == t2[0] and x[-1] == t2[-1]
    assert y.min() == lat.min() and y.max() == lat.max()


def test_many_points_are_reduced_to_an_exact_column_envelope(qtbot: QtBot) -> None:
    plot = LatencyPlot(capacity=100_000, window_s=1e9)
    qtbot.addWidget(plot)
    plot.resize(700, 400)
    plot.show()
    rng = np.random.default_rng(5)
    t = np.sort(rng.random(50_000)) * 100
    lat = rng.gamma(3.0, 1.0, t.size)
    lat[31_337] = 500.0  # one spike among 50k samples
    plot.append(t, lat, 1)
    plot.paint_now()
    x, y = plot.drawn("latency")
    columns = int(plot.latency_plot.vb.width()) // lp.PX_PER_COLUMN
    assert x.size <= 2 * columns < 50_000
    assert y.max() == 500.0 and y.min() == lat.min()
    starts = column_starts(t, columns)
    ends = np.r_[starts[1:], t.size]
    for k in rng.choice(starts.size, 20, replace=False):  # each column: its exact min and max
        a, b = starts[k], ends[k]
        assert (y[2 * k], y[2 * k + 1]) == (lat[a:b].min(), lat[a:b].max())
    p50_x, p50_y = plot.drawn("p50")
    assert p50_x.size == starts.size and p50_y[-1] == plot.rolling_percentiles()[0, -1]


def test_rolling_percentiles_for_a_known_pattern(plot: LatencyPlot, qtbot: QtBot) -> None:
    lat = (np.arange(60) % 10).astype(float)  # every full window of 10 holds 0..9
    plot.append(np.arange(60) * 0.01, lat, 1)
    plot.paint_now()
    p50, p90, p99 = plot.rolling_percentiles()
    np.testing.assert_allclose(p50[:9], np.arange(9) / 2)  # expanding windows at the start
    np.testing.assert_allclose(p50[9:], 4.5)
    np.testing.assert_allclose(p90[9:], 8.1)
    np.testing.assert_allclose(p99[9:], 8.91)
    np.testing.assert_array_equal(plot.drawn("p50")[1], p50)


def test_incremental_percentiles_match_the_engine_reference(qtbot: QtBot) -> None:
    plot = LatencyPlot(capacity=500, percentile_window=25)
    qtbot.addWidget(plot)
    rng = np.random.default_rng(3)
    lat = rng.gamma(2.0, 2.0, 1400)
    start = 0
    for size in (1, 3, 30, 7, 200, 99, 400, 476):  # painted between uneven batches
        plot.append(np.arange(start, start + size) * 0.01, lat[start : start + size], 1)
        plot.paint_now()
        start += size
    expected = rolling_percentiles(lat[:start] * 1e6, 25)[-500:].T
    np.testing.assert_allclose(plot.rolling_percentiles(), expected)


def test_a_large_burst_computes_strided_windows(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(latency_series, "_MAX_WINDOWS", 100)
    plot = LatencyPlot(capacity=5000, percentile_window=20)
    qtbot.addWidget(plot)
    lat = np.random.default_rng(1).random(5000)
    plot.append(np.arange(5000) * 0.01, lat, 1)
    plot.paint_now()
    p50 = plot.rolling_percentiles()[0]
    assert np.isfinite(p50).all()
    assert p50[-1] == pytest.approx(np.percentile(lat[-20:], 50))  # the newest is exact
    assert np.unique(p50[19:]).size <= 101


def test_throughput_per_half_second_bin(plot: LatencyPlot) -> None:
    plot.append(np.arange(30) * 0.05, np.full(30, 4.0), batch=4)  # 10 per bin, 1.5 s
    t, per_s = plot.throughput()
    np.testing.assert_allclose(t, [0.25, 0.75])  # the third bin is still open
    np.testing.assert_allclose(per_s, 4 * 10 / 0.5)
    plot.append([1.6, 2.7], [4.0, 4.0], batch=8)  # closes 1.0-1.5, then empty bins
    t, per_s = plot.throughput()
    np.testing.assert_allclose(t, [0.25, 0.75, 1.25, 1.75, 2.25])
    np.testing.assert_allclose(per_s, [80, 80, 80, 16, 0])


def test_markers_carry_labels_and_drop_with_their_data(plot: LatencyPlot, qtbot: QtBot) -> None:
    feed(plot, 500)
    plot.add_marker(1.0, "INT8 dynamic")
    plot.add_marker(3.0, "batch 8")
    qtbot.wait(PAINT_MS)
    assert plot.markers == [(1.0, "INT8 dynamic"), (3.0, "batch 8")]
    lines = [i for i in plot.latency_plot.items if i.__class__.__name__ == "InfiniteLine"]
    assert sorted(line.label.textItem.toPlainText() for line in lines) == [
        "INT8 dynamic",
        "batch 8",
    ]
    assert {line.value() for line in lines} == {1.0, 3.0}
    feed(plot, 700, start=5.0)  # pushes samples before t=2 out of the ring
    plot.paint_now()
    assert plot.markers == [(3.0, "batch 8")]
    assert len([i for i in plot.latency_plot.items if i.__class__.__name__ == "InfiniteLine"]) == 1


def test_follow_mode_and_user_pan(plot: LatencyPlot, qtbot: QtBot) -> None:
    plot.window_s = 10.0
    feed(plot, 1000, dt=0.03)  # 30 s
    qtbot.wait(PAINT_MS)
    (x0, x1), (y0, y1) = plot.latency_plot.vb.viewRange()
    assert x1 - x0 == pytest.approx(10.0) and 29.97 + 0.1 <= x1 <= 29.97 + 0.1 + 0.5
    assert y0 == 0.0 and y1 >= 6.0
    with qtbot.waitSignal(plot.follow_changed) as blocker:
        plot.latency_plot.vb.sigRangeChangedManually.emit([True, True])  # a user pan
    assert blocker.args == [False] and not plot.following
    plot.latency_plot.vb.setXRange(3.0, 8.0, padding=0)
    feed(plot, 100, start=31.0)
    qtbot.wait(PAINT_MS)
    assert plot.latency_plot.vb.viewRange()[0] == pytest.approx([3.0, 8.0])
    double_click(plot._glw.viewport())
    qtbot.waitUntil(lambda: plot.following, timeout=2000)
    assert plot.latency_plot.vb.viewRange()[0][1] > 32.0


def test_followed_range_holds_still_between_steps(plot: LatencyPlot, qtbot: QtBot) -> None:
    plot.window_s = 10.0
    feed(plot, 1000, dt=0.03)  # to 29.97 s
    plot.paint_now()
    shown = plot.latency_plot.vb.viewRange()[0]
    assert shown == pytest.approx([20.5, 30.5])  # 10 s ending on the next 0.5 s step
    moves: list[object] = []  # each move redraws the axes' ticks and grid
    plot.latency_plot.vb.sigRangeChanged.connect(lambda *args: moves.append(args))
    feed(plot, 10, dt=0.03, start=30.0)  # to 30.27 s: still inside the step
    plot.paint_now()
    assert plot.latency_plot.vb.viewRange()[0] == shown and moves == []
    feed(plot, 10, dt=0.03, start=30.6)  # past the edge: one step on
    plot.paint_now()
    assert plot.latency_plot.vb.viewRange()[0] == pytest.approx([21.0, 31.0])


def test_follow_range_widens_in_round_spans_until_the_window_is_full() -> None:
    assert follow_range(5.0, 5.2, 60.0, (0.0, 1.0)) == (5.0, 6.2)  # at least 1 s, rounded
    assert follow_range(5.0, 7.0, 60.0, (5.0, 8.0)) == (5.0, 8.0)  # still fits: unchanged
    assert follow_range(5.0, 12.0, 60.0, (5.0, 8.0)) == (5.0, 15.0)
    assert follow_range(5.0, 60.0, 60.0, (5.0, 65.0)) == (5.0, 65.0)
    assert follow_range(0.0, 100.0, 60.0, (5.0, 65.0)) == (42.0, 102.0)  # 3 s steps


def test_follow_range_can_scroll_with_every_frame(plot: LatencyPlot) -> None:
    assert follow_range(0.0, 100.0, 60.0, (0.0, 1.0), stepped=False) == pytest.approx((40.6, 100.6))
    assert follow_range(5.0, 5.2, 60.0, (0.0, 1.0), stepped=False) == pytest.approx((4.8, 5.8))
    plot.window_s = 10.0
    plot.set_stepped_follow(False)
    feed(plot, 1000, dt=0.03)  # to 29.97 s
    plot.paint_now()
    assert plot.latency_plot.vb.viewRange()[0] == pytest.approx([20.07, 30.07])
    feed(plot, 10, dt=0.03, start=30.0)  # to 30.27 s: moved, no step to wait for
    plot.paint_now()
    assert plot.latency_plot.vb.viewRange()[0] == pytest.approx([20.37, 30.37])


def test_calm_top_holds_still_and_rounds_up() -> None:
    assert calm_top(0.0, 4.2) == 5.0  # 4.62 rounded up to the next nice number
    assert calm_top(5.0, 4.9) == 5.0 and calm_top(5.0, 2.6) == 5.0  # fits: unchanged
    assert calm_top(5.0, 2.4) == 3.0  # under half: shrinks
    assert calm_top(5.0, 5.1) == 6.0
    assert calm_top(0.0, 0.0123) == pytest.approx(0.015)
    assert calm_top(0.0, 870.0) == 1000.0


def test_follow_action_resumes(plot: LatencyPlot) -> None:
    plot.set_follow(False)
    assert not plot.follow_action.isChecked()
    plot.follow_action.trigger()
    assert plot.following


def test_latest_stats_over_the_trailing_window(plot: LatencyPlot) -> None:
    assert plot.latest_stats()["count"] == 0
    plot.append(np.arange(30.0), np.r_[np.full(20, 100.0), np.arange(1.0, 11.0)], 1)
    stats = plot.latest_stats()
    assert stats["count"] == 10
    assert stats["p50"] == pytest.approx(5.5)
    assert stats["p99"] == pytest.approx(np.percentile(np.arange(1.0, 11.0), 99))


def test_append_validates_its_input(plot: LatencyPlot) -> None:
    with pytest.raises(ValueError, match="differ in length"):
        plot.append([0.0, 1.0], [1.0], 1)
    with pytest.raises(ValueError, match="batch"):
        plot.append([0.0], [1.0], 0)
    plot.append([5.0], [1.0], 1)
    with pytest.raises(ValueError, match="must not decrease"):
        plot.append([4.0], [1.0], 1)
    plot.append([6.0, np.nan], [np.inf, 2.0], 1)  # non-finite points are skipped
    assert plot.samples()[0].size == 1


def test_clear_forgets_everything(plot: LatencyPlot, qtbot: QtBot) -> None:
    feed(plot, 100)
    plot.add_marker(0.5, "fp16")
    qtbot.wait(PAINT_MS)
    plot.set_follow(False)
    plot.clear()
    assert plot.samples()[0].size == 0 and plot.markers == [] and plot.following
    assert plot.drawn("latency")[0].size == 0
    feed(plot, 10, start=0.0)  # a new session may start at t=0 again
    plot.paint_now()
    assert plot.drawn("latency")[0].size == 10


def test_export_png_and_svg(plot: LatencyPlot, tmp_path: Path) -> None:
    feed(plot, 300)
    plot.add_marker(1.0, "INT8 dynamic")
    png, svg = tmp_path / "latency.png", tmp_path / "latency.svg"
    plot.export_image(str(png))
    plot.export_image(str(svg))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = svg.read_text(encoding="utf-8")
    assert "<svg" in text and "INT8 dynamic" in text and len(text) > 1000


def test_export_rejects_other_formats(plot: LatencyPlot, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.png or \.svg"):
        plot.export_image(str(tmp_path / "latency.jpg"))
    with pytest.raises(ValueError, match="no extension"):
        plot.export_image(str(tmp_path / "latency"))
    assert list(tmp_path.iterdir()) == []


def test_a_hidden_plot_paints_when_shown(qtbot: QtBot) -> None:
    plot = LatencyPlot(capacity=100)
    qtbot.addWidget(plot)
    feed(plot, 50)
    qtbot.wait(PAINT_MS)
    assert plot.drawn("latency")[0].size == 0  # hidden: the timer does not paint
    plot.show()
    assert plot.drawn("latency")[0].size == 50


def test_export_before_the_widget_was_shown(qtbot: QtBot, tmp_path: Path) -> None:
    plot = LatencyPlot(capacity=100)
    qtbot.addWidget(plot)
    feed(plot, 50)
    plot.export_image(str(tmp_path / "hidden.png"))
    assert (tmp_path / "hidden.png").stat().st_size > 1000


def test_axis_labels_and_legend(plot: LatencyPlot, qtbot: QtBot) -> None:
    """The two plots' titles are written across, each inside its own plot: vertical ones
    ran together ("samples/s latency (ms)") when the plots were short."""
    latency, rate = plot.titles
    assert (latency.text(), rate.text()) == ("latency (ms)", "samples/s")
    assert not plot.latency_plot.getAxis("left").label.isVisible()
    assert plot.throughput_plot.getAxis("bottom").labelText == "time (s)"
    plot.resize(700, 230)  # as short as the window lets it get
    plot.show()
    qtbot.waitUntil(plot.isVisible)
    a, b = (t.sceneBoundingRect() for t in plot.titles)
    assert not a.intersects(b)
    # the latency title sits above its plot (whose top holds the markers' labels)
    assert a.bottom() <= plot.latency_plot.vb.sceneBoundingRect().top() + 1
    assert plot.throughput_plot.vb.sceneBoundingRect().contains(b)
    names = [label.text for _, label in plot.legend.items]
    assert {"p50", "p90", "p99"} <= set(names)


def test_frame_rate_keeps_painting_within_its_cpu_budget(qtbot: QtBot) -> None:
    """Frames that cost more than the budget affords at 10 Hz slow the timer down; cheap
    ones keep it at the maximum; it never stops."""
    plot = LatencyPlot(capacity=10_000, cpu_budget=0.05)
    qtbot.addWidget(plot)
    plot.resize(600, 300)
    plot.show()
    assert plot.paint_hz == 10.0  # nothing measured yet
    plot._frame_s = 0.010  # 10 ms a frame: 5% of a core affords 5 frames a second
    assert plot.paint_hz == pytest.approx(5.0)
    plot._frame_s = 0.001
    assert plot.paint_hz == 10.0
    plot._frame_s = 1.0
    assert plot.paint_hz == lp.MIN_PAINT_HZ
    plot._frame_s = 0.0
    for i in range(8):  # real frames: their measured cost sets the interval
        feed(plot, 50, start=i * 0.5)
        qtbot.wait(150)
    assert plot._frames >= 3 and plot._frame_s > 0
    assert plot._timer.interval() == round(1000 / plot.paint_hz)


def test_pause_log_opens_at_the_marker_and_closes_at_the_next_sample() -> None:
    from widgets.models.pauses import PauseLog, connect_mask, gap_threshold

    log = PauseLog()
    log.samples_from(1.0)  # no pause open: nothing happens
    log.begin(10.0, "profiling")
    log.begin(11.0, "profiling")  # one at a time
    assert log.open is not None and len(log.pauses) == 1
    log.samples_from(16.5)
    assert log.open is None and (log.pauses[0].start_s, log.pauses[0].end_s) == (10.0, 16.5)
    assert log.forget_before(12.0) == [] and len(log.forget_before(17.0)) == 1
    x = np.array([0.0, 0.1, 0.2, 6.0, 6.1])
    assert connect_mask(x, gap_threshold(0.0, 60.0, 500)).tolist() == [1, 1, 0, 1, 1]
    assert gap_threshold(0.0, 3600.0, 500) == pytest.approx(21.6)  # zoomed out: wider


def test_a_profiling_pause_is_shaded_labelled_and_not_drawn_across(
    plot: LatencyPlot, qtbot: QtBot
) -> None:
    """Samples until 10 s, a profiling pass from 10.05 s, samples again at 16 s: the band
    covers the gap, says 'profiling', and no line joins 10 s to 16 s."""
    t1 = np.linspace(0.0, 10.0, 500)
    plot.append(t1, np.full(t1.size, 2.0), 1)
    plot.add_pause(10.05)
    t2 = np.linspace(16.0, 20.0, 200)
    plot.append(t2, np.full(t2.size, 2.0), 1)
    plot.paint_now()
    assert plot.pauses.bands() == [(10.05, 16.0, "profiling")]
    region, below, label = next(iter(plot.pauses._items.values()))
    assert region.getRegion() == (10.05, 16.0) and below.getRegion() == (10.05, 16.0)
    assert label.textItem.toPlainText() == "profiling"
    for name in ("latency", "p50"):
        path = plot.lines._lines[name].path
        starts = [
            path.elementAt(i).x for i in range(path.elementCount()) if path.elementAt(i).isMoveTo()
        ]
        assert len(starts) == 2 and starts[1] >= 16.0, name
    for start in (20.1, 21.1):  # two more passes, the last right behind the one before
        plot.add_pause(start)
        t3 = np.linspace(start + 0.4, start + 0.9, 20)
        plot.append(t3, np.full(t3.size, 2.0), 1)
    plot.paint_now()
    shown = [items[2].isVisible() for items in plot.pauses._items.values()]
    assert shown == [True, True, False]  # its band only: labels never pile up
    plot.clear()
    assert plot.pauses.bands() == [] and not plot.pauses._items


def test_timing_paused_during_a_profiling_pass_names_the_gap(
    plot: LatencyPlot, qtbot: QtBot
) -> None:
    """A pass begins at 10 s; at 10.2 s the user (or a study wanting the cores) pauses
    timing: the one band from 10 s says why the gap is there, until samples return."""
    t1 = np.linspace(0.0, 10.0, 500)
    plot.append(t1, np.full(t1.size, 2.0), 1)
    plot.add_pause(10.0)
    plot.paint_now()
    plot.add_pause(10.2, "paused: LLM serving", relabel=True)
    plot.add_pause(10.3, "profiling")  # a marker without relabel: the pause keeps its name
    t2 = np.linspace(30.0, 31.0, 50)
    plot.append(t2, np.full(t2.size, 2.0), 1)
    plot.paint_now()
    assert plot.pauses.bands() == [(10.0, 30.0, "paused: LLM serving")]
    (_, _, label) = next(iter(plot.pauses._items.values()))
    assert label.textItem.toPlainText() == "paused: LLM serving"
    plot.add_pause(31.5, "paused", relabel=True)  # none open: a pause of its own
    assert plot.pauses.bands()[-1] == (31.5, None, "paused")
