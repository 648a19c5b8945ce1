"""The checks of a run's JSON fields as a session file holds them (`runs.providers`,
`inputs`, `variant`, `accuracy`): a teammate's file, so each field is checked before a
`RunRow` carries it."""

from __future__ import annotations

from typing import Any

from engine.events import AccuracyResult

NAN = float("nan")
MAX_RANK = 64  # dims of an input's shape
MAX_DIM = 2**31  # one dim of an input's shape


def strings(values: list[Any] | None) -> list[str]:
    out = values or []
    if not all(isinstance(v, str) for v in out):
        raise ValueError("runs.providers holds a non-text entry")
    return out


def inputs(value: dict[str, Any] | None) -> dict[str, Any]:
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


def variant(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value is None:
        return None
    for key, kinds in _VARIANT_KEYS.items():
        if key in value and not isinstance(value[key], kinds):
            raise ValueError(f"runs.variant.{key} has the wrong type")
    return value


def accuracy(value: dict[str, Any] | None) -> AccuracyResult | None:
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
