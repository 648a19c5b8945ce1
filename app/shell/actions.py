"""Menus and keyboard shortcuts of the live window."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QBoxLayout,
    QFileDialog,
    QInputDialog,
    QMenu,
    QMessageBox,
)

from app.desk.menus import MenuItem
from app.host.background import Background
from app.host.engine_client import EngineClient
from app.host.job_runner import JobRunner
from app.sessions.exports import ExportNotice, add_export_actions
from app.sessions.recording import Recording
from app.shell.help_dialogs import guide_dialog, shortcuts_dialog
from app.shell.main_window import STEPPED_KEY, MainWindow
from app.shell.menu_bar import MenuBar
from engine.api import Compacted, OpScopeError, Target, backends


class Workbench(Protocol):
    """What the menus drive: the workbench's commands (app/shell/workbench.py implements them)."""

    window: MainWindow
    client: EngineClient
    jobs: JobRunner
    recording: Recording
    device: str

    def open_path(self, path: str) -> None: ...
    def open_model(self, path: str) -> None: ...
    def open_session(self, path: str) -> None: ...
    def save_session_as(self) -> None: ...
    def toggle_running(self, reason: str = "paused") -> None: ...
    def restart_engine(self) -> None: ...
    def connect_host(self, target: Target | None) -> None: ...
    def set_yield_cpu(self, on: bool) -> None: ...
    def quit(self) -> None: ...


# a GGUF file is imported into a genai folder when opened (app/llm/hf_import.py)
_KINDS = backends.file_filter().split(";;")
MODEL_FILTER = ";;".join(
    [_KINDS[0].replace(")", " *.gguf)", 1), *_KINDS[1:-1], "GGUF language models (*.gguf)",
     _KINDS[-1]]
)  # fmt: skip
SESSION_FILTER = "OpScope sessions (*.opscope);;All files (*)"
COMPACT_KEEP_PASSES = 4  # raw op rows of the last two minutes of live profiling per run


@dataclass
class Menus:
    recent: QMenu
    pause: QAction
    workbench: Workbench
    bar: MenuBar

    def set_recent(self, files: list[str]) -> None:
        self.recent.clear()
        for path in files:
            action = self.recent.addAction(path)
            action.triggered.connect(lambda _=False, p=path: self.workbench.open_path(p))
        self.recent.setEnabled(bool(files))

    def set_running(self, running: bool) -> None:
        self.pause.setText("Pause" if running else "Resume")

    def add(self, items: Sequence[MenuItem]) -> None:
        """A room's entries, added after the menus were built."""
        self.bar.add(items)


