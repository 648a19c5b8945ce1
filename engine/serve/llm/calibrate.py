"""Calibrating the LLM serving simulator on the real engine, measuring only the points the
study's simulation reads (cal_plan.plan_points: prefill at four lengths up to its
longest prompt, decode steps at its batch sizes and two longer contexts, a chunked
engine's passes, the extras after a prefill and a pause, the loop's own work and an idle
engine's start), each in rounds until its repeats agree (or its most), the rounds
interleaved across the points so a slow minute on a shared machine hits them all alike.

Every round is kept in OpScope's cache, keyed by the model's content, its config and
provider, and the machine (CPU model, libraries): a later study reuses the points it
needs ("LLM calibration from <date>, reused"), measures only those it lacks, and a
cancelled calibration keeps the rounds it finished for the next to continue from. Each
yield is a progress point with the seconds left, estimated from the rounds' own times."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.genai.model import OpenedLLM, open_llm, read_config
from engine.config import RunConfig
from engine.events import Event, Notice, Progress
from engine.files import loads_json
from engine.hostinfo import machine_key
from engine.measure.contention import ContentionProbe
from engine.model.info import files_sha256
from engine.serve.llm.cal_fit import cost_from_rounds, honesty_line
from engine.serve.llm.cal_plan import (
    REF_CONTEXT,
    Estimate,
    Needs,
    Point,
    is_done,
    plan_points,
)
from engine.serve.llm.cost import LLMCost
from engine.serve.llm.meter import Meter, timed_steps
from engine.serve.sim.calibration_file import calibration_path, drift_text, write_calibration

VERSION = 8  # 2: prefill passes are per prompt; 3: decode steps after a prefill; 4: after idle
# 5: the serving loop's own work per iteration; 6: passes that continue a prompt; 7: those
# passes timed in the loop's order; 8: points kept by round, only those a study needs
DRIFT_STEPS = 8  # decode steps that check a reused calibration against the engine now
WRITE_EVERY_S = 2.0  # the rounds measured are written at most this often (and at the end)


def llm_calibration_context(model_path: str, config: RunConfig, provider: str) -> dict[str, Any]:
    """What a calibration depends on (its cache key): the model's content, its config and
    provider (threads among them), the machine and its libraries."""
    llm = read_config(model_path)
    return {
        "version": VERSION,
        "kind": "llm",
        "model_sha256": files_sha256([llm.model_file, llm.folder / "genai_config.json"]),
        "config": config.to_json(),
        "provider": provider,
        **machine_key(),
    }


def load_or_calibrate_llm(
    model_path: str,
    config: RunConfig,
    remeasure: bool = False,
    needs: Needs | None = None,
    remedy: str = "--recalibrate",
    fixed_rounds: int = 0,
) -> Generator[Event, None, LLMCost]:
    """The calibration `needs` asks for (None: prompts up to 1,024 tokens, batches up to
    8, chunks of 256): reused from the cache where every point is measured already, else
    the missing points measured now (all of them: `remeasure`). `remedy`: how the user
    measures again (the flag, or the window's button)."""
    needs = needs or Needs(1024, 8, 256)
    llm = open_llm(model_path, config)
    context = llm_calibration_context(model_path, config, llm.provider_used)
    path = calibration_path(context, "llm-")
    points = plan_points(needs, llm.context_length, fixed_rounds)
    store: dict[str, dict[str, list[Any]]] = {}
    if not remeasure:
        store, notice = read_rounds(path, context)
        if notice is not None:
            yield notice
    rounds = {k: v["rounds"] for k, v in store.items()}
    todo = [p for p in points if not is_done(p, rounds.get(p.key, []))]
    kept = [p for p in points if p.key in store]
    if not todo:
        cost = cost_from_rounds(points, rounds, llm.kv_bytes_per_token, context)
        yield Notice("info", f"LLM calibration from {_when(store, points)}, reused "
                             f"({len(points)} points; {honesty_line(cost)})")  # fmt: skip
        drift = drift_text("decode steps", decode_speed_now(llm, cost), path)
        if drift is not None:
            yield Notice("warning", f"{drift}: predictions follow the calibration; measure "
                                    f"again with {remedy}")  # fmt: skip
        return cost
    if kept:
        n_rounds = sum(len(rounds[p.key]) for p in kept)
        yield Notice("info", f"LLM calibration from {_when(store, kept)}, reused for "
                             f"{len(points) - len(todo)} of {len(points)} points ({n_rounds} "
                             f"rounds kept); measuring {len(todo)}")  # fmt: skip
    probe = ContentionProbe()
    start = probe.read()
    t0 = time.perf_counter()
    yield from measure_points(llm, points, store, path, context)
    took = time.perf_counter() - t0
    cost = cost_from_rounds(points, {k: v["rounds"] for k, v in store.items()},
                            llm.kv_bytes_per_token, context)  # fmt: skip
    yield Notice("info", f"LLM calibration measured in {took:.0f} s ({len(todo)} of "
                         f"{len(points)} points; {honesty_line(cost)}); the machine was "
                         f"{probe.since(start).line()}")  # fmt: skip
    return cost


def _when(store: dict[str, dict[str, list[Any]]], points: list[Point]) -> str:
    """When the points were last measured, local time to the minute."""
    at = max((t for p in points for t in store.get(p.key, {}).get("at", [])), default=0.0)
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at))


