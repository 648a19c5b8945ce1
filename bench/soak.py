"""Soak: the live app (window headless + engine host) on a model for MINUTES, measuring how
fast each process's resident memory grows.

RSS of the window (this process) and of the engine host (its child) is sampled every few
seconds; the growth is the slope of a least-squares line through the samples from minute
`--skip` on (start-up, the first profiling pass and the peaks measurement are over by
then). A bounded app levels off, so its slope tends to zero as the soak gets longer.

    QT_QPA_PLATFORM=offscreen python bench/soak.py --minutes 10 --label after

appends a section to bench/results/soak.md (CPU, model, duration, MB/min per process,
RSS at the start of the fit and at the end), and prints which mappings of each process
grew (Linux /proc/PID/smaps: the heap, anonymous arenas, files). `--trace` also takes
tracemalloc snapshots in the window at minute `--skip` and at the end and prints the
largest growths of Python allocations.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "soak.md"
DEMO = ROOT / "resources" / "models" / "demo_transformer.onnx"


def slope_mb_per_min(t_s: np.ndarray, rss_mb: np.ndarray, skip_s: float) -> float:
    """Least-squares slope of RSS against time (MB per minute) over samples at t >= skip_s."""
    keep = t_s >= skip_s
    if keep.sum() < 3:
        return float("nan")
    a, _ = np.polyfit(t_s[keep] / 60.0, rss_mb[keep], 1)
    return float(a)


def smaps(pid: int) -> dict[str, int]:
    """Resident bytes per mapping of `pid` (Linux): '[heap]', a file, or 'anon@ADDR'."""
    out: dict[str, int] = {}
    name = ""
    try:
        with open(f"/proc/{pid}/smaps") as fh:
            for line in fh:
                head = line.split()
                if not head:
                    continue
                if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                    name = head[5] if len(head) > 5 else f"anon@{head[0].split('-')[0]}"
                elif head[0] == "Rss:":
                    out[name] = out.get(name, 0) + int(head[1]) * 1024
    except OSError:
        pass
    return out


def smaps_growth(first: dict[str, int], last: dict[str, int], top: int = 8) -> list[str]:
    """The mappings whose resident size grew most between two `smaps` readings."""
    growth = {k: last.get(k, 0) - first.get(k, 0) for k in set(first) | set(last)}
    ranked = sorted(growth.items(), key=lambda kv: -abs(kv[1]))[:top]
    return [f"{v / 1e6:+8.2f} MB  {k}" for k, v in ranked if v]


def run(minutes: float, model: Path, every_s: float, trace: bool, skip_min: float) -> dict:
    import psutil
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.shell.workbench import Workbench

    app = QApplication.instance() or QApplication(sys.argv[:1])
    tmp = tempfile.mkdtemp(prefix="opscope-soak-")
    wb = Workbench(session_path=str(Path(tmp) / "soak.opscope"), usable=["cpu"])
    wb.window.show()
    wb.start(str(model))
    me = psutil.Process()
    t0 = time.monotonic()
    rows: list[tuple[float, float, float]] = []
    busy: list[tuple[float, float]] = []  # (machine busy CPU-s, this app's CPU-s) per sample
    snaps: list[tracemalloc.Snapshot] = []
    maps: list[dict[str, dict[str, int]]] = []  # at the fit's start and at the end
    if trace:
        tracemalloc.start(6)

    def sample() -> None:
        t = time.monotonic() - t0
        pid = wb.client.pid
        host = psutil.Process(pid).memory_info().rss / 1e6 if pid else float("nan")
        rows.append((t, me.memory_info().rss / 1e6, host))
        busy.append(machine_and_app_cpu(me))
        if not maps and t >= skip_min * 60:
            maps.append({"window": smaps(me.pid), "host": smaps(pid) if pid else {}})
            if trace:
                snaps.append(tracemalloc.take_snapshot())
        if t >= minutes * 60:
            maps.append({"window": smaps(me.pid), "host": smaps(pid) if pid else {}})
            app.quit()

    timer = QTimer(interval=int(every_s * 1000))
    timer.timeout.connect(sample)
    timer.start()
    app.exec()
    timer.stop()
    samples = wb.controller.samples
    if len(maps) == 2:
        for proc in ("window", "host"):
            print(f"resident growth by mapping, {proc}, from minute {skip_min:g} to the end:")
            print("\n".join(smaps_growth(maps[0][proc], maps[1][proc])))
    if trace and snaps:
        end = tracemalloc.take_snapshot()
        for stat in end.compare_to(snaps[0], "traceback")[:15]:
            print(f"{stat.size_diff / 1e6:+.3f} MB {stat.count_diff:+d} blocks")
            for line in stat.traceback.format()[-8:]:
                print("    " + line)
        tracemalloc.stop()
    wb.shutdown()
    session_mb = (Path(tmp) / "soak.opscope").stat().st_size / 1e6
    arr = np.array(rows)
    skip_s = skip_min * 60
    return {
        "t": arr[:, 0],
        "window": arr[:, 1],
        "host": arr[:, 2],
        "window_mb_min": slope_mb_per_min(arr[:, 0], arr[:, 1], skip_s),
        "host_mb_min": slope_mb_per_min(arr[:, 0], arr[:, 2], skip_s),
        "samples": samples,
        "session_mb": session_mb,
        "others_cpu": others_cpu(arr[:, 0], np.array(busy)),
    }


def machine_and_app_cpu(me: object) -> tuple[float, float]:
    """CPU-seconds the whole machine has been busy, and those of this app (the window and
    every process under it: the engine host and its jobs)."""
    import psutil

    t = psutil.cpu_times()
    total = sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0)
    total -= getattr(t, "guest_nice", 0.0)
    own = 0.0
    procs = [me, *me.children(recursive=True)]  # type: ignore[attr-defined]
    for proc in procs:
        try:
            c = proc.cpu_times()  # type: ignore[attr-defined]
            own += c.user + c.system
        except psutil.Error:
            pass
    return total, own


def others_cpu(t_s: np.ndarray, busy: np.ndarray) -> tuple[float, float]:
    """Other processes' CPU use (cores' worth): the mean over the soak and the busiest
    minute's mean."""
    if len(busy) < 2:
        return float("nan"), float("nan")
    others = busy[:, 0] - busy[:, 1]
    mean = float((others[-1] - others[0]) / (t_s[-1] - t_s[0]))
    step = max(1, round(60 / max(float(np.median(np.diff(t_s))), 1e-3)))
    per_min = np.diff(others[::step]) / np.diff(t_s[::step]) if len(t_s) > step else []
    return mean, float(np.max(per_min)) if len(per_min) else mean


