"""Naming and pairing recorded runs where a person picks them: every run picker and run
list (the window's Compare tab and Export Trace, `opscope compare`) names a run by its id,
where it came from (live, load, a tune's trial, a sweep's point, a bench), model, inputs and
config, so that an afternoon's twenty runs of one config read apart;
and the pair Compare opens on is the two latest like-for-like runs (engine/analysis/
likeness.py), or none, with why."""

from __future__ import annotations

from collections.abc import Sequence

from engine.analysis.likeness import unlike
from engine.analysis.run_compare import side_of
from engine.analysis.run_summary import summarize
from engine.session.rows import RunRow


def run_label(run: RunRow) -> str:
    """'run 22 · tune 2, trial 7 · model.onnx · input_ids 1x128 · FP32 fusion=all batch=1
    threads=2' (the provider too when it is not the CPU)."""
    s = summarize(run)
    parts = [f"run {s.id}", s.origin, s.model, s.inputs, s.config]
    if s.provider not in ("CPU", "-", ""):
        parts.append(s.provider)
    return " · ".join(parts)


def default_pair(runs: Sequence[RunRow]) -> tuple[tuple[int, int] | None, str]:
    """The pair to compare first: the newest run that has a like-for-like partner (the
    same model, inputs, batch, engine and kind of latency) against the latest such partner
    before it, as (baseline id, candidate id); or None and why there is none."""
    timed = [r for r in runs if r.samples]
    for i in range(len(timed) - 1, 0, -1):
        cand = timed[i]
        for base in reversed(timed[:i]):
            if not unlike(side_of(base), side_of(cand)):
                return (base.id, cand.id), ""
    if len(timed) < 2:
        return None, f"{len(timed)} run(s) with samples: nothing to compare yet"
    return None, (
        f"no two of the {len(timed)} runs are like for like (the same model, inputs, batch "
        "and engine): pick a pair to see their differences, with no verdict"
    )
