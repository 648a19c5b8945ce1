"""Feeds the runs table from the engine's events (the runs the session records) and
repaints it once a second."""

from __future__ import annotations

import math
from typing import Any

from PySide6.QtCore import QObject, QTimer

from engine.events import (
    AccuracyResult,
    LatencyBatch,
    RunEnded,
    RunStarted,
    ServingStarted,
    ServingSummary,
    TimingDone,
)
from widgets.models.runs_summary import RunsSummary
from widgets.runs_table import RunsTable

REFRESH_MS = 1000


def inputs_text(inputs: dict[str, tuple[tuple[int, ...], str]], most: int = 2) -> str:
    """'input_ids 1x128, attention_mask 1x128' (the first `most`, then '+N')."""
    parts = [f"{k} {'x'.join(map(str, shape))}" for k, (shape, _) in inputs.items()]
    more = f" +{len(parts) - most}" if len(parts) > most else ""
    return ", ".join(parts[:most]) + more


def load_label(traffic: dict[str, Any], batching: dict[str, Any]) -> str:
    """'load bursts:500,2000,4,0.25 · max batch 8, delay 2 ms, 1 instance'."""
    spec = traffic.get("spec") or traffic.get("kind") or "?"
    n = int(batching.get("instances") or 1)
    return (
        f"load {spec} · max batch {batching.get('max_batch', '?')}, "
        f"delay {float(batching.get('delay_ms') or 0):g} ms, {n} instance{'s' if n > 1 else ''}"
    )


class RunsController(QObject):
    """Runs of the live session into `summary`; `table` paints it."""

    def __init__(self, client: Any, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.summary = RunsSummary()
        self.table = RunsTable(self.summary)
        self._serving = False
        client.events.connect(self.on_events)
        self._timer = QTimer(self.table, interval=REFRESH_MS)  # goes with the table
        self._timer.timeout.connect(self._refresh)
        self._timer.start()

    def on_events(self, batch: list[Any]) -> None:
        s = self.summary
        for ev in batch:
            if isinstance(ev, LatencyBatch):
                if not self._serving and ev.latencies_ns.size:
                    s.add(ev.starts_ns, ev.latencies_ns)
            elif isinstance(ev, RunStarted):
                self._serving = False
                s.start(ev.config.short_label(), inputs_text(ev.inputs), ev.batch)
            elif isinstance(ev, AccuracyResult):
                s.set_cosine(ev.cosine)
            elif isinstance(ev, TimingDone):
                s.finish(
                    ev.latency.count,
                    ev.latency.p50,
                    ev.latency.p99,
                    ev.throughput.samples_per_s,
                )
            elif isinstance(ev, RunEnded):
                s.end(failed=ev.status == "error")
            elif isinstance(ev, ServingStarted):  # a load run: requests, not inferences
                self._serving = True
                if ev.simulated:
                    s.end()
                else:
                    s.serving(load_label(ev.traffic, ev.batching), "end to end, requests/s")
            elif isinstance(ev, ServingSummary) and self._serving:
                lat = ev.summary.get("latency_ms") or {}
                rate = (ev.summary.get("throughput") or {}).get("requests_per_s", math.nan)
                s.finish(
                    int(lat.get("count") or 0),
                    float(lat.get("p50", math.nan)),
                    float(lat.get("p99", math.nan)),
                    float(rate),
                )

    def _refresh(self) -> None:
        if self.table.isVisible():
            self.table.refresh()
