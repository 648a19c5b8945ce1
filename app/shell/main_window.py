"""The live workbench window: config panel, latency plot, telemetry, per-op table.

Layout only, plus small view methods the controller calls (`model_loaded`, `command_failed`,
...). Menus live in app/shell/actions.py, event routing in app/live/live_controller.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import shiboken6
from PySide6.QtCore import (
    QByteArray,
    QChildEvent,
    QEvent,
    QObject,
    QSettings,
    QSize,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import (
    QCloseEvent,
    QDragEnterEvent,
    QDropEvent,
    QGuiApplication,
    QShowEvent,
)
from PySide6.QtWidgets import (
    QDockWidget,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QLabel,
    QMainWindow,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.desk.menus import DockPlace
from app.desk.notices import Notices
from app.live.config_panel import ConfigPanel
from app.live.input_panel import InputPanel
from app.sessions.compact import MODEL_KIND_DOCK, ElidedLabel, compact_pickers, scrolled
from app.shell import dock_layout
from app.shell.banner import Banner
from app.shell.model_line import inputs_line, kv_layer
from engine.api import (
    DEFAULT_MIN_COSINE,
    ModelInfo,
    OpProfile,
    RunConfig,
    VariantReady,
    backends,
    quantized_summary,
)
from widgets import theme
from widgets.accuracy_badge import AccuracyBadge
from widgets.fitting_label import FittingLabel
from widgets.generation_panel import GenerationPanel
from widgets.latency_plot import LatencyPlot
from widgets.models.status_rate import LONGEST, SHORTEST
from widgets.op_table import OpTable
from widgets.plot_notice import PlotNotice
from widgets.roofline import RooflinePlot
from widgets.telemetry_strip import TelemetryStrip

SESSION_SUFFIXES = (".opscope",)
STEPPED_KEY = "view/stepped_follow"  # the followed latency plot moves in steps
# the docks: 1 config, operators, roofline; 2 + traffic, tune; 3 + scaling; 4 + generation;
# 5 + runs; 6 the docks scroll inside their share (layouts saved grown are dropped); 7 + memory;
# 8 + messages (the rooms place their own docks); 9 the first layout fits the screen (a
# small one: the bottom docks in one tab group, the rooms' lesser docks closed)
LAYOUT_VERSION = 9


class MainWindow(QMainWindow):
    """The window; `app.shell.workbench.Workbench` wires it to the engine client."""

    node_shown = Signal(str)  # the op table or the roofline shows a node ("" none)

    def __init__(self, usable_providers: list[str]) -> None:
        super().__init__()
        self._model_name: str | None = None
        self._model_path = ""
        self._input_names: list[str] = []  # the loaded model's, in its order
        self._host: str | None = None  # where the engine runs, when not on this machine
        self.setWindowTitle("OpScope")
        self.setAcceptDrops(True)
        self.settings = QSettings("OpScope", "OpScope")
        self.on_open_path: Callable[[str], None] = lambda path: None  # set by the workbench
        # set by the workbench: the app ends with this window
        self.on_closed: Callable[[], None] = lambda: None

        self.banner = Banner()
        self.notices = Notices(self.banner, self.statusBar())
        self.notify = self.notices.notify  # the one way this window tells the user things
        self.latency = LatencyPlot()
        self.plot_notice = PlotNotice(self.latency)
        self.telemetry = TelemetryStrip(paint_hz=1.0)  # slow-changing: once a second, as top
        latency = self.latency
        self.telemetry.set_x_link(  # its own last minute until there are samples to line up
            latency.plot_item, lambda: latency.samples()[0].size > 0 or not latency.following
        )
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.latency)
        splitter.addWidget(self.telemetry)
        splitter.setStretchFactor(0, 4)
        splitter.setStretchFactor(1, 1)
        central = QWidget()
        column = QVBoxLayout(central)
        column.setContentsMargins(4, 4, 4, 4)
        column.addWidget(self.banner)
        column.addWidget(splitter, 1)
        self.setCentralWidget(central)

        self.config_panel = ConfigPanel(usable_providers)
        self.accuracy = AccuracyBadge()
        self.tolerance = self._target_box(
            "accuracy/min_cosine", DEFAULT_MIN_COSINE, 5, 0.9, 0.0005,
            "Minimum cosine similarity to FP32 (worst output) that counts as accurate. "
            "INT8 is built to meet it: settings that suit this CPU are tried, then the "
            "most sensitive nodes kept in FP32.",
        )  # fmt: skip
        self.tolerance.valueChanged.connect(self._tolerance_changed)
        self.accuracy.set_tolerance(self.tolerance.value())
        self.config_panel.set_min_cosine(self.tolerance.value())
        self.token_agreement = self._target_box(
            "accuracy/min_token_agreement", RunConfig().min_token_agreement, 3, 0.5, 0.01,
            "A generating model's weights (INT8, INT4, FP16) keep FP32's next token at least "
            "this share of the positions, teacher-forced, and Min cosine on the worst "
            "position's logits. INT8 and INT4 weights are built to meet both: block size, "
            "accuracy level, then MatMuls kept at a higher precision.",
        )  # fmt: skip
        self.token_agreement.valueChanged.connect(self._token_agreement_changed)
        self.config_panel.set_min_token_agreement(self.token_agreement.value())
        self.latency.set_stepped_follow(bool(self.settings.value(STEPPED_KEY, True, type=bool)))
        self.model_label = QLabel("–")
        self.model_label.setTextFormat(Qt.TextFormat.PlainText)
        self.model_label.setWordWrap(True)
        self.variant_label = QLabel("–")
        self.variant_label.setWordWrap(True)
        self.variant_label.setToolTip(  # the Graph dock counts the same, and says so (#53)
            "Nodes of the model file → of the runtime's graph after fusion, at the top "
            "level; the Graph dock draws input and output boxes besides these"
        )
        side = QWidget()
        side_layout = QVBoxLayout()
        facts = QFormLayout()
        facts.addRow("Model", self.model_label)
        facts.addRow("Variant", self.variant_label)
        side_layout.addLayout(facts)
        side_layout.addWidget(self.config_panel)
        self.inputs = InputPanel()
        side_layout.addWidget(self.inputs)
        acc_form = QFormLayout()
        acc_form.addRow(QLabel("Accuracy against FP32"))
        acc_form.addRow(self.accuracy)  # the dock's whole width: its lines read whole
        acc_form.addRow("Min cosine", self.tolerance)
        acc_form.addRow("Min token agreement", self.token_agreement)
        side_layout.addLayout(acc_form)
        side_layout.addStretch(1)
        side.setLayout(side_layout)
        compact_pickers(side)  # its longest entries must not widen the window past 1024 px
        scroll = QScrollArea()  # scrolls rather than making the window taller than 700 px
        scroll.setWidget(side)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setMinimumWidth(side.minimumSizeHint().width() + 14)
        # a variant build's bar and Cancel sit above the scrolled part: always in view
        progress = self.config_panel.progress_row
        panel_layout = self.config_panel.layout()
        assert panel_layout is not None  # the panel lays itself out in its constructor
        panel_layout.removeWidget(progress)
        config = QWidget()
        config_layout = QVBoxLayout(config)
        config_layout.setContentsMargins(0, 0, 0, 0)
        config_layout.addWidget(progress)
        config_layout.addWidget(scroll, 1)
        self.config_dock = self._dock("Configuration", config, Qt.DockWidgetArea.LeftDockWidgetArea)
        self.generation = GenerationPanel()
        self.generation_dock = self._dock(
            "Generation", scrolled(self.generation), Qt.DockWidgetArea.LeftDockWidgetArea
        )
        self.splitDockWidget(self.config_dock, self.generation_dock, Qt.Orientation.Vertical)
        self.generation_dock.hide()  # shown while a generating model runs
        self.generation.installEventFilter(self)
        self.generation_dock.toggleViewAction().setShortcut("Ctrl+Shift+G")
        self.generation_dock.setProperty(MODEL_KIND_DOCK, True)

        self.op_table = OpTable()
        self.ops_dock = self._dock(
            "Operators", self.op_table, Qt.DockWidgetArea.BottomDockWidgetArea
        )
        self.roofline = RooflinePlot()
        self.roofline_dock = self._dock(
            "Roofline", self.roofline, Qt.DockWidgetArea.BottomDockWidgetArea
        )
        self.splitDockWidget(self.ops_dock, self.roofline_dock, Qt.Orientation.Horizontal)
        self.ops_dock.raise_()
        self.op_table.selection_shown.connect(self.roofline.select_op)  # "" drops the ring
        self.op_table.selection_shown.connect(self.node_shown)
        self._bottom_height: int | None = None
        self.roofline.op_clicked.connect(self._roofline_clicked)
        self.profile_label = QLabel("")

        # the model and the provider give way to the numbers in a narrow window (at 1024 px
        # the rate ran under the session's name)
        self.status_model = ElidedLabel()
        self.status_provider = ElidedLabel()
        self.status_rate = FittingLabel(  # shorter wordings when narrow, whole on hover
            SHORTEST,
            LONGEST,
            "p50 and p99 over the running config's last inferences, the window the plot's "
            "header shows; the Runs table's are over whole runs",
        )
        self.status_session = ElidedLabel()  # gives way to the numbers in a narrow window
        for w in (self.status_model, self.status_provider):
            self.statusBar().addWidget(w)
        self.statusBar().addWidget(self.status_rate, 1)
        self.statusBar().addPermanentWidget(self.status_session)
        self._first_start = False  # no saved layout: the first show lays the docks out
        screen = QGuiApplication.primaryScreen()
        room = screen.availableGeometry().size() if screen is not None else QSize(1400, 900)
        self.resize(QSize(1400, 900).boundedTo(room))

    def event(self, event: QEvent) -> bool:
        if isinstance(event, QChildEvent) and event.type() == QEvent.Type.ChildPolished:
            dock_layout.legible_tabs(event.child())  # a dock tab group's bar
        return super().event(event)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._first_start:  # no saved layout: laid out for this size
            self._first_start = False
            dock_layout.first_layout(self, self.ops_dock, self.config_dock, self.size())

    def _dock(self, title: str, widget: QWidget, area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(title.lower())
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        dock_layout.own_toggle(self, dock)  # raises a dock behind a tab, not hides it
        return dock

    # rooms' docks ------------------------------------------------------------------------
    def add_room_dock(self, title: str, widget: QWidget, place: DockPlace) -> QDockWidget:
        """A room's dock (app/desk/desk.py `add_dock`), placed as `place` says."""
        area = {
            "left": Qt.DockWidgetArea.LeftDockWidgetArea,
            "bottom": Qt.DockWidgetArea.BottomDockWidgetArea,
        }[place.area]
        dock = self._dock(title, scrolled(widget) if place.scroll else widget, area)
        docks = {d.windowTitle(): d for d in self.findChildren(QDockWidget)}
        if place.below in docks:
            self.splitDockWidget(docks[place.below], dock, Qt.Orientation.Vertical)
        if place.tab_with in docks:
            self.tabifyDockWidget(docks[place.tab_with], dock)
        if place.shortcut:
            dock.toggleViewAction().setShortcut(place.shortcut)
        if place.model_kind:  # a saved layout does not show it before a model of its kind
            dock.hide()
            dock.setProperty(MODEL_KIND_DOCK, True)
        if place.tall:
            dock.visibilityChanged.connect(lambda on, d=dock: self._tall_shown(d, on))
        raised = docks.get(place.raise_after or "") if place.raise_after != title else dock
        if raised is not None:
            raised.raise_()
        return dock

    def dock(self, title: str) -> QDockWidget:
        """The dock titled `title` (a room's, or one of the window's own)."""
        found = next((d for d in self.findChildren(QDockWidget) if d.windowTitle() == title), None)
        if found is None:
            raise KeyError(title)
        return found

    def _tall_shown(self, dock: QDockWidget, visible: bool) -> None:
        """A tall dock's tab shown (the graph): the docks of its area grow to half the
        window; another tab shown: they go back to the height they had."""
        if not (shiboken6.isValid(self) and shiboken6.isValid(dock)):
            return  # the window is being deleted: its docks hide as it goes
        area = self.dockWidgetArea(dock)
        if area != Qt.DockWidgetArea.BottomDockWidgetArea or dock.isFloating():
            return
        if visible:
            self._bottom_height = dock.height()
            want = max(dock.height(), self.height() // 2)
            self.resizeDocks([dock], [want], Qt.Orientation.Vertical)
        elif self._bottom_height is not None:
            height, self._bottom_height = self._bottom_height, None
            others = [
                d for d in self.findChildren(QDockWidget)
                if d is not dock and d.isVisible() and self.dockWidgetArea(d) == area
                and not d.isFloating()
            ]  # fmt: skip
            if others:
                self.resizeDocks(others[:1], [height], Qt.Orientation.Vertical)

    def show_node(self, name: str) -> None:
        """A node picked elsewhere (the graph): its op table row and roofline point."""
        if not self.op_table.select_op(name):
            self.op_table.set_mode("per node")
            self.op_table.select_op(name)
        self.roofline.select_op(name)

    def show_inputs(self, lines: list[str]) -> None:
        """The concrete shape of each input of the running config (in the model's order;
        a generating model's KV cache inputs as one item, each in the tooltip)."""
        head = self.model_label.text().split("\n")[:2]
        self.model_label.setText("\n".join([*head, inputs_line(self._input_names, lines)]))
        self._inputs_tip(lines)

    def show_plot_notice(self, text: str | None) -> None:
        self.plot_notice.say(text)

    def set_run_warnings(self, messages: list[str]) -> None:
        """A new config runs: the last one's warnings and a failed apply no longer apply."""
        self.banner.clear("error:apply", "error:load", "error:run", "error:profile", prefix="run:")
        for message in messages:
            self.show_notice("warning", message)

    def model_loaded(self, info: ModelInfo) -> None:
        self._input_names = [v.name for v in info.inputs]
        described = [v.name + " " + v.type_text() for v in info.inputs]
        inputs = inputs_line(self._input_names, described)
        self.model_label.setText(
            f"{info.name}\n{info.nodes} nodes, {info.params:,} params\n{inputs}"
        )
        self._model_path = info.path
        self._inputs_tip(described)
        self._model_name = info.name
        self._set_title()

    def _inputs_tip(self, described: list[str]) -> None:
        """The model's path, and every input when the line shows a KV cache as one item."""
        names = self._input_names
        lines = [self._model_path]
        if sum(kv_layer(n) is not None for n in names) > 1 and len(described) == len(names):
            lines += ["", "Inputs:", *described]
        self.model_label.setToolTip("\n".join(lines))

    def show_host(self, host: str | None) -> None:
        """The engine's host in the title ("on gpu-box"); None: this machine."""
        self._host = host
        self._set_title()

    def _set_title(self) -> None:
        parts = ["OpScope", *([self._model_name] if self._model_name else [])]
        where = f" (engine on {self._host})" if self._host else ""
        self.setWindowTitle(" — ".join(parts) + where)

    def variant_ready(self, ev: VariantReady) -> None:
        after = f" → {ev.nodes}" if ev.nodes is not None else ""
        if ev.precision == "fp32":
            text = f"original, {ev.nodes_original}{after} nodes" + (
                " after fusion" if after else ""
            )
        else:
            how = "cached" if ev.cached else f"built in {ev.build_s:.1f} s"
            text = f"{ev.precision}, {how}; {ev.nodes_original}{after} nodes"
            if ev.precision.startswith("int8") and quantized_summary(ev.details):
                text += f"; {quantized_summary(ev.details)}"  # what INT8 really quantized
            weights = ev.details.get("weights")  # a generating model's weight search
            if isinstance(weights, dict) and weights.get("summary"):
                text += f"; {weights['summary']}"
        int8 = ev.details.get("int8") if ev.precision.startswith("int8") else None
        self.accuracy.set_int8(int8)
        self.op_table.set_fp32_nodes(list((int8 or {}).get("excluded_nodes") or []))
        self.variant_label.setText(text)

    def profile_ready(self, ev: OpProfile) -> None:
        runs = (
            f"{ev.runs} profiled {ev.phase} passes"
            if ev.phase
            else (f"{ev.runs} profiled inferences")
        )
        # the title is also the dock's tab: short, the pass's facts go above the table
        self.op_table.set_pass_info(f"{runs}, {ev.coverage:.0%} of run time covered")

    def show_generation(self, on: bool) -> None:
        """The Generation dock, for a generating model (hidden for the others)."""
        self.generation_dock.setVisible(on)
        if on:
            self.generation.set_figures(None)
            self._fit_generation()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.generation and event.type() == QEvent.Type.LayoutRequest:
            QTimer.singleShot(0, self._fit_generation)  # laid out: every line still in view
        return super().eventFilter(watched, event)

    def _fit_generation(self) -> None:
        """Every line of the Generation dock in view (it lost lines at 1024x700)."""
        dock_layout.fit_lower(self, self.config_dock, self.generation_dock, self.generation)

    def _roofline_clicked(self, name: str) -> None:
        """A point clicked in the roofline selects its node in the op table (a generating
        model's points are named 'phase: node': that phase is shown first)."""
        phase, sep, node = name.partition(": ")
        if sep and phase in [self.op_table.phase_combo.itemText(i)
                             for i in range(self.op_table.phase_combo.count())]:  # fmt: skip
            self.op_table.phase_combo.setCurrentText(phase)
            name = node
        if not self.op_table.select_op(name):
            self.op_table.set_mode("per node")
            self.op_table.select_op(name)
        self.node_shown.emit(name)

    def command_failed(self, command: str, message: str, running: bool = False) -> None:
        keeps = ""
        if command in ("load", "apply"):
            keeps = (
                " The previous model keeps running."
                if running
                else " Open another model with File > Open Model (Ctrl+O)."
            )
        self.notify("error", f"{command} failed: {message}.{keeps}", key=f"error:{command}")

    def show_notice(self, level: str, message: str) -> None:
        if level == "note":  # for the session file, not the user's attention
            return
        if level == "warning":
            self.notify("warning", message, key=f"run:{message}")
        else:
            self.notify("info", message)

    def host_died(self, why: str) -> None:
        saved = (  # the engine died: its samples were recorded; the recording failed: not
            "What was recorded before this is in the session; nothing measured from now on is saved"
            if why.startswith("recording failed")
            else "Everything measured so far is saved in the session"
        )
        self.notify(
            "error",
            f"{why}. {saved}.",
            action="Reconnect" if self._host else "Restart engine",
            key="engine-died",
        )

    def host_hung(self, why: str) -> None:
        self.notify(
            "warning",
            f"{why}. Restarting kills it; everything measured so far is saved.",
            action="Restart engine",
            key="engine-hung",
        )

    def set_status(
        self, model: str, provider: str, rate: str | Sequence[str], session: str
    ) -> None:
        """`rate`: one text, or its wordings longest first (the longest that fits shows)."""
        for label, text in (
            (self.status_model, model),
            (self.status_provider, provider),
            (self.status_session, _file_name(session)),
        ):
            theme.set_text_if_changed(label, text)
        self.status_rate.set_wordings((rate,) if isinstance(rate, str) else rate)
        self.status_session.setToolTip(session)  # the full path; the bar shows its name
        self.status_model.setToolTip(model)
        self.status_provider.setToolTip(provider)

    # desktop behaviour --------------------------------------------------------------
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if any(_openable(u.toLocalFile()) for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        for url in event.mimeData().urls():
            path = url.toLocalFile()
            if _openable(path):
                self.on_open_path(path)
                event.acceptProposedAction()
                return

    def _target_box(
        self, key: str, default: float, decimals: int, minimum: float, step: float, tip: str
    ) -> QDoubleSpinBox:
        """An accuracy target's box, its value remembered in the settings under `key`."""
        box = QDoubleSpinBox(decimals=decimals, minimum=minimum, maximum=1.0, singleStep=step)
        box.setValue(float(str(self.settings.value(key, default))))
        box.setToolTip(tip)
        return box

    def _tolerance_changed(self, value: float) -> None:
        self.accuracy.set_tolerance(value)
        self.config_panel.set_min_cosine(value)
        self.settings.setValue("accuracy/min_cosine", value)

    def _token_agreement_changed(self, value: float) -> None:
        self.config_panel.set_min_token_agreement(value)
        self.settings.setValue("accuracy/min_token_agreement", value)

    def restore_layout(self) -> None:
        """The saved geometry and dock layout, once every dock exists (the workbench calls
        it last): each restoreState made new dock tab bars and left the old ones painted,
        a ghost 'Roofline' tab under the real ones."""
        geometry = self.settings.value("window/geometry")
        state = self.settings.value("window/state")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
        # a saved layout from before a dock was added would put the new dock beside the
        # others and widen the window: saved layouts carry the version of the dock set
        restored = isinstance(state, QByteArray) and self.restoreState(state, LAYOUT_VERSION)
        self._first_start = not restored  # none, or of another dock set: laid out anew
        # a layout saved while a generating model ran shows its docks: they wait for one
        for dock in self.findChildren(QDockWidget):
            if dock.property(MODEL_KIND_DOCK):
                dock.hide()
        QTimer.singleShot(0, self, lambda: dock_layout.hide_stale_tab_bars(self))

    def closeEvent(self, event: QCloseEvent) -> None:
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState(LAYOUT_VERSION))
        super().closeEvent(event)
        if event.isAccepted():
            self.on_closed()


def _file_name(text: str) -> str:
    """'session: /long/folder/x.opscope' -> 'session: x.opscope' (the status bar is narrow)."""
    head, sep, path = text.partition(": ")
    return f"{head}: {Path(path).name}" if sep and path else text


def _openable(path: str) -> bool:
    return Path(path).suffix.lower() in (*backends.model_suffixes(), *SESSION_SUFFIXES)


def recent_hosts(settings: QSettings) -> list[str]:
    value: Any = settings.value("recent/hosts", [])
    if isinstance(value, str):
        value = [value]
    return [str(v) for v in value or []][:10]


def add_recent_host(settings: QSettings, host: str) -> list[str]:
    hosts = [host, *(h for h in recent_hosts(settings) if h != host)][:10]
    settings.setValue("recent/hosts", hosts)
    return hosts


def recent_files(settings: QSettings) -> list[str]:
    value: Any = settings.value("recent/files", [])
    if isinstance(value, str):
        value = [value]
    return [str(v) for v in (value or []) if isinstance(v, str)][:10]


def add_recent(settings: QSettings, path: str) -> list[str]:
    files = [p for p in recent_files(settings) if p != path]
    files.insert(0, path)
    settings.setValue("recent/files", files[:10])
    return files[:10]
