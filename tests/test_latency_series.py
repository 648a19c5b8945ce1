"""The latency plot's data model without Qt: percentiles from raw samples, throughput
bins, bounded memory, bad input refused."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT
from widgets.models.latency_series import BIN_S, LatencySeries


def test_rolling_percentiles_are_those_of_the_trailing_raw_samples() -> None:
    rng = np.random.default_rng(0)
    series = LatencySeries(capacity=1000, percentile_window=50)
    t = np.arange(300) * 0.01
    lat = rng.gamma(2.0, 3.0, 300)
    series.append(t[:120], lat[:120], 1)
    series.update_percentiles()
    series.append(t[120:], lat[120:], 1)  # only the new samples are computed next time
    series.update_percentiles()
    pct = series.rolling_percentiles()
    for i in (0, 10, 49, 50, 199, 299):
        window = lat[max(0, i - 49) : i + 1]
        np.testing.assert_allclose(pct[:, i], np.percentile(window, (50, 90, 99)))
    stats = series.latest_stats()
    assert stats["count"] == 50
    assert stats["p99"] == pytest.approx(np.percentile(lat[-50:], 99))


def test_the_trailing_window_restarts_at_a_config_change() -> None:
    """Batch 1 at 10 ms then batch 16 at 346 ms: the numbers after the change are batch
    16's alone, with samples/s beside them (p50 up, throughput up too)."""
    series = LatencySeries(percentile_window=200)
    series.append(np.arange(300) * 0.01, np.full(300, 10.0), 1)
    before = series.latest_stats()
    assert before["count"] == 200 and before["samples_per_s"] == pytest.approx(100.0)
    series.start_segment()
    assert series.latest_stats()["count"] == 0  # nothing of the new config yet
    t = 3.0 + np.arange(20) * 0.05
    series.append(t, np.full(20, 346.0), 16)
    after = series.latest_stats()
    assert after["count"] == 20 and after["segment"] == 20
    assert after["p50"] == after["p90"] == 346.0  # no batch-1 sample mixed in
    assert after["samples_per_s"] == pytest.approx(16 / 0.05)
    series.clear()
    assert series.latest_stats()["segment"] == 0


def test_the_rolling_lines_restart_at_a_config_change() -> None:
    """The plotted p50/p90/p99 after a change are the new config's alone (expanding from
    its first sample), whether the change lands between paints or within one; the old
    config's points keep their values. They used to drift from the old level to the new
    one over a whole window."""
    for paint_between in (True, False):
        series = LatencySeries(capacity=1000, percentile_window=50)
        series.append(np.arange(100) * 0.01, np.full(100, 10.0), 1)
        if paint_between:
            series.update_percentiles()
        series.start_segment()
        new = np.linspace(40.0, 60.0, 30)
        series.append(1.0 + np.arange(30) * 0.01, new, 1)
        series.update_percentiles()
        pct = series.rolling_percentiles()
        np.testing.assert_allclose(pct[:, 99], [10.0, 10.0, 10.0])
        for k in (0, 1, 29):
            np.testing.assert_allclose(pct[:, 100 + k], np.percentile(new[: k + 1], (50, 90, 99)))
        assert pct[:, 100:].min() >= 40.0  # no old sample mixed in


def test_throughput_bins_count_samples_times_batch() -> None:
    series = LatencySeries()
    t = np.arange(0, 2.0, 0.01)  # 100 inferences/s for 2 s
    series.append(t, np.ones_like(t), batch=4)
    centres, per_s = series.throughput()
    assert centres.tolist() == [0.25, 0.75, 1.25]  # the last bin is still open
    np.testing.assert_allclose(per_s, 400.0, rtol=0.03)
    series.append([2.6], [1.0], batch=4)  # closes the open bin and an empty one
    centres, per_s = series.throughput()
    assert centres[-1] == pytest.approx(2.0 + BIN_S / 2) and per_s[-1] == 0.0


def test_memory_is_bounded_and_bad_input_is_refused() -> None:
    series = LatencySeries(capacity=100, percentile_window=10)
    for k in range(10):
        series.append(np.arange(50) + 50.0 * k, np.ones(50), 1)
    assert len(series) == 100 and series.total == 500
    assert not series.append([np.nan], [1.0], 1)  # nothing finite: nothing added
    with pytest.raises(ValueError, match="must not decrease"):
        series.append([0.0], [1.0], 1)
    with pytest.raises(ValueError, match="batch"):
        series.append([1e6], [1.0], 0)
    series.clear()
    assert len(series) == 0 and series.latest_stats()["count"] == 0


def test_the_model_imports_no_qt() -> None:
    code = (
        "import sys, widgets.models.latency_series\n"
        "print(','.join(m for m in ('PySide6', 'pyqtgraph') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""
