"""Two recorded runs side by side: reads samples, op statistics, configs and accuracy from
session files and hands them to the pure statistics in `engine.analysis.deltas`.

Used by `opscope compare` and by the HTML report; the result renders as JSON or text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine import backends
from engine.analysis.deltas import (
    GENERATION_METRICS,
    MAX_SAMPLES,
    METRICS,
    MIN_SAMPLES,
    REFERENCE_ACCURACY,
    RESAMPLES,
    CompareError,
    MetricDelta,
    OpDiff,
    Samples,
    accuracy_delta,
    compare_metric,
    config_diff,
    diff_ops,
)
from engine.analysis.gate_stats import METHOD, pooled_metric_delta
from engine.analysis.generation_compare import generation_deltas
from engine.analysis.likeness import Side, busy, unlike, verdict
from engine.analysis.run_summary import inputs_text
from engine.measure.contention import Contention
from engine.measure.op_families import group_by_family, is_quantized, op_family
from engine.measure.op_stats import stat_to_json
from engine.session.reader import SessionReader
from engine.session.refs import open_run
from engine.session.rows import RunRow

SERVING_KINDS = ("load", "simulate")
PER_INFERENCE = "per inference"
LATENCY_KINDS = {
    "generate": "a whole generation, end to end",
    "load": "end to end under load",
    "simulate": "end to end under load, SIMULATED",
}
# a serving run's load as `load_facts` names it, and how a change of each is worded
LOAD_LABELS = {  # key: (label, unit)
    "mode": ("served or simulated", ""),
    "traffic": ("traffic", ""),
    "closed_loop": ("closed loop", ""),
    "seed": ("traffic seed", ""),
    "duration_s": ("duration", " s"),
    "max_batch": ("max batch", ""),
    "preferred": ("preferred batch sizes", ""),
    "delay_ms": ("batch delay", " ms"),
    "queue_limit": ("queue limit", ""),
    "timeout_ms": ("timeout", " ms"),
    "instances": ("instances", ""),
    "cache_size": ("cache size", ""),
    "cache_repeat": ("cache repeat", ""),
    "warmup_s": ("warm-up", " s"),
}


@dataclass(frozen=True, slots=True)
class RunComparison:
    """Candidate against baseline: every metric's delta, op diffs, config and accuracy."""

    baseline_ref: str  # "FILE:ID"
    candidate_ref: str
    baseline: RunRow
    candidate: RunRow
    metric: str  # the metric the gate looks at
    metrics: dict[str, MetricDelta]
    ops: list[OpDiff]  # per node, matched by name
    op_types: list[OpDiff]  # per op type, or per op family (see by_family)
    profiled: tuple[bool, bool]
    config_diff: dict[str, list[Any]]
    accuracy_delta: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    seed: int = 0
    # serving runs: what changed in the load (traffic, batching, cache; both serving runs)
    # and what each side's latency is (end to end under load, or per inference)
    load_diff: dict[str, list[Any]] = field(default_factory=dict)
    latency_kind: tuple[str, str] = (PER_INFERENCE, PER_INFERENCE)
    # op types grouped by family (conv, matmul, ...) on both sides: the runs' engines or
    # precisions differ, so one side's op types are not the other's (Conv vs QLinearConv)
    by_family: bool = False
    # why the runs are not like for like (other inputs, batch or kind of latency: no
    # verdict), and each side measured on a busy machine (engine/analysis/likeness.py)
    unlike: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)
    baseline_busy: bool = False

    @property
    def gate(self) -> MetricDelta:
        return self.metrics[self.metric]

    def regression(self, threshold_pct: float) -> bool:
        """A regression the data support: like for like, and not explained by a busy
        machine (see `status`)."""
        return self.status(threshold_pct) == "regression"

    def status(self, threshold_pct: float) -> str:
        """ "regression", "ok", "unlike" or "inconclusive" (`likeness.verdict`)."""
        slower = self.gate.regression(threshold_pct)
        return verdict(slower, self.unlike, self.busy, self.baseline_busy)

    def added(self, kind: str = "node") -> list[OpDiff]:
        return [d for d in (self.ops if kind == "node" else self.op_types) if d.status == "added"]

    def removed(self, kind: str = "node") -> list[OpDiff]:
        return [d for d in (self.ops if kind == "node" else self.op_types) if d.status == "removed"]

    def to_json(self, threshold_pct: float) -> dict[str, Any]:
        """The `opscope compare --json` object."""
        g = self.gate
        return {
            "metric": self.metric,
            "unit": g.unit,
            "baseline": _run_json(self.baseline_ref, self.baseline, g.baseline),
            "candidate": _run_json(self.candidate_ref, self.candidate, g.candidate),
            "baseline_value": g.baseline,
            "candidate_value": g.candidate,
            "delta_pct": g.delta_pct,
            "ci_pct": list(g.ci_pct),
            "slowdown_pct": g.slowdown_pct,
            "slowdown_ci_pct": list(g.slowdown_ci_pct),
            "threshold_pct": threshold_pct,
            "significant": g.significant,
            "regression": self.regression(threshold_pct),
            "verdict": self.status(threshold_pct),
            "unlike": self.unlike,
            "busy": self.busy,
            "metrics": {k: m.to_json() for k, m in self.metrics.items()},
            "bootstrap": {
                "method": "circular block bootstrap of the relative difference"
                if g.runs == (1, 1)
                else METHOD,
                "runs": list(g.runs),
                "resamples": g.resamples,
                "confidence": g.confidence,
                "max_samples": MAX_SAMPLES,
                "n_used": list(g.n_bootstrap),
                "block": list(g.block),
                "seed": self.seed,
            },
            "config_diff": self.config_diff,
            "load_diff": self.load_diff,
            "load_changes": load_changes(self.load_diff),
            "latency_kind": {"baseline": self.latency_kind[0], "candidate": self.latency_kind[1]},
            "accuracy_delta": self.accuracy_delta,
            "profiled": {"baseline": self.profiled[0], "candidate": self.profiled[1]},
            "ops": [d.to_json() for d in self.ops],
            "op_types": [d.to_json() for d in self.op_types],
            "ops_added": [_brief(d) for d in self.added()],
            "ops_removed": [_brief(d) for d in self.removed()],
            "op_types_added": [d.key for d in self.added("op_type")],
            "op_types_removed": [d.key for d in self.removed("op_type")],
            "op_types_by": "family" if self.by_family else "op_type",
            "notes": self.notes,
        }


