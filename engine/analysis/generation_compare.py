"""Two generation runs compared on what their users feel: time to first token and time per
output token (p50, p99), each from its raw samples with the same block bootstrap as the
other metrics; either can be the regression gate (`compare --metric tpot_p99`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from engine.analysis.deltas import GENERATION_METRICS, MetricDelta, Samples, compare_metric
from engine.session.generation_rows import GenerationRun


def _samples(g: GenerationRun) -> dict[str, Samples]:
    ttft = Samples(g.starts_ns, g.ttft_ns)
    # decode steps in time order; only their order matters to the bootstrap's blocks
    tpot = Samples(np.cumsum(g.tpot_ns) - g.tpot_ns, g.tpot_ns)
    return {"ttft": ttft, "tpot": tpot}


def generation_deltas(
    baseline: GenerationRun, candidate: GenerationRun, *, seed: int = 0, resamples: int
) -> dict[str, MetricDelta]:
    sb, sc = _samples(baseline), _samples(candidate)
    out: dict[str, MetricDelta] = {}
    for name in GENERATION_METRICS:
        phase, quantile = name.split("_")
        d = compare_metric(quantile, sb[phase], sc[phase], seed=seed, resamples=resamples)
        out[name] = dataclasses.replace(d, metric=name)
    return out
