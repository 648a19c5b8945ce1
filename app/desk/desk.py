"""The desk: the one thing a room of the window uses (app/<room>/__init__.py `install(desk)`).

It holds what the rooms share and nothing of any room:
- the job runner and background work (`jobs`, `background(name)`);
- the current **workload**: the model that runs, its config and its inputs, kept from the
  engine host's events (a model is current once the host says it loaded), the client's
  inputs and the configuration's signal, never read off a widget (`workload`,
  `workload_changed`);
- the recording (`recording`): the session file every job records into;
- one way to tell the user things (`notify(level, text)`): errors and warnings in the
  banner above the plots, information in the status bar;
- live timing's pause and resume for a job that wants the cores (`pause_for`,
  `resume_after`), and applying a config to the live run (`apply_config`);
- docks and menu entries, declared as data (`add_dock`, `add_actions`);
- the live views' shared figures: the last profile's per-node figures, a node picked;
- `run_on_workload(...)`: the recipe every room's job follows, written once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from PySide6.QtCore import QObject, QSettings, Signal

from app.desk.menus import DockPlace, MenuItem
from app.desk.notices import Level
from app.host.background import Background
from app.host.job_runner import JobRunner
from engine.api import (
    CommandFailed,
    GenerationStarted,
    ModelInfo,
    ModelLoaded,
    OpScopeError,
    RunConfig,
    Workload,
)

NO_MODEL = "load a model first"


@dataclass(frozen=True)
class Figures:
    """The live profile's per-node figures (`OpStat`s) and the roofs they sit under (None
    until the machine's peaks are known)."""

    ops: list[Any]
    roofs: Any


class Recording(Protocol):
    """The session file the window records into (app/sessions/recording.py)."""

    @property
    def path(self) -> Any: ...

    def flush(self) -> None: ...
    def run_id(self, started: int) -> int | None: ...  # the file's id of the nth run started
    def own_run_ids(self) -> set[int]: ...  # the ids its own recorder wrote


class Shell(Protocol):
    """What the desk asks of the window it sits in (app/shell/workbench.py)."""

    def notify(
        self, level: Level, text: str, key: str | None = None, action: str | None = None
    ) -> None: ...
    def clear_notice(self, key: str) -> None: ...
    def add_dock(self, title: str, widget: Any, place: DockPlace) -> Any: ...
    def add_actions(self, items: Sequence[MenuItem]) -> None: ...
    def pause_for(self, concern: str, reason: str) -> None: ...
    def resume_after(self, concern: str) -> None: ...
    def apply_config(self, config: RunConfig) -> None: ...
    def plot_origin_ns(self) -> int: ...
    def mark_plot(self, t_s: float, label: str) -> None: ...
    def plot_stats(self) -> dict[str, Any]: ...
    def set_slo(self, ms: float | None) -> None: ...


def _nothing(*_args: object) -> None:
    return None


