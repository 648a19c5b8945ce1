"""Typed records read back from a session file, each built from a row with every value
checked (see engine/session/trust.py): a run, a marker, an op statistic."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import RunConfig
from engine.errors import ConfigError, SessionFileError
from engine.events import AccuracyResult
from engine.measure.contention import Contention
from engine.measure.op_stats import STAT_KEYS
from engine.measure.stats import LatencyStats, Throughput
from engine.session import blobs
from engine.session.trust import parse_json, req, typed

NAN = float("nan")
MAX_RANK = 64  # dims of an input's shape
MAX_DIM = 2**31  # one dim of an input's shape


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

    def to_json(self) -> dict[str, Any]:
        """The shape `opscope session show --json` writes (close to `bench --json`)."""
        return {
            "id": self.id,
            "kind": self.kind,
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


@dataclass(frozen=True, slots=True)
class MarkerRow:
    """A note on a session's timeline: a config change, a user note, an engine notice."""

    id: int
    run_id: int | None
    wall_ns: int  # epoch ns
    t_ns: int | None  # relative to the run's timing origin, when known
    kind: str  # "config", "note", "notice", ...
    label: str
    text: str


def run_row(r: sqlite3.Row, path: Path) -> RunRow:
    """Build a RunRow from `SELECT runs.*, models.name AS model_name`, checking every value."""
    run_id = req(r["id"], int, "runs.id")

    def s(key: str) -> str | None:
        return typed(r[key], str, f"runs.{key}", nullable=True)

    def i(key: str) -> int | None:
        return typed(r[key], int, f"runs.{key}", nullable=True)

    def f(key: str) -> float | None:
        return typed(r[key], float, f"runs.{key}", nullable=True)

    def fn(key: str) -> float:  # NaN was stored as NULL
        value = f(key)
        return NAN if value is None else value

    config = None
    raw = parse_json(r["config"], dict, "runs.config")
    if raw is not None:
        try:
            config = RunConfig.from_json(blobs.checked(raw, blobs.CONFIG, "runs.config"))
        except (ConfigError, TypeError, ValueError) as exc:
            raise SessionFileError(f"run {run_id} has an invalid config ({exc})", path) from exc
    samples = i("samples") or 0
    timed = r["stable"] is not None or r["p50_ms"] is not None  # the timing pass ended
    return RunRow(
        id=run_id,
        kind=s("kind") or "bench",
        status=req(r["status"], str, "runs.status"),
        error=s("error"),
        model_sha256=s("model_sha256"),
        model_name=typed(r["model_name"], str, "models.name", nullable=True)
        or (Path(s("model_path") or "").name or None),
        model_path=s("model_path"),
        config=config,
        provider_requested=s("provider_requested"),
        provider_used=s("provider_used"),
        providers=tuple(_strings(parse_json(r["providers"], list, "runs.providers"))),
        inputs=_inputs(parse_json(r["inputs"], dict, "runs.inputs")),
        batch=i("batch"),
        session_create_s=f("session_create_s"),
        variant=_variant(parse_json(r["variant"], dict, "runs.variant")),
        started_at=s("started_at"),
        ended_at=s("ended_at"),
        timing_origin_ns=i("timing_origin_ns"),
        host=s("host"),
        app_version=s("app_version"),
        samples=samples,
        latency=LatencyStats(
            samples,
            fn("mean_ms"),
            fn("std_ms"),
            fn("min_ms"),
            fn("p50_ms"),
            fn("p90_ms"),
            fn("p95_ms"),
            fn("p99_ms"),
            fn("max_ms"),
            _interval(r, "p50"),
            _interval(r, "p99"),
        )
        if timed
        else None,
        throughput=Throughput(fn("inferences_per_s"), fn("samples_per_s")) if timed else None,
        stable=None if i("stable") is None else bool(i("stable")),
        warmup_runs=i("warmup_runs"),
        elapsed_s=f("elapsed_s"),
        accuracy=_accuracy(parse_json(r["accuracy"], dict, "runs.accuracy")),
        contention=Contention.from_json(parse_json(r["contention"], dict, "runs.contention"))
        if "contention" in r.keys()  # noqa: SIM118 (a sqlite3.Row: `in` tests its values)
        else None,
    )


def _interval(r: sqlite3.Row, q: str) -> tuple[float, float] | None:
    """A percentile's stored interval (None: not stored, or a file from before v8)."""
    if f"{q}_lo_ms" not in r.keys():  # noqa: SIM118 (a sqlite3.Row: `in` tests its values)
        return None
    lo = typed(r[f"{q}_lo_ms"], float, f"runs.{q}_lo_ms", nullable=True)
    hi = typed(r[f"{q}_hi_ms"], float, f"runs.{q}_hi_ms", nullable=True)
    return None if lo is None or hi is None else (lo, hi)


