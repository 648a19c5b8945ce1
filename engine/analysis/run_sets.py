"""Several recorded runs of one setup, read together: `FILE:1,2,3` for compare, a gate's
baseline (a file's runs of one model and config) and its candidate runs.

Runs pooled on one side must be of the same setup (config, input shapes): pooling a
batch-8 run with a batch-1 run measures neither. What differs is worded once here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.analysis.deltas import GENERATION_METRICS, METRICS, CompareError, Samples
from engine.analysis.likeness import busy
from engine.analysis.run_compare import (
    RunComparison,
    compare_refs,
    compare_runs,
    run_samples,
    side_of,
)
from engine.config import RunConfig
from engine.measure.contention import combine
from engine.session.reader import SessionReader
from engine.session.refs import is_run_list, resolve_run_refs
from engine.session.rows import RunRow

TIMED_KINDS = ("bench", "profile")


@dataclass(frozen=True, slots=True)
class RunSet:
    """Runs of one file with their raw samples, in the order named."""

    path: str
    runs: tuple[RunRow, ...]
    samples: tuple[Samples, ...]

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(r.id for r in self.runs)

    @property
    def ref(self) -> str:
        """'a.opscope:1,2,3' (the way it is named on the command line)."""
        return f"{self.path}:{','.join(str(i) for i in self.ids)}"


def setup_facts(run: RunRow) -> dict[str, Any]:
    """What must match for two runs to be pooled or gated: the config and input shapes."""
    facts: dict[str, Any] = dict(run.config.to_json()) if run.config else {"config": None}
    for name, spec in sorted((run.inputs or {}).items()):
        shape = spec.get("shape") if isinstance(spec, dict) else None
        facts[f"input {name}"] = "x".join(str(d) for d in shape) if shape else None
    facts["batch"] = run.batch if run.batch is not None else facts.get("batch")
    return facts


def setup_difference(a: dict[str, Any], b: dict[str, Any]) -> str:
    """'threads 1 vs 2; input input_ids 1x128 vs 1x148' ('' when they match)."""
    keys = [k for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
    return "; ".join(f"{k} {_word(a.get(k))} vs {_word(b.get(k))}" for k in keys)


def config_facts(config: RunConfig) -> dict[str, Any]:
    """The facts of a config about to be run (its input shapes are not known yet), its
    defaults made explicit as a run records them (threads 0 is this machine's default)."""
    return dict(config.resolved().to_json())


def _word(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "on" if v else "off"
    return str(v)


def read_run_set(reader: SessionReader, runs: Sequence[RunRow]) -> RunSet:
    """The runs' samples; CompareError when one has too few or the setups differ."""
    if not runs:
        raise CompareError("no runs", reader.path)
    first = setup_facts(runs[0])
    for r in runs[1:]:
        diff = setup_difference(first, setup_facts(r))
        if diff:
            raise CompareError(
                f"runs {runs[0].id} and {r.id} cannot be pooled: they differ in {diff}",
                reader.path,
            )
    return RunSet(str(reader.path), tuple(runs), tuple(run_samples(reader, r) for r in runs))


def open_run_set(text: str) -> RunSet:
    """`FILE` (its last run), `FILE:ID` or `FILE:1,2,3`, read and closed."""
    path, ids = resolve_run_refs(text)
    with SessionReader.open(path) as reader:
        if ids is None:
            last = reader.last_run_id()
            if last is None:
                raise CompareError("the session has no runs", path)
            ids = [last]
        return read_run_set(reader, [reader.run(i) for i in ids])


def baseline_runs(
    text: str,
    model_name: str,
    config: RunConfig,
    inputs: Mapping[str, tuple[int, ...]] | None = None,
) -> RunSet:
    """A gate's baseline: `FILE:1,2,3` as named, or every finished bench/profile run of
    `model_name` in FILE with the candidate's config, and its input shapes where they are
    known before it runs (`inputs`). Every run must have that config (and those shapes)."""
    path, ids = resolve_run_refs(text)
    wanted = config_facts(config)
    for name, shape in sorted((inputs or {}).items()):
        wanted[f"input {name}"] = "x".join(str(d) for d in shape)
    with SessionReader.open(path) as reader:
        if ids is not None:
            runs = [reader.run(i) for i in ids]
        else:
            everything = reader.runs()
            of_model = [
                r
                for r in everything
                if r.model_name == model_name and r.kind in TIMED_KINDS and r.status == "ok"
            ]
            if not of_model:
                names = sorted({str(r.model_name) for r in everything if r.kind in TIMED_KINDS})
                have = f" (it has runs of {', '.join(names)})" if names else ""
                raise CompareError(f"no finished runs of {model_name}{have}", path)
            runs = [r for r in of_model if not _config_difference(wanted, r)]
            if not runs:  # name the closest run, the last of those equally close
                what = "config and inputs" if inputs else "config"
                near = min(
                    reversed(of_model), key=lambda r: _config_difference(wanted, r).count(";")
                )
                raise CompareError(
                    f"no run of {model_name} has the candidate's {what} (the closest, run "
                    f"{near.id}: {_config_difference(wanted, near)})",
                    path,
                )
        for r in runs:
            if r.kind not in TIMED_KINDS:
                raise CompareError(
                    f"run {r.id} is a {r.kind} run; the gate compares bench or profile runs",
                    path,
                )
            diff = _config_difference(wanted, r)
            if diff:
                raise CompareError(
                    f"run {r.id} has another config than the candidate's: {diff}", path
                )
        return read_run_set(reader, runs)


def _config_difference(wanted: dict[str, Any], run: RunRow) -> str:
    have = setup_facts(run)
    return setup_difference({k: have.get(k) for k in wanted}, wanted)


def compare_set_refs(
    baseline: str,
    candidate: str,
    metric: str = "p50",
    metrics: Sequence[str] = METRICS,
    *,
    seed: int = 0,
) -> RunComparison:
    """`opscope compare`: one run a side as `compare_refs` does, or several (`FILE:1,2,3`)
    pooled with the hierarchical bootstrap; the first run named stands for its side in the
    config, accuracy and per-op comparison."""
    if not (is_run_list(baseline) or is_run_list(candidate)):
        return compare_refs(baseline, candidate, metric, metrics, seed=seed)
    if metric in GENERATION_METRICS:
        raise CompareError(f"--metric {metric} compares one generation run a side")
    sides = []
    for text in (baseline, candidate):
        path, _ = resolve_run_refs(text)
        sides.append((open_run_set(text), path))
    (sb, pb), (sc, pc) = sides
    with SessionReader.open(pb) as rb, SessionReader.open(pc) as rc:
        comp = compare_runs(
            (rb, sb.runs[0]),
            (rc, sc.runs[0]),
            metric,
            metrics,
            seed=seed,
            samples=(sb.samples[0], sc.samples[0]),
            pooled=(sb.samples, sc.samples),
        )
    pooled = [
        f"the {side} pools runs {', '.join(map(str, s.ids))}"
        for side, s in (("baseline", sb), ("candidate", sc))
        if len(s.runs) > 1
    ]
    notes = [
        "; ".join(pooled)
        + " (the first run named stands for its side in the config, accuracy and op comparison)"
    ]
    loads = [combine(r.contention for r in s.runs if r.contention) for s in (sb, sc)]
    judged = [side_of(s.runs[0], load) for s, load in zip((sb, sc), loads, strict=True)]
    return replace(
        comp,
        baseline_ref=sb.ref,
        candidate_ref=sc.ref,
        notes=[*notes, *comp.notes],
        busy=busy(judged[0], judged[1]),
        baseline_busy=bool(loads[0] and loads[0].busy),
    )