def run_samples(reader: SessionReader, run: RunRow) -> Samples:
    """A run's raw samples; CompareError when it has too few to compare."""
    starts, lats = reader.latency(run.id)
    if lats.size < MIN_SAMPLES:
        why = f" (status {run.status}: {run.error})" if run.error else f" (status {run.status})"
        raise CompareError(
            f"run {run.id} has {lats.size} latency samples{why}; comparing "
            f"needs at least {MIN_SAMPLES}",
            reader.path,
        )
    batch = run.batch or (run.config.batch if run.config else 1)
    return Samples(starts, lats, max(1, batch))


def run_accuracy(run: RunRow) -> dict[str, Any] | None:
    """The run's accuracy against FP32; an FP32 run is its own reference (cosine 1)."""
    if run.accuracy is not None:
        return run.accuracy.to_json()
    if run.config is not None and run.config.precision == "fp32":
        return dict(REFERENCE_ACCURACY)
    return None


def run_facts(run: RunRow) -> dict[str, Any]:
    """What distinguishes one run's setup from another's: config, model, provider, graph."""
    facts: dict[str, Any] = dict(run.config.to_json()) if run.config else {}
    facts.update(
        {
            "model": run.model_name,
            "model_sha256": run.model_sha256,
            "provider_used": run.provider_used,
            "nodes": (run.variant or {}).get("nodes"),
            "inputs": inputs_text(
                {k: v.get("shape") for k, v in run.inputs.items() if isinstance(v, dict)},
                most=64,
            ),
        }
    )
    return facts


