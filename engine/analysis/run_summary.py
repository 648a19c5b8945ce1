"""One processor from a recorded run to what every renderer shows (pyinstrument's
processors): its label, config text, provider name, headline numbers and status, made
once here and printed by `session show`, the HTML report, the export and the window's
runs table alike. Numbers stay numbers; `cell()` formats them the one same way."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from engine import backends
from engine.config import provider_label
from engine.measure.stats import latency_stats
from engine.session import origins
from engine.session.rows import RunRow


@dataclass(frozen=True)
class RunSummary:
    """A recorded run as tables and headings show it (text safe for any renderer to
    escape its own way; `None` where the run has no such number)."""

    id: int
    kind: str
    started_at: str  # 'YYYY-MM-DD HH:MM:SS' (UTC, as stored) or '-'
    model: str
    config: str  # 'INT8 dynamic fusion=all batch=8 threads=2' ('-' without a config)
    provider: str  # 'CPU', 'CUDA', 'torch-cpu'
    inputs: str  # 'input_ids 1x256, attention_mask 1x256' ('-' when none recorded)
    samples: int
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    mean_ms: float | None
    std_ms: float | None
    samples_per_s: float | None
    stable: bool | None
    cosine: float | None
    status: str  # 'ok', or 'error: <why>'
    host: str = "-"  # the machine it ran on ('gpu-box': an engine host over SSH)
    machine: str = "-"  # how busy it was: 'quiet', 'busy 1.9' ('-': not measured)
    machine_line: str = ""  # the same in one line, with its numbers
    # where it came from: 'tune 2, trial 7', 'sweep 1, batch=4', 'live', 'load', 'bench'
    # (engine/session/origins.py; the kind where nothing else is known)
    origin: str = ""

    @property
    def label(self) -> str:
        """'run 3: demo_cnn.onnx INT8 dynamic fusion=all batch=1 threads=2 (CPU)'."""
        return f"run {self.id}: {self.model} {self.config} ({self.provider})"


def summarize(run: RunRow) -> RunSummary:
    lat, tp, acc, c = run.latency, run.throughput, run.accuracy, run.config
    engine = f"{c.engine} " if c is not None and c.engine != backends.DEFAULT else ""
    return RunSummary(
        id=run.id,
        kind=run.kind,
        started_at=(run.started_at or "-")[:19].replace("T", " "),
        model=run.model_name or "?",
        config=engine + c.short_label() if c is not None else "-",
        provider=provider_label(run.provider_used),
        inputs=_inputs_text(run.inputs),
        samples=run.samples,
        p50_ms=lat.p50 if lat else None,
        p90_ms=lat.p90 if lat else None,
        p99_ms=lat.p99 if lat else None,
        mean_ms=lat.mean if lat else None,
        std_ms=lat.std if lat else None,
        samples_per_s=tp.samples_per_s if tp else None,
        stable=run.stable,
        cosine=acc.cosine if acc else None,
        status=run.status + (f": {run.error}" if run.error else ""),
        host=run.host or "-",
        machine=run.contention.short() if run.contention else "-",
        machine_line=run.contention.line() if run.contention else "",
        origin=origins.label(run.origin, run.kind),
    )


def _inputs_text(inputs: dict[str, Any]) -> str:
    return inputs_text(
        {
            name: shape if isinstance(shape := spec.get("shape"), list) else None
            for name, spec in inputs.items()
            if isinstance(spec, dict)
        }
    )


def inputs_text(shapes: Mapping[str, Sequence[Any] | None], most: int = 2) -> str:
    """'input_ids 1x256, attention_mask 1x256' (the first `most`, then '+N'): what tells
    MiniLM at 128 from MiniLM at 256. A shape it cannot read is '?'."""
    parts = [
        f"{name} {'x'.join(map(str, shape)) if shape is not None else '?'}"
        for name, shape in shapes.items()
    ]
    more = f" +{len(parts) - most}" if len(parts) > most else ""
    return ", ".join(parts[:most]) + more or "-"


def cell(value: float | None, digits: int = 3) -> str:
    """A number as every table prints it: fixed digits, '-' when missing or not finite."""
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def with_recorded_stats(run: RunRow, latencies_ns: npt.NDArray[Any]) -> RunRow:
    """`run` with percentiles from its raw samples where it has none stored: a run still
    running (or killed) has its samples in the file but no timing summary yet; a report
    made mid-run showed '-' for a run with 17,391 samples. The status says so."""
    if run.latency is not None or latencies_ns.size == 0:
        return run
    note = f"figures from its {latencies_ns.size:,} recorded samples"
    return dataclasses.replace(
        run,
        latency=latency_stats(np.asarray(latencies_ns)),
        error=f"{note}; {run.error}" if run.error else note,
    )


def machine_text(facts: Mapping[str, str]) -> str:
    """Another machine's facts in one line: 'NVIDIA H200, AMD EPYC (16 CPUs), Linux-6.8,
    onnxruntime 1.23.2, OpScope 0.1.0' (what is not known left out)."""
    cpu = facts.get("cpu")
    if cpu and facts.get("cpu_count"):
        cpu = f"{cpu} ({facts['cpu_count']} CPUs)"
    parts = [
        facts.get("gpu"),
        cpu,
        facts.get("os"),
        f"onnxruntime {facts['onnxruntime']}" if facts.get("onnxruntime") else None,
        f"OpScope {facts['app_version']}" if facts.get("app_version") else None,
    ]
    return ", ".join(p for p in parts if p) or "no facts recorded"