def shell_items(wb: Workbench, compacting: Background) -> tuple[list[MenuItem], list[MenuItem]]:
    """The shell's own entries, as data: those before the session's exports in File, and
    the rest."""
    from app.shell.demos import demo_models

    w = wb.window
    F, R, V, H = "&File", "&Run", "&View", "&Help"
    head = [
        MenuItem(F, "&Open Model…", lambda: _open_model(wb), "Open",
                 "Load an ONNX model or a PyTorch program (.pt2, TorchScript .pt) into the engine"),
        MenuItem(F, "Open &Session…", lambda: _open_session(wb), "Ctrl+Shift+O",
                 "Open a recorded session read-only"),
        *[MenuItem(F, label, lambda p=path: wb.open_model(p), tip=f"Open {path}",
                   submenu="&Demo Models") for label, path in demo_models()],
        MenuItem(F, "&Import Hugging Face Model…", lambda: _import_hf(wb), None,
                 "Build a genai folder from a Hugging Face model folder (offline) and open it"),
        MenuItem(F, "Connect to &Host…", lambda: _connect_host(wb), "Ctrl+Shift+H",
                 "Run the engine on another machine over your own ssh; the session stays here"),
        MenuItem(F, "Save Session &As…", wb.save_session_as, "Ctrl+Shift+S",
                 "Copy the session file and keep recording into the copy", separator_before=True),
        MenuItem(F, "Save &Compact Copy…", lambda: _save_compact(wb, compacting),
                 tip="A smaller copy to hand on: every sample and statistic, the raw op rows of "
                 f"the last {COMPACT_KEEP_PASSES} profiling passes of each run"),
    ]  # fmt: skip
    rest = [
        MenuItem(F, "Save &Plot As…", lambda: _save_plot(wb), "Ctrl+Shift+P",
                 "Save the latency plot as PNG or SVG"),
        MenuItem(F, "&Quit", wb.quit, "Quit", separator_before=True),
        MenuItem(R, "Pause", wb.toggle_running, "Ctrl+Space", "Pause or resume timing",
                 key="pause"),
        MenuItem(R, "Profile &Now", wb.client.profile_now, "Ctrl+Alt+P",
                 "Run a profiling pass of the current config now"),
        MenuItem(R, "&Restart Engine", wb.restart_engine, "Ctrl+Shift+R",
                 "Start a fresh engine host with the same model and config"),
        MenuItem(R, "&Yield CPU to the Window", wb.set_yield_cpu, None,
                 "Run the engine at lower CPU priority so the window stays smooth when "
                 "the engine uses every core (restarts the engine). Its timings then read "
                 "slower whenever other work runs, and each run measured so is marked "
                 "'deprioritised'; off (the default): priority as `opscope bench`",
                 checkable=True, checked=wb.client.nice > 0, separator_before=True),
        MenuItem(V, "&Follow Latest", lambda: w.latency.set_follow(True), "F",
                 "Scroll the latency plot with new samples"),
        MenuItem(V, "Scroll in &Steps", lambda on: _set_stepped(wb, on), None,
                 "Move the followed latency plot forward in steps of 5% of its width: the axes "
                 "hold still and each frame costs less CPU (taken from the engine). Off: scroll "
                 "with every frame", checkable=True, checked=w.latency.stepped_follow),
        MenuItem(H, "&How to Read This Window", lambda: guide_dialog(w).show(), "HelpContents",
                 "What each plot, table and number shows"),
        MenuItem(H, "&Keyboard Shortcuts", lambda: shortcuts_dialog(w).show(), "Ctrl+/",
                 "Every shortcut of this window"),
        MenuItem(H, "&About OpScope", lambda: _about(wb), separator_before=True),
    ]  # fmt: skip
    return head, rest


def build_menus(wb: Workbench, rooms: Sequence[MenuItem] = ()) -> Menus:
    """The menu bar: the shell's entries, the session's exports, then the rooms' (`rooms`),
    then every dock's toggle in View."""
    from app.shell.main_window import recent_files

    w = wb.window
    bar = MenuBar(w)
    exports = _export_notice(w, wb.jobs)  # reports and traces are jobs (Cancel, in the host)
    compacting = Background("compact", w)  # so are compact copies
    head, rest = shell_items(wb, compacting)
    file = bar.menu("&File")
    bar.add(head[:2])
    recent = file.addMenu("Recent &Files")
    bar.add(head[2:])
    add_export_actions(  # this session's; a read-only session window exports its own
        w, file, lambda: str(wb.recording.path), exports, before=wb.recording.flush
    )
    bar.add(rest)
    bar.add(rooms)
    bar.add_dock_toggles()
    menus = Menus(recent, bar.actions["pause"], wb, bar)
    menus.set_recent(recent_files(w.settings))
    return menus


def _set_stepped(wb: Workbench, on: bool) -> None:
    wb.window.latency.set_stepped_follow(on)
    wb.window.settings.setValue(STEPPED_KEY, bool(on))


def _open_model(wb: Workbench) -> None:
    path, _ = QFileDialog.getOpenFileName(wb.window, "Open Model", "", MODEL_FILTER)
    if path:
        wb.open_model(path)


