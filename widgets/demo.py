"""Manual demo: the four views fed with synthetic data, for a visual check and a paint benchmark.

python -m widgets.demo [--dark] [--screenshot out.png] [--quit-after 3]
python -m widgets.demo --bench          # paint time of the latency plot at 300k points
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import numpy as np
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (
    QApplication,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from engine.api import AccuracyResult, OpStat
from widgets.accuracy_badge import AccuracyBadge
from widgets.latency_plot import LatencyPlot
from widgets.op_table import OpTable
from widgets.telemetry_strip import TelemetryStrip

# (start s, label, batch, mean latency ms, cpu %)
PHASES = (
    (0.0, "FP32", 1, 11.5, 190.0),
    (40.0, "INT8 dynamic", 1, 4.6, 175.0),
    (75.0, "batch 8", 8, 24.0, 198.0),
)


class SyntheticRun:
    """Back-to-back inferences whose latency depends on the phase, with rare spikes."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.t = 0.0
        self.phase = -1

    def advance(self, dt: float) -> tuple[np.ndarray, np.ndarray, int, str | None]:
        index = max(i for i, p in enumerate(PHASES) if p[0] <= self.t)
        marker = PHASES[index][1] if index != self.phase and index > 0 else None
        self.phase = index
        _, _, batch, mean, _ = PHASES[index]
        n = max(1, int(dt * 1000 / mean))
        lat = mean * (0.92 + self.rng.gamma(4.0, 0.025, n))
        spikes = self.rng.random(n) < 0.004
        lat[spikes] *= self.rng.uniform(1.6, 3.0, spikes.sum())
        t = self.t + np.cumsum(lat + 0.05) / 1000
        self.t = float(t[-1])
        return t, lat, batch, marker

    def telemetry(self) -> dict[str, float]:
        cpu = PHASES[max(self.phase, 0)][4]
        return {
            "cpu_percent": cpu + self.rng.normal(0, 6),
            "rss_mb": 512.0 + 28.0 * (self.phase >= 1) + self.rng.normal(0, 0.5),
            "cpu_freq_mhz": 2900 + self.rng.normal(0, 40),
        }


def synthetic_ops(seed: int = 1) -> tuple[list[OpStat], list[OpStat]]:
    """A small transformer's profile: per-node and per-op-type rows with consistent numbers."""
    rng = np.random.default_rng(seed)
    kinds: tuple[tuple[str, float, float | None, float], ...] = (
        ("MatMul", 0.30, 2.0e8, 2.4e6),
        ("Add", 0.02, 0.0, 1.6e5),
        ("LayerNormalization", 0.05, 0.0, 2.0e5),
        ("Softmax", 0.08, 0.0, 4.0e5),
        ("Gelu", 0.06, 0.0, 6.0e5),
        ("Transpose", 0.03, None, 3.0e5),
    )
    rows: list[tuple[str, str, float, float | None, float]] = []
    for layer in range(4):
        for part in ("query", "key", "value", "output.dense", "intermediate.dense"):
            kind = kinds[0]
            rows.append(
                (
                    f"/encoder/layer.{layer}/attention/{part}/MatMul",
                    kind[0],
                    kind[1] * rng.uniform(0.7, 1.6),
                    kind[2],
                    kind[3],
                )
            )
        for kind in kinds[1:]:
            rows.append(
                (
                    f"/encoder/layer.{layer}/{kind[0].lower()}/{kind[0]}",
                    kind[0],
                    kind[1] * rng.uniform(0.7, 1.4),
                    kind[2],
                    kind[3],
                )
            )
    total = sum(r[2] for r in rows)
    nodes = []
    for name, op, ms, flops, nbytes in rows:
        s = ms / 1e3
        f = None if flops is None else int(flops if flops else nbytes)
        nodes.append(
            OpStat(
                name,
                op,
                "CPUExecutionProvider",
                1,
                ms,
                ms * 0.97,
                ms * 1.4,
                ms / total,
                int(nbytes),
                nbytes / s / 1e9,
                f,
                None if f is None else f / s / 1e9,
                None if f is None else f / nbytes,
            )
        )
    types = []
    for op in sorted({n.op_type for n in nodes}):
        group = [n for n in nodes if n.op_type == op]
        ms = sum(n.time_ms for n in group)
        nbytes = int(sum(n.bytes or 0 for n in group))
        f = None if any(n.flops is None for n in group) else sum(n.flops or 0 for n in group)
        s = ms / 1e3
        types.append(
            OpStat(
                op,
                op,
                "CPUExecutionProvider",
                len(group),
                ms,
                ms,
                ms * 1.3,
                ms / total,
                nbytes,
                nbytes / s / 1e9,
                f,
                None if f is None else f / s / 1e9,
                None if f is None else f / nbytes,
            )
        )
    return (sorted(nodes, key=lambda n: -n.time_ms), sorted(types, key=lambda n: -n.time_ms))


