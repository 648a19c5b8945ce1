"""TelemetryStrip, AccuracyBadge and the demo script."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtGui import QPalette
from pytestqt.qtbot import QtBot

from engine.events import AccuracyResult
from widgets import demo, theme
from widgets.accuracy_badge import AccuracyBadge, grade
from widgets.latency_plot import LatencyPlot
from widgets.sparkline import Sparkline
from widgets.telemetry_strip import TelemetryStrip, describe, format_value


# ---------------------------------------------------------------------------- telemetry
@pytest.fixture
def strip(qtbot: QtBot) -> TelemetryStrip:
    widget = TelemetryStrip(capacity=50)
    qtbot.addWidget(widget)
    widget.resize(800, 80)
    widget.show()
    return widget


def test_series_appear_with_their_current_value(strip: TelemetryStrip, qtbot: QtBot) -> None:
    strip.append(0.0, {"cpu_percent": 175.0, "rss_mb": 500.0, "cpu_freq_mhz": 2800})
    strip.append(0.5, {"cpu_percent": 180.0, "rss_mb": 512.0, "cpu_freq_mhz": 2900})
    assert strip.names == ["cpu_percent", "rss_mb", "cpu_freq_mhz"]
    qtbot.waitUntil(lambda: strip.label_text("cpu_percent") == "CPU 180%", timeout=2000)
    assert strip.label_text("rss_mb") == "RSS 512 MB"
    assert strip.label_text("cpu_freq_mhz") == "CPU clock 2,900 MHz"
    assert list(strip.sparkline("rss_mb").data()[1]) == [500.0, 512.0]


def test_new_names_arrive_later(strip: TelemetryStrip, qtbot: QtBot) -> None:
    strip.append(0.0, {"cpu_percent": 100.0})
    strip.append(
        1.0,
        {
            "cpu_percent": 100.0,
            "gpu_util_percent": 87.5,
            "gpu_power_w": 212.0,
            "gpu_temp_c": math.nan,
        },
    )
    assert strip.names == ["cpu_percent", "gpu_util_percent", "gpu_power_w"]  # NaN skipped
    qtbot.waitUntil(lambda: strip.label_text("gpu_util_percent") == "GPU util 87.5%", timeout=2000)
    assert strip.label_text("gpu_power_w") == "GPU power 212 W"
    t, v = strip.data("gpu_power_w")
    assert list(t) == [1.0] and list(v) == [212.0]


def test_series_buffers_are_bounded(strip: TelemetryStrip) -> None:
    for i in range(120):
        strip.append(float(i), {"rss_mb": float(i)})
    t, v = strip.data("rss_mb")
    assert t.size == 50 and v[0] == 70.0 and v[-1] == 119.0


def test_x_link_shares_the_latency_plot_range(strip: TelemetryStrip, qtbot: QtBot) -> None:
    plot = LatencyPlot(capacity=100)
    qtbot.addWidget(plot)
    strip.append(0.0, {"cpu_percent": 50.0})
    strip.set_x_link(plot.plot_item)
    plot.latency_plot.vb.setXRange(10.0, 20.0, padding=0)
    strip.paint_now()  # the range follows at the strip's paint rate, not on every move
    assert strip.sparkline("cpu_percent").x_range() == pytest.approx((10.0, 20.0))
    strip.append(1.0, {"cpu_percent": 60.0, "rss_mb": 1.0})  # a later series is linked too
    plot.latency_plot.vb.setXRange(30.0, 40.0, padding=0)
    plot.latency_plot.vb.setXRange(35.0, 45.0, padding=0)
    strip.paint_now()
    assert strip.sparkline("rss_mb").x_range() == pytest.approx((35.0, 45.0))


def line_pixels(spark: Sparkline) -> np.ndarray:
    """(x, y) of every pixel the line coloured in a grab of the sparkline."""
    image = spark.grab().toImage()
    background = spark.palette().color(QPalette.ColorRole.Base).rgb()
    return np.array(
        [
            (x, y)
            for y in range(image.height())
            for x in range(image.width())
            if image.pixel(x, y) != background
        ]
    )


@pytest.mark.parametrize("n", [100, 20_000])  # 20k: reduced to a per-column envelope
def test_sparkline_draws_each_spike_where_it_happened(qtbot: QtBot, n: int) -> None:
    spark = Sparkline()
    qtbot.addWidget(spark)
    spark.resize(200, 34)
    t = np.linspace(0.0, 100.0, n)
    v = np.zeros(n)
    v[n // 2] = 10.0  # one sample, at t = 50
    spark.set_data(t, v)
    spark.set_x_range(0.0, 100.0)
    assert spark.y_range() == pytest.approx((-0.8, 10.8))  # 8% padding
    pixels = line_pixels(spark)
    top = pixels[pixels[:, 1] == pixels[:, 1].min()]
    assert pixels[:, 1].min() <= 3 and abs(top[:, 0].mean() - 100) <= 3
    assert pixels[:, 1].max() >= 28  # the flat part, near the bottom


def test_sparkline_reduces_again_for_a_new_width(qtbot: QtBot) -> None:
    spark = Sparkline()
    qtbot.addWidget(spark)
    spark.resize(100, 34)
    t = np.linspace(0.0, 100.0, 20_000)
    v = np.zeros(t.size)
    v[15_000] = 10.0  # at t = 75
    spark.set_data(t, v)
    spark.set_x_range(0.0, 100.0)
    line_pixels(spark)  # painted (reduced) at 100 px
    spark.resize(400, 34)
    pixels = line_pixels(spark)
    top = pixels[pixels[:, 1] == pixels[:, 1].min()]
    assert abs(top[:, 0].mean() - 300) <= 3


def test_sparkline_fits_y_to_the_visible_range(qtbot: QtBot) -> None:
    spark = Sparkline()
    qtbot.addWidget(spark)
    spark.resize(200, 34)
    spark.set_data(np.arange(10.0), np.r_[np.full(5, 3.0), np.full(5, 100.0)])
    spark.set_x_range(0.0, 4.5)  # only the flat 3.0 part; the line runs on to t = 5
    assert spark.y_range() == pytest.approx((1.5, 4.5))
    rows = np.unique(line_pixels(spark)[:, 1])
    assert rows.min() <= 2 and rows.max() >= 15  # level across the middle, then up
    spark.set_x_range(0.0, 3.0)
    rows = np.unique(line_pixels(spark)[:, 1])
    assert rows.min() >= 14 and rows.max() <= 19  # a level line across the middle
    spark.set_x_range(0.0, 9.0)
    assert spark.y_range()[1] > 100.0


def test_an_idle_link_leaves_the_strip_on_its_own_window(
    strip: TelemetryStrip, qtbot: QtBot
) -> None:
    """Before the linked plot has samples (a bad first model), the sparklines follow their
    own last minute rather than the empty plot's 0-1 s."""
    plot = LatencyPlot(capacity=100)
    qtbot.addWidget(plot)
    strip.set_x_link(plot.plot_item, lambda: plot.samples()[0].size > 0)
    for t in range(0, 90, 10):
        strip.append(float(t), {"cpu_percent": 50.0})
    strip.paint_now()
    assert strip.sparkline("cpu_percent").x_range() == pytest.approx((20.0, 80.0))
    plot.append(np.array([70.0, 71.0]), np.array([1.0, 1.2]), 1)
    plot.latency_plot.vb.setXRange(60.0, 75.0, padding=0)
    strip.paint_now()
    assert strip.sparkline("cpu_percent").x_range() == pytest.approx((60.0, 75.0))