def read_rounds(
    path: Path, context: dict[str, Any]
) -> tuple[dict[str, dict[str, list[Any]]], Notice | None]:
    """The rounds cached for `context` by point ({key: {rounds, s, at}}), and why none
    are when a file does not parse (damaged, foreign): never fatal, measured again."""
    if not path.is_file():
        return {}, None
    try:
        data = loads_json(path.read_text())
        if data.get("version") != VERSION or data.get("context") != context:
            raise ValueError("made for another model, config or machine")
        store = data["points"]
        for key, entry in store.items():
            n = len(entry["rounds"])
            if not isinstance(key, str) or len(entry["s"]) != n or len(entry["at"]) != n:
                raise ValueError(f"point {key!r}: one time and date per round")
            for rnd in entry["rounds"]:
                ms = rnd["ms"]
                rows = [*ms.values(), rnd["base"]] if isinstance(ms, dict) else [ms]
                if not all(0 <= float(x) < 1e6 for row in rows for x in row):
                    raise ValueError(f"point {key!r}: a time out of range")
    except Exception as exc:  # damaged, foreign or older: measure again, say why
        return {}, Notice("warning", f"cached LLM calibration unreadable ({exc}); measuring again")
    return store, None


def _write(path: Path, context: dict[str, Any], store: dict[str, Any]) -> None:
    write_calibration(path, {"version": VERSION, "context": context, "points": store})


def measure_points(
    llm: OpenedLLM,
    points: list[Point],
    store: dict[str, dict[str, list[Any]]],
    path: Path,
    context: dict[str, Any],
    clock: Callable[[], float] = time.perf_counter,
) -> Generator[Event, None, None]:
    """Rounds of every point not done, interleaved, until all are; each round kept in
    `store` and written to `path` as it goes (a cancel keeps them)."""
    meter = Meter(llm)
    entries = {p.key: store.setdefault(p.key, {"rounds": [], "s": [], "at": []}) for p in points}
    rounds = {k: e["rounds"] for k, e in entries.items()}
    estimate = Estimate(points, {k: e["s"] for k, e in entries.items()})
    t0 = last_write = clock()
    try:
        while todo := [p for p in points if not is_done(p, rounds[p.key])]:
            for p in todo:
                left = estimate.left_s(rounds)
                yield calibration_progress(p, len(rounds[p.key]), clock() - t0, left)
                rnd, secs = meter.round(p)
                entry = entries[p.key]
                entry["rounds"].append(rnd)
                entry["s"].append(secs)
                entry["at"].append(time.time())
                if clock() - last_write >= WRITE_EVERY_S:
                    _write(path, context, store)
                    last_write = clock()
    except KeyboardInterrupt as exc:
        done = sum(len(r) for r in rounds.values())
        exc.add_note(f"calibration stopped: {done} rounds of {len(points)} points kept; the "
                     "next calibration continues from them")  # fmt: skip
        raise
    finally:
        store_now = {k: v for k, v in store.items() if v["rounds"]}
        store.clear()
        store.update(store_now)
        _write(path, context, store)


def calibration_progress(
    point: Point, have: int, elapsed_s: float, left_s: float | None
) -> Progress:
    """Progress in whole seconds (done: elapsed, total: elapsed + the estimate left), its
    line naming the point and the time left."""
    left = "estimating the time left" if left_s is None else f"about {_secs(left_s)} left"
    total = None if left_s is None else float(round(elapsed_s + left_s))
    return Progress("calibration", float(round(elapsed_s)), total,
                    f"{point.key}, round {have + 1}; {left}")  # fmt: skip


def _secs(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


def decode_speed_now(llm: OpenedLLM, cached: LLMCost) -> float:
    """Decode steps of one sequence now against the cached calibration's (DRIFT_STEPS steps
    from REF_CONTEXT tokens; 1.2: 20% slower now)."""
    meter = Meter(llm)
    decoder = llm.decoder(1, REF_CONTEXT + DRIFT_STEPS + 2)
    token = decoder.prefill(meter.ids(1, REF_CONTEXT)).argmax(axis=-1)
    token = decoder.step(token).argmax(axis=-1)
    steps, _ = timed_steps(decoder, token, DRIFT_STEPS)
    ctx = REF_CONTEXT + 1 + DRIFT_STEPS / 2
    return float(np.median(steps)) / cached.decode_step_ms(1, int(ctx))
