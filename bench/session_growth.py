"""Session growth: how many MB a live session gains per minute, recorded the way the app
records it (the engine host's events fed to the Recorder), on the demo transformer and on a
generated ~325-node model (bench/models/deep_encoder.py).

Each model runs live for MINUTES (default 3: about 6 profiling passes, one every 30 s);
the per-minute growth is the file's size over the minutes (a short run, extrapolated to an
hour by 60x; the fixed part, schema and model rows, is under 0.1 MB). The table breakdown
comes from SQLite's dbstat. `--label` names the section appended to
bench/results/session_growth.md; run it from an older checkout for a before/after.

    python bench/session_growth.py --minutes 3 --label after
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.rss import append_section  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "session_growth.md"
DEMO = ROOT / "resources" / "models" / "demo_transformer.onnx"


def record_live(model: Path, session: Path, minutes: float) -> dict[str, float]:
    """Run the engine host on `model` for `minutes`, recording into `session`."""
    from engine.events import LatencyBatch, OpProfile
    from engine.run import host_commands as cmds
    from engine.run.host import host_main
    from engine.run.wire import PipeConnection
    from engine.session import Recorder, SessionStore

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    conn = PipeConnection(parent)  # wire messages, as the window sends them
    proc = ctx.Process(target=host_main, args=(child, 0.1, 0), daemon=True)
    proc.start()
    child.close()
    samples = passes = 0
    store = SessionStore.create_or_open(session)
    rec = Recorder(store, kind="live")
    try:
        conn.send(cmds.Load(str(model)))
        end = time.monotonic() + minutes * 60
        while time.monotonic() < end:
            if conn.poll(0.2):
                batch = conn.recv()
                rec.feed_many(batch)
                samples += sum(e.latencies_ns.size for e in batch if isinstance(e, LatencyBatch))
                passes += sum(isinstance(e, OpProfile) for e in batch)
        conn.send(cmds.Shutdown())
        while proc.is_alive() or conn.poll(0):
            if conn.poll(0.5):
                rec.feed_many(conn.recv())
            elif not proc.is_alive():
                break
    except EOFError:
        pass
    finally:
        rec.close()
        store.close()
        proc.join(10)
    return {"samples": samples, "passes": passes}


def tables(session: Path) -> dict[str, int]:
    """Bytes per table (its indexes counted with it)."""
    conn = sqlite3.connect(f"file:{session}?mode=ro", uri=True)
    try:
        owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master"))
        out: dict[str, int] = {}
        for name, size in conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            table = owner.get(name, name)
            out[table] = out.get(table, 0) + int(size)
        return out
    finally:
        conn.close()


def measure(model: Path, minutes: float, folder: Path) -> dict[str, object]:
    session = folder / f"{model.stem}.opscope"
    counts = record_live(model, session, minutes)
    size = session.stat().st_size
    return {
        "model": model.name,
        "minutes": minutes,
        "mb": size / 1e6,
        "mb_per_min": size / 1e6 / minutes,
        "tables": tables(session),
        "version": _version(session),
        **counts,
    }


def _version(session: Path) -> str:
    conn = sqlite3.connect(f"file:{session}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return str(row[0]) if row else "?"
    finally:
        conn.close()


def report(results: list[dict[str, object]], label: str) -> str:
    from engine.session.env import cpu_name

    lines = [
        f"## {label} ({time.strftime('%Y-%m-%d %H:%M')})",
        "",
        f"CPU: {cpu_name() or 'unknown'} ({os.cpu_count()} logical cores, shared). Live "
        "recording as the app does it; MB/hour = 60 x the measured MB/min (extrapolated).",
        "",
        "| model | format | minutes | samples | profiling passes | file MB | MB/min | MB/hour | "
        "largest tables (MB) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        sizes = r["tables"]
        assert isinstance(sizes, dict)
        top = sorted(sizes.items(), key=lambda kv: -kv[1])[:4]
        breakdown = ", ".join(f"{k} {v / 1e6:.2f}" for k, v in top)
        mb_min = float(r["mb_per_min"])  # type: ignore[arg-type]
        lines.append(
            f"| {r['model']} | v{r['version']} | {r['minutes']:g} | {r['samples']:,} | "
            f"{r['passes']} | {r['mb']:.2f} | {mb_min:.2f} | {60 * mb_min:.0f} | {breakdown} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0, help="per model")
    parser.add_argument("--label", default="run")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--keep", metavar="DIR", help="leave the sessions in DIR")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "bench" / "models"))
    from deep_encoder import build

    folder = Path(args.keep or tempfile.mkdtemp(prefix="opscope-growth-"))
    folder.mkdir(parents=True, exist_ok=True)
    deep = build(folder / "deep_encoder_325.onnx")
    results = [measure(m, args.minutes, folder) for m in (DEMO, deep)]
    text = report(results, args.label)
    print(text)
    append_section(
        Path(args.out),
        "# Session growth: MB per minute of live recording\n\n"
        "`python bench/session_growth.py --minutes 3 --label L` (see its docstring).\n\n",
        text,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
