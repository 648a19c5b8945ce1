"""LLM serving studies read back (schema v7: `opscope simulate --llm --session`, `load --llm
--session`, the window's LLM Serving dock). A session may come from anyone, so the stored
JSON is not handed on as read: each summary row and the plan are checked against the
declared fields below (engine/session/blobs.py: numbers finite and within bounds, text and
lists bounded) and only those fields are kept; a number the renderers need that was not
known (NaN, stored as null) reads as NaN. A malformed study raises ValueError naming the
study and the field, which the reader turns into one line."""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass
from typing import Any

from engine.config import RunConfig
from engine.session import blobs
from engine.session.blobs import Flag, Num, Seq, Spec, Text
from engine.session.columns import COUNT, SECONDS
from engine.session.spec import Column, RecordSpec

KINDS = ("simulate", "real")
MAX_ROWS = 64  # layouts of one study
LATENCY = Num(float, 0.0, 1e9)  # ms
RATE = Num(float, 0.0, 1e12)  # per second
SHARE = Num(float, 0.0, 1.0)
INSTANCES = Num(int, 0, 4096)
STATS: dict[str, Spec] = {
    "count": Num(int, 0, COUNT),
    **{k: LATENCY for k in ("p50", "p90", "p99", "mean", "max")},
}
THROUGHPUT: dict[str, Spec] = {
    k: RATE for k in ("tokens_per_s", "prompt_tokens_per_s", "requests_per_s")
}
ROW: dict[str, Spec] = {
    "layout": Text(64),
    "simulated": Flag(),
    "layout_config": {
        "name": Text(64),
        "label": Text(128),
        "instances": INSTANCES,
        "prefill_instances": INSTANCES,
        "decode_instances": INSTANCES,
        "chunk_tokens": Num(int, 0, 1e9),
        "max_seqs": Num(int, 0, 1e9),
    },
    "requests": {
        "count": Num(int, 0, COUNT),
        "prompt_tokens_mean": Num(float, 0.0, 1e9),
        "output_tokens_mean": Num(float, 0.0, 1e9),
    },
    "ttft_ms": STATS,
    "tpot_ms": STATS,
    "itl_ms": STATS,
    "e2e_ms": STATS,
    "throughput": THROUGHPUT,
    "span_s": Num(float, 0.0, SECONDS),
    "decode_batch_mean": Num(float, 0.0, 1e9),
    "goodput": {
        "requests_per_s": RATE,
        "share": SHARE,
        "count": Num(int, 0, COUNT),
        "slo_ttft_ms": LATENCY,
        "slo_tpot_ms": LATENCY,
    },
    "prefix_cache": {
        "blocks": Num(int, 0, 1 << 26),
        "hit_rate": SHARE,
        "requests_hit": Num(int, 0, COUNT),
        "cached_tokens": Num(int, 0, COUNT),
    },
    "without_prefix_cache": {"ttft_ms": STATS, "tpot_ms": STATS, "throughput": THROUGHPUT},
    "tokens_identical": {"requests": Num(int, 0, COUNT), "same": Num(int, 0, COUNT)},
    "prefix_curve": Seq(
        {
            "blocks": Num(int, 0, 1 << 30),
            "hit_rate": SHARE,
            "ttft_p50_ms": LATENCY,
            "ttft_p99_ms": LATENCY,
        },
        64,
    ),
    "simulator_s": Num(float, 0.0, SECONDS),
    "unfinished": Num(int, 0, COUNT),
}
PLAN: dict[str, Spec] = {
    "traffic": Text(8192),
    "seed": Num(int, -(2**63), 2**63),
    "requests": Num(int, 0, COUNT),
    "duration_s": Num(float, 0.0, SECONDS),
    "prompt_len": Text(256),
    "new_tokens": Text(256),
    "layout": Text(64),
    "instances": INSTANCES,
    "chunk_tokens": Num(int, 0, 1e9),
    "max_seqs": Num(int, 0, 1e9),
    "prefill_instances": INSTANCES,
    "decode_instances": INSTANCES,
    "slo_ttft_ms": LATENCY,
    "slo_tpot_ms": LATENCY,
    "shared_prefix": Text(64),
    "prefix_block": Num(int, 0, 1 << 20),
    "prefix_cache": Num(int, 0, 1 << 26),
    "kv_ms_per_mb": Num(float, 0.0, 1e9),
}
NEEDED = (("ttft_ms", "p50"), ("ttft_ms", "p99"), ("tpot_ms", "p50"), ("tpot_ms", "p99"),
          ("throughput", "tokens_per_s"), ("requests", "count"))  # fmt: skip


