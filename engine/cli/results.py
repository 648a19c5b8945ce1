"""Fold a run's events into the result object the CLI prints and writes as JSON.

The JSON shape is a contract scripts rely on (see README, "Command line").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.events import (
    AccuracyResult,
    Event,
    LatencyBatch,
    ModelLoaded,
    Notice,
    OpProfile,
    RunEnded,
    RunStarted,
    TimingDone,
    VariantReady,
)
from engine.measure.roofline import Roofs


@dataclass
class RunResult:
    """Everything one run produced, assembled from its events."""

    model: ModelLoaded | None = None
    variant: VariantReady | None = None
    started: RunStarted | None = None
    timing: TimingDone | None = None
    accuracy: AccuracyResult | None = None
    profile: OpProfile | None = None
    phases: dict[str, OpProfile] = field(default_factory=dict)  # a generating model's
    ended: RunEnded | None = None
    notices: list[Notice] = field(default_factory=list)
    machine: Roofs | None = None  # the machine's roofs for the provider used
    _starts: list[np.ndarray] = field(default_factory=list)
    _lats: list[np.ndarray] = field(default_factory=list)

    def feed(self, ev: Event) -> None:
        if isinstance(ev, LatencyBatch):
            self._starts.append(ev.starts_ns)
            self._lats.append(ev.latencies_ns)
        elif isinstance(ev, ModelLoaded):
            self.model = ev
        elif isinstance(ev, VariantReady):
            self.variant = ev
        elif isinstance(ev, RunStarted):
            self.started = ev
        elif isinstance(ev, TimingDone):
            self.timing = ev
        elif isinstance(ev, AccuracyResult):
            self.accuracy = ev
        elif isinstance(ev, OpProfile):
            self.profile = ev
            if ev.phase:
                self.phases[ev.phase] = ev
        elif isinstance(ev, RunEnded):
            self.ended = ev
        elif isinstance(ev, Notice):
            self.notices.append(ev)

    @property
    def latencies_ns(self) -> np.ndarray:
        return np.concatenate(self._lats) if self._lats else np.empty(0, np.int64)

    @property
    def starts_ns(self) -> np.ndarray:
        return np.concatenate(self._starts) if self._starts else np.empty(0, np.int64)

    def _op_json(self, stat: Any) -> dict[str, Any]:
        """One op's JSON, with its roofline fields when the machine's peaks are known."""
        from engine.measure.op_stats import stat_to_json
        from engine.measure.roofline import roofline_fields

        out: dict[str, Any] = dict(stat_to_json(stat))
        if self.machine:
            out.update(roofline_fields(stat, self.machine))
        return out

    def to_json(self, top: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.model:
            info = self.model.info
            out["model"] = {"path": info.path, "sha256": info.sha256, "name": info.name}
        if self.started:
            out["config"] = self.started.config.to_json()
            out["provider_requested"] = self.started.provider_requested
            out["provider_used"] = self.started.provider_used
            out["providers"] = list(self.started.providers)
            out["inputs"] = {
                k: {"shape": list(s), "dtype": d} for k, (s, d) in self.started.inputs.items()
            }
            out["batch"] = self.started.batch
        if self.variant:
            out["variant"] = {
                "precision": self.variant.precision,
                "nodes": self.variant.nodes,
                "nodes_original": self.variant.nodes_original,
                "build_s": round(self.variant.build_s, 4),
                "cached": self.variant.cached,
                "path": self.variant.path,
            }
            if "quantized" in self.variant.details:  # per op type: [quantized, of]
                out["variant"]["quantized"] = self.variant.details["quantized"]
            if "torch_export" in self.variant.details:
                out["variant"]["torch_export"] = self.variant.details["torch_export"]
            int8 = self.variant.details.get("int8")
            if int8:  # how INT8 met (or missed) its accuracy target, every attempt kept
                out["variant"].update(
                    {
                        "min_cosine": int8.get("min_cosine"),
                        "met": int8.get("met"),
                        "isa": int8.get("isa"),
                        "settings": int8.get("settings"),
                        "excluded_nodes": int8.get("excluded_nodes"),
                        "attempts": int8.get("attempts"),
                        "ranking": int8.get("ranking"),  # the race of what met it
                        "worst": int8.get("worst"),  # the check nearest to failing
                        "data": int8.get("data"),  # what the attempts were judged on
                        "head_in_fp32": int8.get("head_in_fp32") or [],
                    }
                )
        if self.timing:
            out["latency_ms"] = self.timing.latency.to_json()
            out["throughput"] = self.timing.throughput.to_json()
            out["stable"] = self.timing.stable
            out["warmup_runs"] = self.timing.warmup_runs
            if self.timing.contention is not None:
                out["machine"] = {"contention": self.timing.contention.to_json()}
        out["accuracy"] = self.accuracy.to_json() if self.accuracy else None
        if self.profile:
            p = self.profile
            ops = p.ops[:top] if top else p.ops
            out["ops"] = [self._op_json(s) for s in ops]
            out["op_types"] = [self._op_json(s) for s in p.op_types]
            if self.machine:
                out.setdefault("machine", {}).update(
                    {
                        "peak_gbps": self.machine.dram.gbps,
                        "peak_gflops": self.machine.compute,
                        "roofs": self.machine.to_json(),
                    }
                )
            out["profile"] = {
                "runs": p.runs,
                "coverage": p.coverage,
                "provider_nodes": p.provider_nodes,
                "overhead": p.profile_overhead,
                "nodes_total": len(p.ops),
                "contention": p.contention.to_json() if p.contention else None,
            }
            if self.phases:  # ops/op_types above are the last phase's; each phase here
                out["phases"] = {
                    name: {"runs": ph.runs, "op_types": [self._op_json(s) for s in ph.op_types]}
                    for name, ph in self.phases.items()
                }
        out["notices"] = [{"level": n.level, "message": n.message} for n in self.notices]
        out["status"] = self.ended.status if self.ended else "incomplete"
        if self.ended and self.ended.error:
            out["error"] = self.ended.error
        return out
