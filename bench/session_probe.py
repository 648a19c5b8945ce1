"""Every mutation of a real session file against every reader command (#29, #30).

A session is recorded with the CLI (profile, load, simulate, sweep of the demo models),
then copied and damaged in each way tests/session_mutations.py lists (each column
dropped, each numeric column NULL / -1 / 1e18 / inf / text, text columns inflated to 5 MB,
JSON fields given absurd values, `steps` rows under a load run, 500 sweeps). Each reader
command (session show, --json, compare, export --trace/--csv, report, simulate FILE:ID) runs
on each copy in a forked child (the CLI's main, in-process), and must end with exit 0 or
a one-line error with exit 2: no traceback, CPU time and peak memory within a bound of the
same command on the undamaged file.

Run: .venv/bin/python bench/session_probe.py [--only SUBSTRING] [--out FILE]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_file import publish  # noqa: E402

from tests.session_mutations import (  # noqa: E402
    mutated_copy,
    mutations,
    reader_commands,
    record_material,
    run_reader,
    warm_imports,
)

CPU_RATIO = 5.0  # a command on a damaged file: at most this x the slowest clean command
RSS_RATIO = 2.0  # and at most this x its peak memory


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="only mutations whose name holds this")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "session_probe.md"))
    args = ap.parse_args()
    warm_imports()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="opscope-probe-") as tmp:
        work = Path(tmp)
        material = record_material(work)
        out = work / "out"
        out.mkdir()
        clean = {
            name: run_reader(argv, work) for name, argv in reader_commands(material, out).items()
        }
        bad_clean = {n: o.problem() for n, o in clean.items() if o.problem()}
        cpu_base = max(o.cpu_s for o in clean.values())
        rss_base = max(o.max_rss_kb for o in clean.values())
        rows: list[str] = []
        failures: list[str] = []
        cases = skipped = 0
        slowest = (0.0, "")
        biggest = (0, "")
        for label, mutate in mutations(material):
            if args.only not in label:
                continue
            copy = work / "case.opscope"
            try:
                mutated_copy(material, copy, mutate)
            except sqlite3.IntegrityError:  # a NOT NULL column: SQLite refuses the value
                skipped += 1
                continue
            codes: list[str] = []
            for name, argv in reader_commands(copy, out).items():
                o = run_reader(argv, work)
                cases += 1
                why = o.problem()
                if o.cpu_s > CPU_RATIO * cpu_base:
                    why = why or f"CPU {o.cpu_s:.1f} s (clean max {cpu_base:.1f} s)"
                if o.max_rss_kb > RSS_RATIO * rss_base:
                    why = why or f"peak RSS {o.max_rss_kb // 1024} MB ({rss_base // 1024} MB)"
                slowest = max(slowest, (o.cpu_s, f"{label} / {name}"))
                biggest = max(biggest, (o.max_rss_kb, f"{label} / {name}"))
                codes.append(str(o.rc) if why is None else "FAIL")
                if why:
                    failures.append(f"- {label} / {name}: {why}")
            rows.append(f"| {label} | {' '.join(codes)} |")
            print(f"{label}: {' '.join(codes)}", flush=True)
    commands = " ".join(clean)
    text = "\n".join(
        [
            "# Session probe: hostile copies of a real session, every reader command",
            "",
            f"{cases} command runs over {len(rows)} mutated files ({skipped} mutations SQLite "
            f"itself refuses: NULL in a NOT NULL column), {time.monotonic() - started:.0f} s.",
            f"Clean file: slowest command {cpu_base:.2f} s CPU, peak RSS {rss_base // 1024} MB; "
            f"bounds {CPU_RATIO:g}x and {RSS_RATIO:g}x of those."
            + (f" Clean problems: {bad_clean}" if bad_clean else ""),
            f"Slowest damaged case: {slowest[0]:.2f} s CPU ({slowest[1]}); largest peak RSS "
            f"{biggest[0] // 1024} MB ({biggest[1]}).",
            "",
            f"**{len(failures)} failures**" + (":" if failures else "."),
            *failures,
            "",
            f"Exit codes per command ({commands}); 2 is a one-line error:",
            "",
            "| mutation | rc |",
            "|---|---|",
            *rows,
        ]
    )
    publish(text, args.out)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