@dataclass(frozen=True, slots=True)
class LLMStudyRow:
    id: int
    created_at: str | None
    model_path: str | None
    kind: str  # simulate | real
    config: RunConfig | None
    plan: dict[str, Any]  # the checked fields of LLMPlan
    rows: list[dict[str, Any]]  # the checked fields of each summary row
    status: str  # complete | partial


LLM_STUDIES: RecordSpec[dict[str, Any]] = RecordSpec(
    "llm_studies",
    (
        Column("id", int),
        Column("created_at", str, nullable=True),
        Column("model_path", str, nullable=True),
        Column("kind", str),  # simulate | real
        Column("config", str, nullable=True),  # checked as a RunConfig below
        Column("plan", dict),
        Column("rows", list),
        Column("status", str),  # complete | partial
    ),
)


def read_llm_studies(conn: sqlite3.Connection) -> list[LLMStudyRow]:
    """Every LLM serving study, oldest first."""
    out = []
    for r in conn.execute(LLM_STUDIES.select(order="ORDER BY id")).fetchall():
        study_id = LLM_STUDIES.value(r, "id")
        try:
            out.append(_study(LLM_STUDIES.values(r)))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"LLM serving study {study_id}: {exc}") from exc
    return out


def _study(v: dict[str, Any]) -> LLMStudyRow:
    kind = v["kind"]
    if kind not in KINDS:
        raise ValueError(f"llm_studies.kind is {kind[:20]!r}, not simulate or real")
    status = v["status"]
    if status not in ("complete", "partial"):
        raise ValueError(f"llm_studies.status is {status[:20]!r}, not complete or partial")
    config: RunConfig | None = blobs.stored_config(v["config"], "llm_studies.config")
    plan = _kept(v["plan"] or {}, PLAN, "plan")
    rows = v["rows"]
    if rows is None or len(rows) > MAX_ROWS:
        raise ValueError(f"llm_studies.rows is missing or holds more than {MAX_ROWS} rows")
    checked = [checked_row(row, f"rows[{i}]") for i, row in enumerate(rows)]
    return LLMStudyRow(v["id"], v["created_at"], v["model_path"], kind, config, plan, checked,
                       status)  # fmt: skip


def checked_row(raw: object, what: str) -> dict[str, Any]:
    """One summary row's declared fields, checked; the figures a table needs are present
    (NaN where the study did not know them)."""
    if not isinstance(raw, dict):
        raise ValueError(f"{what} is not an object")
    row = _kept(raw, ROW, what)
    for key in ("layout", "simulated", "layout_config"):
        if key not in row:
            raise ValueError(f"{what}.{key} is missing")
    c = row["layout_config"]
    if row["layout"] == "disaggregated":
        c.setdefault("prefill_instances", 1)
        c.setdefault("decode_instances", 1)
    elif "instances" not in c:
        raise ValueError(f"{what}.layout_config.instances is missing")
    for group, key in NEEDED:
        row.setdefault(group, {}).setdefault(key, 0 if key == "count" else math.nan)
    return row


def _kept(value: dict[str, Any], spec: dict[str, Spec], what: str) -> dict[str, Any]:
    """`value` checked against `spec`, keeping only the fields it names (nulls left out)."""
    out = blobs.checked(value, spec, what)
    kept: dict[str, Any] = {}
    for key, field in spec.items():
        if key not in out:
            continue
        if isinstance(field, dict):
            kept[key] = _kept(out[key], field, f"{what}.{key}")
        elif isinstance(field, Seq) and isinstance(field.item, dict):
            item = field.item
            kept[key] = [_kept(x, item, f"{what}.{key}[{i}]") for i, x in enumerate(out[key])]
        else:
            kept[key] = out[key]
    return kept
