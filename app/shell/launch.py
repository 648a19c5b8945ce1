"""`opscope` / `opscope gui [MODEL | SESSION] [--session FILE]`: start the desktop app."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.shell.demos import demo_model_path
from engine.api import OneLineParser


def _quiet_offscreen_warnings() -> None:
    """The offscreen platform (screenshots, CI) warns on every dock resize; drop just that."""
    from PySide6.QtCore import QtMsgType, qInstallMessageHandler

    def handler(kind: QtMsgType, _context: object, message: str) -> None:
        if "propagateSizeHints" in message:
            return
        print(message, file=sys.stderr)

    qInstallMessageHandler(handler)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="opscope gui", description="The OpScope desktop workbench.")
    p.add_argument(
        "path",
        nargs="?",
        help="a model to run live (.onnx, or a PyTorch .pt2/.pt with the torch "
        "extra), or an .opscope session to open read-only in a window of its own (no "
        "engine, nothing recorded) (default: the bundled demo transformer)",
    )
    p.add_argument(
        "--session",
        metavar="FILE",
        help="record into this session file (default: a new file in the autosave folder)",
    )
    p.add_argument(
        "--host",
        metavar="[USER@]HOST[:PORT]",
        help="run the engine on that machine over your own ssh (`opscope` installed there, "
        "the same version); the session is recorded here",
    )
    p.add_argument(
        "--screenshot", metavar="PNG", help="save a PNG of the main window just before quitting"
    )
    p.add_argument(
        "--quit-after", type=float, metavar="SECONDS", help="quit (exit 0) after this many seconds"
    )
    p.add_argument(
        "--size",
        type=_size,
        metavar="WxH",
        help="open the window at this size in pixels (e.g. 1024x700), not the saved one",
    )
    return p


def _size(text: str) -> tuple[int, int]:
    """'1024x700' -> (1024, 700); a one-line argparse error otherwise."""
    import argparse

    w, sep, h = text.lower().partition("x")
    if not (sep and w.isdigit() and h.isdigit() and int(w) >= 320 and int(h) >= 240):
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTHxHEIGHT (at least 320x240)")
    return int(w), int(h)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    t_launch = time.perf_counter()
    from app.shell.qt_platform import window_problem

    problem = window_problem()  # one line, where Qt would abort with a core dump
    if problem is not None:
        print(f"opscope: {problem}", file=sys.stderr)
        return 1
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QMessageBox

    from app.shell.workbench import Workbench
    from engine.api import OpScopeError, Target, escape_controls

    try:
        target = Target.parse(args.host) if args.host else None
    except OpScopeError as exc:
        print(f"opscope gui: error: {escape_controls(str(exc))}", file=sys.stderr)
        return 2

    _quiet_offscreen_warnings()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    app.setApplicationName("OpScope")
    app.setOrganizationName("OpScope")
    collector = gui_thread_gc()  # noqa: F841 (kept for the app's life)
    shared = args.path if args.path and Path(args.path).suffix.lower() == ".opscope" else None
    if shared and not (args.session or args.host):  # a teammate's file, by itself
        return view_session(args, app)
    try:
        wb = Workbench(session_path=args.session, host=target)
    except OpScopeError as exc:  # not even an autosave file can be written
        print(f"opscope: error: {escape_controls(str(exc))}", file=sys.stderr)
        if args.quit_after is None:  # a modal would block a scripted run forever
            QMessageBox.critical(None, "OpScope", str(exc))
        return 2
    if args.size:
        wb.window.resize(*args.size)
    wb.window.show()
    if shared:  # a workbench was asked for too (--session, --host): the file beside it
        wb.start(None)
        wb.open_session(shared)
    else:
        wb.start(args.path or demo_model_path())

    first = {"logged": False}

    def first_point() -> None:
        if not first["logged"] and wb.controller.first_sample_s is not None:
            first["logged"] = True
            print(
                f"opscope: first latency point {time.perf_counter() - t_launch:.2f} s after launch",
                file=sys.stderr,
            )

    wb.controller.client.events.connect(lambda _: first_point())

    if args.quit_after is not None:

        def finish() -> None:
            if args.screenshot:
                wb.update_status()
                wb.window.latency.paint_now()
                if not wb.window.grab().save(args.screenshot):
                    print(
                        f"opscope: error: cannot write screenshot {args.screenshot}",
                        file=sys.stderr,
                    )
            wb.window.close()
            app.quit()

        QTimer.singleShot(int(args.quit_after * 1000), finish)
    app.aboutToQuit.connect(wb.shutdown)
    return _run(app)


def view_session(args: argparse.Namespace, app: Any) -> int:
    """`opscope gui FILE.opscope` (no --session, no --host): the session's read-only window
    alone (no workbench, no engine host, no autosave file); closing it ends the app. A file
    that cannot be opened is one line (and a dialog, unless the run is scripted), exit 2."""
    from PySide6.QtCore import QSettings, QTimer
    from PySide6.QtWidgets import QMessageBox

    from app.sessions.viewer import SessionViewer
    from app.shell.main_window import add_recent
    from engine.api import OpScopeError, escape_controls

    try:
        viewer = SessionViewer(args.path)
    except OpScopeError as exc:
        line = f"Cannot open session {exc}"
        print(f"opscope: error: {escape_controls(line)}", file=sys.stderr)
        if args.quit_after is None:
            QMessageBox.critical(None, "OpScope", line)
        return 2
    window = viewer.window
    add_recent(QSettings("OpScope", "OpScope"), str(Path(args.path).resolve()))
    if args.size:
        window.resize(*args.size)
    window.show()
    window.closed.connect(app.quit)
    if args.quit_after is not None:

        def finish() -> None:
            if args.screenshot and not window.grab().save(args.screenshot):
                print(f"opscope: error: cannot write screenshot {args.screenshot}", file=sys.stderr)
            window.close()
            app.quit()

        QTimer.singleShot(int(args.quit_after * 1000), finish)
    app.aboutToQuit.connect(viewer.shutdown)
    return _run(app)


def _run(app: Any) -> int:
    """The event loop. Ctrl-C in the terminal, `kill` (SIGTERM) and a closed terminal
    (SIGHUP) close the app as its window does: the run ended and recorded, the file
    checkpointed, the engine host stopped (Python handles signals between Qt events, hence
    the tick below)."""
    from PySide6.QtCore import QTimer

    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), lambda *_: app.quit())
    tick = QTimer(interval=200)
    tick.timeout.connect(lambda: None)
    tick.start()
    return int(app.exec())


def gui_thread_gc() -> object:
    """Python's cyclic garbage collected on the GUI thread only, on a timer (pyqtgraph's
    GarbageCollector): collected on a worker thread (a comparison, an export), a cycle
    holding a Qt object deletes it there, and Qt crashes (seen: a segfault in the suite,
    while three comparisons ran). Keep the returned object alive."""
    from pyqtgraph.util.garbage_collector import GarbageCollector

    return GarbageCollector(interval=1.0)
