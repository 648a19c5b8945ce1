"""One processor from a recorded run to what every renderer shows (pyinstrument's
processors): its label, config text, provider name, headline numbers and status, made
once here and printed by `session show`, the HTML report, the export and the window's
runs table alike. Numbers stay numbers; `cell()` formats them the one same way."""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine import backends
from engine.config import provider_label
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
    )


def cell(value: float | None, digits: int = 3) -> str:
    """A number as every table prints it: fixed digits, '-' when missing or not finite."""
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"