def load_facts(reader: SessionReader, run: RunRow) -> dict[str, Any] | None:
    """A serving run's load: traffic, batching, cache and whether it was simulated (None
    for a run that served no requests)."""
    if run.kind not in SERVING_KINDS:
        return None
    s = reader.serving(run.id)
    if s is None:
        return None
    t, b, c = s.traffic, s.batching, s.cache
    return {
        "mode": "simulated" if s.simulated else "served",
        "traffic": t.get("spec") or t.get("kind"),
        "closed_loop": t.get("closed_loop"),
        "seed": t.get("seed"),
        "duration_s": t.get("duration_s"),
        "max_batch": b.get("max_batch"),
        "preferred": b.get("preferred"),
        "delay_ms": b.get("delay_ms"),
        "queue_limit": b.get("queue_limit"),
        "timeout_ms": b.get("timeout_ms"),
        "instances": b.get("instances"),
        "cache_size": c.get("size"),
        "cache_repeat": c.get("repeat"),
        "warmup_s": s.warmup_s,
    }


def load_changes(diff: dict[str, list[Any]]) -> list[str]:
    """['traffic: poisson:200 -> bursts:100,600,1,0.3', 'max batch 1 -> 4'] in LOAD_LABELS'
    order (traffic, then batching, then cache)."""
    out = []
    for key, (label, unit) in LOAD_LABELS.items():
        if key in diff:
            a, b = (_load_value(v) + (unit if v is not None else "") for v in diff[key])
            if key == "mode":  # 'served -> simulated'
                out.append(f"{a} -> {b}")
            else:
                out.append(f"{label}: {a} -> {b}" if key == "traffic" else f"{label} {a} -> {b}")
    return out


def _load_value(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, list):
        return "/".join(str(x) for x in v) or "none"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def latency_kind(run: RunRow) -> str:
    """What the run's latency samples measure."""
    return LATENCY_KINDS.get(run.kind, PER_INFERENCE)


def node_rows(reader: SessionReader, run: RunRow, kind: str = "node") -> list[dict[str, Any]]:
    """The op rows of the run's last profiling pass ([] when it was never profiled)."""
    if not reader.profiles(run.id):
        return []
    return [stat_to_json(s) for s in reader.ops(run.id, kind)]


