"""Memory reports read back (schema v6: `opscope memory --session`, the window's Memory
dock). A session may come from anyone, so the report JSON is not handed on as read: the
fields the renderers use are copied out one by one, each checked (numbers finite and within
bounds, text and lists bounded); a malformed report raises ValueError naming the report and
the field, which the reader turns into one line."""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass
from typing import Any

from engine.config import RunConfig
from engine.session import blobs
from engine.session.spec import Column, RecordSpec

BYTES = 1e15
SECONDS = 1e7
MAX_TIMELINE = 200_000  # nodes of one liveness pass
MAX_ALIVE = 64
MAX_DTYPES = 64
MAX_INPUTS = 256
NAME = 4096  # a node's or tensor's name
LOAD = ("read_s", "variant_s", "session_s", "model_loading_s", "session_initialization_s")


@dataclass(frozen=True, slots=True)
class MemoryRow:
    id: int
    created_at: str | None
    model_path: str | None
    config: RunConfig | None
    report: dict[str, Any]  # the checked fields of engine/run/memory_job.py's result


MEMORY: RecordSpec[dict[str, Any]] = RecordSpec(
    "memory",
    (
        Column("id", int),
        Column("created_at", str, nullable=True),
        Column("model_path", str, nullable=True),
        Column("config", str, nullable=True),  # checked as a RunConfig below
        Column("report", dict),  # engine/run/memory_job.py's result, checked below
    ),
)


def read_memory(conn: sqlite3.Connection) -> list[MemoryRow]:
    """Every memory report, oldest first."""
    out = []
    for r in conn.execute(MEMORY.select(order="ORDER BY id")).fetchall():
        memory_id = MEMORY.value(r, "id")
        try:
            out.append(_row(MEMORY.values(r)))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"memory report {memory_id}: {exc}") from exc
    return out


def _row(v: dict[str, Any]) -> MemoryRow:
    config: RunConfig | None = blobs.stored_config(v["config"], "memory.config")
    if v["report"] is None:
        raise ValueError("memory.report is missing or too long")
    return MemoryRow(v["id"], v["created_at"], v["model_path"], config, checked_report(v["report"]))


def checked_report(raw: dict[str, Any]) -> dict[str, Any]:
    """The report's fields, checked; what is not known is left out. OpScope writes null
    for a number it lacks, so a NaN or Infinity literal anywhere (even in a field no
    renderer reads) means the report was edited: refused, never taken silently."""
    if (where := _non_finite(raw)) is not None:
        raise ValueError(f"{where} holds a NaN or Infinity literal (OpScope writes null)")
    w = _obj(raw.get("weights_bytes"), "weights_bytes")
    acts = _obj(raw.get("activations"), "activations")
    m = _obj(raw.get("measured"), "measured")
    load = _obj(raw.get("load"), "load")
    rss = _obj(m.get("rss_bytes"), "measured.rss_bytes")
    inputs = _obj(raw.get("inputs", {}), "inputs")
    if len(inputs) > MAX_INPUTS:
        raise ValueError(f"inputs names more than {MAX_INPUTS} inputs")
    return {
        "model": _text(raw.get("model"), "model", optional=True),
        "inputs": {
            _text(k, "inputs", NAME): [
                int(_num(d, f"inputs.{k}", 2**53)) for d in _list(v, f"inputs.{k}", 16)
            ]
            for k, v in inputs.items()
        },
        "provider_used": _text(raw.get("provider_used"), "provider_used", optional=True),
        "weights_bytes": {
            "total": _num(w.get("total"), "weights_bytes.total", BYTES),
            "by_dtype": _dtypes(w.get("by_dtype"), "weights_bytes.by_dtype"),
            "as_loaded": _dtypes(w.get("as_loaded"), "weights_bytes.as_loaded"),
        },
        "activations": {
            "as_loaded": _liveness(acts.get("as_loaded"), "activations.as_loaded"),
            "as_run": _liveness(acts.get("as_run"), "activations.as_run"),
            "as_run_nodes": _num(acts.get("as_run_nodes"), "as_run_nodes", 1e9, optional=True),
        },
        "measured": {
            "rss_bytes": {
                _text(k, "measured.rss_bytes", 64): _num(v, f"measured.rss_bytes.{k}", BYTES)
                for k, v in list(rss.items())[:8]
            },
            "held_bytes": _num(m.get("held_bytes"), "measured.held_bytes", BYTES, lo=-BYTES),
            "estimate_bytes": _num(m.get("estimate_bytes"), "measured.estimate_bytes", BYTES),
            "estimate_over_measured": _num(
                m.get("estimate_over_measured"),
                "measured.estimate_over_measured",
                1e9,
                optional=True,
            ),
        },
        "load": {key: _num(load.get(key), f"load.{key}", SECONDS, optional=True) for key in LOAD}
        | {
            "variant_cached": _flag(load.get("variant_cached"), "load.variant_cached"),
            "weights_to_device": _copy(load.get("weights_to_device")),
        },
        "llm": _llm(raw.get("llm")),
    }