def test_series_names_are_described() -> None:
    assert describe("gpu_mem_used_mb") == ("GPU mem used", " MB")
    assert describe("dram_bw_util_percent") == ("DRAM bw util", "%")
    assert describe("weird") == ("weird", "")
    assert format_value(math.inf, "%") == "–"
    assert format_value(0.123456, " W") == "0.123 W"


def test_set_format_overrides_a_title(strip: TelemetryStrip, qtbot: QtBot) -> None:
    strip.set_format("threads", "Threads", "")
    strip.append(0.0, {"threads": 8})
    qtbot.waitUntil(lambda: strip.label_text("threads") == "Threads 8", timeout=2000)


# ---------------------------------------------------------------------------- accuracy badge
def result(cosine: float, top1: float | None = 1.0) -> AccuracyResult:
    return AccuracyResult(
        baseline="fp32",
        max_abs_err=0.012,
        mean_abs_err=0.001,
        cosine=cosine,
        top1_agreement=top1,
        samples=16,
        per_output={"logits": {"cosine": cosine, "max_abs_err": 0.012}},
    )


@pytest.fixture
def badge(qtbot: QtBot) -> AccuracyBadge:
    widget = AccuracyBadge()
    qtbot.addWidget(widget)
    return widget


def test_badge_baseline_and_pending(badge: AccuracyBadge) -> None:
    assert badge.text() == "FP32 baseline" and badge.state == "baseline"
    badge.set_pending()
    assert badge.state == "pending" and "checking" in badge.text()
    badge.set_result(None)
    assert badge.text() == "FP32 baseline"


