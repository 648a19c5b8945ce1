"""Routes engine events to the views and view edits to the engine (ndv-style controller).

The controller owns no widgets' internals: it calls their public methods. Events arrive
in batches on the GUI thread; painting happens on the widgets' own timers.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from PySide6.QtCore import QObject, Signal

from app.host.peaks_loader import shared_loader
from app.live.model_switch import config_for_new_model
from app.live.run_notices import RunNotices
from engine.api import (
    AccuracyResult,
    CommandFailed,
    Contention,
    ContentionSample,
    Heartbeat,
    LatencyBatch,
    Marker,
    ModelLoaded,
    Notice,
    OpProfile,
    PeaksMeasured,
    Progress,
    RunConfig,
    RunEnded,
    RunStarted,
    ServingStarted,
    Telemetry,
    VariantReady,
)

if TYPE_CHECKING:
    from app.host.engine_client import EngineClient
    from app.shell.main_window import MainWindow

PER_CORE = re.compile(r"cpu\d+_percent$")  # recorded in the session, too many to draw
BUILD_STAGES = {"upload", "load", "variant", "calibration", "session", "accuracy"}
_PEAKS_NOTICE = (
    "Measuring this machine's peaks, once (a few seconds; timing pauses meanwhile). "
    "The roofline uses them; later launches reuse them."
)
# no heartbeat (the host sends one a second from a thread of its own, even inside a long
# profiling pass or calibration) for this long: the host is stopped or frozen whole
HANG_AFTER_S = 30.0


class LiveController(QObject):
    """Turns engine events into view updates; `view` is the main window (or a double)."""

    status_changed = Signal()
    figures_ready = Signal(object, object)  # the live profile's OpStats, their roofs (or None)
    variant_ready = Signal(object)  # VariantReady, once the window shows it

    def __init__(
        self,
        view: MainWindow,
        client: EngineClient,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        super().__init__()
        self.view = view
        self.client = client
        self.clock = clock
        self.t0_ns = clock()
        self.batch = 1
        self.model_name = ""
        self.provider = ""
        self.requested = ""
        self.run_started = False
        self.first_sample_s: float | None = None
        self.samples = 0
        self.last_beat: float | None = None  # clock s of the host's last batch (None: not yet)
        self.hang_reported = False
        self.last_profile: OpProfile | None = None
        self.contention: Contention | None = None  # the machine's load, its last second
        self.roof_ops: list[Any] | None = None  # drawn instead of last_profile's (phases)
        self.serving = False  # a load run: samples are end-to-end latencies of requests
        self._last_t = -np.inf
        self.notices = RunNotices()  # the running config's warnings, and the next one's
        self.carry_settings: Callable[[], bool] = lambda: False  # set by the workbench
        self.peaks = shared_loader()
        client.events.connect(self.on_events)
        client.host_died.connect(self.on_host_died)

    def check_hang(self, now: float | None = None) -> bool:
        """Called on a timer (`now`: seconds on `clock`): a host whose heartbeats stopped is
        stopped or frozen whole; one busy in a long profile or calibration still beats.
        Silent hosts are not judged before their first batch (a remote one may still be
        receiving its model)."""
        if self.last_beat is None or self.hang_reported:
            return False
        quiet = (self.clock() / 1e9 if now is None else now) - self.last_beat
        if quiet <= HANG_AFTER_S:
            return False
        self.hang_reported = True
        self.view.host_hung(
            f"no heartbeat from the engine host for {quiet:.0f} s: it is stopped or frozen "
            "(a long profile or calibration keeps beating)"
        )
        return True

    def host_started(self) -> None:
        """A new host: not judged until it is heard from."""
        self.last_beat, self.hang_reported = None, False

    # view -> engine --------------------------------------------------------------------
    def apply(self, config: RunConfig) -> None:
        if config.precision != "fp32":
            self.view.accuracy.set_pending()
        self.view.config_panel.show_progress("preparing " + config.label(), 0, None)
        self.notices.build_started()
        self.client.apply(config)

    def build_started(self, what: str) -> None:
        """Another part asked for a rebuild (an input size, a data file)."""
        self.view.config_panel.show_progress("preparing " + what, 0, None)
        self.notices.build_started()

    def build_cancelled(self) -> None:
        """Cancel: the cancelled build's warnings (its calibration data, say) are dropped,
        never shown when the running config carries on."""
        self.notices.build_failed()

    def open_model(self, path: str, **load: Any) -> None:
        """Load `path` on the FP32 defaults, or with the current settings when the user
        carries them over (saying which); `load` goes to the client (dims, data files)."""
        panel = self.view.config_panel
        before = panel.config()
        config, said = config_for_new_model(before, self.carry_settings(), path)
        if config != before:
            panel.set_config(config)
        self.view.notices.clear("new-model")
        if said:
            self.view.notify("info", said[:1].upper() + said[1:], key="new-model")
        panel.show_progress(f"loading {path}", 0, None)
        self.notices.build_started()
        self.client.load(path, config=config if config != before else None, **load)

    # engine -> view --------------------------------------------------------------------
    def on_events(self, batch: list[Any]) -> None:
        lat_t: list[np.ndarray] = []
        lat_v: list[np.ndarray] = []
        self.last_beat = self.clock() / 1e9  # any batch says the host lives
        if self.hang_reported:  # it beats again: the hang no longer applies
            self.view.notices.clear("engine-hung")
            self.hang_reported = False
        for ev in batch:
            if isinstance(ev, Heartbeat):
                continue  # liveness only
            if isinstance(ev, LatencyBatch):
                if ev.latencies_ns.size:
                    t, v = self._points(ev)
                    lat_t.append(t)
                    lat_v.append(v)
            elif isinstance(ev, Telemetry):
                shown = {k: v for k, v in ev.values.items() if not PER_CORE.match(k)}
                self.view.telemetry.append((ev.t_ns - self.t0_ns) / 1e9, shown)
            else:
                if lat_t:  # keep order: samples before a marker land before it
                    self._plot(lat_t, lat_v)
                    lat_t, lat_v = [], []
                self._one(ev)
        if lat_t:
            self._plot(lat_t, lat_v)

    def _points(self, ev: LatencyBatch) -> tuple[np.ndarray, np.ndarray]:
        """Seconds on the plot and ms. A timed inference sits at its start; a served
        request at its completion (as a monitor sees it), in completion order: requests
        end out of their arrival order."""
        lat_ms = ev.latencies_ns / 1e6
        if not self.serving:
            return (ev.origin_ns + ev.starts_ns - self.t0_ns) / 1e9, lat_ms
        t = (ev.origin_ns + ev.starts_ns + ev.latencies_ns - self.t0_ns) / 1e9
        order = np.argsort(t, kind="stable")
        t = np.maximum(t[order], self._last_t)  # a report's stragglers: at its start
        self._last_t = float(t[-1])
        return t, lat_ms[order]

    def _plot(self, ts: list[np.ndarray], vs: list[np.ndarray]) -> None:
        t = np.concatenate(ts)
        v = np.concatenate(vs)
        if self.first_sample_s is None:
            self.first_sample_s = float(t[0])
        self.samples += int(t.size)
        self.view.latency.append(t, v, self.batch)

    def timing_paused(self, reason: str) -> None:
        """Timing was paused (by the user, or for a study that wants the cores): the gap on
        the plot is shaded and says why, even if it began as a profiling pass."""
        self.view.latency.add_pause((self.clock() - self.t0_ns) / 1e9, reason, relabel=True)

    def _one(self, ev: Any) -> None:
        view = self.view
        if isinstance(ev, Marker):
            if ev.kind in ("config", "load"):
                view.latency.start_segment()  # the numbers above the plot restart
                view.latency.add_marker((ev.t_ns - self.t0_ns) / 1e9, ev.label)
            elif ev.kind in ("profile", "pause"):  # timing waits (a profiling pass, or a
                # build of the next config): shade the gap and say why
                view.latency.add_pause((ev.t_ns - self.t0_ns) / 1e9, ev.label)
        elif isinstance(ev, ServingStarted):
            self.serving = not ev.simulated
            self.batch = 1
        elif isinstance(ev, RunEnded) and self.serving:
            self.serving = False
            if ev.status == "error":
                view.command_failed("load", ev.error or "the load run failed")
        elif isinstance(ev, RunStarted):
            self.batch = ev.batch
            self.provider = ev.provider_used
            self.requested = ev.provider_requested
            self.run_started = True
            view.config_panel.hide_progress()
            view.config_panel.set_provider_used(ev.provider_used, ev.provider_requested)
            view.config_panel.set_config(
                ev.config if self.client.last_config.threads else _unresolved(ev.config)
            )
            if ev.config.precision == "fp32":
                view.accuracy.set_result(None)
            warnings = self.notices.run_started()
            if warnings is not None:  # a new config: the old one's warnings go
                view.set_run_warnings(warnings)
            self.status_changed.emit()
        elif isinstance(ev, ModelLoaded):
            self.model_name = ev.info.name
            view.model_loaded(ev.info)
            view.config_panel.set_model_kind(ev.info.path)
            self.status_changed.emit()
        elif isinstance(ev, VariantReady):
            view.variant_ready(ev)
            self.variant_ready.emit(ev)
        elif isinstance(ev, AccuracyResult):
            view.accuracy.set_result(ev)
        elif isinstance(ev, OpProfile) and ev.phase is None:  # phases: GenerationController
            self.roof_ops = None
            view.op_table.set_ops(
                ev.ops, ev.op_types, ev.coverage, ev.profile_overhead, ev.contention
            )
            view.profile_ready(ev)
            self.last_profile = without_trace(ev)
            self.show_roofline()
        elif isinstance(ev, Progress):
            if ev.stage == "peaks":  # the plot waits meanwhile: say why over it
                view.show_plot_notice(None if ev.done >= (ev.total or 1) else _PEAKS_NOTICE)
            elif ev.stage in BUILD_STAGES:
                view.config_panel.show_progress(ev.message, ev.done, ev.total)
        elif isinstance(ev, CommandFailed):
            if ev.command in ("load", "apply"):
                self.notices.build_failed()
            view.config_panel.hide_progress()
            view.command_failed(ev.command, ev.message, running=self.run_started)
        elif isinstance(ev, Notice):
            if ev.level != "warning" or self.notices.warning(ev.message):
                view.show_notice(ev.level, ev.message)
        elif isinstance(ev, ContentionSample):  # how busy the machine was, last second
            self.contention = ev.contention
            view.latency.machine.set_contention(ev.contention)
        elif isinstance(ev, PeaksMeasured):  # the host measured the machine's roofs
            self.peaks.peaks = ev.peaks
            self.show_roofline()
        elif isinstance(ev, RunEnded) and ev.status == "error":
            view.command_failed("run", ev.error or "the run failed")

    def show_roofline(self) -> None:
        """Draw the last profile on the roofline, with roofs once the peaks are known."""
        import shiboken6

        roofline = getattr(self.view, "roofline", None)
        ops = (
            self.roof_ops
            if self.roof_ops is not None
            else (self.last_profile.ops if self.last_profile is not None else None)
        )
        if roofline is None or ops is None:
            return
        if isinstance(roofline, QObject) and not shiboken6.isValid(roofline):
            return  # the window closed before the peaks arrived
        from engine.api import roofs_for

        peaks = self.peaks.request()  # the engine host measures them
        roofs = roofs_for(peaks, self.provider) if peaks else None
        roofline.set_ops(ops, roofs)
        table = getattr(self.view, "op_table", None)
        if table is not None:
            table.set_roofs(roofs)
        self.figures_ready.emit(ops, roofs)  # the rooms that paint the same pass

    def on_host_died(self, why: str) -> None:
        self.run_started = False
        self.last_beat = None  # a dead host is not a hung one
        self.view.config_panel.hide_progress()
        self.view.host_died(why)


def without_trace(profile: OpProfile) -> OpProfile:
    """The pass's figures without its raw trace: every node's execution in every profiled
    inference (2,120 NodeEvents, ~2.7 MB, for 20 inferences of the 106-node demo). The
    recorder wrote them in the reader's thread before the window got the batch; nothing in
    the window reads them, and a kept one was held until the next pass replaced it."""
    import dataclasses

    return profile if profile.trace is None else dataclasses.replace(profile, trace=None)


def _unresolved(config: RunConfig) -> RunConfig:
    """Show 'default' threads in the panel when the user did not pick a number."""
    import dataclasses

    return dataclasses.replace(config, threads=0)