def _llm(raw: object) -> dict[str, Any] | None:
    """A generating model's KV cache and phases (engine/run/llm_memory.py), or None."""
    if raw is None:
        return None
    what = "llm"
    llm, kv = _obj(raw, what), _obj(_obj(raw, what).get("kv_cache"), f"{what}.kv_cache")
    tokens = {k: int(_num(llm.get(k), f"{what}.{k}", 2**31)) for k in
              ("prompt_len", "new_tokens", "context_length")}  # fmt: skip
    rows = [
        {k: _num(_obj(r, f"{what}.kv_cache.by_batch").get(k), f"{what}.kv_cache.{k}", BYTES)
         for k in ("batch", "per_token", "per_sequence", "full_context")}
        for r in _list(kv.get("by_batch"), f"{what}.kv_cache.by_batch", 16)
    ]  # fmt: skip
    phases = {
        _text(name, f"{what}.phases", 16): {
            "tokens": _num(_obj(p, name).get("tokens"), f"{what}.{name}.tokens", 2**31),
            "activation_peak_bytes": _num(
                _obj(p, name).get("activation_peak_bytes"),
                f"{what}.{name}.peak",
                BYTES,
                optional=True,
            ),
            "rss_growth_bytes": _num(
                _obj(p, name).get("rss_growth_bytes"),
                f"{what}.{name}.rss",
                BYTES,
                lo=-BYTES,
                optional=True,
            ),
        }
        for name, p in list(_obj(llm.get("phases", {}), f"{what}.phases").items())[:4]
    }
    return tokens | {
        "kv_cache": {
            "dtype": _text(kv.get("dtype"), f"{what}.kv_cache.dtype", 32, optional=True),
            "bytes_per_token": _num(kv.get("bytes_per_token"), f"{what}.kv_cache", BYTES),
            "run_tokens": int(_num(kv.get("run_tokens"), f"{what}.kv_cache.run", 2**31)),
            "by_batch": rows,
        },
        "phases": phases,
    }


def _copy(raw: object) -> dict[str, Any] | None:
    """The weights' copy to a GPU (engine/backends/ort/weight_copy.py), or why it failed."""
    if raw is None:
        return None
    what = "load.weights_to_device"
    c = _obj(raw, what)
    if "error" in c:
        return {"error": _text(c["error"], f"{what}.error", 300)}
    return {
        "bytes": _num(c.get("bytes"), f"{what}.bytes", BYTES),
        "seconds": _num(c.get("seconds"), f"{what}.seconds", SECONDS),
        "gb_s": _num(c.get("gb_s"), f"{what}.gb_s", 1e6, optional=True),
        "tensors": int(_num(c.get("tensors"), f"{what}.tensors", 1e9)),
        "device": _text(c.get("device"), f"{what}.device", 64),
    }


def _liveness(raw: object, what: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    live = _obj(raw, what)
    alive = _list(live.get("alive_at_peak"), f"{what}.alive_at_peak", MAX_ALIVE)
    timeline = _list(live.get("timeline", []), f"{what}.timeline", MAX_TIMELINE)
    return {
        "peak_bytes": _num(live.get("peak_bytes"), f"{what}.peak_bytes", BYTES),
        "at_node": _text(live.get("at_node"), f"{what}.at_node"),
        "unknown_tensors": _num(live.get("unknown_tensors"), f"{what}.unknown_tensors", 1e9),
        "alive_at_peak": [
            {
                "tensor": _text(_obj(t, what).get("tensor"), f"{what}.alive_at_peak.tensor"),
                "bytes": _num(_obj(t, what).get("bytes"), f"{what}.alive_at_peak.bytes", BYTES),
                "producer": _text(_obj(t, what).get("producer"), f"{what}.alive_at_peak.producer"),
            }
            for t in alive
        ],
        "timeline": [
            {
                "node": _text(_obj(p, what).get("node"), f"{what}.timeline.node"),
                "bytes": _num(_obj(p, what).get("bytes"), f"{what}.timeline.bytes", BYTES),
            }
            for p in timeline
        ],
    }


def _non_finite(value: object, where: str = "report") -> str | None:
    """The path of the first NaN or infinity in a parsed JSON value (None: there is none).
    Iterative: the nesting is bounded by the JSON parser, the size by the column."""
    stack: list[tuple[object, str]] = [(value, where)]
    while stack:
        v, at = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return at
        if isinstance(v, dict):
            stack.extend((x, f"{at}.{k}") for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((x, f"{at}[{i}]") for i, x in enumerate(v))
    return None


def _flag(value: object, what: str) -> bool:
    """A yes/no field: true, false or absent (a number there is not taken as yes)."""
    if value is None or isinstance(value, bool):
        return bool(value)
    raise ValueError(f"{what} is not true or false")


def _obj(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not an object")
    return value


def _list(value: object, what: str, most: int) -> list[Any]:
    if not isinstance(value, list) or len(value) > most:
        raise ValueError(f"{what} is not a list of at most {most:,} entries")
    return value


def _num(value: object, what: str, hi: float, lo: float = 0.0, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not lo <= value <= hi
    ):
        raise ValueError(f"{what} is not a number from {lo:g} to {hi:g}")
    return value


def _text(value: object, what: str, most: int = NAME, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not isinstance(value, str) or len(value) > most:
        raise ValueError(f"{what} is not text of at most {most:,} characters")
    return value


def _dtypes(value: object, what: str) -> dict[str, float]:
    d = _obj(value, what)
    if len(d) > MAX_DTYPES:
        raise ValueError(f"{what} names more than {MAX_DTYPES} dtypes")
    return {_text(k, what, 64): _num(v, f"{what}.{k}", BYTES) for k, v in d.items()}
