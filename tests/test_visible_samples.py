"""What the latency plot draws for the range in view (widgets/models/visible_samples.py) and
how its figures say which samples they are over, without Qt: a run below one inference per
second draws every inference as a dot joined by a line, broken only at pauses; a fast run
is reduced to pixel columns as before."""

from __future__ import annotations

import numpy as np

from widgets.models.columns import column_envelope, column_starts
from widgets.models.latency_series import LatencySeries, duration_text, window_text
from widgets.models.pauses import connect_mask
from widgets.models.visible_samples import POINT_PX, smooth_rate, visible

WIDTH = 1000.0
COLUMNS = 500


def _pcts(n: int) -> dict[str, np.ndarray]:
    return {q: np.full(n, v) for q, v in (("p50", 1266.0), ("p90", 1400.0), ("p99", 1500.0))}


def test_below_one_inference_a_second_every_inference_is_a_dot_joined_by_a_line() -> None:
    """Batch 8 under load: p50 1,266 ms, 0.8 inferences/s; the plot was empty (no two
    samples within the 1 s join limit, and lines were all it drew)."""
    rng = np.random.default_rng(0)
    lat = rng.gamma(8.0, 160.0, 48)  # ms, p50 about 1.27 s
    t = np.cumsum(lat / 1e3)  # a closed loop: the next starts when this one ends
    shown = visible(t, lat, _pcts(t.size), t[-1] - 60.0, t[-1] + 0.6, WIDTH, COLUMNS)
    assert shown.dots is not None
    assert np.array_equal(shown.dots[0], t) and np.array_equal(shown.dots[1], lat)
    x, y, mask = shown.lines["latency"]
    assert np.array_equal(x, t) and np.array_equal(y, lat)
    assert mask[:-1].all()  # one line through them all
    assert all(shown.lines[q][2][:-1].all() for q in ("p50", "p90", "p99"))


def test_sparse_lines_break_at_pauses_and_at_gaps_far_wider_than_their_spacing() -> None:
    t = np.r_[np.arange(0.0, 30.0, 1.25), np.arange(45.0, 60.0, 1.25), 200.0]
    lat = np.full(t.size, 1250.0)
    shown = visible(t, lat, {}, 0.0, 201.0, WIDTH, COLUMNS, breaks=[30.1])
    _, _, mask = shown.lines["latency"]
    broken = np.flatnonzero(mask[:-1] == 0)
    assert t[broken].tolist() == [28.75, 58.75]  # the profiling pass; 141 s of silence
    assert shown.dots is not None  # the samples themselves still show


def test_a_fast_run_is_reduced_to_pixel_columns_without_dots() -> None:
    t = np.arange(0.0, 60.0, 1 / 300)  # 300 inferences/s
    lat = np.random.default_rng(1).gamma(8.0, 0.5, t.size)
    shown = visible(t, lat, _pcts(t.size), 0.0, 60.0, WIDTH, COLUMNS, breaks=[20.0])
    assert shown.dots is None
    x, y, mask = shown.lines["latency"]
    ex, ey = column_envelope(t, lat, column_starts(t, COLUMNS))
    assert np.array_equal(x, ex) and np.array_equal(y, ey)
    assert (mask[:-1] == 0).sum() == 1  # the pause at 20 s, and nothing else


def test_dots_only_where_they_can_be_told_apart() -> None:
    for rate, dotted in ((1.0, True), (2.5, True), (10.0, False)):
        t = np.arange(0.0, 60.0, 1 / rate)
        shown = visible(t, np.ones(t.size), {}, 0.0, 60.0, WIDTH, COLUMNS)
        assert (shown.dots is not None) is dotted, rate
        assert shown.lines["latency"][2][:-1].all()  # joined at any rate
    assert POINT_PX * 60.0 / WIDTH < 0.4  # 2.5/s: 0.4 s apart, 6.7 px


