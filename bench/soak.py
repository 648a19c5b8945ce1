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
largest growths of Python allocations; `--census` prints what the window holds then and at
the end (Python objects by type, graphics-scene items, QObjects, bytes malloc has out), each
the least of CENSUS_TAKES censuses one sample apart: the wire reader's thread decodes each
batch through one JSON tree (a profiling pass's: ~20,800 dicts and ~16,300 lists, gone when
its events are built), and a single census that caught it counted that as growth.

Each sample also splits the window's RSS: anonymous vs file-backed (smaps_rollup), in
transparent huge pages, malloc's bytes in use, and pymalloc's arenas (Python's small objects,
mmapped apart from malloc, so mallinfo2 never counts them). `--profile-every S` presses the
window's own Profile Now every S seconds (the host's schedule backs off to one pass every
240 s, so an hour holds only ~15): 8 s gives ~7 passes a minute on the demo model.

Trims: by default the product's own (engine/run/memory_trim.py: the window calls glibc's
`malloc_trim(0)` every 60 s, the host never); `--trim S` has both call it every S seconds
(`OPSCOPE_MALLOC_TRIM_S`, which the host inherits), `--trim 0` neither. Every trim is logged
(RSS before and after, its duration); the report adds the slope of each series (after a
trim: what the allocator could not give back).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench import rss  # noqa: E402  (RSS samples, their slope, others' CPU)

RESULTS = ROOT / "bench" / "results" / "soak.md"
DEMO = ROOT / "resources" / "models" / "demo_transformer.onnx"


def trim_log(path: Path, window_pid: int, t0_wall: float) -> dict[str, np.ndarray]:
    """The trims logged by engine/run/memory_trim.py: per process ('window', 'host'), rows of
    (seconds since the soak began, RSS before, RSS after in MB, the trim's duration in s)."""
    rows: dict[str, list[tuple[float, float, float, float]]] = {"window": [], "host": []}
    try:
        text = path.read_text()
    except OSError:
        text = ""
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) < 4:
            continue
        who = "window" if int(parts[0]) == window_pid else "host"
        took = float(parts[5]) if len(parts) > 5 else float("nan")
        at = float(parts[1]) - t0_wall
        rows[who].append((at, int(parts[2]) / 1e6, int(parts[3]) / 1e6, took))
    return {k: np.array(v).reshape(-1, 4) for k, v in rows.items()}


def census(app: Any) -> dict[str, int]:
    """What the window holds: Python objects by type (after a collection), the items in
    every graphics scene, QObjects under the windows, bytes malloc has out."""
    import gc

    from PySide6.QtCore import QObject
    from PySide6.QtWidgets import QGraphicsView

    widgets = app.allWidgets()
    scenes = {id(w.scene()): w.scene() for w in widgets if isinstance(w, QGraphicsView)}
    items = sum(len(s.items()) for s in scenes.values() if s is not None)
    qobjects = sum(len(w.findChildren(QObject)) for w in app.topLevelWidgets())
    gc.collect()  # after findChildren: the wrappers it makes are counted by every census
    out = rss.object_counts()  # safe beside the window's reader thread
    out["[scene items]"] = items
    out["[QObjects under windows]"] = qobjects
    out["[malloc in use, KB]"] = rss.malloc_in_use() // 1024
    free = rss.malloc_free()  # fragmentation: free bytes in holes no trim gives back
    out["[malloc arenas from the OS, KB]"] = free.get("system", -1024) // 1024
    out["[malloc free in holes < 4 KiB, KB]"] = free.get("holes", -1024) // 1024
    out["[malloc free in larger chunks and tops, KB]"] = free.get("large", -1024) // 1024
    out["[malloc mmapped blocks, KB]"] = free.get("mmapped", -1024) // 1024
    small = rss.pymalloc()  # Python's own arenas: mmapped, outside malloc's figure
    out["[pymalloc arenas, 1 MiB each]"] = small.get("arenas", -1)
    out["[pymalloc in blocks, KB]"] = small.get("in blocks", -1024) // 1024
    return out


CENSUS_TAKES = 3  # censuses a sample apart at the fit's start and at the end; each count's least