def test_badge_good_result_is_green(badge: AccuracyBadge) -> None:
    badge.set_result(result(0.99987))
    assert badge.text() == "meets 0.999: 0.99987\ntop-1 100%"
    assert badge.state == "good" and theme.GOOD in badge.styleSheet()
    tip = badge.toolTip()
    assert "16" in tip and "0.99987000" in tip and "logits" in tip and "0.001" in tip


@pytest.mark.parametrize(
    ("cosine", "state", "color"),
    [
        (0.999, "good", theme.GOOD),
        (0.995, "warn", theme.WARN),  # within 10x the 0.001 gap
        (0.9901, "warn", theme.WARN),
        (0.98, "bad", theme.BAD),
        (float("nan"), "warn", theme.WARN),  # nothing comparable: not green
    ],
)
def test_badge_grades_against_the_tolerance(
    badge: AccuracyBadge, cosine: float, state: str, color: str
) -> None:
    badge.set_result(result(cosine, top1=None))
    assert badge.state == state and color in badge.styleSheet()
    assert "top-1" not in badge.text()


def test_badge_names_the_metric_and_the_worst_output_in_full(badge: AccuracyBadge) -> None:
    """Issue #50: the judged figure, the check that set it and what the samples were, each
    whole at the dock's width (the badge wraps rather than cutting "3 nodes kept in FP32")."""
    checks = [
        {"output": "output0", "part": "channels 0-3", "metric": "cosine", "worst": 0.99998,
         "mean": 0.99999, "sample": 3, "samples": 64},
        {"output": "output0", "part": "channels 4-83", "metric": "cosine", "worst": 0.0,
         "mean": 0.0, "sample": 0, "samples": 64},
        {"output": "output0", "part": "", "metric": "detections kept", "worst": 0.0,
         "mean": 0.0, "sample": 0, "samples": 64, "detail": "0 of FP32's 41 matched, 0 found"},
    ]  # fmt: skip
    r = AccuracyResult("fp32", 2.0, 0.1, 0.0, None, 64, {}, checks=checks,
                       data="generated: 64 natural-statistics images in [0,1]")  # fmt: skip
    badge.set_int8({"min_cosine": 0.99, "met": False, "excluded_nodes": ["a", "b", "c"],
                    "settings": {"precision": "int8-static"}})  # fmt: skip
    badge.set_tolerance(0.99)
    badge.set_result(r)
    lines = badge.text().split("\n")
    assert lines[0] == "misses 0.99: 0.00000" and badge.state == "bad"
    assert lines[1] == "worst: output0 channels 4-83 cosine 0.0000"
    assert "int8-static; INT8 missed 0.99 (3 nodes in FP32)" in lines
    assert lines[-1] == "on 64 natural-statistics images in [0,1]"
    badge.resize(260, 200)  # the dock's default width
    assert badge.wordWrap()
    assert "detections kept 0.0% (0 of FP32&#x27;s 41 matched, 0 found)" in badge.toolTip()


def test_badge_regrades_when_the_tolerance_changes(badge: AccuracyBadge) -> None:
    badge.set_result(result(0.9995))
    assert badge.state == "good"
    badge.set_tolerance(0.99999)
    assert badge.state == "bad" and theme.BAD in badge.styleSheet()
    badge.set_tolerance(0.9999)
    assert badge.state == "warn"
    with pytest.raises(ValueError):
        badge.set_tolerance(1.5)


def test_grade_boundaries() -> None:
    assert grade(0.999, 0.999) == "good"
    assert grade(0.99, 0.999) == "warn"
    assert grade(0.9899, 0.999) == "bad"


# ---------------------------------------------------------------------------- demo
def test_demo_runs_and_saves_a_screenshot(tmp_path: Path) -> None:
    """In its own process: running and quitting an event loop here would leave this test
    process's QApplication quitting for the tests after it."""
    import subprocess
    import sys

    out = tmp_path / "demo.png"
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run(
        [sys.executable, "-m", "widgets.demo", "--screenshot", str(out), "--quit-after", "0.5"],
        cwd=root,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_bench_reports_paint_times(qtbot: QtBot) -> None:
    result = demo.bench_paint(points=3000, repeats=2)
    assert result["points"] == 3000
    assert all(np.isfinite(v) and v > 0 for v in result.values())
