"""The afternoon at real durations on a real-size model (#29): tests/afternoon.py's story
(a model, a new input size, INT8 to cosine 0.99, a load run and the What-if, a 2-trial
tune, a 2-point sweep, the demo LLM's serving study, Save As, Quit) in the app's own
process, under an offscreen display; this parent checks what the suite cannot: that the
process exits after Quit, and that every process it started is gone.

    python bench/afternoon.py [--model ~/.cache/opscope-bench/minilm/model.onnx]
        [--size 256] [--sweep 128,256] [--out bench/results/afternoon.md]

The model defaults to all-MiniLM-L6-v2 (bench/models/minilm_onnx.py builds it), or the
demo transformer when that is absent (and the results say so)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MINILM = Path.home() / ".cache" / "opscope-bench" / "minilm" / "model.onnx"
DEMO = ROOT / "resources" / "models" / "demo_transformer.onnx"
LLM = ROOT / "resources" / "models" / "demo_llm"


def child(args: argparse.Namespace) -> int:
    """The app's process: the story, then Quit as File > Quit does it."""
    import psutil
    from PySide6.QtWidgets import QApplication

    from tests import afternoon

    app = QApplication(sys.argv[:1])
    from app.shell.launch import gui_thread_gc

    collector = gui_thread_gc()  # noqa: F841 (as the app does)
    from app.shell.workbench import Workbench

    folder = Path(args.folder)
    wb = Workbench(session_path=str(folder / "afternoon.opscope"), usable=["cpu"])
    wb.window.resize(1024, 700)
    wb.window.show()

    def wait(cond, ms):  # type: ignore[no-untyped-def]
        end = time.monotonic() + ms / 1000
        while not cond():
            app.processEvents()
            time.sleep(0.02)
            if time.monotonic() > end:
                wb.window.grab().save(str(folder / "timeout.png"))
                raise SystemExit(f"afternoon: timed out (the window: {folder}/timeout.png)")

    sizes = [int(v) for v in args.sweep.split(",")]
    plan = afternoon.Plan(
        Path(args.model), LLM, folder, dim=args.dim, size=args.size, sweep=(sizes[0], sizes[1]),
        load_rate=args.rate, load_s=args.load_s, tune_s=args.tune_s,
        llm_requests=args.llm_requests, timeout_ms=int(args.timeout_s * 1000),
    )  # fmt: skip
    pids: list[int] = []

    def quit_app() -> None:  # what app.exec()'s end does (aboutToQuit: wb.shutdown)
        pids.extend(p.pid for p in psutil.Process().children(recursive=True))
        wb.shutdown()

    a = afternoon.run(wb, wait, plan, quit_app)
    result = {
        "steps": a.steps,
        "shown_shape": a.shown_shape,
        "checks": afternoon.checks(a),
        "pids_at_quit": pids,
        "quit_at": time.time(),
    }
    (folder / "afternoon.json").write_text(json.dumps(result, indent=1, default=str))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--folder", help=argparse.SUPPRESS)
    ap.add_argument("--model", default=str(MINILM if MINILM.is_file() else DEMO))
    ap.add_argument("--dim", default="sequence", help="the input dimension --size sets")
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--sweep", default="128,256")
    ap.add_argument("--rate", type=float, default=60.0)
    ap.add_argument("--load-s", type=float, default=10.0)
    ap.add_argument("--tune-s", type=float, default=3.0)
    ap.add_argument("--llm-requests", type=int, default=24)
    ap.add_argument("--timeout-s", type=float, default=900.0)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "afternoon.md"))
    args = ap.parse_args()
    if args.child:
        return child(args)
    from engine.session.env import cpu_name

    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, __file__, "--child", "--folder", tmp]
        for flag in ("model", "dim", "size", "sweep", "rate", "load_s", "tune_s",
                     "llm_requests", "timeout_s"):  # fmt: skip
            argv += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
        env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
        load = os.getloadavg()
        t0 = time.monotonic()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=ROOT)
        wall = time.monotonic() - t0
        ended = time.time()
        path = Path(tmp) / "afternoon.json"
        if proc.returncode != 0 or not path.is_file():
            print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
            print(f"afternoon: the app's process exited {proc.returncode}", file=sys.stderr)
            return 1
        r = json.loads(path.read_text())
        deadline = time.monotonic() + 10  # an orphan has this long to end
        while (left := [p for p in r["pids_at_quit"] if _running(p)]) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.2)
        exit_s = ended - r["quit_at"]
    lines = [
        "# The afternoon at real durations (bench/afternoon.py)",
        "",
        f"- Date: {time.strftime('%Y-%m-%d %H:%M')}; CPU: {cpu_name() or '?'}, "
        f"{os.cpu_count()} logical CPUs; load average at start {load[0]:.2f}, at the end "
        f"{os.getloadavg()[0]:.2f} (other work shared the machine)",
        f"- Model: `{Path(args.model).name}` ({Path(args.model).parent.name}); input size set "
        f"to {args.size}: the window showed `{r['shown_shape'].strip()}`",
        f"- Whole afternoon {wall:.0f} s; the app's process exited {exit_s:.1f} s after Quit "
        f"(rc {proc.returncode}); of the {len(r['pids_at_quit'])} processes it had started, "
        f"{len(left)} left",
        "",
        "| step | s | outcome |",
        "|---|---|---|",
        *(f"| {n} | {s:.1f} | {str(o).replace('|', '/')[:160]} |" for n, s, o in r["steps"]),
        "",
        "## Checks",
        "",
        *(f"- {k}: {v}" for k, v in r["checks"].items()),
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))
    c = r["checks"]
    ok = (
        c["autosave integrity_check"] == "ok"
        and c["Save As copy integrity_check"] == "ok"
        and not c["runs at another shape than the window showed"]
        and not c["processes left after Quit"]
        and not left
    )
    return 0 if ok else 1


def _running(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


if __name__ == "__main__":
    raise SystemExit(main())
