"""Many writers and kills over one session file (#29): `integrity_check` after every round.

Each round, over one file: a "window" process records a live run through the Recorder
(latency batches every 20 ms) and, as the window does, reads its own file back every
0.2 s (a session window's open, `runs()`, a report's check, a compact copy); meanwhile waves
of "trial" processes (as `opscope bench --session` runs for the tuner and the sweep), one
or two at a time, each record a run of their own and close, a quarter of them killed with
SIGKILL mid-run; the window
itself is killed with SIGKILL or SIGTERM in some rounds and restarted, as a crashed app
is. After the round, every process stopped, the file must pass `PRAGMA integrity_check`
and open as a session, and the samples each finished writer committed must all be there.

`--raw-read` makes the window read its file as OpScope did before the fix (a plain
open/read/close of its header): the same rounds then lose writes or tear the file, which
shows the stress run can see the mechanism.

Run: .venv/bin/python bench/session_stress.py [--rounds 40] [--raw-read]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402

WRITER = r"""
import os, sys, time, random
import numpy as np
from pathlib import Path
from engine.config import RunConfig
from engine.events import LatencyBatch, RunEnded, RunStarted
from engine.session import Recorder, SessionStore, open_session_file
from engine.session.compact import compact_copy
from engine.session.trust import check_file

path, role, seconds, raw = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4] == "1"
started = RunStarted(RunConfig(threads=1), "CPUExecutionProvider", "CPUExecutionProvider",
                     ("CPUExecutionProvider",), {"x": ((1, 4), "float32")}, 1, 0.01)
store = SessionStore.create_or_open(path)
rec = Recorder(store, model_path=role + ".onnx")
rec.feed(started)
rng = np.random.default_rng(os.getpid())
t0 = time.monotonic(); n = 0; last_read = t0; copies = 0; run_id = None
while time.monotonic() - t0 < seconds:
    lats = rng.integers(100_000, 900_000, 200, dtype=np.int64)
    rec.feed(LatencyBatch(np.cumsum(lats) + n * 1_000_000, lats, 0))
    n += 200
    run_id = run_id if run_id is not None else rec.run_id
    if role == "window" and time.monotonic() - last_read > 0.2:
        last_read = time.monotonic()
        if raw:
            with open(path, "rb") as fh:  # what check_file did before held.py
                fh.read(100)
        else:
            which = random.randrange(3)
            if which == 0:
                with open_session_file(path) as r:
                    r.runs()
            elif which == 1:
                check_file(Path(path))
            else:
                rec.flush()
                copies += 1
                dest = Path(path).with_name(f"copy-{os.getpid()}-{copies}.opscope")
                compact_copy(path, dest)
                dest.unlink()
    time.sleep(0.02)
rec.feed(RunEnded("ok"))
rec.close()
store.close()
run_id = run_id if run_id is not None else rec.run_id  # its writes may have waited on a lock
print(run_id, n)
"""


def _spawn(path: Path, role: str, seconds: float, raw: bool) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), role, str(seconds), "1" if raw else "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _check(path: Path) -> tuple[str, dict[int, int], dict[int, str]]:
    conn = sqlite3.connect(path)
    try:
        (check,) = conn.execute("PRAGMA integrity_check").fetchone()
        counts = dict(conn.execute("SELECT run_id, COUNT(*) FROM latency GROUP BY run_id"))
        status = dict(conn.execute("SELECT id, status FROM runs"))
    except sqlite3.DatabaseError as exc:
        return f"unreadable ({exc})", {}, {}
    finally:
        conn.close()
    return check, counts, status


def one_round(folder: Path, rnd: int, rng: random.Random, raw: bool) -> dict[str, object]:
    path = folder / f"round-{rnd}.opscope"
    finished: dict[int, int] = {}  # run id -> samples, of writers that ended on their own
    window = _spawn(path, "window", 8.0, raw)
    time.sleep(0.8)
    trials = []
    killed = 0
    for _ in range(rng.randint(3, 5)):  # waves, as a tune's trials run one after another
        wave = [_spawn(path, "trial", rng.uniform(0.3, 1.2), raw) for _ in range(rng.randint(1, 2))]
        for p in wave:
            if rng.random() < 0.25:
                time.sleep(rng.uniform(0.2, 0.6))
                p.send_signal(signal.SIGKILL)
                killed += 1
            p.wait()
        trials += wave
        time.sleep(rng.uniform(0.1, 0.4))
    window_fate = rng.choice(["ends", "ends", "SIGKILL", "SIGTERM"])
    if window_fate != "ends":
        time.sleep(rng.uniform(0.5, 2.0))
        window.send_signal(getattr(signal, window_fate))
        window.wait()
        window = _spawn(path, "window", 1.5, raw)  # the app restarted on the same file
    procs = [*trials, window]
    errors = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        if p.returncode == 0:
            run_id, n = out.split()  # "None": its run never reached the file
            finished[int(run_id) if run_id != "None" else -len(finished) - 1] = int(n)
        elif p.returncode > 0:
            errors.append(err.strip().splitlines()[-1] if err.strip() else f"rc {p.returncode}")
    check, counts, _ = _check(path)
    lost = sum(max(0, n - counts.get(run_id, 0)) for run_id, n in finished.items())
    return {
        "round": rnd,
        "writers": len(procs) + (window_fate != "ends"),
        "killed": killed + (window_fate == "SIGKILL"),
        "window": window_fate,
        "integrity": check,
        "finished_samples": sum(finished.values()),
        "samples_in_file": sum(counts.values()),
        "lost": lost,
        "errors": errors,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--raw-read", action="store_true", help="read the file as before the fix")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    rows = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="opscope-stress-") as tmp:
        for rnd in range(args.rounds):
            row = one_round(Path(tmp), rnd, rng, args.raw_read)
            rows.append(row)
            print(row, flush=True)
    bad = [r for r in rows if r["integrity"] != "ok" or r["lost"] or r["errors"]]
    how = " (raw reads, as before the fix)" if args.raw_read else ""
    took = time.monotonic() - t0
    lines = [
        f"# Session stress: {args.rounds} rounds{how}",
        "",
        f"CPU: {_cpu()}; {os.cpu_count()} cores; {took:.0f} s; seed {args.seed}",
        "",
        f"- writer processes: {sum(int(r['writers']) for r in rows)}"  # type: ignore[call-overload]
        f", of them killed with SIGKILL: {sum(int(r['killed']) for r in rows)}"  # type: ignore[call-overload]
        f"; window SIGTERM'd in {sum(r['window'] == 'SIGTERM' for r in rows)} rounds",
        f"- rounds failing `integrity_check`: {sum(r['integrity'] != 'ok' for r in rows)}",
        f"- rounds losing samples a finished writer committed: {sum(bool(r['lost']) for r in rows)}"
        f" ({sum(int(r['lost']) for r in rows):,} samples)",  # type: ignore[call-overload]
        f"- rounds with a writer's error: {sum(bool(r['errors']) for r in rows)}",
        "",
        "| round | writers | killed | window | integrity | finished writers' samples | in file |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['round']} | {r['writers']} | {r['killed']} | {r['window']} | "
            f"{str(r['integrity'])[:60]} | {r['finished_samples']:,} | {r['samples_in_file']:,} |"
        )
    if bad:
        lines += ["", "Errors:"] + [
            f"- round {r['round']}: {r['errors']}" for r in bad if r["errors"]
        ]
    name = "session_stress_raw.md" if args.raw_read else "session_stress.md"
    publish("\n".join(lines), args.out or ROOT / "bench/results" / name)


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


if __name__ == "__main__":
    main()
