"""An LLM calibration's rounds turned into the simulator's cost model (cost.LLMCost),
with how far to trust it: each point's repeat spread (interquartile range over median of
its rounds) and each fit's residual (root mean square, relative to the times fitted).
Pure: the same rounds give the same model, measured now or read back from the cache."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from engine.measure.fits import fit_continuing, fit_prefill, fit_slope
from engine.serve.llm.cal_plan import REF_CONTEXT, Point, round_value, spread
from engine.serve.llm.cost import LLMCost

Rounds = dict[str, list[dict[str, Any]]]


def _rel_rms(fitted: np.ndarray, y: np.ndarray) -> float:
    """The fit's residual: root mean square of (fit - measured) / measured."""
    if y.size == 0:
        return 0.0
    return float(np.sqrt(np.mean(((fitted - y) / np.maximum(y, 1e-9)) ** 2)))


def _median(rows: list[float]) -> float:
    return float(np.median(rows)) if rows else 0.0


def cost_from_rounds(
    points: list[Point], rounds: Rounds, kv_bytes_per_token: int, context: dict[str, Any]
) -> LLMCost:
    """The cost model from the points' rounds (every point with at least one round)."""
    have = [p for p in points if rounds.get(p.key)]
    by_kind: dict[str, list[Point]] = defaultdict(list)
    for p in have:
        by_kind[p.kind].append(p)
    residual: dict[str, float] = {}

    pre = {p.args[0]: _median([round_value(p.kind, r) for r in rounds[p.key]])
           for p in by_kind["prefill"]}  # fmt: skip
    lens = np.asarray(sorted(pre), np.float64)
    ys = np.asarray([pre[int(n)] for n in lens])
    a, b, c = fit_prefill(lens, ys) if lens.size else (0.0, 0.0, 0.0)
    residual["prefill"] = _rel_rms(a + b * lens + c * lens**2, ys)

    xs, ys_s = [], []  # one sequence's decode steps: (mean context, median ms) per round
    for p in by_kind["decode"]:
        if p.args[0] == 1:
            for r in rounds[p.key]:
                xs.append(r["ctx"] + (len(r["ms"]) - 1) / 2)
                ys_s.append(round_value(p.kind, r))
    slope, base = fit_slope(np.asarray(xs, np.float64), np.asarray(ys_s, np.float64))
    residual["decode_slope"] = _rel_rms(base + slope * np.asarray(xs), np.asarray(ys_s))
    decode: dict[int, float] = {}
    for p in by_kind["decode"]:
        if p.args[2] == 0:  # a batch size at the reference context
            bt = p.args[0]
            decode[bt] = _median([
                round_value(p.kind, r) - slope * bt * (r["ctx"] + (len(r["ms"]) - 1) / 2
                                                      - REF_CONTEXT)
                for r in rounds[p.key]
            ])  # fmt: skip

    continuing, cont_ms = None, {}
    for p in by_kind["chunks"]:
        cases: dict[tuple[int, int], list[float]] = defaultdict(list)
        for r in rounds[p.key]:
            for k, d, ms in zip(r["k"], r["d"], r["ms"], strict=True):
                cases[(int(k), int(d))].append(float(ms))
        cont_ms = {kd: _median(v) for kd, v in sorted(cases.items())}
        ks, ds = (np.asarray(x, np.float64) for x in zip(*cont_ms, strict=True))
        y = np.asarray(list(cont_ms.values()))
        continuing = fit_continuing(ks, ds, y)
        ca, cb, cc, cd = continuing
        residual["continuing"] = _rel_rms(ca + cb * ks + cc * ks * (ds + ks) + cd * ds, y)

    tight = _median([x for p in by_kind["after"] + by_kind["pause"]
                     for r in rounds[p.key] for x in r["base"]])  # fmt: skip
    prompt_base = _median([x for p in by_kind["prompt_pause"] for r in rounds[p.key]
                           for x in r["base"]])  # fmt: skip

    def extras(p: Point | None, key: int, base: float) -> tuple[float, ...]:
        """The extra ms of each step (or pass) after `key` (a prefill's length, a pause)."""
        if p is None:
            return ()
        cols = zip(*[r["ms"][str(key)] for r in rounds[p.key]], strict=True)
        return _settling([float(np.median(col)) - base for col in cols])

    after, pause, prompt = (
        next(iter(by_kind[k]), None) for k in ("after", "pause", "prompt_pause")
    )
    lengths = after.args if after is not None else ()
    pauses = pause.args if pause is not None and prompt is not None else ()
    own = _median([x for p in by_kind["own"] for r in rounds[p.key] for x in r["ms"]])
    idle_start = [x for p in by_kind["idle"] for r in rounds[p.key] for x in r["ms"]]
    return LLMCost(
        prefill_a_ms=a,
        prefill_b_ms=b,
        prefill_c_ms=c,
        decode_ms=decode,
        decode_ref_context=REF_CONTEXT,
        decode_slope_ms=slope,
        kv_bytes_per_token=kv_bytes_per_token,
        prefill_pass_per_prompt=True,  # the serving loop prefills each prompt on its slot
        iteration_ms=max(0.0, own),
        idle_start_ms=max(0.0, _median(idle_start)),
        continuing=continuing,
        after_prefill_lengths=tuple(lengths),
        after_prefill_ms=tuple(extras(after, n, tight) for n in lengths),
        after_idle_pauses_ms=tuple(float(ms) for ms in pauses),
        after_idle_ms=_growing(tuple(extras(pause, ms, tight) for ms in pauses)),
        after_idle_prompt_ms=_growing(tuple(extras(prompt, ms, prompt_base) for ms in pauses)),
        context=context,
        points={
            "prefill_ms": {str(n): v for n, v in sorted(pre.items())},
            "continuing_ms": {f"{k}@{d}": v for (k, d), v in cont_ms.items()},
            "decode_ms": {f"{bt}x{REF_CONTEXT}": v for bt, v in sorted(decode.items())},
            "after_prefill_tight_ms": tight,
            "iteration_own_ms": own,
            "idle_start_ms": [round(x, 4) for x in idle_start],
            "rounds": {p.key: len(rounds[p.key]) for p in have},
            "spread": {
                p.key: round(spread([round_value(p.kind, r) for r in rounds[p.key]]), 4)
                for p in have
            },
            "fit_residual": {k: round(v, 4) for k, v in residual.items()},
            "steps_per_round": max(
                (len(r["ms"]) for p in by_kind["decode"] for r in rounds[p.key]), default=0
            ),
        },
    )