def steady(takes: list[dict[str, int]]) -> dict[str, int]:
    """Per key, the least count over censuses taken a sample apart: what the window keeps,
    not what a thread held for a moment (the reader's JSON tree of a batch it was decoding
    made stop 61's '230 dicts and 180 lists a profiling pass'). A key one census lacks
    counts 0 there."""
    keys = set().union(*takes) if takes else set()
    return {k: min(t.get(k, 0) for t in takes) for k in keys}


def census_growth(first: dict[str, int], last: dict[str, int], top: int = 15) -> list[str]:
    """The memory figures ('[...]', each with where it began) and the `top` object counts
    that changed most."""
    growth = {k: last.get(k, 0) - first.get(k, 0) for k in set(first) | set(last)}
    figures = [
        f"{growth[k]:+9d}  {k} (from {first.get(k, 0):,})" for k in sorted(growth) if k[0] == "["
    ]
    counts = [kv for kv in growth.items() if kv[0][0] != "["]
    ranked = sorted(counts, key=lambda kv: -abs(kv[1]))[:top]
    return figures + [f"{v:+9d}  {k}" for k, v in ranked if v]


def run(
    minutes: float,
    model: Path,
    every_s: float,
    trace: bool,
    skip_min: float,
    trim_s: float | None = None,
    count: bool = False,
    profile_every_s: float = 0,
) -> dict[str, Any]:
    import psutil
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.shell.launch import gui_thread_gc
    from app.shell.workbench import Workbench

    app = QApplication.instance() or QApplication(sys.argv[:1])
    collector = gui_thread_gc()  # noqa: F841 (as the app collects: on the GUI thread, timed)
    tmp = tempfile.mkdtemp(prefix="opscope-soak-")
    trims = Path(tmp) / "trims.tsv"
    # before the window starts its host: the host inherits the environment
    os.environ.pop("OPSCOPE_MALLOC_TRIM_S", None)  # None: the product's own trims
    if trim_s is not None:
        os.environ["OPSCOPE_MALLOC_TRIM_S"] = f"{trim_s:g}"  # 0: none
    os.environ["OPSCOPE_MALLOC_TRIM_LOG"] = str(trims)
    t0_wall = time.time()
    wb = Workbench(session_path=str(Path(tmp) / "soak.opscope"), usable=["cpu"])
    wb.window.show()
    wb.start(str(model))
    me = psutil.Process()
    t0 = time.monotonic()
    rows: list[tuple[float, float, float]] = []
    # the window's resident memory split, and what its malloc has out, at each sample (MB):
    # anonymous, file-backed, in transparent huge pages, malloc in use; the host's split;
    # the window's pymalloc arenas
    split: list[tuple[float, ...]] = []
    passes: list[float] = []  # when the window got each profiling pass (s since the start)
    last_profile: list[Any] = [None]
    died: list[tuple[float, str]] = []  # the host's end, as the window was told: the soak ends

    def host_died(message: str) -> None:
        died.append((time.monotonic() - t0, message))
        app.quit()

    wb.client.host_died.connect(host_died)
    busy: list[tuple[float, float]] = []  # (machine busy CPU-s, this app's CPU-s) per sample
    snaps: list[tracemalloc.Snapshot] = []
    maps: list[dict[str, dict[str, int]]] = []  # at the fit's start and at the end
    # --census: the window's, at the fit's start and at the end (CENSUS_TAKES each)
    takes: dict[str, list[dict[str, int]]] = {"start": [], "end": []}
    if trace:
        tracemalloc.start(6)

    def sample() -> None:
        t = time.monotonic() - t0
        pid = wb.client.pid
        try:
            host = psutil.Process(pid).memory_info().rss / 1e6 if pid else float("nan")
        except psutil.Error:  # gone: host_died says why
            host = float("nan")
        rows.append((t, me.memory_info().rss / 1e6, host))
        mine, theirs = rss.rollup(me.pid), rss.rollup(pid) if pid else {}
        split.append(
            (
                *(mine.get(k, 0) / 1e6 for k in ("anon", "file", "thp")),
                rss.malloc_in_use() / 1e6,
                *(theirs.get(k, 0) / 1e6 for k in ("anon", "file")),
                rss.pymalloc().get("arenas", 0) * 2**20 / 1e6,
            )
        )
        profile = getattr(wb.controller, "last_profile", None)
        if profile is not None and profile is not last_profile[0]:
            last_profile[0] = profile
            passes.append(t)
        busy.append(rss.machine_and_proc_cpu(me))  # the window and all under it
        if not maps and t >= skip_min * 60:
            maps.append({"window": rss.smaps(me.pid), "host": rss.smaps(pid) if pid else {}})
            if trace:
                snaps.append(tracemalloc.take_snapshot())
        if count and t >= skip_min * 60 and len(takes["start"]) < CENSUS_TAKES:
            takes["start"].append(census(app))
        elif count and t >= minutes * 60 - (CENSUS_TAKES - 0.5) * every_s:
            takes["end"].append(census(app))  # the last CENSUS_TAKES samples (or so)
        if t >= minutes * 60:
            maps.append({"window": rss.smaps(me.pid), "host": rss.smaps(pid) if pid else {}})
            app.quit()

    timer = QTimer(interval=int(every_s * 1000))
    timer.timeout.connect(sample)
    timer.start()
    # --profile-every: the window's own Profile Now (Ctrl+Alt+P) on a clock, so an hour holds
    # hundreds of passes (the host's own schedule backs off to one every 240 s)
    profiler = QTimer(interval=max(1, int(profile_every_s * 1000)))
    profiler.timeout.connect(wb.client.profile_now)
    if profile_every_s > 0:
        profiler.start()
    app.exec()
    timer.stop()
    profiler.stop()
    samples = wb.controller.samples
    if len(maps) == 2:
        for proc in ("window", "host"):
            print(f"resident growth by mapping, {proc}, from minute {skip_min:g} to the end:")
            print("\n".join(rss.smaps_growth(maps[0][proc], maps[1][proc])))
    if takes["start"] and takes["end"]:
        print(
            f"what the window holds, from minute {skip_min:g} to the end (each count the "
            f"least of {len(takes['start'])} and of {len(takes['end'])} censuses a sample apart):"
        )
        print("\n".join(census_growth(steady(takes["start"]), steady(takes["end"]))))
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
    parts = np.array(split).reshape(-1, 7)
    skip_s = skip_min * 60
    logged = trim_log(trims, me.pid, t0_wall)
    trim_slopes = {
        f"{who}_{col}": rss.slope_mb_per_min(series[:, 0], series[:, i], skip_s)
        for who, series in logged.items()
        for i, col in ((1, "before"), (2, "after"))
    }
    return {
        "trim_s": trim_s,
        "trims": logged,
        "trim_slopes": trim_slopes,
        "t": arr[:, 0],
        "window": arr[:, 1],
        "host": arr[:, 2],
        "window_mb_min": rss.slope_mb_per_min(arr[:, 0], arr[:, 1], skip_s),
        "host_mb_min": rss.slope_mb_per_min(arr[:, 0], arr[:, 2], skip_s),
        "samples": samples,
        "session_mb": session_mb,
        "others_cpu": rss.others_cpu(arr[:, 0], np.array(busy)),
        "split": parts,
        "split_mb_min": [
            rss.slope_mb_per_min(arr[:, 0], parts[:, i], skip_s) for i in range(parts.shape[1])
        ],
        "passes": passes,
        "died": died,
    }


