"""The window's reader side of a profiling pass, part by part: what each keeps per pass.

The live soaks (bench/soak.py --profile-every 4) saw the window's malloc in use grow ~14 KB
a pass, and the drawing was cleared of it (bench/results/soak.md, stop 62). What the
window's reader thread does with a pass besides is decode it off the wire (engine/run/
wire.py) and record it (engine/session/recorder.py, SQLite). This feeds real profiling
passes of the demo transformer (ONNX Runtime's profiler, 20 inferences, as the window's
host profiles; a few different passes, taken in turn), encoded as the host's outbox sends
them, to each part alone, each in a process of its own:

  decode  every message of a pass decoded, then dropped
  record  the recorder fed a pass (decoded once, before) after a second of timing's
          samples and telemetry, into a real session file, committed
  reader  the window's reader side without Qt: a reader thread recv()s the messages from
          a real multiprocessing pipe (PipeConnection: decode) and feeds the recorder
  window  the real window (headless, no engine host, its own recording): each message
          decoded on a thread and handed to the engine client's own delivery (recorder,
          then the `events` signal to every slot in the GUI thread), painted after a pass
          (`--parts window`: not in the default run)

and reads, after every pass (the reader idle, gc run): glibc's malloc in use (mallinfo2),
SQLite's own memory and the part of it in its page cache (sqlite3_status64), and, in a
run of its own, Python's traced allocations (tracemalloc). Per pass over the first and the
second half of the passes: what levels off (a cache filling to its cap) grows in the
first half only.

    .venv/bin/python bench/pass_memory.py --passes 120 --label "stop 63"

appends a section to bench/results/pass_memory.md.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench import rss  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "pass_memory.md"
DEMO = ROOT / "resources" / "models" / "demo_transformer.onnx"
HEADER = (
    "# The window's reader side of a profiling pass: what each part keeps per pass\n\n"
    "Written by bench/pass_memory.py (see its docstring). Sections are appended.\n"
)
KINDS = 3  # different real passes, fed in turn
BETWEEN = 20  # timing's messages between two passes (one every 50 ms: a second of timing)


def make_passes(folder: Path) -> None:
    """KINDS real profiling passes, each a list of wire messages, as JSON of hex bytes."""
    from engine.backends.ort.profiler import profile_pass
    from engine.config import RunConfig
    from engine.events import Event, Marker
    from engine.model.info import load_model
    from engine.model.inputs import generate_inputs, plan_inputs
    from engine.run.load_window import with_load
    from engine.run.wire import encode

    model, info = load_model(DEMO)
    feeds = generate_inputs(model, info, plan_inputs(info, 1), 0)
    for k in range(KINDS):
        events: list[Event] = [Marker("profile", "profiling", time.perf_counter_ns())]
        events += with_load(profile_pass(DEMO, RunConfig(threads=1), feeds, runs=20))
        (folder / f"pass{k}.json").write_text(json.dumps([encode([e]).hex() for e in events]))


class _Sqlite:
    """SQLite's own memory counters, from the library Python's sqlite3 uses."""

    def __init__(self) -> None:
        import _sqlite3

        self.lib = ctypes.CDLL(_sqlite3.__file__)  # its symbols and its library's
        self.lib.sqlite3_status64.argtypes = [ctypes.c_int, *[ctypes.POINTER(ctypes.c_int64)] * 2,
                                              ctypes.c_int]  # fmt: skip

    def status(self, op: int) -> int:
        cur, high = ctypes.c_int64(), ctypes.c_int64()
        self.lib.sqlite3_status64(op, ctypes.byref(cur), ctypes.byref(high), 0)
        return cur.value

    def used(self) -> int:
        return self.status(0)  # SQLITE_STATUS_MEMORY_USED

    def page_cache(self) -> int:
        return self.status(2)  # SQLITE_STATUS_PAGECACHE_OVERFLOW: every page, none set up


def measure(part: str, folder: Path, passes: int, traced: bool) -> dict[str, Any]:
    """One part alone, in this process: its readings after each pass."""
    from engine.config import RunConfig
    from engine.events import LatencyBatch, OpProfile, RunStarted, Telemetry
    from engine.run.wire import PipeConnection, decode, encode
    from engine.session.recorder import Recorder
    from engine.session.store import SessionStore

    kinds = [
        [bytes.fromhex(h) for h in json.loads((folder / f"pass{k}.json").read_text())]
        for k in range(KINDS)
    ]
    sqlite = _Sqlite()
    window = _Window() if part == "window" else None
    store = SessionStore.create_or_open(Path(tempfile.mkdtemp(dir=folder)) / "s.opscope")
    rec = Recorder(store, kind="live")
    started = RunStarted(RunConfig(threads=1), "cpu", "CPUExecutionProvider",
                         ("CPUExecutionProvider",), {"x": ((1, 8), "float")}, 1, 0.1)  # fmt: skip
    if window is None:
        rec.feed(started)
    else:
        window.deliver([encode([started])])
    origin = window.origin if window is not None else 1
    decoded = [[decode(m) for m in kind] for kind in kinds] if part == "record" else []
    count = [0]

    def timing() -> list[bytes]:
        out = []
        for j in range(BETWEEN):
            count[0] += 1
            starts = np.arange(60, dtype=np.int64) * 1_000 + count[0] * 10**6
            lats = np.full(60, 900_000, np.int64) + j
            tele = Telemetry(time.perf_counter_ns(), {"cpu_util": 50.0 + j})
            out.append(encode([LatencyBatch(starts, lats, origin_ns=origin), tele]))
        return out

    a, b = mp.Pipe()
    done = threading.Semaphore(0)

    def read() -> None:  # the window's reader thread, less the signal to the GUI
        conn = PipeConnection(a)
        while (batch := conn.recv()) != "stop":
            rec.feed_many(batch)
            if any(isinstance(e, OpProfile) for e in batch):
                done.release()
            del batch

    if part == "reader":
        threading.Thread(target=read, daemon=True).start()

    def one_pass(k: int) -> None:
        if part == "decode":
            for m in kinds[k % KINDS]:
                decode(m)
        elif part == "record":
            for m in timing():
                rec.feed_many(decode(m))
            for batch in decoded[k % KINDS]:
                rec.feed_many(batch)
            rec.flush()
        elif part == "window":
            assert window is not None
            window.deliver([*timing(), *kinds[k % KINDS]])
        else:
            for m in [*timing(), *kinds[k % KINDS]]:
                b.send_bytes(m)
            done.acquire()

    if traced:
        tracemalloc.start()
    rows = []
    for k in range(passes + 1):
        time.sleep(0.02)
        gc.collect()
        py = tracemalloc.get_traced_memory()[0] if traced else 0
        rows.append([rss.malloc_in_use(), sqlite.used(), sqlite.page_cache(), py])
        if k < passes:
            one_pass(k)
    if part == "reader":
        b.send_bytes(encode("stop"))
    if window is not None:
        window.close()
    rec.close()
    store.close()
    return {"rows": rows}


class _Window:
    """The real window (headless, no engine host) with its own recording: messages are
    decoded on a thread and handed to the engine client's own delivery (its recorder's
    sink, then its `events` signal to the GUI thread), as its reader thread does; the GUI
    thread runs Qt's events meanwhile and paints the latency plot after a pass."""

    def __init__(self) -> None:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        from PySide6.QtWidgets import QApplication

        self.app = QApplication.instance() or QApplication([])
        from app.shell.workbench import Workbench

        tmp = tempfile.mkdtemp(prefix="opscope-pass-window-")
        self.wb = Workbench(session_path=str(Path(tmp) / "s.opscope"), usable=["cpu"])
        self.origin = int(self.wb.controller.t0_ns)

    def deliver(self, messages: list[bytes]) -> None:
        from engine.run.wire import decode

        def read() -> None:
            for m in messages:
                self.wb.client._deliver(decode(m))

        reader = threading.Thread(target=read)
        reader.start()
        while reader.is_alive():
            self.app.processEvents()
            time.sleep(0.005)
        reader.join()
        for _ in range(3):
            self.app.processEvents()
        self.wb.window.latency.paint_now()
        self.app.processEvents()

    def close(self) -> None:
        self.wb.shutdown()


