"""The live workbench: the main window wired to the engine host, the recorder and menus."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication, QFileDialog

from app.desk import Desk, DockPlace, Level, MenuItem
from app.host.engine_client import EngineClient
from app.host.job_runner import JobRunner
from app.live.inputs_controller import InputsController
from app.live.live_controller import LiveController
from app.llm.generation_controller import GenerationController
from app.sessions.recording import Recording, new_autosave_path
from app.shell.actions import build_menus
from app.shell.main_window import SESSION_SUFFIXES, MainWindow, add_recent
from app.shell.pause_holds import PauseHolds
from app.shell.rooms import ROOMS
from engine.api import (
    OpScopeError,
    RunConfig,
    Target,
    cpu_name,
    gpu_facts,
    provider_label,
    source_kind,
    start_window_memory_trim,
)
from widgets.models.status_rate import rate_wordings

STATUS_INTERVAL_MS = 500
T = TypeVar("T")
ENGINE_NICE = 10  # the engine's priority below the window's when it yields (Run menu)
YIELD_KEY = "engine/yield_cpu"


class Workbench(QObject, PauseHolds):
    """Owns the live app's parts and their lifetimes."""

    def __init__(
        self,
        session_path: str | None = None,
        usable: list[str] | None = None,
        host: Target | None = None,
    ) -> None:
        super().__init__()
        from app.live.config_panel import usable_providers

        # free memory back to the OS every minute: a live window's RSS crept up with
        # malloc's bytes in use flat (engine/run/memory_trim.py; not the host, which times)
        start_window_memory_trim()

        self.window = MainWindow(usable if usable is not None else usable_providers())
        self.recording = self._open_recording(session_path)
        # off by default: a niced engine reads 2-4x slow whenever anything else runs
        # (issue 49); a run measured while it yields says so (its contention's nice)
        yields = self.window.settings.value(YIELD_KEY, False, type=bool)
        self.client = EngineClient(sink=self.recording.sink, nice=ENGINE_NICE if yields else 0)
        self.client.target = host  # None: a host process on this machine
        self.window.show_host(None if host is None else str(host))
        self.jobs = JobRunner(self.client)  # every long job: load runs, tune, sweeps...
        self.controller = LiveController(self.window, self.client)
        self.desk = self._desk()
        self.generation = GenerationController(self.window, self.controller, self.client)
        self.inputs = InputsController(self.window, self.client, self.controller)
        self.controller.carry_settings = lambda: self.inputs.carry
        self.menu_items: list[MenuItem] = []
        self.rooms = [install(self.desk) for install in ROOMS]  # their docks, their menus
        self.window.restore_layout()  # every dock exists now: one restore
        self.session_windows: list[QObject] = []
        gpu, _ = gpu_facts()
        self.device = gpu or cpu_name() or "CPU"

        w = self.window
        w.on_open_path = self.open_path
        w.on_closed = self.quit
        self._quitting = False
        w.config_panel.config_changed.connect(self.controller.apply)
        w.config_panel.cancel_requested.connect(self.controller.build_cancelled)
        w.config_panel.cancel_requested.connect(self.client.cancel_build)
        w.banner.action_clicked.connect(self.restart_engine)
        self.client.host_died.connect(self.recording.host_died)
        self.client.host_started.connect(self.controller.host_started)
        self.controller.status_changed.connect(self.update_status)
        self.menus = build_menus(self, self.menu_items)
        self.status_timer = QTimer(self, interval=STATUS_INTERVAL_MS)
        self.status_timer.timeout.connect(self.update_status)
        self.status_timer.timeout.connect(self.controller.check_hang)
        self.status_timer.start()
        self.running = True

    def _desk(self) -> Desk:
        """The desk the rooms sit at, its workload kept from the host's events, the
        client's inputs and the configuration's signal."""
        w, client = self.window, self.client
        desk = Desk(self, self.jobs, self.recording, w.settings, w.config_panel.config(), self)
        client.events.connect(desk.on_events)
        client.load_sent.connect(desk.loading)
        client.inputs_sent.connect(desk.inputs_changed)
        client.generation_sent.connect(desk.generation_changed)
        w.config_panel.config_shown.connect(desk.config_changed)
        w.node_shown.connect(desk.node_shown)
        desk.node_picked.connect(w.show_node)
        desk.node_memory.connect(w.op_table.set_node_memory)
        w.notices.listeners.append(desk.said.emit)  # every message, for the Messages room
        self.controller.figures_ready.connect(desk.publish_figures)
        self.controller.variant_ready.connect(desk.variant_ready)
        return desk

    def room(self, kind: type[T]) -> T:
        """The installed room whose controller is a `kind` (tests, scripts)."""
        found = next((r for r in self.rooms if isinstance(r, kind)), None)
        if found is None:
            raise KeyError(kind.__name__)
        return found

    # the desk's shell (app/desk/desk.py) ---------------------------------------------------
    def notify(
        self, level: Level, text: str, key: str | None = None, action: str | None = None
    ) -> None:
        self.window.notify(level, text, key, action)

    def clear_notice(self, key: str) -> None:
        self.window.notices.clear(key)

    def add_dock(self, title: str, widget: Any, place: DockPlace) -> Any:
        return self.window.add_room_dock(title, widget, place)

    def add_actions(self, items: Sequence[MenuItem]) -> None:
        self.menu_items.extend(items)
        if hasattr(self, "menus"):  # the menus exist already: added to them
            self.menus.add(items)

    def apply_config(self, config: RunConfig) -> None:
        self.window.config_panel.set_config(config)
        self.controller.apply(config)
        if not self.running:
            self.toggle_running()

    def plot_origin_ns(self) -> int:
        return int(self.controller.t0_ns)

    def mark_plot(self, t_s: float, label: str) -> None:
        self.window.latency.add_marker(t_s, label)

    def plot_stats(self) -> dict[str, Any]:
        return dict(self.window.latency.latest_stats())

    def set_slo(self, ms: float | None) -> None:
        self.window.latency.set_slo(ms)

    def _open_recording(self, session_path: str | None) -> Recording:
        """The file asked for; when it cannot be written (read-only, locked, corrupt, not
        ours), a new autosave file instead, said in the banner (never a modal dialog: the
        app stays up, and nothing blocks a scripted --quit-after)."""
        if session_path is None:
            return Recording(new_autosave_path())
        try:
            return Recording(session_path)
        except OpScopeError as exc:
            recording = Recording(new_autosave_path())
            self.window.notify(
                "error", f"Cannot record into {exc}. Recording into {recording.path} instead."
            )
            return recording

    def start(self, model: str | None) -> None:
        self.client.start()
        self.client.apply(self.window.config_panel.config())
        if model:
            self.open_model(model)
        self.update_status()

    # commands ---------------------------------------------------------------------------
    def open_path(self, path: str) -> None:
        if Path(path).suffix.lower() in SESSION_SUFFIXES:
            self.open_session(path)
        else:
            self.open_model(path)

    def open_model(self, path: str) -> None:
        self.menus.set_recent(add_recent(self.window.settings, str(Path(path).resolve())))
        if source_kind(path) is not None:  # a GGUF file or Hugging Face folder: import first
            from app.llm.hf_import import import_and_open

            import_and_open(
                self.window, self.jobs, str(path), self._open_imported,
                lambda text: self.notify("error", text),
            )  # fmt: skip
            return
        self._open_imported(str(path))

    def _open_imported(self, path: str) -> None:
        self.controller.open_model(str(path), **self.inputs.for_new_model(str(path)))

    def open_session(self, path: str) -> None:
        from app.sessions.session_window import SessionWindow

        try:
            window = SessionWindow(path, self.jobs)
        except OpScopeError as exc:  # the banner, not a modal: the app stays usable
            self.notify("error", f"Cannot open session {exc}")
            return
        window.show()
        self.session_windows.append(window)
        self.menus.set_recent(add_recent(self.window.settings, str(Path(path).resolve())))

    def save_session_as(self) -> None:
        dest, _ = QFileDialog.getSaveFileName(
            self.window,
            "Save Session As",
            str(Path.home() / "session.opscope"),
            "OpScope sessions (*.opscope)",
        )
        if not dest:
            return
        if not dest.endswith(".opscope"):
            dest += ".opscope"
        try:
            self.recording.save_as(dest)
        except (OSError, OpScopeError) as exc:
            self.notify("error", f"Cannot save the session as {dest}: {exc}")
            return
        self.update_status()

    def toggle_running(self, reason: str = "paused") -> None:
        """Pause or resume live timing; a pause is marked on the plot with `reason`."""
        self.running = not self.running
        if self.running:
            self.client.start_timing()
        else:
            self.client.stop_timing()
            self.controller.timing_paused(reason)
        self.menus.set_running(self.running)

    def restart_engine(self) -> None:
        self.window.banner.clear_all()
        self.client.restart()
        self.running = True
        self.menus.set_running(True)

    def set_yield_cpu(self, on: bool) -> None:
        """Engine priority below the window's (on) or equal (off); a fresh host applies it."""
        self.window.settings.setValue(YIELD_KEY, bool(on))
        self.client.nice = ENGINE_NICE if on else 0
        self.restart_engine()

    def update_status(self) -> None:
        c = self.controller
        stats = self.window.latency.shown_stats  # the very figures the plot's header shows
        provider = provider_label(c.provider or "–")
        if c.provider and c.requested and c.provider != c.requested:
            provider += f" (asked for {provider_label(c.requested)})"
        self.window.set_status(
            c.model_name or "no model",
            f"{provider} on {self.where()}",
            # the header's window, said as it says it; no model (a load failed): nothing to
            # wait for, where "waiting for samples" read as if one were coming
            rate_wordings(stats, c.contention) if c.model_name else "",
            self.recording.status(),
        )

    def where(self) -> str:
        """The engine's machine as the status bar names it."""
        return self.device if self.client.target is None else self.client.where

    def connect_host(self, target: Target | None) -> None:
        """The engine on `target` from now on (None: this machine); the model and config
        shown go on there (the model's files sent first); the session stays here."""
        self.window.banner.clear_all()
        self.client.connect_to(target)
        self.running = True
        self.menus.set_running(True)
        self.window.show_host(None if target is None else str(target))
        self.update_status()

    def quit(self) -> None:
        """File > Quit, or the main window closed: the app ends, with every read-only
        session window (one left open used to keep the process and its engine running)."""
        if self._quitting:
            return
        self._quitting = True
        for w in list(self.session_windows):
            w.close()  # type: ignore[attr-defined]
        self.window.close()  # saves its layout
        quit_app()

    def shutdown(self) -> None:
        self.status_timer.stop()
        self.client.shutdown()  # its jobs are cancelled (a tune, a sweep, an LLM study: what
        # they measured stays in the session) and the host ends
        self.recording.close()
        for w in self.session_windows:
            w.close()  # type: ignore[attr-defined]


def quit_app() -> None:
    QApplication.quit()
