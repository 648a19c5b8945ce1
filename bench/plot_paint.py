"""Cost of one live frame of the latency plot, in the GUI thread.

Feeds the plot as the engine host does (a batch every 50 ms at a given inference rate) and,
once the followed window is full, measures the GUI thread's CPU time per 10 Hz frame:
`paint_now` (data reduced and handed to the items) and the paint it schedules. No engine
runs: this isolates the window's own cost, which the event-loop lag budget (16 ms) pays for.
The latencies are gamma-distributed with a wide spread, a pessimistic case for drawing.
Then the same for one repaint of the telemetry strip (seven sparklines fed at 10 Hz).

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/plot_paint.py [--rate 300] [--frames 200]

A rate below 20/s feeds a sample every 1/rate s (a slow run: each one a dot and a line).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rate", type=float, default=300.0, help="inferences per second fed")
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--width", type=int, default=1400)
    args = ap.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from widgets.latency_plot import LatencyPlot

    app = QApplication.instance() or QApplication([])
    plot = LatencyPlot()
    plot.resize(args.width, 520)
    plot.show()
    app.processEvents()
    rng = np.random.default_rng(0)
    t = 0.0
    sent = 0  # samples fed so far: sample k starts at k / rate

    def feed(seconds: float) -> None:
        nonlocal t, sent
        for _ in range(round(seconds / 0.05)):
            t += 0.05
            due = int(t * args.rate)  # below 20/s, most batches are empty
            if due > sent:
                plot.append(np.arange(sent, due) / args.rate, rng.gamma(8.0, 0.5, due - sent), 1)
                sent = due

    feed(plot.window_s * 1.3)  # a full followed window plus the margin
    plot.paint_now()
    plot.add_marker(t - 20, "INT8 dynamic")
    view = plot._glw.viewport()
    data_ms, render_ms = [], []
    for _ in range(args.frames):
        feed(0.1)  # one 10 Hz frame's worth
        t0 = time.thread_time()
        plot.paint_now()
        t1 = time.thread_time()
        app.processEvents()  # the update the new data scheduled: one paint of the view
        t2 = time.thread_time()
        data_ms.append((t1 - t0) * 1e3)
        render_ms.append((t2 - t1) * 1e3)
    d, r = np.array(data_ms), np.array(render_ms)
    tot = d + r
    n_pts = plot.samples()[0].size
    print(
        f"latency plot, {args.rate:g} inf/s, {n_pts:,} points retained, "
        f"view {view.width()}x{view.height()} px, {args.frames} frames"
    )
    for name, a in (("paint_now", d), ("render", r), ("frame", tot)):
        print(
            f"  {name:9s} CPU p50 {np.percentile(a, 50):6.2f} ms  "
            f"p99 {np.percentile(a, 99):6.2f} ms  max {a.max():6.2f} ms"
        )
    plot.hide()  # its paint timer stays quiet while the strip is measured
    strip_cost(app, args.width)


def strip_cost(app: object, width: int, repaints: int = 60) -> None:
    """GUI thread CPU of one telemetry-strip repaint: seven series, sampled at 10 Hz, the
    last 60 s shown (as the app does at its 1 Hz strip rate)."""
    from widgets.telemetry_strip import TelemetryStrip

    strip = TelemetryStrip(paint_hz=1.0)
    strip.resize(width, 80)
    strip.show()
    strip._timer.stop()  # repaints are driven below, one per 10 samples
    names = ["cpu_percent", "process_cpu_percent", "rss_mb", "cpu0_percent", "cpu1_percent",
             "cpu_freq_mhz", "mem_used_percent"]  # fmt: skip
    rng = np.random.default_rng(0)
    t = 0.0
    cost = []
    for i in range(600 + 10 * repaints):
        t += 0.1
        strip.append(t, {n: float(rng.uniform(0, 100)) for n in names})
        if i >= 600 and i % 10 == 9:
            start = time.thread_time()
            strip.paint_now()
            app.processEvents()  # type: ignore[attr-defined]
            cost.append((time.thread_time() - start) * 1e3)
    print(
        f"telemetry strip, {len(names)} series at 10 Hz, {repaints} repaints: "
        f"CPU p50 {np.percentile(cost, 50):6.2f} ms  p99 {np.percentile(cost, 99):6.2f} ms"
    )


if __name__ == "__main__":
    main()