def halves(values: list[int]) -> tuple[float, float, float]:
    """KB per pass over all the passes, the first half and the second half."""
    v = np.asarray(values, float) / 1024
    n, h = len(v) - 1, (len(v) - 1) // 2
    return (v[-1] - v[0]) / n, (v[h] - v[0]) / h, (v[-1] - v[h]) / (n - h)


def _settled(values: list[int]) -> int:
    """The first pass after which `values` stay within 5% of their growth of the end."""
    v = np.asarray(values, float)
    near = np.abs(v - v[-1]) <= 0.05 * max(abs(v[-1] - v[0]), 1.0)
    far = np.flatnonzero(~near)
    return int(far[-1] + 1) if far.size else 0


def report(results: dict[str, dict[str, Any]], passes: int, busy: str, label: str) -> str:
    lines = [
        f"CPU: {rss.cpu_model()}; {busy}.",
        f"{passes} passes a part (each process of its own), {KINDS} real passes of "
        f"{DEMO.name} (20 inferences, ~0.96 MB on the wire) in turn. KB per pass: all / "
        "first half / second half.",
        "",
        "| part | malloc in use | SQLite outside its page cache | SQLite page cache "
        "| Python (tracemalloc, run apart) |",
        "|---|---|---|---|---|",
    ]
    for part, res in results.items():
        rows = np.asarray(res["rows"])
        cells = []
        for col in (rows[:, 0], rows[:, 1] - rows[:, 2], rows[:, 2]):
            cells.append(" / ".join(f"{x:+.2f}" for x in halves(list(col))))
        traced = res.get("traced")
        if traced is not None:
            py = np.asarray(traced["rows"])[:, 3]
            cells.append(" / ".join(f"{x:+.2f}" for x in halves(list(py))))
        else:
            cells.append("-")
        lines.append(f"| {part} | " + " | ".join(cells) + " |")
        last = rows[-1] - rows[0]
        lines.append(f"| {part}: malloc in use reached 95% of its growth at pass "
                     f"{_settled(list(rows[:, 0]))} | | | | |")  # fmt: skip
        lines.append(
            f"| {part}: total over the run (KB) | {last[0] / 1024:+,.0f} | "
            f"{(last[1] - last[2]) / 1024:+,.0f} | {last[2] / 1024:+,.0f} (now "
            f"{rows[-1, 2] / 1024:,.0f}) | |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=120)
    ap.add_argument("--traced-passes", type=int, default=40)
    ap.add_argument("--parts", default="decode,record,reader")
    ap.add_argument("--label", default="")
    ap.add_argument("--part", help=argparse.SUPPRESS)  # a child: one part, JSON out
    ap.add_argument("--folder", help=argparse.SUPPRESS)
    ap.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.part:
        res = measure(args.part, Path(args.folder), args.passes, args.traced)
        print(json.dumps(res))
        return
    t0, busy0 = time.monotonic(), _busy()
    load0 = os.getloadavg()[0]
    folder = Path(tempfile.mkdtemp(prefix="opscope-pass-memory-"))
    make_passes(folder)
    results: dict[str, dict[str, Any]] = {}
    for part in args.parts.split(","):
        cmd = [sys.executable, __file__, "--part", part, "--folder", str(folder)]
        out = subprocess.run([*cmd, "--passes", str(args.passes)], capture_output=True,
                             text=True, check=True)  # fmt: skip
        results[part] = json.loads(out.stdout)
        if part in ("decode", "record") and args.traced_passes:
            out = subprocess.run([*cmd, "--passes", str(args.traced_passes), "--traced"],
                                 capture_output=True, text=True, check=True)  # fmt: skip
            results[part]["traced"] = json.loads(out.stdout)
        print(part, "done", flush=True)
    busy1 = _busy()
    others = ((busy1[0] - busy0[0]) - (busy1[1] - busy0[1])) / (time.monotonic() - t0)
    busy = (f"other processes took {others:.2f} CPUs on average of {os.cpu_count()}; load "
            f"average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")  # fmt: skip
    text = report(results, args.passes, busy, args.label)
    print(text)
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    rss.append_section(
        RESULTS, HEADER, f"\n## {args.label or 'pass memory'} ({when} UTC)\n\n{text}"
    )


def _busy() -> tuple[float, float]:
    """CPU-seconds the machine has been busy, and this process's with its finished
    children's (the parts' processes)."""
    import psutil

    t = psutil.cpu_times()
    total = sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0)
    total -= getattr(t, "guest_nice", 0.0)
    return total, sum(os.times()[:4])


if __name__ == "__main__":
    main()
