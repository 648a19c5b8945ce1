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

Each start is timed four ways, interleaved: the console script with a command and with none
(the window's entry), the entry with no `site` (-S), and with --strict-venv, a venv holding
a strict editable install (`pip install -e COPY --no-deps --config-settings
editable_mode=strict`, the other packages from .venv through a path .pth): one static
path where the default install's .pth imports its finder. The window where Ctrl-C is a
traceback (Python's SIGINT handler to ours) is given per start; the machine's load and the
others' CPU use beside them.

Run: .venv/bin/python bench/signal_startup.py [--cases 40] [--strict-venv VENV] [--out FILE.md]
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


# the console script as pip writes it here, for another interpreter (a scratch venv with a
# strict editable install: `pip install -e . --config-settings editable_mode=strict`, whose
# .pth is one static path to a tree of links, no finder imported by `site`)
TEMPLATE = "import sys\nfrom app.entry import run\nsys.exit(run())\n"


def strict_install(venv: Path) -> list[str]:
    script = Path("/tmp") / f"opscope-strict-entry-{os.getpid()}.py"
    script.write_text(TEMPLATE)
    return [str(venv / "bin" / "python"), str(script), "info", CNN]


def busy_cpus() -> tuple[float, float]:
    """(jiffies busy, jiffies in all) of the whole machine so far (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


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
    ap.add_argument("--strict-venv", type=Path, help="a venv with a strict editable install")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "signal_startup.md"))
    args = ap.parse_args()
    random.seed(54)
    load0 = os.getloadavg()[0]
    busy0, all0 = busy_cpus()
    ways = [
        ("console script", ARGV),
        ("console script, no command (the window's entry)", [str(SCRIPT)]),
        ("no .pth finder (-S)", no_finder(ROOT)),
    ]
    if args.strict_venv:
        strict = strict_install(args.strict_venv)
        ways.append(("strict editable install (one static .pth path)", strict))
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
    busy1, all1 = busy_cpus()
    import resource

    own = resource.getrusage(resource.RUSAGE_CHILDREN)
    hz = os.sysconf("SC_CLK_TCK")
    ncpu = os.cpu_count() or 1
    wall = (all1 - all0) / hz / ncpu
    others = max(0.0, (busy1 - busy0) / hz - own.ru_utime - own.ru_stime) / max(wall, 1e-9)
    cpu = next((x.split(":", 1)[1].strip() for x in Path("/proc/cpuinfo").read_text().splitlines()
                if x.startswith("model name")), "?")  # fmt: skip
    out = [
        "# A signal in the first second of `opscope` (bench/signal_startup.py)\n",
        *([args.note, ""] if args.note else []),
        f"{cpu}, {ncpu} CPUs, shared: load1 {load0:.1f} at the start, {os.getloadavg()[0]:.1f} "
        f"at the end; others' CPU use over the run {others:.2f} of {ncpu} CPUs (each figure "
        "below is wall time on that busy machine).\n",
        f"## When the handlers are in place ({args.cases} starts each, alternating)\n",
        "| start | handler | median s | min s | max s |",
        "|---|---|---:|---:|---:|",
        *[
            f"| {name} | {which} | {statistics.median(got):.3f} | {min(got):.3f} | {max(got):.3f} |"
            for name, (py, own) in times.items()
            for which, got in (("Python's SIGINT", py), ("ours", own))
        ],
        "",
        "The window where Ctrl-C is a KeyboardInterrupt traceback: from Python's SIGINT "
        "handler to ours, per start (before Python's, SIGINT's default action ends the "
        "process silently, rc -2).\n",
        "| start | window median ms | min ms | max ms |",
        "|---|---:|---:|---:|",
        *[
            f"| {name} | {statistics.median(w):.1f} | {min(w):.1f} | {max(w):.1f} |"
            for name, (py, own) in times.items()
            for w in ([1000 * (b - a) for a, b in zip(py, own, strict=True)],)
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
