"""What reading a trace holds per row at its peak (#54: a 50M-row Azure trace took about
9.5 GB before the simulation's memory check refused it), for each format, measured with
tracemalloc (numpy's arrays included) on generated traces, each read in a fresh process;
with --tree OLD, an older checkout is measured the same way beside this one. The figures
behind engine/serve/traffic/trace_size.py's READ_BYTES_PER_ROW, and its estimate beside
each peak.

Run: .venv/bin/python bench/trace_read_memory.py [--rows 200000] [--tree OLD] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402

FORMATS = ("azure", "burstgpt", "mooncake", "csv")

MEASURE = """
import json, sys, tracemalloc
from engine.serve.traffic.trace_formats import read_any_trace
tracemalloc.start()
trace = read_any_trace(sys.argv[1])
cur, peak = tracemalloc.get_traced_memory()
try:
    from engine.serve.traffic.trace_size import estimate
    need = estimate(sys.argv[1], sys.argv[2]).need_bytes
except ImportError:
    need = None
print(json.dumps({"rows": len(trace), "peak": peak, "kept": cur, "need": need}))
"""


def write(folder: Path, fmt: str, n: int) -> Path:
    """A generated trace of `n` rows in `fmt`."""
    path = folder / f"{fmt}.txt"
    with path.open("w") as f:
        if fmt == "azure":
            f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
            for k in range(n):
                f.write(f"2023-11-16 18:{(k // 60000) % 60:02d}:{(k // 1000) % 60:02d}."
                        f"{k % 1000:03d}5900,{100 + k % 900},{1 + k % 300}\n")  # fmt: skip
        elif fmt == "burstgpt":
            f.write("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
            for k in range(n):
                f.write(f"{k * 0.01:.2f},ChatGPT,{100 + k % 900},{1 + k % 300},"
                        f"{101 + k % 1200},Conversation log\n")  # fmt: skip
        elif fmt == "mooncake":
            for k in range(n):
                ids = list(range(k % 7, k % 7 + (100 + k % 900) // 512 + 1))
                row = {"timestamp": k * 10, "input_length": 100 + k % 900,
                       "output_length": 1 + k % 300, "hash_ids": ids}  # fmt: skip
                f.write(json.dumps(row) + "\n")
        else:
            f.write("time,size\n")
            for k in range(n):
                f.write(f"{k * 0.01:.2f},{1 + k % 300}\n")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--tree", help="an older checkout, measured beside this one")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "trace_read_memory.md"))
    args = ap.parse_args()
    trees = [("this", ROOT)] + ([("old", Path(args.tree))] if args.tree else [])
    rows = ["| format | file B/row | tree | peak B/row | kept B/row | estimate B/row |",
            "|---|---:|---|---:|---:|---:|"]  # fmt: skip
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="opscope-trace-mem-") as tmp:
        for fmt in FORMATS:
            path = write(Path(tmp), fmt, args.rows)
            file_b = path.stat().st_size / args.rows
            for name, tree in trees:
                argv = [sys.executable, "-c", MEASURE, str(path), fmt]
                done = subprocess.run(argv, cwd=tree, capture_output=True, text=True, check=True)
                got = json.loads(done.stdout.splitlines()[-1])
                need = "-" if got["need"] is None else f"{got['need'] / got['rows']:.0f}"
                rows.append(f"| {fmt} | {file_b:.0f} | {name} | {got['peak'] / got['rows']:.0f} "
                            f"| {got['kept'] / got['rows']:.0f} | {need} |")  # fmt: skip
                print(rows[-1], flush=True)
    head = (
        "# Trace read: memory per row (bench/trace_read_memory.py)\n\n"
        f"{args.rows:,} generated rows per format, tracemalloc's peak and what the read "
        f"kept (the Trace), per row; load1 {load0:.1f} (memory, not time: the load does "
        "not move these). estimate: trace_size.estimate's need per row, the figure "
        "compared with the memory free before the read.\n\n"
    )
    publish(head + "\n".join(rows), args.out)


if __name__ == "__main__":
    main()
