"""A signal in the second or two after a command has finished (#54): the interpreter's
teardown (atexit, its modules, ONNX Runtime's sessions and threads, the C library's
static destructors) still ran with Python's handlers reset to the default, so a SIGTERM
there ended a finished command by the signal (-15) and its buffered stdout was lost.

Each case is a real `opscope` process sent SIGTERM (or SIGINT) at one moment: with stdout
unbuffered, a random 0-1.5 s after its last line appeared (the command had finished); and,
buffered as usual, at moments spread over its whole run. Every outcome must be the
command's own code with its whole output, or 130 with the one line "opscope: interrupted";
anything else (-15, -2, a traceback, more lines) is counted as bad.

Run: .venv/bin/python bench/signal_exit_window.py [--cases 40] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402

CNN = str(ROOT / "resources" / "models" / "demo_cnn.onnx")
OPSCOPE = [sys.executable, "-c", "from app.entry import run; run()"]
COMMANDS = {
    "info": ["info", CNN],
    "bench": ["bench", CNN, "--duration", "0.2", "--min-runs", "5", "--warmup", "2",
              "--no-accuracy", "--no-live", "--threads", "1"],
}  # fmt: skip


def outcome(rc: int, out: str, err: str, want_lines: int) -> str:
    """'code' (its code, its whole output), 'interrupted' (130, one line) or what was bad."""
    lines = [x for x in err.splitlines() if x.strip()]
    if "terminate called" in err:
        return f"bad: abort, terminate called (rc {rc})"
    if "Traceback" in err:
        return f"bad: traceback (rc {rc})"
    if rc == 0 and len(out.splitlines()) == want_lines:
        return "code"
    if rc == 130 and lines and lines[-1] == "opscope: interrupted":
        return "interrupted"
    return f"bad: rc {rc}, {len(out.splitlines())}/{want_lines} stdout lines"


def one(argv: list[str], sig: int, delay: float | None, after_last: int | None) -> str:
    """Run once; send `sig` `delay` s after the start, or a random 0-1.5 s after stdout's
    `after_last`-th line (unbuffered)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1" if after_last else ""}
    proc = subprocess.Popen(OPSCOPE + argv, cwd=TREE[0], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_defaults)  # fmt: skip
    out = ""
    if after_last:
        assert proc.stdout is not None
        for n, line in enumerate(proc.stdout, 1):
            out += line
            if n == after_last:
                break
        time.sleep(random.uniform(0, 1.5))
    else:
        assert delay is not None
        time.sleep(delay)
    proc.send_signal(sig)
    rest, err = proc.communicate(timeout=120)
    return outcome(proc.returncode, out + rest, err, after_last or BASE[argv[0]])


BASE: dict[str, int] = {}
TREE = [ROOT]  # the checkout whose `opscope` runs (--tree: an older one, side by side)


def _defaults() -> None:
    """The child starts with the default actions (a background shell job ignores SIGINT,
    and an ignored signal stays ignored across exec: it would measure nothing)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def others_cpu(t0: list[int], t1: list[int], own: float) -> float:
    busy = (sum(t1) - t1[3] - t1[4]) - (sum(t0) - t0[3] - t0[4])
    total = sum(t1) - sum(t0)
    tick = os.sysconf("SC_CLK_TCK")
    return max(0.0, busy - own * tick) / max(1, total) * (os.cpu_count() or 1)


def stat() -> list[int]:
    return [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=40, help="cases per command and mode")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "signal_exit_window.md"))
    ap.add_argument("--tree", default=str(ROOT), help="the checkout to run (cwd of -c)")
    ap.add_argument("--only", choices=sorted(COMMANDS), help="one command")
    ap.add_argument("--note", default="", help="a line said above the table (the tree run)")
    args = ap.parse_args()
    random.seed(61)
    TREE[0] = Path(args.tree)
    rows = ["| command | signal | when | cases | its code, whole output | 130, one line | bad |",
            "|---|---|---|---:|---:|---:|---|"]  # fmt: skip
    load0, t0, c0 = os.getloadavg()[0], stat(), os.times()
    for name, argv in COMMANDS.items():
        if args.only and name != args.only:
            continue
        t = time.monotonic()
        done = subprocess.run(OPSCOPE + argv, cwd=TREE[0], capture_output=True, text=True)
        wall = time.monotonic() - t
        assert done.returncode == 0, done.stderr
        BASE[name] = len(done.stdout.splitlines())
        for sig in (signal.SIGTERM, signal.SIGINT):
            for mode in ("after its output", "over its run"):
                seen: Counter[str] = Counter()
                for _ in range(args.cases):
                    if mode == "after its output":
                        seen[one(argv, sig, None, BASE[name])] += 1
                    else:
                        seen[one(argv, sig, random.uniform(0.3, 1.3) * wall, None)] += 1
                bad = "; ".join(f"{v}x {k[5:]}" for k, v in seen.items() if k.startswith("bad"))
                rows.append(
                    f"| {name} | {sig.name} | {mode} | {sum(seen.values())} | {seen['code']} "
                    f"| {seen['interrupted']} | {bad or '0'} |"
                )
                print(rows[-1], flush=True)
    c1 = os.times()
    own = c1.children_user + c1.children_system - c0.children_user - c0.children_system
    head = (
        "# A signal around a command's end (bench/signal_exit_window.py)\n\n"
        + (f"{args.note}\n\n" if args.note else "")
        + f"{os.cpu_count()} CPUs, shared; load1 {load0:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end; others used "
        f"{others_cpu(t0, stat(), own):.2f} of {os.cpu_count()} CPUs meanwhile.\n\n"
    )
    publish(head + "\n".join(rows), args.out)


if __name__ == "__main__":
    main()
