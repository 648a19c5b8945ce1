"""Where the engine host's `[heap]` grows: per latency sample, or per profiling pass; ours,
or ONNX Runtime's and glibc's.

An hour's soak of the demo transformer live showed the host's `[heap]` mapping +2.1 MB over
911,038 samples (about 2.4 bytes a sample). This runs, two at a time side by side:

- `host-live`: the real engine host (host_main in a spawned process, as the window starts
  it, its events over the wire) timing the model live, background profiling passes off;
- `bare-run`: the bare ONNX Runtime loop on the same session and inputs (`run_once`, two
  clock reads a run, nothing of OpScope's);
- `host-passes`: the real host again, live, with Profile Now sent 3 s after each pass ends;
- `bare-pass`: the bare ONNX Runtime pass: a session with profiling on, 25 runs,
  `end_profiling`, its JSON read, the session dropped (nothing of OpScope's).

Each process logs, every 5 s (a thread inside the host: glibc's figures are per process):
glibc's `mallinfo2()` (malloc in use over all arenas), the `[heap]` mapping's size and
resident bytes (/proc/self/smaps: the main thread's arena, where the live loop and the
passes allocate), and how many samples and passes it had by then. The report fits growth
against samples (or passes) from `--skip` seconds on, over the whole and over each half:
a slope that falls to zero in the second half levels off.

    python bench/host_heap.py --minutes 5

appends a section to bench/results/host_heap.md (CPU, how busy the machine was). The pass
runs go three side by side: `host-passes`, `host-passes-dynamic` (the same host with glibc's
mmap threshold left to its own rule through passes, as before
`engine.run.memory_trim.big_blocks_mmapped`, as `engine.run.live` calls it) and
`bare-pass`; the live runs two: `host-live` and `bare-run`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench import rss  # noqa: E402  (CPU name, others' CPU, a results section)

RESULTS = ROOT / "bench" / "results" / "host_heap.md"
DEMO = ROOT / "resources" / "models" / "demo_transformer.onnx"
HEADER = (
    "# The engine host's heap: per latency sample or per profiling pass\n\n"
    "Written by bench/host_heap.py (what it runs and how it fits: its docstring). Growth is\n"
    "bytes per sample (live runs) or per pass (pass runs), fitted over the whole run after\n"
    "its start, then over each half: a second half near zero levels off.\n\n"
)
EVERY_S = 5.0
PASS_GAP_S = 3.0  # host-passes: Profile Now this long after each pass ends


def reading() -> dict[str, float]:
    """Now (wall clock), malloc in use (uordblks + hblkhd), the [heap] mapping's size and
    resident bytes, and the process's resident bytes."""
    size = res = 0
    with open("/proc/self/smaps") as fh:
        inheap = False
        for line in fh:
            head = line.split()
            if head and "-" in head[0] and not head[0].endswith(":"):
                inheap = line.rstrip().endswith("[heap]")
            elif inheap and head and head[0] == "Size:":  # summed: the heap can be split
                size += int(head[1]) * 1024  # into several mappings (each named [heap])
            elif inheap and head and head[0] == "Rss:":
                res += int(head[1]) * 1024
    with open("/proc/self/statm") as fh:
        whole = int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return {
        "wall": time.time(),
        "in_use": rss.malloc_in_use(),
        "heap": size,
        "heap_rss": res,
        "rss": whole,
    }


class Log:
    """Readings as JSON lines, flushed as each is written (kept if the run is killed)."""

    def __init__(self, path: str) -> None:
        self._fh = open(path, "a")  # noqa: SIM115
        self._lock = threading.Lock()

    def write(self, **row: Any) -> None:
        with self._lock:
            self._fh.write(json.dumps(row) + "\n")
            self._fh.flush()


def _monitor(path: str) -> None:
    log = Log(path)
    while True:
        log.write(kind="mem", **reading())
        time.sleep(EVERY_S)


def _host_target(child: Any, path: str, dynamic: bool) -> None:
    """The engine host as the window spawns it, a monitor thread beside its loop, its
    background passes off (only a new config's own pass, and those asked for); `dynamic`:
    glibc's mmap threshold left to its own rule through passes, as before
    `engine.run.memory_trim.big_blocks_mmapped`, as `engine.run.live` calls it."""
    threading.Thread(target=_monitor, args=(path,), daemon=True).start()
    import engine.run.host_profiler as hp
    import engine.run.live as live
    from engine.run.host import host_main

    hp.PROFILE_EVERY_S = hp.PROFILE_MAX_EVERY_S = 1e9
    if dynamic:
        live.big_blocks_mmapped = contextlib.nullcontext  # type: ignore[assignment,attr-defined]
    host_main(child, 0.1, 0, None)


