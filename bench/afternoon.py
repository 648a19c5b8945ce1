"""The afternoon at real durations on a real-size model (#29): tests/afternoon.py's story
(a model, a new input size, INT8 to cosine 0.99, a load run and the What-if, a 2-trial
tune, a 2-point sweep, the demo LLM's serving study, Save As, Quit) in the app's own
process, under an offscreen display; this parent checks what the suite cannot: that the
process exits after Quit, and that every process it started is gone.

Then the afternoon's additions (#53), on the file the afternoon saved: a teammate opens it
(`opscope gui FILE`, in a process of its own: one window, no engine, no new autosave file,
and the app ends when that window closes); the Runs dock's `#` as the window showed it
against the file's run ids and the report's runs table; Compare's pickers (each naming
kind, model and inputs) and the pair it opens on; the report's time.

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
from typing import Any

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

    dock: list[list[str]] = []

    def quit_app() -> None:  # what app.exec()'s end does (aboutToQuit: wb.shutdown)
        pids.extend(p.pid for p in psutil.Process().children(recursive=True))
        dock.extend(_runs_dock(wb))  # as the window showed it at Quit
        wb.shutdown()

    a = afternoon.run(wb, wait, plan, quit_app)
    checks = afternoon.checks(a)
    quit_at = time.time()
    extra_steps, extra = additions(Path(str(a.copy)), folder, dock, args.keep)
    result = {
        "steps": [*a.steps, *extra_steps],
        "shown_shape": a.shown_shape,
        "checks": {**checks, **extra},
        "pids_at_quit": pids,
        "quit_at": quit_at,
    }
    (folder / "afternoon.json").write_text(json.dumps(result, indent=1, default=str))
    return 0


def _runs_dock(wb: Any) -> list[list[str]]:
    """The Runs dock's rows as it shows them: #, kind, model, config, inputs."""
    from app.runs.controller import RunsController
    from widgets.runs_table import COLUMNS

    ctl = wb.room(RunsController)
    ctl.view.set_runs(ctl.run_ids(), list(ctl._kinds))
    ctl.view.refresh()
    t = ctl.view.table
    cols = [COLUMNS.index(c) for c in ("#", "kind", "model", "config", "inputs")]
    return [[(t.item(r, c).text() if t.item(r, c) else "") for c in cols]
            for r in range(t.rowCount())]  # fmt: skip


def teammate(path: str, folder: str) -> int:
    """A teammate's `opscope gui FILE`, in this process: once its window shows, and a
    second more, what shows and runs is noted (and Compare's pickers), then the window is
    closed as the user closes it; the app must end with it (not at the 60 s guard)."""
    import multiprocessing

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QMainWindow

    from app.entry import main as opscope

    t0 = time.monotonic()
    seen: dict[str, Any] = {}

    def shown() -> list[Any]:
        return [w for w in QApplication.topLevelWidgets()
                if isinstance(w, QMainWindow) and w.isVisible()]  # fmt: skip

    def look() -> None:
        if not shown():
            QTimer.singleShot(50, look)
            return
        seen.setdefault("window shown s", round(time.monotonic() - t0, 2))
        QTimer.singleShot(1000, note_then_close)

    def note_then_close() -> None:
        windows = shown()
        seen["windows"] = [w.windowTitle() for w in windows]
        seen["processes"] = [p.name for p in multiprocessing.active_children()]
        seen["autosaves"] = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
        for w in windows:
            compare = getattr(w, "compare", None)
            if compare is not None:
                seen["pickers"] = [compare.baseline.itemText(i)
                                   for i in range(compare.baseline.count())]  # fmt: skip
                seen["pair"] = [compare.baseline.currentData(), compare.candidate.currentData()]
                seen["compare says"] = compare.summary.text()
            w.close()

    def guard() -> None:
        seen["still open after its window closed"] = [w.windowTitle() for w in shown()]
        for w in shown():
            w.close()
        QApplication.instance().quit()  # type: ignore[union-attr]

    app = QApplication(sys.argv[:1])  # noqa: F841 (the app's, as `opscope` makes it)
    QTimer.singleShot(50, look)
    QTimer.singleShot(60_000, guard)
    seen["rc"] = opscope(["gui", path])
    seen["autosaves at the end"] = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    print(json.dumps(seen))
    return 0


