"""Session store insert throughput: 1,000,000 latency samples written through the Recorder
(LatencyBatch events of 10,000 int64 samples, committed every 0.4 s as in a real run) vs raw
`sqlite3.executemany` of the same rows, prebuilt as tuples, into the same table of a file
made by the same store (WAL, synchronous=NORMAL), in one transaction. Goal: ratio <= 1.3.

Rounds alternate between the two so machine noise hits both alike; the ratio is of the
medians. One round of sqlite-utils `insert_all(batch_size=10000)` (dict rows) is timed for
reference. Run: .venv/bin/python bench/store_insert.py   (results in bench/results/)
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402

from engine.config import RunConfig  # noqa: E402
from engine.events import LatencyBatch, RunStarted  # noqa: E402
from engine.session import Recorder, SessionStore  # noqa: E402

STARTED = RunStarted(
    RunConfig(threads=1),
    "CPUExecutionProvider",
    "CPUExecutionProvider",
    ("CPUExecutionProvider",),
    {"x": ((1, 4), "float32")},
    1,
    0.01,
)


def samples(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    lats = rng.integers(200_000, 3_000_000, n, dtype=np.int64)
    return np.cumsum(lats + 1000) - lats[0], lats


def new_session(folder: Path, name: str) -> tuple[SessionStore, Recorder]:
    store = SessionStore.create_or_open(folder / f"{name}.opscope")
    rec = Recorder(store, model_path="model.onnx")
    rec.feed(STARTED)
    return store, rec


def through_store(folder: Path, starts: np.ndarray, lats: np.ndarray, batch: int) -> float:
    store, rec = new_session(folder, f"store{time.perf_counter_ns()}")
    t0 = time.perf_counter()
    for i in range(0, lats.size, batch):
        rec.feed(LatencyBatch(starts[i : i + batch], lats[i : i + batch], 1))
    rec.flush()
    elapsed = time.perf_counter() - t0
    assert rec._next_index == lats.size
    rec.close()
    store.close()
    return elapsed


def raw_executemany(folder: Path, starts: np.ndarray, lats: np.ndarray) -> float:
    store, rec = new_session(folder, f"raw{time.perf_counter_ns()}")
    run_id, path = rec.run_id, store.path
    rec.close()
    store.close()
    rows = list(
        zip([run_id] * lats.size, range(lats.size), starts.tolist(), lats.tolist(), strict=True)
    )
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    t0 = time.perf_counter()
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO latency (run_id, i, start_ns, latency_ns) VALUES (?, ?, ?, ?)", rows
    )
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed


def sqlite_utils_insert_all(folder: Path, starts: np.ndarray, lats: np.ndarray) -> float:
    store, rec = new_session(folder, f"su{time.perf_counter_ns()}")
    run_id = rec.run_id
    rows = [
        {"run_id": run_id, "i": i, "start_ns": s, "latency_ns": v}
        for i, (s, v) in enumerate(zip(starts.tolist(), lats.tolist(), strict=True))
    ]
    t0 = time.perf_counter()
    store.db.table("latency").insert_all(rows, batch_size=10_000)
    elapsed = time.perf_counter() - t0
    rec.close()
    store.close()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=10_000, help="samples per LatencyBatch")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--skip-insert-all", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/store_insert.txt")
    args = ap.parse_args()
    starts, lats = samples(args.rows)
    store_s: list[float] = []
    raw_s: list[float] = []
    with tempfile.TemporaryDirectory(prefix="opscope-bench-") as tmp:
        folder = Path(tmp)
        for r in range(args.rounds):
            order = (raw_s, store_s) if r % 2 == 0 else (store_s, raw_s)
            for bucket in order:
                if bucket is raw_s:
                    raw_s.append(raw_executemany(folder, starts, lats))
                else:
                    store_s.append(through_store(folder, starts, lats, args.batch))
            print(
                f"round {r + 1}: raw {raw_s[-1]:.2f} s  store {store_s[-1]:.2f} s", file=sys.stderr
            )
        su = None if args.skip_insert_all else sqlite_utils_insert_all(folder, starts, lats)
    raw_med, store_med = statistics.median(raw_s), statistics.median(store_s)
    lines = [
        f"{args.rows:,} latency rows, LatencyBatch of {args.batch:,}, {args.rounds} rounds "
        "(median)",
        f"raw sqlite3 executemany (prebuilt tuples, 1 commit)  {raw_med:6.2f} s  "
        f"{args.rows / raw_med / 1e6:.2f} M rows/s",
        f"Recorder -> SessionStore (numpy, commits every 0.4 s) {store_med:6.2f} s  "
        f"{args.rows / store_med / 1e6:.2f} M rows/s",
        f"ratio store / raw: {store_med / raw_med:.2f}  (goal <= 1.3); best rounds: raw "
        f"{min(raw_s):.2f} s, store {min(store_s):.2f} s, ratio {min(store_s) / min(raw_s):.2f}",
        "rounds (raw, store): "
        + ", ".join(f"({a:.2f}, {b:.2f})" for a, b in zip(raw_s, store_s, strict=True)),
    ]
    if su is not None:
        lines.append(
            f"reference: sqlite-utils insert_all(batch_size=10000), dict rows: "
            f"{su:.2f} s ({su / raw_med:.1f}x raw)"
        )
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