def run_host(
    seconds: float, path: str, model: str, dims: dict[str, int], passes: bool, dynamic: bool
) -> None:
    from engine.events import LatencyBatch, OpProfile
    from engine.run import host_commands as cmds
    from engine.run.wire import PipeConnection

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    conn = PipeConnection(parent)
    proc = ctx.Process(target=_host_target, args=(child, path, dynamic), daemon=True)
    proc.start()
    child.close()
    conn.send(cmds.Load(model, dims=dims))
    log = Log(path)
    n = done = 0
    due: float | None = None
    end = time.monotonic() + seconds
    next_log = 0.0
    try:
        while time.monotonic() < end:
            if conn.poll(0.1):
                for ev in conn.recv():
                    if isinstance(ev, LatencyBatch):
                        n += int(ev.latencies_ns.size)
                    elif isinstance(ev, OpProfile):
                        done += 1
                        due = time.monotonic() + PASS_GAP_S if passes else None
            if due is not None and time.monotonic() >= due:
                due = None
                conn.send(cmds.Profile())
            if time.monotonic() >= next_log:
                log.write(kind="count", wall=time.time(), samples=n, passes=done)
                next_log = time.monotonic() + 1.0
        log.write(kind="count", wall=time.time(), samples=n, passes=done)
    finally:
        with contextlib.suppress(OSError):
            conn.send(cmds.Shutdown())
        proc.join(20)
        if proc.is_alive():
            proc.kill()


def _staged(model: str, dims: dict[str, int]) -> Any:
    from engine.backends.base import PrepareRequest
    from engine.config import RunConfig
    from engine.model.workload import JobInputs, Workload
    from engine.run.live import stage

    gen = stage(PrepareRequest(Workload(model, RunConfig(), JobInputs(dims=dims))), "bare")
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value


def run_bare(seconds: float, path: str, model: str, dims: dict[str, int]) -> None:
    """The bare ONNX Runtime loop: the same session, inputs and call as the live run's."""
    staged = _staged(model, dims)
    run_once, clock = staged.prepared.run_once, time.perf_counter_ns
    log = Log(path)
    n = 0
    end = time.monotonic() + seconds
    next_log = 0.0
    while time.monotonic() < end:
        for _ in range(64):
            t0 = clock()
            run_once()
            _ = clock() - t0
        n += 64
        if time.monotonic() >= next_log:
            log.write(kind="mem", samples=n, passes=0, **reading())
            next_log = time.monotonic() + EVERY_S
    log.write(kind="mem", samples=n, passes=0, **reading())


def run_bare_pass(seconds: float, path: str, model: str, dims: dict[str, int]) -> None:
    """The bare ONNX Runtime profiling pass, again and again, a second apart."""
    from engine.backends.ort.inference_session import open_session, plan_session

    staged = _staged(model, dims)
    feeds = staged.prepared.feeds
    log = Log(path)
    done = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with tempfile.TemporaryDirectory(prefix="host-heap-") as tmp:
            plan = plan_session(staged.config, gpu_present=False, profiling=True,
                                profile_prefix=str(Path(tmp) / "p"))  # fmt: skip
            opened = open_session(model, plan)
            sess = opened.session
            for _ in range(25):
                sess.run(None, feeds)
            profile = sess.end_profiling()
            del sess, opened
            with open(profile) as fh:
                json.load(fh)
        done += 1
        log.write(kind="mem", samples=0, passes=done, **reading())
        time.sleep(1.0)


