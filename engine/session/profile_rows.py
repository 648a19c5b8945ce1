"""A profiling pass's records: its summary (`profiles`), its inferences (`profile_runs`),
its per-node and per-op-type statistics (`ops`, read as `OpStat`) and every node
execution (`op_nodes` once per run + `op_times` per execution, read as `NodeEvent`),
each declared once (engine/session/spec.py)."""

from __future__ import annotations

import functools
import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from engine.events import OpProfile
from engine.measure.op_stats import STAT_KEYS, OpStat
from engine.measure.op_trace import NodeEvent, ProfileTrace, RunSpan, Shapes
from engine.session.spec import Column, RecordSpec
from engine.session.trust import json_text, parse_json, req
from engine.session.writable import utc_now


@dataclass(frozen=True, slots=True)
class ProfileRow:
    """One profiling pass's summary: how many inferences it profiled, how much of each its
    nodes cover, what profiling cost, nodes per provider, how busy the machine was."""

    run_id: int
    pass_: int
    runs: int
    coverage: float | None
    overhead: float | None
    provider_nodes: dict[str, int]
    nodes_total: int | None
    recorded_at: str | None
    contention: dict[str, Any] | None  # engine/measure/contention.py's to_json


def _int_map(value: dict[str, Any] | None) -> dict[str, int]:
    out = value or {}
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in out.values()):
        raise ValueError("profiles.provider_nodes holds a non-integer count")
    return out


RUN_ID = Column("run_id", int)
PASS = Column("pass", int, field="pass_")

PROFILES: RecordSpec[ProfileRow] = RecordSpec(
    "profiles",
    (
        RUN_ID,
        PASS,
        Column("runs", int),
        Column("coverage", float, nullable=True),
        Column("overhead", float, nullable=True),
        Column("provider_nodes", dict, then=_int_map),
        Column("nodes_total", int, nullable=True),
        Column("recorded_at", str, nullable=True),
        Column("contention", dict),
    ),
    ProfileRow,
)

PROFILE_RUNS: RecordSpec[RunSpan] = RecordSpec(
    "profile_runs",
    (
        RUN_ID,
        PASS,
        Column("run_index", int),
        Column("start_us", float),
        Column("dur_us", float),
    ),
    lambda run_id, pass_, **span: RunSpan(**span),
)


def _op_stat(run_id: int, pass_: int, kind: str, rank: int, **stat: Any) -> OpStat:
    return OpStat(**stat)


_NULLABLE_STATS = ("calls", "bytes", "gbps", "flops", "gflops", "intensity")
# optional in the file (columns.py): a file without them reads NaN, which tables show as "-"
_NAN_STATS = ("p50_ms", "p99_ms", "share")
_STAT_KINDS = {"name": str, "op_type": str, "provider": str, "calls": int, "bytes": int,
               "flops": int}  # fmt: skip

OPS: RecordSpec[OpStat] = RecordSpec(
    "ops",
    (
        RUN_ID,
        PASS,
        Column("kind", str),  # "node" | "op_type"
        Column("rank", int),  # by time, largest first
        *(
            Column(
                key,
                _STAT_KINDS.get(key, float),
                nullable=key in (*_NULLABLE_STATS, *_NAN_STATS, "provider"),
                default="" if key == "provider" else math.nan if key in _NAN_STATS else None,
            )
            for key in STAT_KEYS
        ),
    ),
    _op_stat,
)

# What a node is, written once per run (its id: its order of first appearance in the run)
_NODE_FACTS = ("name", "parent", "op_type", "provider", "node_index", "activation_bytes",
               "parameter_bytes", "output_bytes", "input_shapes", "output_shapes")  # fmt: skip
