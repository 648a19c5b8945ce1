"""How long `opscope report` takes on a large session, and where the time goes (#53:
Export Report took 210 s for an 18 MB session, 22 s for a small one).

The session is built from a real one recorded with the CLI (profiled MiniLM runs, a
demo CNN bench and load run, a demo transformer profile, a memory report): its runs are
copied in again (engine/session/merge.py) until the file passes --mb. Then the report is
written --repeat times in one process each for this checkout and, with --before, for
another checkout (an older commit's tree: `git archive COMMIT engine | tar -x -C DIR`),
alternating, so both meet the same machine; each timing says how busy the machine was
(the CPU other processes took, engine/measure/contention.py), and the CPU time of the
report process itself, which others' load does not inflate. The top functions of one
cProfile of this checkout's report follow.

    python bench/report_speed.py --source S.opscope --before /tmp/old --label after
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "report_speed.md"

from engine.hostinfo import cpu_model  # noqa: E402

CHILD = """
import resource, sys, time
sys.path.insert(0, sys.argv[1])
from engine.analysis.report import write_report
t0 = time.perf_counter()
write_report(sys.argv[2], sys.argv[3])
wall = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_SELF)
print(f"{wall:.3f} {ru.ru_utime + ru.ru_stime:.3f}")
"""


def build(source: Path, out: Path, mb: float) -> int:
    """`source`'s runs copied into `out` until it holds `mb` MB; the number of runs."""
    from engine.session.merge import copy_runs
    from engine.session.reader import SessionReader
    from engine.session.store import SessionStore

    out.unlink(missing_ok=True)
    shutil.copyfile(source, out)
    with SessionStore.create_or_open(out) as store:
        while out.stat().st_size < mb * 1e6:
            copy_runs(store, source)
    with SessionReader.open(out) as reader:
        return len(reader.runs())


def one_report(tree: Path, session: Path, html: Path) -> tuple[float, float, str]:
    """(wall s, CPU s of the report, how busy the machine was) for one report."""
    from engine.measure.contention import Window

    window = Window()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), str(session), str(html)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),
    )
    load = window.done()
    wall, cpu = (float(v) for v in proc.stdout.split()[-2:])
    # the report runs in a child process, which the probe counts among the "others"
    others = max(load.others_cpu - cpu / wall, 0.0) if load else 0.0
    busy = f"others {others:.2f} of {load.cpus} CPUs" if load else "not measured"
    return wall, cpu, busy


def profile_top(session: Path, html: Path, lines: int = 14) -> str:
    from engine.analysis.report import write_report

    prof = cProfile.Profile()
    prof.enable()
    write_report(str(session), str(html))
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(40)
    keep = [line for line in out.getvalue().splitlines() if "engine/" in line or "ncalls" in line]
    return "\n".join(keep[: lines + 1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, required=True, help="a session recorded with the CLI")
    ap.add_argument("--mb", type=float, default=18.0)
    ap.add_argument("--before", type=Path, help="an older checkout's tree (its engine/)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--label", default="run")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="report-speed-"))
    session = work / "big.opscope"
    runs = build(args.source, session, args.mb)
    size = session.stat().st_size / 1e6
    trees = [("this checkout", ROOT)] + ([("before", args.before)] if args.before else [])
    rows = []
    for i in range(args.repeat):
        for name, tree in trees if i % 2 == 0 else trees[::-1]:
            wall, cpu, busy = one_report(tree, session, work / f"{name}.html")
            html_mb = (work / f"{name}.html").stat().st_size / 1e6
            rows.append(f"| {name} | {wall:.1f} | {cpu:.1f} | {html_mb:.1f} | {busy} |")
            print(rows[-1], flush=True)
    top = profile_top(session, work / "profiled.html")
    text = (
        f"\n## {args.label}: {time.strftime('%Y-%m-%d %H:%M')} UTC\n\n"
        f"{cpu_model()}, {os.cpu_count()} CPUs; session {size:.1f} MB, {runs} runs "
        f"(copies of {args.source.name}); peak RSS of this script "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB\n\n"
        "| code | wall s | CPU s (report process) | HTML MB | machine during it |\n"
        "|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        "cProfile of this checkout's report (cumulative s, engine functions):\n\n"
        f"```\n{top}\n```\n"
    )
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a", encoding="utf-8") as fh:
        fh.write(text)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