def _open_session(wb: Workbench) -> None:
    path, _ = QFileDialog.getOpenFileName(wb.window, "Open Session", "", SESSION_FILTER)
    if path:
        wb.open_session(path)


THIS_MACHINE = "this machine"


def _connect_host(wb: Workbench) -> None:
    """Ask where the engine runs: a recent host, a new [USER@]HOST[:PORT], or this machine."""
    from app.shell.main_window import add_recent_host, recent_hosts

    settings = wb.window.settings
    current = str(wb.client.target) if wb.client.target is not None else THIS_MACHINE
    items = [current, *(h for h in [THIS_MACHINE, *recent_hosts(settings)] if h != current)]
    text, ok = QInputDialog.getItem(
        wb.window,
        "Connect to Host",
        "Run the engine on [USER@]HOST[:PORT] over your ssh (OpScope of this version "
        "installed there), or on this machine:",
        items,
        0,
        True,
    )
    if not ok or not text.strip():
        return
    if text.strip() == THIS_MACHINE:
        wb.connect_host(None)
        return
    try:
        target = Target.parse(text)
    except OpScopeError as exc:
        wb.window.notify("error", str(exc))
        return
    add_recent_host(settings, str(target))
    wb.connect_host(target)


def _import_hf(wb: Workbench) -> None:
    from app.llm.hf_import import import_interactively

    import_interactively(
        wb.window, wb.jobs, wb.open_model, lambda text: wb.window.notify("error", text)
    )


def _save_plot(wb: Workbench) -> None:
    path, _ = QFileDialog.getSaveFileName(
        wb.window, "Save Plot As", "latency.png", "PNG image (*.png);;SVG image (*.svg)"
    )
    if not path:
        return
    try:
        wb.window.latency.export_image(path)
    except (ValueError, OSError) as exc:
        wb.window.notify("error", f"Cannot save the plot as {path}: {exc}")


def _export_notice(w: MainWindow, jobs: JobRunner) -> ExportNotice:
    """The strip above the plots that shows an export's progress and its saved path."""
    notice = ExportNotice(jobs, w)
    central = w.centralWidget()
    layout = central.layout() if central is not None else None
    if isinstance(layout, QBoxLayout):
        layout.insertWidget(1, notice)  # under the banner, above the plots
    return notice


def _save_compact(wb: Workbench, job: Background) -> None:
    default = Path(wb.recording.path).with_suffix("").name + "-compact.opscope"
    path, _ = QFileDialog.getSaveFileName(
        wb.window, "Save Compact Copy", str(Path.home() / default), SESSION_FILTER
    )
    if not path:
        return
    if not path.endswith(".opscope"):
        path += ".opscope"
    wb.window.notify("info", f"writing a compact copy {path}…")

    def done(result: object) -> None:
        sizes = (
            f": {result.copy_bytes / 1e6:.1f} MB (the session: {result.source_bytes / 1e6:.1f} MB)"
            if isinstance(result, Compacted)
            else ""
        )
        wb.window.notify("info", f"wrote {path}{sizes}")

    def failed(error: str) -> None:
        wb.window.notify("error", f"Cannot save a compact copy {path}: {error}")

    job.submit(lambda: wb.recording.compact_copy(path, COMPACT_KEEP_PASSES), done, failed)


def _about(wb: Workbench) -> None:
    import platform

    import pyqtgraph
    import PySide6

    from engine.api import __version__, ort_version

    QMessageBox.about(
        wb.window,
        "About OpScope",
        f"<b>OpScope {__version__}</b><br>A workbench for model inference optimization."
        f"<br><br>ONNX Runtime {ort_version() or '?'}<br>PySide6 {PySide6.__version__}"
        f"<br>pyqtgraph {pyqtgraph.__version__}<br>Python {platform.python_version()}"
        f"<br>Device: {wb.device}<br>Session: {wb.recording.path}",
    )