OP_NODES: RecordSpec[dict[str, Any]] = RecordSpec(
    "op_nodes",
    (
        RUN_ID,
        Column("id", int),
        *(Column(n, int if "bytes" in n or n == "node_index" else str) for n in _NODE_FACTS),
    ),
)
# Each execution (self_us NULL: the same as dur_us)
OP_TIMES: RecordSpec[dict[str, Any]] = RecordSpec(
    "op_times",
    (
        RUN_ID,
        PASS,
        Column("seq", int),
        Column("run_index", int),
        Column("node", int),
        Column("start_us", float),
        Column("dur_us", float),
        Column("self_us", float, nullable=True),
    ),
)


@functools.lru_cache(maxsize=4096)
def _shapes(text: str, what: str) -> Shapes:
    """'[["float",[1,3]]]' -> (("float", (1, 3)),), checked entry by entry."""
    out: list[tuple[str, tuple[int, ...]]] = []
    for entry in parse_json(text, list, what) or []:
        if (
            not isinstance(entry, list)
            or len(entry) != 2
            or not isinstance(entry[0], str)
            or not isinstance(entry[1], list)
            or not all(isinstance(d, int) and not isinstance(d, bool) for d in entry[1])
        ):
            raise ValueError(f"{what} holds a malformed shape")
        out.append((entry[0], tuple(entry[1])))
    return tuple(out)


def _shapes_column(name: str) -> Column:
    what = f"op_events.{name}"
    return Column(name, str, nullable=True, default="[]", expr=f"n.{name}",
                  then=lambda text: _shapes(text, what))  # fmt: skip


# A node execution as read: op_times joined with its op_nodes row (the `op_events` view)
OP_EVENTS: RecordSpec[NodeEvent] = RecordSpec(
    "op_events",
    (
        Column("run_index", int, expr="t.run_index"),
        *(Column(n, str, expr=f"n.{n}") for n in ("name", "op_type", "provider")),
        Column("parent", str, nullable=True, default="", expr="n.parent"),
        Column("node_index", int, expr="n.node_index"),
        Column("start_us", float, expr="t.start_us"),
        Column("dur_us", float, expr="t.dur_us"),
        Column("self_us", float, expr="COALESCE(t.self_us, t.dur_us)"),
        *(Column(n, int, expr=f"n.{n}") for n in _NODE_FACTS if "bytes" in n),
        _shapes_column("input_shapes"),
        _shapes_column("output_shapes"),
    ),
    NodeEvent,
    source="op_times t JOIN op_nodes n ON n.run_id = t.run_id AND n.id = t.node",
)


def last_pass(conn: sqlite3.Connection, run_id: int, pass_: int | None = None) -> int:
    """`pass_`, or the run's last profiling pass (-1: none)."""
    if pass_ is not None:
        return pass_
    (last,) = conn.execute("SELECT MAX(pass) FROM profiles WHERE run_id = ?", [run_id]).fetchone()
    return -1 if last is None else req(last, int, "profiles.pass")


def read_profiles(conn: sqlite3.Connection, run_id: int) -> list[ProfileRow]:
    return PROFILES.read_all(conn, "WHERE run_id = ?", "ORDER BY pass", [run_id])


def read_ops(conn: sqlite3.Connection, run_id: int, kind: str, pass_: int | None) -> list[OpStat]:
    where = "WHERE run_id = ? AND kind = ? AND pass = ?"
    return OPS.read_all(
        conn, where, "ORDER BY rank", [run_id, kind, last_pass(conn, run_id, pass_)]
    )


def read_op_events(conn: sqlite3.Connection, run_id: int, pass_: int | None) -> list[NodeEvent]:
    """The raw per-inference node rows of a pass, in trace order."""
    where = "WHERE t.run_id = ? AND t.pass = ?"
    p = last_pass(conn, run_id, pass_)
    return OP_EVENTS.read_all(conn, where, "ORDER BY t.seq", [run_id, p])