def op_stat_row(r: tuple[Any, ...]) -> dict[str, Any]:
    """A row of the STAT_KEYS columns, in order -> the dict `engine.measure.op_stats.stat_to_json`
    makes."""
    kinds: tuple[type, ...] = (
        str,
        str,
        str,
        int,
        float,
        float,
        float,
        float,
        int,
        float,
        int,
        float,
        float,
    )
    out: dict[str, Any] = {}
    for key, kind, value in zip(STAT_KEYS, kinds, r, strict=True):
        nullable = key in ("gbps", "flops", "gflops", "intensity", "provider")
        out[key] = typed(value, kind, f"ops.{key}", nullable=nullable)
    if out["provider"] is None:
        out["provider"] = ""
    return out


def _strings(values: list[Any] | None) -> list[str]:
    out = values or []
    if not all(isinstance(v, str) for v in out):
        raise ValueError("runs.providers holds a non-text entry")
    return out


def _inputs(value: dict[str, Any] | None) -> dict[str, Any]:
    out = value or {}
    for spec in out.values():
        if (
            not isinstance(spec, dict)
            or not isinstance(spec.get("dtype"), str)
            or not isinstance(spec.get("shape"), list)
            or len(spec["shape"]) > MAX_RANK
            or not all(
                isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_DIM
                for d in spec["shape"]
            )
        ):
            raise ValueError("runs.inputs holds a malformed input")
    return out


_VARIANT_KEYS: dict[str, tuple[type, ...]] = {
    "precision": (str,),
    "path": (str,),
    "build_s": (int, float),
    "cached": (bool,),
    "nodes": (int, type(None)),
    "nodes_original": (int,),
    "details": (dict,),
}


def _variant(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value is None:
        return None
    for key, kinds in _VARIANT_KEYS.items():
        if key in value and not isinstance(value[key], kinds):
            raise ValueError(f"runs.variant.{key} has the wrong type")
    return value


def _accuracy(value: dict[str, Any] | None) -> AccuracyResult | None:
    if value is None:
        return None

    def num(key: str) -> float:
        v = value.get(key)
        if v is None:
            return NAN
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ValueError(f"runs.accuracy.{key} is not a number")
        return float(v)

    baseline, samples = value.get("baseline"), value.get("samples", 0)
    per_output = value.get("per_output", {})
    if (
        not isinstance(baseline, str)
        or not isinstance(samples, int)
        or not isinstance(per_output, dict)
    ):
        raise ValueError("runs.accuracy is malformed")

    def optional(key: str) -> float | None:
        return None if value.get(key) is None else num(key)

    return AccuracyResult(
        baseline,
        num("max_abs_err"),
        num("mean_abs_err"),
        num("cosine"),
        optional("top1_agreement"),
        samples,
        per_output,
        optional("label_top1"),
        optional("baseline_label_top1"),
        int(optional("nonfinite") or 0),
        mean_cosine=optional("mean_cosine"),
        checks=_checks(value.get("checks")),
        data=value["data"] if isinstance(value.get("data"), str) else "",
    )


_CHECK_TEXT = ("output", "part", "metric")


def _checks(value: object) -> list[dict[str, Any]]:
    """A run's accuracy checks as a session file holds them (a teammate's file: each field
    checked; an older file has none)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError("runs.accuracy.checks is not a list")
    out = []
    for c in value:
        if not isinstance(c, dict) or not all(isinstance(c.get(k), str) for k in _CHECK_TEXT):
            raise ValueError("runs.accuracy.checks holds a malformed check")
        for k in ("worst", "mean", "target"):
            v = c.get(k)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                raise ValueError(f"runs.accuracy.checks.{k} is not a number")
        out.append(
            {
                **{k: c[k] for k in _CHECK_TEXT},
                "worst": NAN if c.get("worst") is None else float(c["worst"]),
                "mean": NAN if c.get("mean") is None else float(c["mean"]),
                "sample": int(c["sample"]) if isinstance(c.get("sample"), int) else 0,
                "samples": int(c["samples"]) if isinstance(c.get("samples"), int) else 0,
                "detail": str(c.get("detail", ""))[:200],
                # a generating model's check carries its own target (token agreement 0.9)
                **({"target": float(c["target"])} if c.get("target") is not None else {}),
            }
        )
    return out
