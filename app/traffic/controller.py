"""Routes the Traffic dock to the engine host and the serving events back: Run load /
Stop load, the live serving curves and tally, the SLO line and its crossings, and the
What-if view (the simulator, on a worker thread, from the host's calibration).

A load run and a calibration are jobs on the loaded model through the window's one job
runner (concerns "load" and "calibrate"): Stop load is a load run's Cancel (what was sent
is served and recorded), Cancel a calibration's (it stops between two batches; nothing
half-measured is kept); a calibration shows its progress with the time left; a failure or
the host's death comes back in one line. The load run's own events (its requests and
batches, its summary) come on the desk's events, as a run's. A real run is held against
its prediction with the real runs' own repeat spread and both machines' contention. The
dock is reached through its setters (app/traffic/port.py), the window through the desk
(the live plot's SLO line, markers and figures; the banner and the status bar). The rate
starts at a share of the model's measured capacity (app/traffic/default_rate.py: the
calibration's, else the live throughput at the current batch), until the user sets one."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np
from PySide6.QtCore import QObject

from app.desk import Desk
from app.traffic.default_rate import from_calibration, from_live
from app.traffic.port import TrafficViewPort
from engine.api import (
    OK,
    REJECTED,
    TIMED_OUT,
    UNSERVED,
    BatchPolicy,
    CalibrateRequest,
    LoadRunRequest,
    ModelLoaded,
    Notice,
    OpScopeError,
    Progress,
    Question,
    RealCheck,
    RunEnded,
    RunStarted,
    ServedRequests,
    ServiceModel,
    ServingStarted,
    ServingSummary,
    answer,
    calibration_drift,
    parse_traffic,
    what_if_headline,
)
from engine.api import check_real_run as check

CALIBRATE_BATCH = 32  # calibrated up to this batch (or the dock's max batch, if larger)
KEEP_REPEATS = 5  # real runs of one row kept for its repeat spread


class TrafficController(QObject):
    def __init__(self, desk: Desk, view: TrafficViewPort) -> None:
        super().__init__()
        self.desk, self.view = desk, view
        self.serving = False
        self.calibrating = False
        self.service: ServiceModel | None = None
        self.current: BatchPolicy | None = None  # the batching of the last load run
        self.slo_over = False
        self.tally = {"sent": 0, "ok": 0, "rejected": 0, "timed_out": 0, "hits": 0}
        self.job = desk.background("what-if")
        self.real_job = desk.background("real-vs-what-if")  # its own: sliders never drop it
        self._pending = False
        self._run: dict[str, Any] = {}  # the running load run's traffic, batching, cache
        self._batches: list[tuple[Any, Any]] = []  # its batches' sizes and durations (s)
        self.last_check: RealCheck | None = None
        self._last_real: dict[str, Any] | None = None  # the last load run's summary
        self._repeats: dict[str, list[dict[str, Any]]] = {}  # real runs by row (repeat spread)
        self._rate_of: object = None  # the live run (and calibration) the rate was taken from
        self._runs = 0  # live runs started (a new config's run: its own samples, its batch)
        self._run_batch = 1
        view.run_requested.connect(self.run_load)
        view.stop_requested.connect(self.stop_load)
        view.calibrate_requested.connect(self.calibrate)
        view.cancel_calibration_requested.connect(self.cancel_calibration)
        view.settings_changed.connect(self.settings_changed)
        desk.events.connect(self.on_events)
        desk.events.connect(lambda _batch: self.check_slo())  # after the plot's new samples
        desk.events.connect(lambda _batch: self.suggest_rate())

    def suggest_rate(self) -> None:
        """The dock's rate from the model's measured capacity, once per live run (a model
        or config started: the plot's figures are that run's own) and once more when
        calibrated (the calibration's capacity, else the live throughput at the running
        batch), until the user sets a rate of their own."""
        if self.serving or not self._runs or self.view.rate_edited():
            return
        key = (self._runs, self.service is not None)
        if key == self._rate_of:
            return
        if self.service is not None:
            got = from_calibration(self.service, *self.view.calibrate_sizes())
        else:
            got = from_live(self.desk.plot_stats(), self._run_batch)
        if got is not None:
            self._rate_of = key
            self.view.suggest_rate(*got)

    # -- telling the user ------------------------------------------------------------------
    def _error(self, command: str, message: str) -> None:
        """A failure in the banner, one per command (a later one replaces it)."""
        self.desk.notify("error", f"{command} failed: {message}.", key=f"error:{command}")

    def _notice(self, level: str, message: str) -> None:
        """What a job said on the way: a warning in the banner (until another config runs),
        information in the status bar; a note is for the session file only."""
        if level == "warning":
            self.desk.notify("warning", message, key=f"run:{message}")
        elif level != "note":
            self.desk.notify("info", message)

    # -- dock -> engine -----------------------------------------------------------------
    def run_load(self, req: LoadRunRequest) -> None:
        try:
            parse_traffic(req.traffic)
        except OpScopeError as exc:
            self._error("load run", str(exc))
            return
        self.view.set_running(True)
        self.view.show_progress(0, None, "preparing the serving loop")
        self.desk.jobs.start(
            "load",
            req,
            lambda _figures: self._job_ended(),
            self._load_failed,
            on_cancelled=self._job_ended,
        )

    def stop_load(self) -> None:
        """Stop sending: the requests already sent are served and the run is recorded."""
        self.desk.jobs.cancel("load")
        self.desk.jobs.cancel("calibrate")

    def calibrate(self) -> None:
        self.view.set_what_if_text("calibrating: timing batches on the engine...")
        self.view.set_calibrating(True)
        self.calibrating = True
        self.view.show_progress(0, None, "calibrating: preparing the model at batch 1")
        # calibrated already: the button says Recalibrate, and measures again
        max_batch, instances = self.view.calibrate_sizes()
        req = CalibrateRequest(max(CALIBRATE_BATCH, max_batch), instances, self.service is not None)
        self.desk.jobs.start(
            "calibrate",
            req,
            self._calibrated,
            self._calibrate_failed,
            on_events=self._calibration_events,
            on_cancelled=self._calibrate_cancelled,
        )

    def cancel_calibration(self) -> None:
        """Stop the calibration between two batches (an earlier one stays)."""
        self.desk.jobs.cancel("calibrate")
        self.view.set_cancel_enabled(False)
        self.view.show_progress(0, None, "stopping the calibration after this batch")

    def _calibration_events(self, batch: list[Any]) -> None:
        """What the calibration says on the way: its progress with the time left on the
        dock's bar; a cached one the engine no longer matches, a speed that moved while it
        was timed, a busy machine: the window's banner or status bar."""
        for ev in batch:
            if isinstance(ev, Notice):
                self._notice(ev.level, ev.message)
            elif isinstance(ev, Progress) and ev.stage == "calibrate":
                self.view.show_progress(ev.done, ev.total, ev.message)

    def settings_changed(self) -> None:
        # the SLO is the load runs' (end-to-end request latency): the live plot draws it
        # only while one runs, never over the per-inference timing loop's samples
        self.desk.set_slo(self.view.slo_ms() if self.serving else None)
        self.view.set_what_if_slo(self.view.slo_ms())
        self.slo_over = False
        self.predict()

    # -- engine -> dock -----------------------------------------------------------------
    def on_events(self, batch: list[Any]) -> None:
        for ev in batch:
            if isinstance(ev, ServingStarted) and not ev.simulated:
                self._started(ev)
            elif isinstance(ev, ServedRequests) and self.serving:
                self._served(ev)
            elif isinstance(ev, Progress) and ev.stage == "serving" and self.serving:
                self.view.show_progress(ev.done, ev.total, ev.message)
            elif isinstance(ev, Progress) and ev.stage == "calibrate" and self.calibrating:
                # a job on the loaded model (a thread of the host) streams as a run does
                self.view.show_progress(ev.done, ev.total, ev.message)
            elif isinstance(ev, ServingSummary) and self.serving:
                self._summary(ev.summary)
            elif isinstance(ev, RunEnded) and self.serving:
                self._load_ended()
            elif isinstance(ev, ModelLoaded | RunStarted) and not self.serving:
                if isinstance(ev, RunStarted):  # the plot's figures are this run's from now
                    self._runs, self._run_batch = self._runs + 1, ev.config.batch
                self._model_changed(ev)

    def check_slo(self) -> None:
        """After new latency samples of a load run: a rolling p99 above the SLO leaves a
        marker and a warning, once per crossing. The SLO applies to the load runs it was
        set for: the idle per-inference timing loop, or another model's, never trips it."""
        slo = self.view.slo_ms()
        if not slo or not self.serving:
            return
        p99 = self.desk.plot_stats().get("p99", math.nan)
        if not math.isfinite(p99):
            return
        if p99 > slo and not self.slo_over:
            self.slo_over = True
            t = (time.perf_counter_ns() - self.desk.plot_origin_ns()) / 1e9
            self.desk.mark_plot(t, f"p99 > SLO {slo:g} ms")
            self._notice("warning", f"p99 {p99:.1f} ms crossed the SLO of {slo:g} ms")
        elif p99 <= slo * 0.95:
            self.slo_over = False

    # -- internals ----------------------------------------------------------------------
    def _load_ended(self) -> None:
        """The load run ended (its RunEnded, or its job's end when it never served)."""
        self.serving = False
        self.slo_over = False
        self.desk.set_slo(None)  # timing resumes: not what the SLO is about
        self.view.set_running(False)

    def _job_ended(self) -> None:
        """The load job's end. A run that served ends with its own RunEnded, in the same
        stream and possibly the same batch (which the runner reads first): only a job that
        never served (stopped while preparing) frees the dock here."""
        if not self.serving:
            self._load_ended()

    def _load_failed(self, message: str) -> None:
        self._load_ended()
        self._error("load run", message)

    def _calibration_ended(self) -> None:
        self.calibrating = False
        self.view.set_calibrating(False)

    def _calibrate_failed(self, message: str) -> None:
        self._calibration_ended()
        self.view.set_calibrate_enabled(not self.serving)
        self.view.set_what_if_text(f"calibration failed: {message}")
        self._error("calibration", message)

    def _calibrate_cancelled(self) -> None:
        self._calibration_ended()
        self.view.set_calibrate_enabled(not self.serving)
        kept = " (the What-if keeps its earlier one)" if self.service is not None else ""
        self.view.set_what_if_text(
            f"calibration stopped: nothing of it was kept{kept}; Calibrate What-if measures again"
        )

    def _started(self, ev: ServingStarted) -> None:
        self.serving = True
        self.view.set_running(True)
        self.view.clear_serving()
        self.tally = dict.fromkeys(self.tally, 0)
        try:
            self.current = BatchPolicy.from_json(ev.batching)
        except OpScopeError:
            self.current = None
        self._run = {"traffic": ev.traffic, "policy": self.current, "cache": ev.cache}
        self.slo_over = False
        self.desk.set_slo(self.view.slo_ms())
        self._batches = []
        self.view.show_serving()

    def _served(self, ev: ServedRequests) -> None:
        t = self.tally
        # a waiting request comes once on arrival (unserved) and again when it ends
        t["sent"] += int((ev.outcome != UNSERVED).sum())
        t["ok"] += int((ev.outcome == OK).sum())
        t["rejected"] += int((ev.outcome == REJECTED).sum())
        t["timed_out"] += int((ev.outcome == TIMED_OUT).sum())
        t["hits"] += int(ev.hit.sum())
        if ev.batch_size.size:
            self._batches.append((ev.batch_size, ev.batch_end - ev.batch_start))
        if math.isfinite(ev.at_s):
            mean = float(ev.batch_size.mean()) if ev.batch_size.size else math.nan
            at = (ev.origin_ns - self.desk.plot_origin_ns()) / 1e9 + ev.at_s
            self.view.append_serving(at, ev.queued, ev.queue_peak, mean)
        self.view.set_tally(
            f"{t['sent']:,} ended: {t['ok']:,} ok ({t['hits']:,} from cache), "
            f"{t['rejected']:,} rejected, {t['timed_out']:,} timed out · "
            f"{ev.queued} waiting now"
        )

    def _summary(self, s: dict[str, Any]) -> None:
        lat, req = s["latency_ms"], s["requests"]
        good = s.get("goodput")
        within = (
            f" (goodput {good['requests_per_s']:.0f} within {good['slo_ms']:g} ms)" if good else ""
        )
        self.view.set_tally(
            f"done: p50 {lat['p50']:.2f} ms, p99 {lat['p99']:.2f} ms end to end (n="
            f"{lat['count']:,}, after the warm-up) · {s['throughput']['requests_per_s']:.0f}"
            f" requests/s{within} · {req['rejected']:,} rejected, {req['timed_out']:,} timed "
            f"out · mean batch {s['batch_size']['mean']:.2f} · queue max "
            f"{s['queue_depth']['max']}"
        )
        self._last_real = s
        key = self._row_key()
        runs = self._repeats.setdefault(key, [])
        self._check_real(s, list(runs))
        runs.append(s)
        del runs[:-KEEP_REPEATS]
        self.predict()  # the "batching in use" curve is now this run's

    def _row_key(self) -> str:
        """The load run's row: its traffic, batching and cache (runs of one row repeat)."""
        policy = self._run.get("policy")
        return repr((self._run.get("traffic"), policy.to_json() if policy else None,
                     self._run.get("cache")))  # fmt: skip

    def _check_real(self, real: dict[str, Any], earlier: list[dict[str, Any]]) -> None:
        """The run beside the What-if's prediction of the same traffic and batching, the
        likely cause when they differ (a prediction never stands silent beside a real run
        that read otherwise), its error against the earlier real runs of the same row, and
        the real run's machine beside the calibration's."""
        spec_text = str((self._run.get("traffic") or {}).get("spec") or "")
        policy, service = self._run.get("policy"), self.service
        try:
            spec = parse_traffic(spec_text)
        except OpScopeError:
            return
        offered = spec.mean_rate()
        if service is None or policy is None:
            self.view.set_what_if_real(
                offered,
                real["latency_ms"]["p99"],
                (
                    f"REAL run at {spec_text}: p99 {real['latency_ms']['p99']:,.1f} ms. Calibrate "
                    "the What-if to compare it with a prediction."
                ),
            )
            return
        cache = self._run.get("cache") or {}
        q = Question(
            spec,
            policy,
            None,
            cache=int(cache.get("size") or 0),
            repeat=float(cache.get("repeat") or 0.0),
            slo_ms=None,
        )
        sizes = [b for b, _ in self._batches]
        durations = [d for _, d in self._batches]

        def work() -> RealCheck:
            said = answer(q, service)
            predicted = said["prediction"]
            ratio = (
                service.speed_ratio(np.concatenate(sizes), np.concatenate(durations))
                if sizes
                else math.nan
            )
            drift = calibration_drift(service)
            return check(
                spec_text, real, predicted, ratio, offered, service.contention, earlier, drift,
                said.get("flags"),
            )  # fmt: skip

        def done(rc: RealCheck) -> None:
            self.last_check = rc
            self.view.set_what_if_real(offered, rc.real_p99, rc.text())

        def failed(message: str) -> None:
            self.view.set_what_if_real(None, None, f"compare: {message}")

        self.real_job.submit(work, done, failed)

    def _calibrated(self, data: dict[str, Any]) -> None:
        self._calibration_ended()
        self.view.set_calibrate_enabled(True)
        try:
            self.service = ServiceModel.from_json(data)
        except (OpScopeError, ValueError) as exc:
            self.view.set_what_if_text(f"calibration unreadable: {exc}")
            return
        self.view.set_calibrated(True)
        self.suggest_rate()  # the calibration's capacity, now known
        self.view.show_what_if()
        if self._last_real is not None:  # held against the new calibration
            earlier = self._repeats.get(self._row_key(), [])
            self._check_real(self._last_real, [r for r in earlier if r is not self._last_real])
        self.predict()

    def _model_changed(self, ev: ModelLoaded | RunStarted) -> None:
        """A new model or config: the calibration no longer describes it. (Timing that
        resumes after a load run or a calibration starts the same config again.)"""
        if self.service is None:
            return
        ctx = self.service.context
        if isinstance(ev, ModelLoaded):
            same = ev.info.sha256 == ctx.get("model_sha256")
        else:  # serving runs batch 1 whatever the live batch
            same = dataclasses.replace(ev.config, batch=1).to_json() == ctx.get("config")
        if not same:
            self.service = None
            self.view.set_calibrated(False)
            self.view.set_what_if_curves(None, None)
            self.view.set_what_if_real(None, None)
            self.view.set_what_if_flags([])
            self._last_real = None
            self._repeats.clear()
            self.view.set_what_if_text("the model or config changed: calibrate again to predict")

    def predict(self) -> None:
        """The simulator's answer for the dock's settings, off the GUI thread; one at a
        time (a slider moved meanwhile asks again when it ends)."""
        if self.service is None:
            return
        if self.job.busy:
            self._pending = True
            return
        cache, repeat = self.view.cache_settings()
        try:
            q = Question(
                parse_traffic(self.view.traffic_spec()),
                self.view.policy(),
                self.current,
                cache=cache,
                repeat=repeat,
                slo_ms=self.view.slo_ms(),
                slow_stretches=self.view.slow_stretches(),
            )
        except OpScopeError as exc:
            self.view.set_what_if_text(str(exc))
            return
        service = self.service
        self._pending = False
        if q.spec.kind != "trace":  # a trace's rate is read with it, off the GUI thread
            self.view.set_what_if_rate(q.spec.mean_rate())
        self.job.submit(lambda: answer(q, service), self._answered, self._failed)

    def _answered(self, a: dict[str, Any]) -> None:
        v = self.view
        if not v.alive():  # an answer that came after its window closed: nowhere to go
            return
        v.set_what_if_rate(a["offered_rate"])
        v.set_what_if_curves(a["current"], a["proposed"])
        v.set_what_if_text(what_if_headline(a, v.traffic_spec()))
        v.set_what_if_flags(list(a.get("flags") or []))
        if self._pending:
            self.predict()

    def _failed(self, message: str) -> None:
        self.view.set_what_if_text(f"What-if failed: {message}")
        if self._pending:
            self.predict()


__all__ = ["TrafficController"]
