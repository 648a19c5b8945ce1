"""Ctrl-C in the first fraction of a second of `opscope` (#54): where the time goes before
the entry's own handler is installed (app/entry.py `_stop_until_taken_over`), and what a
signal does there.

1. When each handler is in place, read from outside: the console script is polled through
   /proc/PID/status (SigCgt), giving the moment Python's own SIGINT handler is installed
   (its start-up, before `site`) and the moment ours catches SIGTERM (after `site`, the
   .pth files of the editable install, and `from app.entry import run`).
2. SIGINT sent at moments spread over the first second: each outcome classified (died by
   the signal, silent; a traceback; 130 and one line; the command's own end).
3. `python -X importtime` of the console script's imports, largest first.

Run: .venv/bin/python bench/signal_startup.py [--cases 40] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402

SCRIPT = Path(sys.executable).parent / "opscope"  # the console script, as a user runs it
CNN = str(ROOT / "resources" / "models" / "demo_cnn.onnx")
ARGV = [str(SCRIPT), "info", CNN]
# the same entry without `site` (its .pth files: the editable install's finder imports
# pathlib, re, urllib.parse and ipaddress), the paths it would add given instead: what a
# path-only .pth (setuptools' editable_mode=compat, or a regular install) would leave
SITE = next(p for p in sys.path if p.endswith("site-packages"))


def no_finder(tree: Path) -> list[str]:
    return [sys.executable, "-S", "-c", f"import sys; sys.path[:0] = [{str(tree)!r}, "
            f"{SITE!r}]; from app.entry import run; sys.exit(run())", "info", CNN]  # fmt: skip


def _defaults() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _caught(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return int(line.split()[1], 16)
    except OSError:
        return None
    return None


def handler_times(argv: list[str]) -> tuple[float | None, float | None]:
    """(s to Python's SIGINT handler, s to ours on SIGTERM) for one start."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=_defaults)  # fmt: skip
    py = ours = None
    while ours is None and proc.poll() is None:
        mask = _caught(proc.pid)
        now = time.monotonic() - t0
        if mask is not None:
            if py is None and mask & (1 << (signal.SIGINT - 1)):
                py = now
            if mask & (1 << (signal.SIGTERM - 1)):
                ours = now
        time.sleep(0.0005)
    proc.kill()
    proc.wait()
    return py, ours


def early_signal(delay: float) -> str:
    proc = subprocess.Popen(ARGV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_defaults)  # fmt: skip
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    lines = [x for x in err.splitlines() if x.strip()]
    if "Traceback" in err:
        return "a traceback"
    if proc.returncode == -signal.SIGINT and not lines:
        return "died by SIGINT, silent"
    if proc.returncode == 130 and lines == ["opscope: interrupted"]:
        return "130, one line"
    if proc.returncode == 0:
        return "ran to its end"
    return f"rc {proc.returncode}, {len(lines)} lines"


def importtime() -> list[str]:
    """Python's own import-time tree of the console script's imports, lines of 2 ms or more
    (cumulative), as it prints it: a module is imported by the next one less indented."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "import app.entry"],
                          capture_output=True, text=True, cwd="/")  # fmt: skip
    keep = [done.stderr.splitlines()[0]]
    for line in done.stderr.splitlines()[1:]:
        parts = line.split("|")
        if len(parts) == 3 and (int(parts[1]) >= 2000 or "app" in parts[2]):
            keep.append(line)
    return ["```", *keep, "```"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--note", default="")
    ap.add_argument("--old-tree", type=Path, help="an older checkout's entry, beside this one")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "signal_startup.md"))
    args = ap.parse_args()
    random.seed(54)
    load0 = os.getloadavg()[0]
    ways = [("console script", ARGV), ("no .pth finder (-S)", no_finder(ROOT))]
    if args.old_tree:
        ways.append(("no .pth finder (-S), the older tree's entry", no_finder(args.old_tree)))
    times: dict[str, tuple[list[float], list[float]]] = {}
    for _ in range(args.cases):  # the ways, alternating
        for name, argv in ways:
            py, own = handler_times(argv)
            if py is not None and own is not None:
                times.setdefault(name, ([], []))[0].append(py)
                times[name][1].append(own)
    ours = times["console script"][1]
    seen: Counter[str] = Counter()
    hi = statistics.median(ours) * 1.5 if ours else 1.0
    for _ in range(args.cases):
        seen[early_signal(random.uniform(0.0, hi))] += 1
    out = [
        "# A signal in the first second of `opscope` (bench/signal_startup.py)\n",
        *([args.note, ""] if args.note else []),
        f"2 CPUs, shared: load1 {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end "
        "(each figure below is wall time on that busy machine).\n",
        f"## When the handlers are in place ({args.cases} starts each, alternating)\n",
        "| start | handler | median s | min s | max s |",
        "|---|---|---:|---:|---:|",
        *[
            f"| {name} | {which} | {statistics.median(got):.3f} | {min(got):.3f} | {max(got):.3f} |"
            for name, (py, own) in times.items()
            for which, got in (("Python's SIGINT", py), ("ours", own))
        ],
        "",
        f"## SIGINT at a random moment in the first {hi:.2f} s ({args.cases} starts)\n",
        "| outcome | starts |",
        "|---|---:|",
        *[f"| {k} | {v} |" for k, v in seen.most_common()],
        "",
        "## What is imported before our handler (`python -X importtime -c 'import app.entry'`)\n",
        *importtime(),
    ]
    publish("\n".join(out), args.out)


if __name__ == "__main__":
    main()