def test_a_slow_config_beside_a_fast_one_in_view_still_draws() -> None:
    """The window a moment after batch 1 (3.7 ms) became batch 64 under load (1.27 s):
    thousands of samples in view, so pixel columns; the slow ones are still joined and
    each one a dot, and the config change's gap is not a break."""
    fast = np.arange(0.0, 12.0, 0.0037)
    slow = 12.0 + 1.27 * np.arange(1, 38)
    t = np.r_[fast, slow]
    lat = np.r_[np.full(fast.size, 3.7), np.full(slow.size, 1270.0)]
    shown = visible(t, lat, _pcts(t.size), 0.0, 60.0, WIDTH, COLUMNS)
    x, _, mask = shown.lines["latency"]
    assert x.size < t.size  # reduced
    assert mask[:-1].all()
    assert shown.dots is not None and np.array_equal(shown.dots[0], slow)
    assert shown.lines["p50"][2][:-1].all()


def test_a_stall_far_longer_than_the_spacing_around_it_breaks_the_line() -> None:
    """Unannounced gaps: 5 s in a 300/s run, 20 s in a 1.3 s run, break; a 3 s inference
    among 1.3 s ones (its own latency) does not."""
    fast = np.r_[np.arange(0.0, 10.0, 1 / 300), np.arange(15.0, 20.0, 1 / 300)]
    _, _, mask = visible(fast, np.ones(fast.size), {}, 0.0, 20.0, WIDTH, COLUMNS).lines["latency"]
    assert (mask[:-1] == 0).sum() == 1
    slow = np.r_[1.3 * np.arange(10), 11.7 + 3.0, 14.7 + 1.3 * np.arange(1, 5), 40.0, 41.3]
    _, _, mask = visible(slow, np.ones(slow.size), {}, 0.0, 42.0, WIDTH, COLUMNS).lines["latency"]
    assert slow[np.flatnonzero(mask[:-1] == 0)].tolist() == [14.7 + 1.3 * 4]
    x = np.array([0.0, 1.0, 2.0, 3.0])
    assert connect_mask(x, 5.0, breaks=[1.5, -1.0, 99.0]).tolist() == [1, 0, 1, 1]


def test_the_figures_say_which_samples_they_are_over() -> None:
    series = LatencySeries(percentile_window=200)
    t = np.arange(0.0, 400 * 1.25, 1.25)
    series.append(t, np.full(t.size, 1250.0), 8)
    series.start_segment()
    series.append(t[-1] + 1.25 * np.arange(1, 301), np.full(300, 1266.0), 8)
    stats = series.latest_stats()
    assert stats["count"] == 200 and stats["span_s"] == 199 * 1.25
    assert window_text(stats) == "over the last 200 inferences (4.15 min)"
    assert window_text(stats, series.total) == (
        "over the last 200 inferences (4.15 min) of 300 since the config change"
    )
    fresh = LatencySeries(percentile_window=200)
    fresh.append([0.0, 1.3, 2.6], [1.0, 1.0, 1.0], 1)
    assert window_text(fresh.latest_stats(), fresh.total) == "over all 3 inferences (2.6 s)"
    assert window_text({"count": 0}) == "no inference yet"
    assert [duration_text(s) for s in (0.85, 41.2, 249.0)] == ["850 ms", "41.2 s", "4.15 min"]


def test_a_slow_runs_throughput_reads_steady_not_as_stalls() -> None:
    """0.8 inferences of batch 64 a second: the 0.5 s bins alternate 0 and 128 samples/s;
    averaged over about four spacings they read near the run's 51 samples/s. A fast run's
    bins are left as they are."""
    t = np.arange(0.0, 60.0, 1.25)
    series = LatencySeries()
    series.append(t, np.full(t.size, 1250.0), 64)
    _, rate = series.throughput()
    assert set(np.unique(rate)) == {0.0, 128.0}
    shown = visible(*series.samples(), {}, 0.0, 60.0, WIDTH, COLUMNS)
    assert shown.spacing_s == 1.25
    smooth = smooth_rate(rate, shown.spacing_s)
    assert np.all(np.abs(smooth[6:-6] - 51.2) < 51.2 * 0.2)
    fast = np.array([300.0, 0.0, 300.0])
    assert smooth_rate(fast, 1 / 300) is fast
