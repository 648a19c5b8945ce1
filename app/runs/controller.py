"""The Runs room's controller: the runs the session records, fed from the engine host's
events (the desk's `events`) into the summary the view paints, repainted once a second
while it shows."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer

from app.desk import Desk
from app.runs.port import RunsViewPort
from engine.api import (
    AccuracyResult,
    ContentionSample,
    LatencyBatch,
    ModelLoaded,
    RunEnded,
    RunStarted,
    ServingStarted,
    ServingSummary,
    TimingDone,
    inputs_text,
)
from widgets.models.runs_summary import RunsSummary

REFRESH_MS = 1000


def load_label(traffic: dict[str, Any], batching: dict[str, Any]) -> str:
    """'load bursts:500,2000,4,0.25 · max batch 8, delay 2 ms, 1 instance'."""
    spec = traffic.get("spec") or traffic.get("kind") or "?"
    n = int(batching.get("instances") or 1)
    return (
        f"load {spec} · max batch {batching.get('max_batch', '?')}, "
        f"delay {float(batching.get('delay_ms') or 0):g} ms, {n} instance{'s' if n > 1 else ''}"
    )


class RunsController(QObject):
    """Runs of the live session into `summary`; `view` paints it. `parent`: the view's
    widget, so that the repaint timer goes with it."""

    def __init__(
        self,
        desk: Desk,
        view: RunsViewPort,
        summary: RunsSummary,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.view, self.summary, self.desk = view, summary, desk
        self._serving = False
        # per summary row: which RunStarted of the session began it (the recording's id of
        # that run is the row's #), and its kind as the file has it (live, load)
        self._started = 0
        self._row_start: list[int | None] = []
        self._kinds: list[str] = []
        self._model = ""  # the loaded model's file name, for each run's row
        desk.events.connect(self.on_events)
        self._timer = QTimer(self, interval=REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        self._timer.start()

    def on_events(self, batch: list[Any]) -> None:
        s = self.summary
        for ev in batch:
            if isinstance(ev, LatencyBatch):
                if not self._serving and ev.latencies_ns.size:
                    s.add(ev.starts_ns, ev.latencies_ns)
            elif isinstance(ev, ModelLoaded):
                self._model = Path(ev.info.path).name
            elif isinstance(ev, RunStarted):
                self._serving = False
                row = s.start(
                    ev.config.short_label(),
                    inputs_text({k: shape for k, (shape, _) in ev.inputs.items()}),
                    ev.batch,
                    self._model,
                    ev.config.engine,
                )
                self._row(row, self._started, "live")
                self._started += 1
            elif isinstance(ev, ContentionSample):
                s.add_load(ev.contention)
            elif isinstance(ev, AccuracyResult):
                s.set_cosine(ev.cosine)
            elif isinstance(ev, TimingDone):
                s.finish(
                    ev.latency.count,
                    ev.latency.p50,
                    ev.latency.p99,
                    ev.throughput.samples_per_s,
                    (ev.latency.p50_ci, ev.latency.p99_ci),
                    ev.contention,
                )
            elif isinstance(ev, RunEnded):
                s.end(failed=ev.status == "error")
            elif isinstance(ev, ServingStarted):  # a load run: requests, not inferences
                self._serving = True
                if ev.simulated:
                    s.end()
                else:
                    row = s.serving(load_label(ev.traffic, ev.batching), "end to end, requests/s")
                    self._row(row, self._started - 1 if self._started else None, "load")
            elif isinstance(ev, ServingSummary) and self._serving:
                lat = ev.summary.get("latency_ms") or {}
                rate = (ev.summary.get("throughput") or {}).get("requests_per_s", math.nan)
                s.finish(
                    int(lat.get("count") or 0),
                    float(lat.get("p50", math.nan)),
                    float(lat.get("p99", math.nan)),
                    float(rate),
                )

    def _row(self, row: int, started: int | None, kind: str) -> None:
        while len(self._row_start) <= row:
            self._row_start.append(None)
            self._kinds.append("live")
        self._row_start[row], self._kinds[row] = started, kind

    def run_ids(self) -> list[int | None]:
        """Each row's run id in the session file (None: not written, or never: a run that
        measured nothing is not recorded)."""
        out: list[int | None] = []
        for started in self._row_start:
            rid = None if started is None else self.desk.recording.run_id(started)
            out.append(rid if isinstance(rid, int) else None)
        return out

    def refresh(self) -> None:
        """The view given the file's run ids (always: a baseline pinned while the dock was a
        background tab named its run "this run"), and repainted when it shows."""
        self.view.set_runs(self.run_ids(), list(self._kinds))
        if self.view.isVisible():
            self.view.refresh()