def honesty_line(cost: LLMCost) -> str:
    """How far the calibration goes: the widest repeat spread (which point) and each fit's
    residual, in one line."""
    sp = cost.points.get("spread") or {}
    fits = cost.points.get("fit_residual") or {}
    worst = max(sp.items(), key=lambda kv: kv[1], default=None)
    parts = []
    if worst is not None:
        parts.append(f"repeat spread up to {worst[1]:.0%} ({worst[0]})")
    parts += [f"{k.replace('_', ' ')} fit {v:.1%} off" for k, v in fits.items()
              if math.isfinite(v)]  # fmt: skip
    return "; ".join(parts)


def _growing(rows: tuple[tuple[float, ...], ...]) -> tuple[tuple[float, ...], ...]:
    """Extras after pauses made what they physically are: never smaller after a longer
    pause (each row at least the one before it, step by step)."""
    out: list[tuple[float, ...]] = []
    for row in rows:
        out.append(tuple(max(x, y) for x, y in zip(row, out[-1], strict=True)) if out else row)
    return tuple(out)


def _settling(extra: list[float]) -> tuple[float, ...]:
    """Extra ms per step after a prefill, made what it physically is: never negative and
    never growing with the steps since (the caches only refill), so that one slow step in
    a noisy minute does not read as a later penalty."""
    out, cap = [], float("inf")
    for x in extra:
        cap = min(cap, max(0.0, x))
        out.append(cap)
    return tuple(out)