def read_profile_trace(conn: sqlite3.Connection, run_id: int, pass_: int | None) -> ProfileTrace:
    """The pass rebuilt as a ProfileTrace, so `engine.measure.op_stats` can recompute."""
    p = last_pass(conn, run_id, pass_)
    where = "WHERE run_id = ? AND pass = ?"
    spans = tuple(PROFILE_RUNS.read_all(conn, where, "ORDER BY run_index", [run_id, p]))
    nodes = tuple(read_op_events(conn, run_id, p))
    if any(not 0 <= n.run_index < len(spans) for n in nodes):
        raise ValueError("op_events.run_index outside the profiled runs")
    return ProfileTrace(runs=spans, nodes=nodes)


def add_profile(conn: sqlite3.Connection, run_id: int, prof: OpProfile) -> int:
    """One profiling pass: its summary, per-inference spans, per-node and per-op-type
    statistics, and every raw per-inference node row. Returns the pass number. Joins the
    caller's transaction."""
    (last,) = conn.execute("SELECT MAX(pass) FROM profiles WHERE run_id = ?", [run_id]).fetchone()
    pass_ = 0 if last is None else int(last) + 1
    contention = json_text(prof.contention.to_json()) if prof.contention else None
    conn.execute(PROFILES.insert(), PROFILES.row(
        run_id=run_id, runs=prof.runs, coverage=prof.coverage, overhead=prof.profile_overhead,
        provider_nodes=json_text(prof.provider_nodes), nodes_total=len(prof.ops),
        recorded_at=utc_now(), contention=contention, **{"pass": pass_},
    ))  # fmt: skip
    conn.executemany(
        OPS.insert(),
        [
            OPS.of(stat, run_id=run_id, kind=kind, rank=rank, **{"pass": pass_})
            for kind, stats in (("node", prof.ops), ("op_type", prof.op_types))
            for rank, stat in enumerate(stats)
        ],
    )
    runs = prof.trace.runs  # raw executemany: a pass can hold 10^5 node rows
    conn.executemany(
        PROFILE_RUNS.insert(),
        [PROFILE_RUNS.of(r, run_id=run_id, **{"pass": pass_}) for r in runs],
    )
    _add_op_rows(conn, run_id, pass_, prof.trace.nodes)
    return pass_


def _add_op_rows(
    conn: sqlite3.Connection, run_id: int, pass_: int, events: Sequence[NodeEvent]
) -> None:
    """A pass's per-inference node rows, compact: nodes not yet seen in this run go to
    `op_nodes` once (ids in order of first appearance), every execution to `op_times`."""
    known = OP_NODES.select("WHERE run_id = ?", names=("id", *_NODE_FACTS))
    ids: dict[tuple[Any, ...], int] = {
        tuple(key): node for node, *key in conn.execute(known, [run_id])
    }
    shapes: dict[Any, str] = {}

    def shape_json(value: Any) -> str:
        text = shapes.get(value)
        if text is None:
            text = shapes[value] = json_text(value)
        return text

    new_nodes: list[tuple[Any, ...]] = []
    nodes: list[int] = []
    for n in events:
        facts = {
            "name": n.name,
            "parent": n.parent,
            "op_type": n.op_type,
            "provider": n.provider,
            "node_index": n.node_index,
            "activation_bytes": n.activation_bytes,
            "parameter_bytes": n.parameter_bytes,
            "output_bytes": n.output_bytes,
            "input_shapes": shape_json(n.input_shapes),
            "output_shapes": shape_json(n.output_shapes),
        }
        key = tuple(facts[k] for k in _NODE_FACTS)
        node = ids.get(key)
        if node is None:
            node = ids[key] = len(ids)
            new_nodes.append(OP_NODES.row(run_id=run_id, id=node, **facts))
        nodes.append(node)
    conn.executemany(OP_NODES.insert(), new_nodes)
    conn.executemany(
        OP_TIMES.insert(),
        OP_TIMES.rows(
            run_id=repeat(run_id),
            seq=range(len(events)),
            run_index=[n.run_index for n in events],
            node=nodes,
            start_us=[n.start_us for n in events],
            dur_us=[n.dur_us for n in events],
            self_us=[None if n.self_us == n.dur_us else n.self_us for n in events],
            **{"pass": repeat(pass_)},
        ),
    )
