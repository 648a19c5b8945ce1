"""Soak: `opscope load` serving a model for MINUTES, measuring how fast its resident memory
grows (issue 54: the demo CNN at 50 requests/s grew 0.63-0.66 MB a minute, 1.89 at 150/s).

The command runs as it does for a user (`opscope load MODEL --traffic poisson:RATE
--duration S --session FILE`: every request and batch recorded as it ends); its RSS is
sampled every few seconds and the growth is the slope of a least-squares line through the
samples from minute `--skip` on (preparing the model, the warm-up and the first commits are
over by then). How busy the machine was is measured beside it: the CPU time every other
process took over the soak (others' CPUs, the mean and the busiest minute).

    python bench/load_soak.py --minutes 60 --rate 50 --label after

appends a section to bench/results/soak_load.md (CPU, model, rate, duration, MB/min, RSS at
the start of the fit and at the end, which mappings grew).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench import rss  # noqa: E402  (RSS samples, their slope, others' CPU)

RESULTS = ROOT / "bench" / "results" / "soak_load.md"
DEMO_CNN = ROOT / "resources" / "models" / "demo_cnn.onnx"
OPSCOPE = ROOT / ".venv" / "bin" / "opscope"
SERVING_BYTES = 64 << 10  # the session grew this much: requests are being committed


def recorded_bytes(session: Path) -> int:
    """The session file and its write-ahead log, in bytes (0 before it exists)."""
    total = 0
    for p in (session, session.with_name(session.name + "-wal")):
        with contextlib.suppress(OSError):
            total += p.stat().st_size
    return total


def run(args: argparse.Namespace) -> dict[str, Any]:
    import psutil

    tmp = Path(tempfile.mkdtemp(prefix="opscope-load-soak-"))
    session = tmp / "soak.opscope"
    seconds = args.minutes * 60
    cmd = [str(OPSCOPE), "load", args.model, "--traffic", f"poisson:{args.rate:g}",
           "--duration", f"{seconds:g}", "--session", str(session)]  # fmt: skip
    log = (tmp / "load.log").open("w")
    child = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    proc = psutil.Process(child.pid)
    t0 = time.monotonic()
    rows: list[tuple[float, float]] = []
    busy: list[tuple[float, float]] = []
    maps: list[dict[str, int]] = []  # at the fit's start, and the latest (once a minute)
    serving_at: float | None = None  # the schedule starts once the model is prepared
    base = -1  # the session's bytes when first seen: serving commits requests past it
    mapped_at = -1e9
    while child.poll() is None:
        t = time.monotonic() - t0
        try:
            resident = proc.memory_info().rss / 1e6
            cpu = rss.machine_and_proc_cpu(proc)
        except psutil.Error:
            break
        size = recorded_bytes(session)
        if base < 0 and size > 0:
            base = size
        elif serving_at is None and base >= 0 and size > base + SERVING_BYTES:
            serving_at = t
        rows.append((t, resident))
        busy.append(cpu)
        if serving_at is not None and t - serving_at >= args.skip * 60 and t - mapped_at >= 60:
            maps[1:] = [rss.smaps(child.pid)]
            if len(maps) == 1:
                maps.insert(0, maps[0])
            mapped_at = t
        time.sleep(args.every)
    rc = child.wait()
    log.close()
    arr = np.array(rows)
    start = (serving_at or 0.0) + args.skip * 60
    tail = (tmp / "load.log").read_text(errors="replace").strip().splitlines()[-12:]
    return {
        "t": arr[:, 0],
        "rss": arr[:, 1],
        "fit_from": start,
        "mb_min": rss.slope_mb_per_min(arr[:, 0], arr[:, 1], start),
        "others_cpu": rss.others_cpu(arr[:, 0], np.array(busy)),
        "rc": rc,
        "tail": tail,
        "session_mb": session.stat().st_size / 1e6 if session.exists() else 0.0,
        "growth": rss.smaps_growth(maps[0], maps[-1]) if len(maps) == 2 else [],
    }


def report(out: dict[str, Any], args: argparse.Namespace) -> str:
    t, resident = out["t"], out["rss"]
    first = min(int(np.searchsorted(t, out["fit_from"])), len(t) - 1)
    sent = next((ln for ln in out["tail"] if ln.startswith("requests")), "requests ?")
    lines = [
        f"## {args.label}: `opscope load` {Path(args.model).name} at poisson:{args.rate:g}, "
        f"{args.minutes:g} min ({time.strftime('%Y-%m-%d %H:%M')})",
        "",
        f"CPU: {rss.cpu_model()} ({os.cpu_count()} logical cores, shared with other work). "
        f"Other processes took {out['others_cpu'][0]:.2f} CPUs on average (busiest minute "
        f"{out['others_cpu'][1]:.2f}) of {os.cpu_count()}.",
        f"Exit status {out['rc']}; {sent.split(None, 1)[-1]}; session file "
        f"{out['session_mb']:.1f} MB.",
        f"Fit from minute {args.skip:g} of serving on ({len(t) - first} RSS samples every "
        f"{args.every:g} s).",
        "",
        "| process | RSS at fit start (MB) | RSS at end (MB) | growth (MB/min) |",
        "|---|---:|---:|---:|",
        f"| opscope load | {resident[first]:.1f} | {resident[-1]:.1f} | {out['mb_min']:+.3f} |",
    ]
    if out["growth"]:
        lines += ["", "Resident growth by mapping over the fit:", "", "```"]
        lines += out["growth"] + ["```"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=50.0, help="requests per second")
    parser.add_argument("--model", default=str(DEMO_CNN))
    parser.add_argument("--every", type=float, default=5.0, help="RSS sampling interval, s")
    parser.add_argument("--skip", type=float, default=2.0, help="fit from this minute on")
    parser.add_argument("--label", default="run")
    parser.add_argument("--out", default=str(RESULTS), help="markdown file to append to")
    args = parser.parse_args()
    out = run(args)
    text = report(out, args)
    print(text)
    rss.append_section(
        Path(args.out),
        "# Soak: memory growth of `opscope load`\n\n"
        "`python bench/load_soak.py --minutes N --rate R --label L`: `opscope load` on "
        "the demo CNN under Poisson traffic, recorded to a session; growth is the "
        "least-squares slope of its RSS from minute 2 of serving on.\n\n",
        text,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