class DemoWindow(QMainWindow):
    def __init__(self) -> None:
        super().__init__()
        self.setWindowTitle("OpScope widgets demo (synthetic data)")
        self.run = SyntheticRun()
        self.latency = LatencyPlot()
        self.telemetry = TelemetryStrip()
        self.telemetry.set_x_link(self.latency.latency_plot)
        self.ops = OpTable()
        self.ops.set_ops(*synthetic_ops())
        self.badge = AccuracyBadge()
        self.badge.set_result(AccuracyResult("fp32", 0.012, 0.0011, 0.99987, 1.0, 16))
        title = QLabel(
            "<b>demo_transformer.onnx</b> · INT8 dynamic · batch 8 · "
            "CPUExecutionProvider · <i>synthetic data</i>"
        )
        header = QHBoxLayout()
        header.addWidget(title, 1)
        header.addWidget(QLabel("accuracy"))
        header.addWidget(self.badge)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.latency)
        split.addWidget(self.ops)
        split.setSizes([460, 300])
        body = QWidget()
        layout = QVBoxLayout(body)
        layout.addLayout(header)
        layout.addWidget(split, 1)
        layout.addWidget(self.telemetry)
        self.setCentralWidget(body)
        self.resize(1280, 880)
        for _ in range(900):  # 90 s of history, then live
            self.tick()
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.tick)
        self._timer.start(100)

    def tick(self) -> None:
        t, lat, batch, marker = self.run.advance(0.1)
        if marker is not None:
            self.latency.add_marker(float(t[0]), marker)
        self.latency.append(t, lat, batch)
        if int(self.run.t * 10) % 5 == 0:
            self.telemetry.append(self.run.t, self.run.telemetry())


def bench_paint(points: int = 300_000, repeats: int = 50) -> dict[str, float]:
    """Median milliseconds per paint (handing a 0.1 s batch to the items + rendering the
    widget) with `points` samples retained, following the last 60 s and showing everything."""
    plot = LatencyPlot(capacity=points)
    plot.resize(1200, 500)
    plot.show()
    run = SyntheticRun()
    while plot.samples()[0].size < points:
        t, lat, batch, _ = run.advance(20.0)
        plot.append(t, lat, batch)
    plot.paint_now()
    QApplication.processEvents()
    result: dict[str, float] = {"points": float(plot.samples()[0].size)}
    for mode in ("follow", "all"):
        if mode == "all":
            plot.set_follow(False)
            plot.latency_plot.vb.autoRange(padding=0)
        update, render = [], []
        for _ in range(repeats):
            t, lat, batch, _ = run.advance(0.1)
            plot.append(t, lat, batch)
            t0 = time.perf_counter()
            plot.paint_now()
            t1 = time.perf_counter()
            plot.grab()
            render.append(time.perf_counter() - t1)
            update.append(t1 - t0)
        total = np.add(update, render)
        result[f"{mode}_update_ms"] = 1e3 * float(np.median(update))
        result[f"{mode}_render_ms"] = 1e3 * float(np.median(render))
        result[f"{mode}_total_ms"] = 1e3 * float(np.median(total))
        result[f"{mode}_total_p90_ms"] = 1e3 * float(np.percentile(total, 90))
        result[f"{mode}_total_min_ms"] = 1e3 * float(total.min())  # least disturbed
    plot.close()
    plot.deleteLater()
    return result


def dark_palette() -> QPalette:
    palette = QPalette()
    for role, color in (
        (QPalette.ColorRole.Window, "#202124"),
        (QPalette.ColorRole.Base, "#17181a"),
        (QPalette.ColorRole.AlternateBase, "#222326"),
        (QPalette.ColorRole.Text, "#e3e3e3"),
        (QPalette.ColorRole.WindowText, "#e3e3e3"),
        (QPalette.ColorRole.Button, "#2a2b2e"),
        (QPalette.ColorRole.ButtonText, "#e3e3e3"),
        (QPalette.ColorRole.Highlight, "#3d6fd1"),
        (QPalette.ColorRole.HighlightedText, "#ffffff"),
        (QPalette.ColorRole.ToolTipBase, "#2a2b2e"),
        (QPalette.ColorRole.ToolTipText, "#e3e3e3"),
        (QPalette.ColorRole.PlaceholderText, "#8a8a8a"),
    ):
        palette.setColor(role, QColor(color))
    return palette


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--screenshot", help="save a PNG of the window, then quit")
    parser.add_argument("--quit-after", type=float, help="seconds before quitting")
    parser.add_argument("--dark", action="store_true", help="dark palette")
    parser.add_argument("--bench", action="store_true", help="print paint times and quit")
    parser.add_argument("--points", type=int, default=300_000, help="points for --bench")
    args = parser.parse_args(argv)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    app.setStyle("Fusion")
    if args.dark:
        app.setPalette(dark_palette())
    if args.bench:
        for key, value in bench_paint(args.points).items():
            print(f"{key:>18}: {value:,.2f}")
        return 0
    window = DemoWindow()
    window.show()

    def finish() -> None:
        if args.screenshot:
            window.grab().save(args.screenshot)
        window.close()
        app.quit()

    if args.quit_after is not None or args.screenshot:
        QTimer.singleShot(round(1000 * (args.quit_after or 1.0)), finish)
    app.exec()
    window.deleteLater()
    return 0


if __name__ == "__main__":
    sys.exit(main())
