"""The desktop app under load: Qt event-loop lag while the engine runs flat out, engine
throughput with the window open and painting vs `opscope bench` on the same model, and the
time from launch to the first latency point.

Rounds alternate GUI and CLI so machine noise hits both alike. Run headless or on a screen:
    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/app_responsiveness.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from results_file import publish  # noqa: E402

MODEL = ROOT / "resources/models/demo_transformer.onnx"


def covered_rate(batches: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """Inferences per second over the time the batches cover (profiling gaps excluded)."""
    n = 0
    covered = 0.0
    for starts, lats in batches:
        if starts.size:
            n += starts.size
            covered += (starts[-1] + lats[-1] - starts[0]) / 1e9
    return n / covered if covered > 0 else 0.0


def gui_round(
    seconds: float, threads: int = 0, yield_cpu: bool = True
) -> tuple[float, np.ndarray, float]:
    """(inferences/s seen by the GUI, event-loop lag samples in ms, the window process's
    CPU use as a share of one core) for one round, in the app's own event loop
    (QApplication.exec), as a user runs it."""
    from PySide6.QtCore import QElapsedTimer, QTimer
    from PySide6.QtWidgets import QApplication

    from app.shell import workbench as wbm
    from engine.events import LatencyBatch

    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        wb = wbm.Workbench(session_path=str(Path(tmp) / "b.opscope"), usable=["cpu"])
        wb.client.nice = wbm.ENGINE_NICE if yield_cpu else 0
        wb.window.show()
        batches: list[tuple[np.ndarray, np.ndarray]] = []
        lags: list[float] = []
        clock = QElapsedTimer()
        clock.start()
        state = {"measuring": False, "last": 0, "cpu0": 0.0, "wall0": 0.0}
        me = psutil.Process()

        def on_events(evs: list[object]) -> None:
            if state["measuring"]:
                batches.extend(
                    (e.starts_ns, e.latencies_ns) for e in evs if isinstance(e, LatencyBatch)
                )

        wb.client.events.connect(on_events)
        if threads:
            panel = wb.window.config_panel
            panel.set_config(panel.config().__class__(threads=threads))
        wb.start(str(MODEL))
        tick = QTimer(interval=10)
        tick.setTimerType(tick.timerType().PreciseTimer)

        def on_tick() -> None:
            now = clock.nsecsElapsed()
            lags.append((now - state["last"]) / 1e6 - 10.0)
            state["last"] = now

        tick.timeout.connect(on_tick)

        def begin() -> None:  # 200 samples in, and 3 s for the first profiling pass
            if wb.controller.samples < 200 and clock.elapsed() < 120_000:
                QTimer.singleShot(100, begin)
                return
            QTimer.singleShot(3000, measure)

        def measure() -> None:
            state["measuring"], state["last"] = True, clock.nsecsElapsed()
            cpu = me.cpu_times()
            state["cpu0"], state["wall0"] = cpu.user + cpu.system, time.monotonic()
            tick.start()
            QTimer.singleShot(round(seconds * 1000), app.quit)

        QTimer.singleShot(0, begin)
        app.exec()
        tick.stop()
        state["measuring"] = False
        cpu = me.cpu_times()
        gui_cpu = (cpu.user + cpu.system - state["cpu0"]) / (time.monotonic() - state["wall0"])
        wb.window.close()
        wb.shutdown()
    return covered_rate(batches), np.array(lags), gui_cpu


def cli_round(seconds: float, threads: int = 0) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "b.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "app.entry",
                "bench",
                str(MODEL),
                "--duration",
                str(seconds),
                "--no-accuracy",
                "--threads",
                str(threads),
                "--json",
                str(out),
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        return float(json.loads(out.read_text())["throughput"]["inferences_per_s"])


def first_point() -> tuple[float, float]:
    """(seconds from process spawn, seconds from Python start) to the first latency point."""
    env = dict(os.environ, QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"))
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.entry", "--quit-after", "30"],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    inner = float("nan")
    outer = float("nan")
    for line in proc.stderr:
        if "first latency point" in line:
            outer = time.perf_counter() - t0
            inner = float(line.split("point")[1].split("s after")[0])
            break
    proc.terminate()
    proc.wait(10)
    return outer, inner


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument(
        "--threads",
        type=int,
        default=0,
        help="engine intra-op threads in both (0: one per physical core)",
    )
    ap.add_argument(
        "--no-yield",
        action="store_true",
        help="engine host at the window's CPU priority (Run > Yield CPU off)",
    )
    ap.add_argument("--out", default=str(ROOT / "bench/results/app_responsiveness.txt"))
    args = ap.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    gui_rates, cli_rates, lags, gui_cpus = [], [], [], []
    lines = [
        f"# bench/app_responsiveness.py --seconds {args.seconds:g} --rounds {args.rounds}"
        f"{' --no-yield' if args.no_yield else ''}, {psutil.cpu_count()} logical CPUs"
    ]
    for r in range(args.rounds):
        order = ("gui", "cli") if r % 2 == 0 else ("cli", "gui")
        for which in order:
            if which == "gui":
                rate, lag, cpu = gui_round(args.seconds, args.threads, not args.no_yield)
                gui_rates.append(rate)
                lags.append(lag)
                gui_cpus.append(cpu)
                line = (
                    f"round {r} gui: {rate:.1f} inf/s, window process {100 * cpu:.1f}% "
                    f"of one core, loop lag p50 {np.percentile(lag, 50):.2f} ms "
                    f"p99 {np.percentile(lag, 99):.2f} ms (n={lag.size})"
                )
            else:
                rate = cli_round(args.seconds, args.threads)
                cli_rates.append(rate)
                line = f"round {r} cli: {rate:.1f} inf/s"
            print(line, flush=True)
            lines.append(line)
    all_lags = np.concatenate(lags)
    ratios = [g / c for g, c in zip(gui_rates, cli_rates, strict=True)]
    outer, inner = first_point()
    lines += [
        "",
        f"engine throughput with the window open / opscope bench: median ratio "
        f"{statistics.median(ratios):.3f} over {args.rounds} rounds (goal >= 0.95); "
        f"per round {min(ratios):.3f}..{max(ratios):.3f}; ratio of the medians "
        f"{statistics.median(gui_rates) / statistics.median(cli_rates):.3f}",
        f"opscope bench alone: {min(cli_rates):.0f}..{max(cli_rates):.0f} inf/s between rounds",
        f"window process CPU: median {100 * statistics.median(gui_cpus):.1f}% of one core",
        f"event-loop lag while running: p50 {np.percentile(all_lags, 50):.2f} ms, "
        f"p99 {np.percentile(all_lags, 99):.2f} ms, max {all_lags.max():.2f} ms "
        f"(n={all_lags.size}; goal p99 < 16 ms)",
        f"launch to first latency point: {outer:.2f} s from process spawn "
        f"({inner:.2f} s after Python started)",
    ]
    publish("\n".join(lines), args.out, lead="\n")


if __name__ == "__main__":
    main()