class Desk(QObject):
    workload_changed = Signal(object)  # Workload | None: the model, config or inputs changed
    model_loaded = Signal(object)  # ModelInfo: the host loaded a model (again, or another)
    variant_ready = Signal(object)  # VariantReady: the config's model file is built
    figures_changed = Signal(object)  # Figures: the live profile's per-node figures
    events = Signal(list)  # every batch of the engine host's events, in order
    node_picked = Signal(str)  # a room picked a node: the op table and roofline show it
    node_shown = Signal(str)  # the op table or roofline shows a node ("" none): rooms follow
    node_memory = Signal(dict)  # a room measured each node's memory: the op table shows it
    said = Signal(str, str)  # level, text: every message the window told the user

    def __init__(
        self,
        shell: Shell,
        jobs: JobRunner,
        recording: Recording,
        settings: QSettings,
        config: RunConfig,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.shell, self._jobs, self._recording, self.settings = shell, jobs, recording, settings
        self._config = config
        self._model: str | None = None  # the model the host runs (its path on this machine)
        self._info: ModelInfo | None = None
        self._pending: str | None = None  # asked to load, not yet loaded
        self._inputs: Any = None  # JobInputs of the pending or loaded model
        self._generation: tuple[int, int] | None = None  # prompt, new tokens
        self.figures: Figures | None = None

    # (properties, so that a room's test double, MagicMock(spec=Desk), has them too)
    @property
    def jobs(self) -> JobRunner:
        return self._jobs

    @property
    def recording(self) -> Recording:
        return self._recording

    @property
    def generation_shape(self) -> tuple[int, int] | None:
        """A generating model's prompt and new tokens as last run or asked for (None: no
        generation yet)."""
        return self._generation

    # the workload -------------------------------------------------------------------------
    @property
    def workload(self) -> Workload | None:
        """What runs now: None until the host has loaded a model."""
        if self._model is None:
            return None
        if self._inputs is None:
            return Workload(self._model, self._config)
        return Workload(self._model, self._config, self._inputs)

    @property
    def model_info(self) -> ModelInfo | None:
        return self._info

    def loading(self, path: str, inputs: Any) -> None:
        """The window asked the host to load `path` on `inputs` (JobInputs)."""
        self._pending, self._inputs = path, inputs

    def inputs_changed(self, inputs: Any) -> None:
        """The loaded model's inputs changed (dims, data files)."""
        self._inputs = inputs
        self._changed()

    def config_changed(self, config: RunConfig) -> None:
        """The configuration shows `config` (the user's edit, a trial applied, a run's)."""
        if config != self._config:
            self._config = config
            self._changed()

    def generation_changed(self, prompt_len: int, new_tokens: int) -> None:
        self._generation = (prompt_len, new_tokens)

    def on_events(self, batch: list[Any]) -> None:
        """The host's events: a model loaded becomes the workload's (a failed load leaves
        the running one current); every batch goes on to the rooms."""
        for ev in batch:
            if isinstance(ev, ModelLoaded):
                self._model = self._pending or self._model or ev.info.path
                self._info = ev.info
                self.model_loaded.emit(ev.info)
                self._changed()
            elif isinstance(ev, CommandFailed) and ev.command == "load":
                self._pending = self._model
            elif isinstance(ev, GenerationStarted):  # the lengths the host runs now
                self._generation = (ev.prompt_len, ev.new_tokens)
        self.events.emit(batch)

    def _changed(self) -> None:
        self.workload_changed.emit(self.workload)

    # telling the user ----------------------------------------------------------------------
    def notify(
        self, level: Level, text: str, key: str | None = None, action: str | None = None
    ) -> None:
        """The one way a room tells the user something: an error or a warning in the
        banner (`key`: a later one replaces it; cleared with `clear_notice`), information
        in the status bar."""
        self.shell.notify(level, text, key, action)

    def clear_notice(self, key: str) -> None:
        self.shell.clear_notice(key)

    # docks and menus -------------------------------------------------------------------------
    def add_dock(self, title: str, widget: Any, place: DockPlace | None = None) -> Any:
        """A dock titled `title` holding `widget`, placed as `place` says; the View menu
        shows and hides it. Returns the QDockWidget."""
        return self.shell.add_dock(title, widget, place or DockPlace())

    def add_actions(self, items: Sequence[MenuItem]) -> None:
        self.shell.add_actions(items)

    def background(self, name: str) -> Background:
        """Work for `name` on a thread of the window's (one at a time: a newer supersedes)."""
        return Background(name, self)

    # live timing --------------------------------------------------------------------------------
    def pause_for(self, concern: str, reason: str) -> None:
        self.shell.pause_for(concern, reason)

    def resume_after(self, concern: str) -> None:
        self.shell.resume_after(concern)

    def apply_config(self, config: RunConfig) -> None:
        """Run `config` live (shown in the configuration; timing resumed)."""
        self.shell.apply_config(config)

    def plot_origin_ns(self) -> int:
        """The live plot's time origin (perf_counter ns): its x is seconds after it."""
        return self.shell.plot_origin_ns()

    def mark_plot(self, t_s: float, label: str) -> None:
        """A marker on the live latency plot at `t_s`."""
        self.shell.mark_plot(t_s, label)

    def plot_stats(self) -> dict[str, Any]:
        """The latency plot's latest figures (p50, p99, count...)."""
        return self.shell.plot_stats()

    def set_slo(self, ms: float | None) -> None:
        """The latency target line on the live plot (None: none)."""
        self.shell.set_slo(ms)

    # the live views' shared figures -------------------------------------------------------------
    def publish_figures(self, ops: list[Any], roofs: Any) -> None:
        self.figures = Figures(list(ops), roofs)
        self.figures_changed.emit(self.figures)

    def pick_node(self, name: str) -> None:
        self.node_picked.emit(name)

    def show_node_memory(self, memory: dict[str, Any]) -> None:
        self.node_memory.emit(memory)

    # the recipe ----------------------------------------------------------------------------------
    def run_on_workload(
        self,
        concern: str,
        request: Callable[[Workload], object],
        *,
        on_done: Callable[[Any], None],
        on_failed: Callable[[str], None],
        on_events: Callable[[list[Any]], None] = _nothing,
        on_cancelled: Callable[[], None] = _nothing,
        pause: str | None = None,
    ) -> bool:
        """Run the job `request(workload)` makes for the current workload, once: nothing
        when `concern`'s job runs already (False); `on_failed(NO_MODEL)` without a model;
        with `pause`, live timing pauses (marked with it) until the job ends. The session
        is flushed first: the job records beside the live runs. A request refused while
        it is made (`OpScopeError`) is `on_failed` with its line."""
        workload = self.workload
        if workload is None:
            on_failed(NO_MODEL)
            return False
        if self.jobs.busy(concern):
            return False
        if pause is not None:
            self.pause_for(concern, pause)
        self.recording.flush()
        try:
            job = request(workload)
        except OpScopeError as exc:
            self.resume_after(concern)
            on_failed(str(exc))
            return False

        def ended(then: Callable[..., None]) -> Callable[..., None]:
            def call(*args: Any) -> None:
                self.resume_after(concern)  # a no-op for a job that paused nothing
                then(*args)

            return call

        self.jobs.start(
            concern,
            job,
            on_done=ended(on_done),
            on_failed=ended(on_failed),
            on_events=on_events,
            on_cancelled=ended(on_cancelled),
        )
        return True

    @property
    def session_path(self) -> str:
        return str(self.recording.path)