# the report ----------------------------------------------------------------------------
def series(path: Path) -> dict[str, np.ndarray]:
    """Memory readings with the samples and passes done by then (the host's counts come
    from the window's side: interpolated by wall time)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    mem = [r for r in rows if r["kind"] == "mem"]
    counts = [r for r in rows if r["kind"] == "count"]
    keys = ("wall", "in_use", "heap", "heap_rss", "rss")
    out = {k: np.array([r[k] for r in mem], dtype=float) for k in keys}
    if counts:
        cw = np.array([r["wall"] for r in counts])
        for k in ("samples", "passes"):
            out[k] = np.interp(out["wall"], cw, np.array([r[k] for r in counts], dtype=float))
    else:
        for k in ("samples", "passes"):
            out[k] = np.array([r[k] for r in mem], dtype=float)
    return out


def _slope(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 3 or np.ptp(x) == 0:
        return float("nan")
    return float(np.polyfit(x, y, 1)[0])


def fit(s: dict[str, np.ndarray], by: str, skip_s: float) -> list[str]:
    """Markdown rows: each figure's growth per unit of `by` (whole fit, first and second
    half) from `skip_s` seconds after the first reading."""
    t = s["wall"] - s["wall"][0]
    keep = t >= skip_s
    x = s[by][keep]
    rows = []
    for key, name in (("heap", "[heap] size"), ("heap_rss", "[heap] resident"),
                      ("in_use", "malloc in use"), ("rss", "process resident")):  # fmt: skip
        y = s[key][keep]
        if len(y) < 6:
            rows.append(f"| {name} | - | - | - | - |")
            continue
        h = len(y) // 2
        rows.append(
            f"| {name} | {y[0] / 1e6:.2f} -> {y[-1] / 1e6:.2f} | {_slope(x, y):+.2f} | "
            f"{_slope(x[:h], y[:h]):+.2f} | {_slope(x[h:], y[h:]):+.2f} |"
        )
    return rows


def _cpu_seconds() -> tuple[float, float]:
    """CPU-seconds the whole machine has been busy, and those of this process and of its
    children it has waited for (the runs, and the hosts they waited for)."""
    import psutil

    t = psutil.cpu_times()
    total = sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0)
    total -= getattr(t, "guest_nice", 0.0)
    own = os.times()
    return total, own.user + own.system + own.children_user + own.children_system


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=5.0, help="each pair's run")
    ap.add_argument("--skip", type=float, default=60.0, help="seconds left out of the fit")
    ap.add_argument("--model", default=str(DEMO))
    ap.add_argument("--label", default="")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--role", help=argparse.SUPPRESS)
    ap.add_argument("--log", help=argparse.SUPPRESS)
    args = ap.parse_args()
    dims = {"sequence": 16} if "transformer" in Path(args.model).name else {}
    seconds = args.minutes * 60
    if args.role:
        roles = {
            "host-live": lambda: run_host(seconds, args.log, args.model, dims, False, False),
            "host-passes": lambda: run_host(seconds, args.log, args.model, dims, True, False),
            "host-passes-dynamic": lambda: run_host(
                seconds, args.log, args.model, dims, True, True
            ),
            "bare-run": lambda: run_bare(seconds, args.log, args.model, dims),
            "bare-pass": lambda: run_bare_pass(seconds, args.log, args.model, dims),
        }
        roles[args.role]()
        return

    tmp = Path(tempfile.mkdtemp(prefix="host-heap-"))
    logs: dict[str, Path] = {}
    busy: dict[str, tuple[float, float, float]] = {}
    for pair in (("host-live", "bare-run"), ("host-passes", "host-passes-dynamic", "bare-pass")):
        t0 = time.time()
        cpu0 = _cpu_seconds()
        procs = []
        for role in pair:
            logs[role] = tmp / f"{role}.jsonl"
            cmd = [sys.executable, __file__, "--role", role, "--log", str(logs[role]),
                   "--minutes", str(args.minutes), "--model", args.model]  # fmt: skip
            procs.append(subprocess.Popen(cmd))
        loads = []
        while any(p.poll() is None for p in procs):  # (polled: waited for when done)
            time.sleep(5)
            loads.append(os.getloadavg()[0])
        cpu1 = _cpu_seconds()
        dt = time.time() - t0
        others = ((cpu1[0] - cpu0[0]) - (cpu1[1] - cpu0[1])) / dt
        for role in pair:
            busy[role] = (others, float(np.mean(loads)) if loads else float("nan"), dt)
    text = report(logs, busy, args)
    print(text)
    title = f"## {time.strftime('%Y-%m-%d %H:%M')} UTC {args.label}".strip()
    rss.append_section(Path(args.out), HEADER, f"{title}\n\n{text}")


def report(logs: dict[str, Path], busy: dict[str, tuple[float, float, float]], args: Any) -> str:
    lines = [
        f"CPU: {rss.cpu_model()} ({os.cpu_count()} CPUs); model {Path(args.model).name}; "
        f"each group ran {args.minutes:g} min side by side; fit from {args.skip:g} s on.",
        "",
    ]
    for role, by in (("host-live", "samples"), ("bare-run", "samples"), ("host-passes", "passes"),
                     ("host-passes-dynamic", "passes"), ("bare-pass", "passes")):  # fmt: skip
        s = series(logs[role])
        others, load, dt = busy[role]
        unit = "B/sample" if by == "samples" else "B/pass"
        heap = s["heap"][s["wall"] - s["wall"][0] >= args.skip]
        lines += [
            f"**{role}**: {int(s['samples'][-1]):,} samples, {int(s['passes'][-1])} passes in "
            f"{dt:.0f} s; other processes used {others:.2f} CPUs (beside these), load "
            f"average {load:.1f}",
            "",
            f"| figure | MB (fit start -> end) | {unit} | first half | second half |",
            "|---|---:|---:|---:|---:|",
            *fit(s, by, args.skip),
            "",
            f"[heap] size over the fit: {heap.min() / 1e6:.2f} to {heap.max() / 1e6:.2f} MB",
            "",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