def compare_runs(
    baseline: tuple[SessionReader, RunRow],
    candidate: tuple[SessionReader, RunRow],
    metric: str = "p50",
    metrics: Iterable[str] = METRICS,
    *,
    seed: int = 0,
    resamples: int = RESAMPLES,
    samples: tuple[Samples, Samples] | None = None,
    pooled: tuple[Sequence[Samples], Sequence[Samples]] | None = None,
) -> RunComparison:
    """Compare two runs (possibly of different files). `metric` is always computed;
    `metrics` adds others for display. `samples` saves reading them again (the report).
    `pooled`: every run of each side (the given runs first), compared with the hierarchical
    bootstrap of `engine.analysis.gate_stats`; the runs given stand for their side in the
    config, accuracy and op comparison."""
    if metric not in METRICS + GENERATION_METRICS:
        known = ", ".join(METRICS + GENERATION_METRICS)
        raise CompareError(f"unknown metric {metric!r} (choose from {known})")
    (rb, b), (rc, c) = baseline, candidate
    sb, sc = samples or (run_samples(rb, b), run_samples(rc, c))
    wanted = [m for m in [metric, *metrics] if m in METRICS]
    if pooled is not None:
        deltas = {m: pooled_metric_delta(m, *pooled, seed=seed, resamples=resamples)
                  for m in dict.fromkeys(wanted)}  # fmt: skip
    else:
        deltas = {m: compare_metric(m, sb, sc, seed=seed, resamples=resamples)
                  for m in dict.fromkeys(wanted)}  # fmt: skip
    # a generation's phases come from one run each; pooled runs compare their latency only
    gen_b = rb.generation(b.id) if b.kind == "generate" and pooled is None else None
    gen_c = rc.generation(c.id) if c.kind == "generate" and pooled is None else None
    if gen_b is not None and gen_c is not None:
        deltas |= generation_deltas(gen_b, gen_c, seed=seed, resamples=resamples)
    elif metric in GENERATION_METRICS:
        raise CompareError(f"--metric {metric} compares two generation runs (opscope generate)")
    ops_b, ops_c = node_rows(rb, b), node_rows(rc, c)
    types_b, types_c = node_rows(rb, b, "op_type"), node_rows(rc, c, "op_type")
    cross_engine = engine_of(b) != engine_of(c)
    by_family = cross_engine or quantized_against_float(types_b, types_c)
    load_b, load_c = load_facts(rb, b), load_facts(rc, c)
    load_diff = config_diff(load_b, load_c) if load_b and load_c else {}
    kinds = (latency_kind(b), latency_kind(c))
    if by_family:  # aten vs ONNX ops, or Conv vs QLinearConv: compare families
        types_b, types_c = group_by_family(types_b), group_by_family(types_c)
    sides = side_of(b), side_of(c)
    return RunComparison(
        baseline_ref=f"{rb.path}:{b.id}",
        candidate_ref=f"{rc.path}:{c.id}",
        baseline=b,
        candidate=c,
        metric=metric,
        metrics=deltas,
        ops=diff_ops(ops_b, ops_c, "name") if ops_b and ops_c and not cross_engine else [],
        op_types=diff_ops(types_b, types_c, "name" if by_family else "op_type")
        if types_b and types_c
        else [],
        profiled=(bool(ops_b), bool(ops_c)),
        config_diff=config_diff(run_facts(b), run_facts(c)),
        accuracy_delta=accuracy_delta(run_accuracy(b), run_accuracy(c)),
        notes=_notes(b, c, sb, sc, bool(ops_b), bool(ops_c))
        + _load_notes(kinds, load_diff)
        + (_family_note() if by_family and not cross_engine else []),
        seed=seed,
        load_diff=load_diff,
        latency_kind=kinds,
        by_family=by_family,
        unlike=unlike(*sides, same_model=False),
        busy=busy(*sides),
        baseline_busy=bool(b.contention and b.contention.busy),
    )


def side_of(run: RunRow, contention: Contention | None = None) -> Side:
    """The run's facts for `likeness` (`contention`: several pooled runs' combined)."""
    return Side(
        model=run.model_sha256 or run.model_name,
        inputs=run.inputs or None,
        batch=run.batch,
        engine=engine_of(run),
        contention=contention or run.contention,
        kind=latency_kind(run),
    )


def quantized_against_float(
    types_b: Sequence[Mapping[str, Any]], types_c: Sequence[Mapping[str, Any]]
) -> bool:
    """One run has a quantized op type (QLinearConv, DynamicQuantizeMatMul, MatMulNBits,
    ...) whose family the other run covers with other op types only (Conv, MatMul): op types
    would all read as added or removed, so they are compared by family."""
    b = {str(r["op_type"]) for r in types_b}
    c = {str(r["op_type"]) for r in types_c}
    for mine, theirs in ((b - c, c), (c - b, b)):
        families = {op_family(t) for t in theirs}
        if any(is_quantized(t) and op_family(t) in families for t in mine):
            return True
    return False


def _family_note() -> list[str]:
    return [
        "quantized against float: op types are compared by family (conv: Conv -> "
        "QLinearConv, matmul: MatMul -> DynamicQuantizeMatMul, ...); node names change "
        "when ONNX Runtime rewrites the quantized graph"
    ]


