"""The Runs room's controller: the runs the session records, fed from the engine host's
events (the desk's `events`) into the summary the view paints, repainted once a second
while it shows; and the runs other processes record in the same file (a tune's trials, a
sweep's points: jobs in processes of their own), read back from the file off the GUI
thread as such a job goes and when it ends, so that every id of the file is a row."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer

from app.desk import Desk
from app.runs.port import RunsViewPort
from engine.api import (
    AccuracyResult,
    Contention,
    ContentionSample,
    JobUpdate,
    LatencyBatch,
    ModelLoaded,
    RunEnded,
    RunStarted,
    ServingStarted,
    ServingSummary,
    SessionReader,
    TimingDone,
    inputs_text,
    summarize,
)
from widgets.models.runs_summary import RunsSummary

REFRESH_MS = 1000
READ_EVERY_S = 3.0  # while a job records, the file is read back at most this often


@dataclass(frozen=True)
class FileRun:
    """A run as the session file has it, for a row the engine's events did not give."""

    id: int
    kind: str  # where it came from: 'tune 2, trial 7', 'sweep 1, batch=4', 'bench' (its label)
    model: str
    config: str
    inputs: str
    figures: tuple[int, float, float, float]  # count, p50 ms, p99 ms, samples/s
    batch: int
    engine: str
    cosine: float | None
    contention: Contention | None
    failed: bool


def read_file_runs(path: str) -> list[FileRun]:
    """Every run of the session file at `path`, oldest first (off the GUI thread)."""
    reader = SessionReader.open(path)
    try:
        rows = reader.runs()
    finally:
        reader.close()
    out = []
    for r in rows:
        s = summarize(r)
        nan = math.nan
        out.append(
            FileRun(
                r.id,
                s.origin,
                s.model,
                s.config,
                s.inputs,
                (
                    s.samples,
                    nan if s.p50_ms is None else s.p50_ms,
                    nan if s.p99_ms is None else s.p99_ms,
                    nan if s.samples_per_s is None else s.samples_per_s,
                ),
                r.config.batch if r.config is not None else 1,
                r.config.engine if r.config is not None else "",
                s.cosine,
                r.contention,
                s.status.startswith("error"),
            )
        )
    return out


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
        # that run is the row's #), and where it came from (live, load; a file's run: its
        # origin's label, "tune 2, trial 7", as every run list names it)
        self._started = 0
        self._row_start: list[int | None] = []
        self._kinds: list[str] = []
        self._file_ids: list[int | None] = []  # per row: its id, for a row read from the file
        self._model = ""  # the loaded model's file name, for each run's row
        # the file read back: at the start (runs recorded before the window opened it),
        # then as a job that records in it goes (at most every READ_EVERY_S) and as it ends
        self._reader = desk.background("runs")
        self._stale = True
        self._next_read = 0.0
        desk.events.connect(self.on_events)
        self._timer = QTimer(self, interval=REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        self._timer.start()

    def on_events(self, batch: list[Any]) -> None:
        s = self.summary
        for ev in batch:
            if isinstance(ev, JobUpdate):  # a job's trial or point may be in the file now
                self._stale = True
                if ev.kind != "events":
                    self._next_read = 0.0  # it ended: read what it left at once
            elif isinstance(ev, LatencyBatch):
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

    def _row(self, row: int, started: int | None, kind: str, file_id: int | None = None) -> None:
        while len(self._row_start) <= row:
            self._row_start.append(None)
            self._kinds.append("live")
            self._file_ids.append(None)
        self._row_start[row], self._kinds[row], self._file_ids[row] = started, kind, file_id

    def _read_file(self) -> None:
        """Read the session file's runs back (off the GUI thread) when a job may have
        added some."""
        now = time.monotonic()
        if not self._stale or self._reader.busy or now < self._next_read:
            return
        self._stale, self._next_read = False, now + READ_EVERY_S
        path = str(self.desk.session_path)
        self._reader.submit(lambda: read_file_runs(path), self._add_file_runs, self._unread)

    def _unread(self, _why: str) -> None:
        self._stale = True  # the file busy or locked a moment: read again later

    def _add_file_runs(self, runs: list[FileRun]) -> None:
        """Rows for the file's runs that no row has yet and the window did not record
        (the window's own rows come from the engine's events)."""
        known = {i for i in self.run_ids() if i is not None}
        known |= self.desk.recording.own_run_ids()  # its row may not have come yet
        for run in runs:
            if run.id in known:
                continue
            row = self.summary.recorded(
                run.config, run.inputs, run.model, run.figures, batch=run.batch,
                engine=run.engine, cosine=run.cosine, contention=run.contention,
                failed=run.failed,
            )  # fmt: skip
            self._row(row, None, run.kind, run.id)
        self.refresh()

    def run_ids(self) -> list[int | None]:
        """Each row's run id in the session file (None: not written, or never: a run that
        measured nothing is not recorded)."""
        out: list[int | None] = []
        for started, file_id in zip(self._row_start, self._file_ids, strict=True):
            rid = file_id if file_id is not None else (
                None if started is None else self.desk.recording.run_id(started)
            )  # fmt: skip
            out.append(rid if isinstance(rid, int) else None)
        return out

    def refresh(self) -> None:
        """The view given the file's run ids (always: a baseline pinned while the dock was a
        background tab named its run "this run"), and repainted when it shows."""
        self._read_file()
        self.view.set_runs(self.run_ids(), list(self._kinds))
        if self.view.isVisible():
            self.view.refresh()