def cpu_model() -> str:
    from engine.session.env import cpu_name

    return cpu_name() or "unknown CPU"


def report(out: dict, args: argparse.Namespace) -> str:
    t = out["t"]
    first = int(np.searchsorted(t, args.skip * 60))
    first = min(first, len(t) - 1)
    lines = [
        f"## {args.label}: {Path(args.model).name}, {args.minutes:g} min "
        f"({time.strftime('%Y-%m-%d %H:%M')})",
        "",
        f"CPU: {cpu_model()} ({os.cpu_count()} logical cores, shared with other work); "
        f"{out['samples']:,} latency samples; session file {out['session_mb']:.1f} MB.",
        f"Other processes took {out['others_cpu'][0]:.2f} CPUs on average "
        f"(busiest minute {out['others_cpu'][1]:.2f}) of {os.cpu_count()}.",
        f"Fit from minute {args.skip:g} on ({len(t) - first} RSS samples every {args.every:g} s).",
        "",
        "| process | RSS at fit start (MB) | RSS at end (MB) | growth (MB/min) |",
        "|---|---:|---:|---:|",
    ]
    for name in ("window", "host"):
        series = out[name]
        lines.append(
            f"| {name} | {series[first]:.1f} | {series[-1]:.1f} | {out[name + '_mb_min']:+.3f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--model", default=str(DEMO))
    parser.add_argument("--every", type=float, default=5.0, help="RSS sampling interval, s")
    parser.add_argument("--skip", type=float, default=2.0, help="fit from this minute on")
    parser.add_argument("--label", default="run")
    parser.add_argument("--trace", action="store_true", help="tracemalloc diff in the window")
    parser.add_argument("--out", default=str(RESULTS), help="markdown file to append to")
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    out = run(args.minutes, Path(args.model), args.every, args.trace, args.skip)
    text = report(out, args)
    print(text)
    path = Path(args.out)
    if not path.exists():
        path.write_text(
            "# Soak: memory growth of the live app\n\n"
            "`QT_QPA_PLATFORM=offscreen python bench/soak.py --minutes N --label L`: the "
            "window (headless) and its engine host on the demo transformer; growth is the "
            "least-squares slope of RSS from minute 2 on.\n\n"
        )
    with path.open("a") as fh:
        fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