def additions(
    copy: Path, folder: Path, dock: list[list[str]], keep: str = ""
) -> tuple[list[Any], dict[str, Any]]:
    """The afternoon's additions on the saved file (see the module's docstring)."""
    from engine.api import open_session_file, write_report

    steps: list[Any] = []
    out: dict[str, Any] = {}
    autosave = folder / "teammate-autosave"
    t = time.monotonic()
    proc = subprocess.run(
        [sys.executable, __file__, "--teammate", str(copy), "--folder", str(autosave)],
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen", "OPSCOPE_SESSION_DIR": str(autosave)},
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    try:
        seen = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        seen = {"failed": f"rc {proc.returncode}: {proc.stderr[-500:]}"}
    steps.append(("teammate opens the file", time.monotonic() - t,
                  f"{len(seen.get('windows', []))} window(s) in {seen.get('window shown s')} s; "
                  f"rc {seen.get('rc')}"))  # fmt: skip
    out["teammate: windows"] = seen.get("windows", seen.get("failed"))
    out["teammate: engine or other processes"] = seen.get("processes")
    out["teammate: new autosave files"] = seen.get("autosaves at the end")
    out["teammate: still open after its window closed"] = seen.get(
        "still open after its window closed", []
    )
    with open_session_file(copy) as reader:
        runs = {r.id: r for r in reader.runs()}

    def matches(row: list[str]) -> bool:
        run = runs.get(int(row[0])) if row[0].isdigit() else None
        return run is not None and (run.kind, run.model_name) == (row[1], row[2])

    wrong = [row for row in dock if not matches(row)]
    out["Runs dock rows"] = len(dock)
    out["Runs dock ids"] = [row[0] for row in dock]
    out["Runs dock rows whose # is not that run in the file (kind, model)"] = wrong
    kinds = sorted({r.kind for r in runs.values()})
    out["file run ids by kind"] = {k: [i for i, r in runs.items() if r.kind == k] for k in kinds}
    report = folder / "afternoon-report.html"
    t = time.monotonic()
    write_report(str(copy), str(report))
    took = time.monotonic() - t
    table = _report_runs(report.read_text())
    steps.append(("report", took, f"{report.stat().st_size / 1e6:.1f} MB, "
                  f"{len(table)} rows in its runs table"))  # fmt: skip
    filed = [(str(i), r.kind) for i, r in sorted(runs.items())]
    out["report's runs table (run, kind) = the file's"] = table == filed
    out["report's runs table rows unlike the file's"] = [
        (t, f) for t, f in zip(table, filed, strict=False) if t != f
    ][:4] + ([f"{len(table)} rows, the file {len(filed)} runs"] if len(table) != len(filed) else [])
    if keep:  # the saved file and its report, for a look afterwards
        import shutil

        Path(keep).mkdir(parents=True, exist_ok=True)
        for f in (copy, report):
            shutil.copy(f, Path(keep) / f.name)
    pickers = seen.get("pickers", [])
    unnamed = [
        p
        for p, r in zip(pickers, sorted(runs.values(), key=lambda r: r.id), strict=False)
        if not p.startswith(f"run {r.id} · {r.kind} · {r.model_name} · ")
        or (r.inputs and next(iter(r.inputs)) not in p)
    ]
    out["Compare pickers"] = len(pickers)
    out["Compare pickers not naming kind, model and inputs"] = unnamed
    out["Compare pickers (first and last)"] = [pickers[0], pickers[-1]] if pickers else []
    pair = seen.get("pair") or [None, None]
    out["Compare opens on"] = pair
    out["Compare opens on like for like"] = bool(
        pair[0] in runs and pair[1] in runs
        and runs[pair[0]].model_name == runs[pair[1]].model_name
        and runs[pair[0]].inputs == runs[pair[1]].inputs
    )  # fmt: skip
    out["Compare says"] = seen.get("compare says", "")[:160]
    return steps, out


def _report_runs(html: str) -> list[tuple[str, str]]:
    """(run, kind) of each row of the report's runs table (the table headed run, kind)."""
    from html.parser import HTMLParser

    tables: list[list[list[str]]] = []

    class Cells(HTMLParser):
        cell: list[str] | None = None

        def handle_starttag(self, tag: str, _attrs: Any) -> None:
            if tag == "table":
                tables.append([])
            elif tag == "tr" and tables:
                tables[-1].append([])
            elif tag in ("td", "th"):
                self.cell = []

        def handle_endtag(self, tag: str) -> None:
            if tag in ("td", "th") and self.cell is not None and tables and tables[-1]:
                tables[-1][-1].append("".join(self.cell).strip())
                self.cell = None

        def handle_data(self, data: str) -> None:
            if self.cell is not None:
                self.cell.append(data)

    Cells().feed(html)
    import re

    for rows in tables:
        if rows and [c.split()[0] if c else "" for c in rows[0][:2]] == ["run", "kind"]:
            return [(m.group(0) if (m := re.match(r"\d+", r[0])) else r[0],
                     (r[1].split() or [""])[0])  # 'load (latency: end to end under load)'
                    for r in rows[1:] if len(r) >= 2]  # fmt: skip
    return []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--teammate", help=argparse.SUPPRESS)
    ap.add_argument("--keep", default="", help="copy the saved session and its report here")
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
    if args.teammate:
        return teammate(args.teammate, args.folder)
    if args.child:
        return child(args)
    from engine.session.env import cpu_name

    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, __file__, "--child", "--folder", tmp]
        for flag in ("model", "dim", "size", "sweep", "rate", "load_s", "tune_s",
                     "llm_requests", "timeout_s", "keep"):  # fmt: skip
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
        *(f"| {n} | {s:.1f} | {_cell(o)} |" for n, s, o in r["steps"]),
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
        c["teammate: windows"] == ["Session — afternoon-copy.opscope (read-only)"]
        and not c["teammate: engine or other processes"]
        and not c["teammate: new autosave files"]
        and not c["teammate: still open after its window closed"]
        and not c["Runs dock rows whose # is not that run in the file (kind, model)"]
        and c["report's runs table (run, kind) = the file's"]
        and not c["Compare pickers not naming kind, model and inputs"]
        and c["Compare opens on like for like"]
        and c["autosave integrity_check"] == "ok"
        and c["Save As copy integrity_check"] == "ok"
        and not c["runs at another shape than the window showed"]
        and not c["processes left after Quit"]
        and not left
    )
    return 0 if ok else 1


def _cell(outcome: object) -> str:
    """An outcome as one Markdown table cell (a multi-line badge's lines joined)."""
    return " / ".join(str(outcome).replace("|", "/").splitlines())[:160]


def _running(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


if __name__ == "__main__":
    raise SystemExit(main())
