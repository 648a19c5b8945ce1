"""A run as recorded (`runs`, read as `RunRow`), declared once (engine/session/spec.py):
config, provider obtained, variant facts, stored statistics, every value checked (see
engine/session/trust.py and run_fields.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import RunConfig
from engine.errors import ConfigError, SessionFileError
from engine.events import AccuracyResult
from engine.measure.contention import Contention
from engine.measure.stats import LatencyStats, Throughput
from engine.session import blobs, run_fields
from engine.session.origins import Origin
from engine.session.spec import Column, RecordSpec

NAN = float("nan")


@dataclass(frozen=True, slots=True)
class RunRow:
    """One run as recorded: config, provider obtained, variant facts, stored statistics."""

    id: int
    kind: str  # "bench" | "profile" (CLI) | "live" (the app)
    status: str  # "running" (never ended: killed) | "ok" | "cancelled" | "error"
    error: str | None
    model_sha256: str | None
    model_name: str | None
    model_path: str | None
    config: RunConfig | None  # None when the run failed before it had one
    provider_requested: str | None
    provider_used: str | None
    providers: tuple[str, ...]
    inputs: dict[str, Any]  # name -> {"shape": [...], "dtype": "float32"}
    batch: int | None
    session_create_s: float | None
    variant: dict[str, Any] | None  # precision, path, build_s, cached, nodes, nodes_original
    started_at: str | None  # ISO 8601 UTC
    ended_at: str | None
    timing_origin_ns: int | None  # wall clock (epoch ns) of latency.start_ns == 0
    host: str | None
    app_version: str | None
    samples: int  # latency rows committed for this run
    latency: LatencyStats | None  # None until the timing pass finished
    throughput: Throughput | None
    stable: bool | None
    warmup_runs: int | None
    elapsed_s: float | None
    accuracy: AccuracyResult | None
    contention: Contention | None = None  # how busy the machine was (None: not recorded)
    # who made it (a tune's trial, a sweep's point); None: as its kind says (the reader
    # fills it: engine/session/origins.py)
    origin: Origin | None = None

    def to_json(self) -> dict[str, Any]:
        """The shape `opscope session show --json` writes (close to `bench --json`)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "origin": (self.origin or Origin(self.kind)).to_json(),
            "status": self.status,
            "error": self.error,
            "model": {
                "sha256": self.model_sha256,
                "name": self.model_name,
                "path": self.model_path,
            },
            "config": self.config.to_json() if self.config else None,
            "provider_requested": self.provider_requested,
            "provider_used": self.provider_used,
            "providers": list(self.providers),
            "inputs": self.inputs,
            "batch": self.batch,
            "variant": self.variant,
            "latency_ms": self.latency.to_json() if self.latency else None,
            "throughput": self.throughput.to_json() if self.throughput else None,
            "stable": self.stable,
            "warmup_runs": self.warmup_runs,
            "elapsed_s": self.elapsed_s,
            "accuracy": self.accuracy.to_json() if self.accuracy else None,
            "samples": self.samples,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "timing_origin_ns": self.timing_origin_ns,
            "host": self.host,
            "app_version": self.app_version,
            "machine": {"contention": self.contention.to_json() if self.contention else None},
        }


_MS = ("mean_ms", "std_ms", "min_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms")
_INTERVALS = ("p50_lo_ms", "p50_hi_ms", "p99_lo_ms", "p99_hi_ms")


def _run(name: str, kind: type, then: Any = None, **kw: Any) -> Column:
    """A column of `runs`, selected from the join with `models` (nullable unless said)."""
    kw.setdefault("nullable", True)
    return Column(name, kind, then=then, expr=f"r.{name}", **kw)


def _or_zero(value: int | None) -> int:
    return value or 0


RUNS: RecordSpec[dict[str, Any]] = RecordSpec(
    "runs",
    (
        _run("id", int, nullable=False),
        _run("kind", str),
        _run("model_sha256", str),
        Column("model_name", str, nullable=True, expr="m.name", what="models.name"),
        _run("model_path", str),
        _run("config", dict),
        _run("provider_requested", str),
        _run("provider_used", str),
        _run("providers", list, run_fields.strings),
        _run("inputs", dict, run_fields.inputs),
        _run("batch", int),
        _run("session_create_s", float),
        _run("variant", dict, run_fields.variant),
        _run("status", str, nullable=False),
        _run("error", str),
        _run("started_at", str),
        _run("ended_at", str),
        _run("timing_origin_ns", int),
        _run("host", str),
        _run("app_version", str),
        _run("samples", int, _or_zero),
        *(_run(name, float) for name in (*_MS, *_INTERVALS)),
        _run("inferences_per_s", float),
        _run("samples_per_s", float),
        _run("stable", int),
        _run("warmup_runs", int),
        _run("elapsed_s", float),
        _run("accuracy", dict, run_fields.accuracy),
        _run("contention", dict, Contention.from_json),
    ),
    source="runs r LEFT JOIN models m ON m.sha256 = r.model_sha256",
)
WRITTEN = tuple(n for n in RUNS.names if n != "model_name")  # the columns of `runs` itself


def run_row(v: dict[str, Any], path: Path, origin: Origin | None = None) -> RunRow:
    """A RunRow from the checked values of a row of `RUNS.select()`, by name, and where it
    came from (engine/session/origins.py's `read_origins`)."""

    def fn(key: str) -> float:  # NaN was stored as NULL
        value = v[key]
        return NAN if value is None else float(value)

    config = None
    if v["config"] is not None:
        try:
            config = RunConfig.from_json(blobs.checked(v["config"], blobs.CONFIG, "runs.config"))
        except (ConfigError, TypeError, ValueError) as exc:
            raise SessionFileError(f"run {v['id']} has an invalid config ({exc})", path) from exc
    samples = v["samples"]
    timed = v["stable"] is not None or v["p50_ms"] is not None  # the timing pass ended
    stats = {k.removesuffix("_ms"): fn(k) for k in _MS}  # mean, std, ..., max
    return RunRow(
        id=v["id"],
        kind=v["kind"] or "bench",
        status=v["status"],
        error=v["error"],
        model_sha256=v["model_sha256"],
        model_name=v["model_name"] or (Path(v["model_path"] or "").name or None),
        model_path=v["model_path"],
        config=config,
        provider_requested=v["provider_requested"],
        provider_used=v["provider_used"],
        providers=tuple(v["providers"]),
        inputs=v["inputs"],
        batch=v["batch"],
        session_create_s=v["session_create_s"],
        variant=v["variant"],
        started_at=v["started_at"],
        ended_at=v["ended_at"],
        timing_origin_ns=v["timing_origin_ns"],
        host=v["host"],
        app_version=v["app_version"],
        samples=samples,
        latency=LatencyStats(
            samples, **stats, p50_ci=_interval(v, "p50"), p99_ci=_interval(v, "p99")
        )
        if timed
        else None,
        throughput=Throughput(fn("inferences_per_s"), fn("samples_per_s")) if timed else None,
        stable=None if v["stable"] is None else bool(v["stable"]),
        warmup_runs=v["warmup_runs"],
        elapsed_s=v["elapsed_s"],
        accuracy=v["accuracy"],
        contention=v["contention"],
        origin=origin,
    )


def _interval(v: dict[str, Any], q: str) -> tuple[float, float] | None:
    """A percentile's stored interval (None: not stored, or a file from before v8)."""
    lo, hi = v[f"{q}_lo_ms"], v[f"{q}_hi_ms"]
    return None if lo is None or hi is None else (lo, hi)