def engine_of(run: RunRow) -> str:
    return run.config.engine if run.config else backends.DEFAULT


def compare_refs(
    baseline: str,
    candidate: str,
    metric: str = "p50",
    metrics: Iterable[str] = METRICS,
    *,
    seed: int = 0,
) -> RunComparison:
    """`FILE` (its last run) or `FILE:ID` for each side; the files may be the same."""
    rb, b = open_run(baseline)
    try:
        rc, c = open_run(candidate)
        try:
            return compare_runs((rb, b), (rc, c), metric, metrics, seed=seed)
        finally:
            rc.close()
    finally:
        rb.close()


def _notes(b: RunRow, c: RunRow, sb: Samples, sc: Samples, prof_b: bool, prof_c: bool) -> list[str]:
    notes: list[str] = []
    for side, run in (("baseline", b), ("candidate", c)):
        if run.status != "ok":
            notes.append(
                f"the {side} run ended with status {run.status}"
                + (f": {run.error}" if run.error else "")
            )
        if run.stable is False:
            notes.append(f"the {side} run was flagged unstable (its windows differ by >10%)")
    if b.model_sha256 != c.model_sha256:
        notes.append("the runs are of different models")
    if engine_of(b) != engine_of(c):
        notes.append(
            f"different engines ({engine_of(b)} vs {engine_of(c)}): op types are "
            "compared by family (matmul, conv, attention, normalization, ...) and "
            "nodes not at all, since each engine names its own"
        )
    if sb.batch != sc.batch:
        notes.append(
            f"batch sizes differ ({sb.batch} vs {sc.batch}): latency is per "
            "inference of a whole batch; throughput is in samples/s"
        )
    if not (prof_b and prof_c):
        which = (
            "neither run has"
            if not (prof_b or prof_c)
            else f"the {'baseline' if not prof_b else 'candidate'} run has no"
        )
        notes.append(
            f"no per-op comparison: {which} profile (record one with "
            "`opscope profile ... --session`)"
        )
    return notes


def _load_notes(kinds: tuple[str, str], load_diff: dict[str, list[Any]]) -> list[str]:
    """Say when the two latencies are not like for like: a serving run against a run that
    timed single inferences, a simulated run against a served one, or a changed load."""
    notes = []
    serving = [k != PER_INFERENCE for k in kinds]
    if serving[0] != serving[1]:
        notes.append(
            f"the baseline's latency is {kinds[0]} and the candidate's is {kinds[1]} "
            "(end to end includes queueing and batching): the delta compares different things"
        )
    elif all(serving) and load_diff:
        if "mode" in load_diff:
            notes.append(
                f"one run was served and the other simulated ({load_diff['mode'][0]} -> "
                f"{load_diff['mode'][1]}): a prediction against a measurement"
            )
        changed = load_changes({k: v for k, v in load_diff.items() if k != "mode"})
        if changed:
            notes.append(
                "the load changed (" + "; ".join(changed) + "): the latency delta reflects "
                "the traffic, batching and cache as well as the model and its config"
            )
    return notes


def _run_json(ref: str, run: RunRow, value: float) -> dict[str, Any]:
    return {
        "ref": ref,
        "run_id": run.id,
        "kind": run.kind,
        "model": run.model_name,
        "model_sha256": run.model_sha256,
        "config": run.config.to_json() if run.config else None,
        "provider_used": run.provider_used,
        "status": run.status,
        "samples": run.samples,
        "value": value,
        "contention": run.contention.to_json() if run.contention else None,
    }


def _brief(d: OpDiff) -> dict[str, Any]:
    return {
        "name": d.key,
        "op_type": d.op_type,
        "time_ms": d.cand_time_ms if d.status == "added" else d.base_time_ms,
    }


def top_changes(diffs: Sequence[OpDiff], n: int) -> list[OpDiff]:
    """The `n` largest absolute time changes (the list is already in that order)."""
    return list(diffs[:n])