def halves(out: dict[str, Any], first: int, names: tuple[str, ...]) -> list[str]:
    """The growth over the fit's first half and over its second: a bounded process levels
    off (its second half's slope near zero), a leak keeps its slope."""
    t = out["t"]
    mid = first + (len(t) - first) // 2
    rows = [("window", out["window"]), ("host", out["host"])]
    rows += [(names[i], out["split"][:, i]) for i in (3, 4)]  # malloc in use; host anonymous
    lines = [
        "Growth over the fit's first half and over its second (MB/min; levelling off: the "
        "second near zero):",
        "",
        "| series | first half | second half |",
        "|---|---:|---:|",
    ]
    for name, series in rows:
        a = rss.slope_mb_per_min(t[first : mid + 1], series[first : mid + 1], 0)
        b = rss.slope_mb_per_min(t[mid:], series[mid:], 0)
        lines.append(f"| {name} | {a:+.3f} | {b:+.3f} |")
    return lines


def report(out: dict[str, Any], args: argparse.Namespace) -> str:
    t = out["t"]
    first = int(np.searchsorted(t, args.skip * 60))
    first = min(first, len(t) - 1)
    lines = [
        f"## {args.label}: {Path(args.model).name}, {args.minutes:g} min "
        f"({time.strftime('%Y-%m-%d %H:%M')})",
        "",
        f"CPU: {rss.cpu_model()} ({os.cpu_count()} logical cores, shared with other work); "
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
    parts, slopes = out["split"], out["split_mb_min"]
    names = (
        "window: anonymous (heap, arenas, mmaps)",
        "window: file-backed (libraries, fonts, files)",
        "window: of anonymous, in transparent huge pages",
        "window: malloc in use (mallinfo2)",
        "host: anonymous",
        "host: file-backed",
        "window: pymalloc arenas (mmapped, outside malloc's figure)",
    )
    lines += [
        "",
        "| part | at fit start (MB) | at end (MB) | growth (MB/min) |",
        "|---|---:|---:|---:|",
    ]
    for i, name in enumerate(names):
        lines.append(f"| {name} | {parts[first, i]:.1f} | {parts[-1, i]:.1f} | {slopes[i]:+.3f} |")
    lines += ["", *halves(out, first, names)]
    passes = out["passes"]
    after = sum(1 for p in passes if p >= args.skip * 60)
    how = f"Profile Now every {args.profile_every:g} s" if args.profile_every else "host's schedule"
    lines += ["", f"Profiling passes the window got: {len(passes)} ({after} in the fit; {how})."]
    for at, why in out["died"]:
        lines += [
            "",
            f"**The engine host ended at minute {at / 60:.1f}: {why}** (the soak stopped).",
        ]
    trim_s = out["trim_s"]
    if trim_s is None:
        trimmed = "the product's own (the window every 60 s, the host never)"
    elif trim_s > 0:
        trimmed = f"every {trim_s:g} s in both processes (`--trim`)"
    else:
        trimmed = "none (`--trim 0`)"
    lines += ["", f"`malloc_trim(0)`: {trimmed}."]
    if any(len(v) for v in out["trims"].values()):
        lines += [
            "RSS logged just before and just after each trim, fit from the same minute.",
            "",
            "| process | trims | given back per trim (MB, median) | before-trim slope (MB/min) "
            "| after-trim slope (MB/min) | RSS after last trim (MB) | trim's duration "
            "(ms, median / max) |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for name in ("window", "host"):
            tr = out["trims"].get(name, np.zeros((0, 4)))
            if not len(tr):
                lines.append(f"| {name} | 0 | | | | | |")
                continue
            freed = float(np.median(tr[:, 1] - tr[:, 2])) if len(tr) else float("nan")
            last = float(tr[-1, 2]) if len(tr) else float("nan")
            lines.append(
                f"| {name} | {len(tr)} | {freed:.1f} | "
                f"{out['trim_slopes'].get(name + '_before', float('nan')):+.3f} | "
                f"{out['trim_slopes'].get(name + '_after', float('nan')):+.3f} | {last:.1f} | "
                f"{np.nanmedian(tr[:, 3]) * 1e3:.1f} / {np.nanmax(tr[:, 3]) * 1e3:.1f} |"
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
    parser.add_argument("--census", action="store_true", help="objects the window holds")
    parser.add_argument(
        "--profile-every",
        type=float,
        default=0.0,
        help="the window's Profile Now every S seconds (0: the host's own schedule)",
    )
    parser.add_argument(
        "--trim",
        type=float,
        default=None,
        help="malloc_trim(0) every S seconds in both processes (0: none; default: the "
        "product's own, the window every 60 s)",
    )
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    out = run(
        args.minutes,
        Path(args.model),
        args.every,
        args.trace,
        args.skip,
        args.trim,
        args.census,
        args.profile_every,
    )
    text = report(out, args)
    print(text)
    rss.append_section(
        Path(args.out),
        "# Soak: memory growth of the live app\n\n"
        "`QT_QPA_PLATFORM=offscreen python bench/soak.py --minutes N --label L`: the "
        "window (headless) and its engine host on the demo transformer; growth is the "
        "least-squares slope of RSS from minute 2 on.\n\n",
        text,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
