"""Calibrating the simulator on the real engine: batch service times for each size,
measured once per model, config, machine and instance count, and cached on disk, with how
busy the machine was meanwhile (a calibration taken beside other work predicts that
machine, not a quiet one). It says how far it is and about how long is left, and stops
when asked (nothing half-measured is cached)."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from engine.events import Event, Notice, Progress
from engine.hostinfo import machine_key
from engine.measure.contention import Contention, Window
from engine.serve.setup import Serving
from engine.serve.sim.calibration_file import (
    calibration_path,
    drift_notice,
    read_calibration,
    write_calibration,
)
from engine.serve.sim.idle_cost import HALF_S, SLOW_S, LoopRatios, measure_idle_slowdown
from engine.serve.sim.service import (
    ServiceModel,
    calibrate,
    calibration_sizes,
    time_batches,
)
from engine.serve.sim.slow_stretches import SlowStretches

VERSION = 16  # 6: stacking timed; 7: arrival costs; 8: send lateness; 9: kept buffers;
# 10: no arrival costs (the loop's generator sleeps while every instance is busy);
# 11: idle slowdowns from a short run of the real loop; 12: slow stretches;
# 13: slow stretches from back-to-back batches only; 14: sizes timed shuffled together;
# 15: send and wake-up lateness by the server's state, turnarounds, from the loop's runs;
# 16: the wake-up lateness one pool for every state


CHECK_S = 0.3  # a cached calibration is checked against the engine's speed now for this long


def speed_now(
    run: Callable[[Any], object], make: Callable[[int], Any], cached: ServiceModel
) -> float:
    """The engine's batch time now against a cached calibration's: batches of the largest
    calibrated size for about CHECK_S seconds (at least 5, 2 warm-up runs discarded), their
    median over the calibration's (1.2: 20% slower now)."""
    size = cached.sizes[-1]
    times = time_batches(run, make, size, runs=5, min_s=CHECK_S, warmup=2, most=200)
    return float(np.median(times)) / cached.median(size)


def calibration_context(
    model_sha256: str, config: dict[str, Any], provider: str, max_batch: int, instances: int
) -> dict[str, Any]:
    """What a calibration depends on (its cache key)."""

    return {
        "version": VERSION,
        "model_sha256": model_sha256,
        "config": config,
        "provider": provider,
        "sizes": calibration_sizes(max_batch),
        "instances": instances,
        **machine_key("torch"),
    }


def time_left(elapsed_s: float, done: float, total: float, after_s: float = 0.0) -> float | None:
    """Seconds left of a phase `done` of `total` (expected seconds) after `elapsed_s` of wall
    time, at the pace so far, and `after_s` for what follows; None before any is done."""
    if done <= 0 or total <= 0:
        return None
    return max(total - done, 0.0) * elapsed_s / done + after_s


def _left_text(left: float | None) -> str:
    if left is None:
        return "estimating the time left"
    return f"about {left:.0f} s left" if left >= 1.5 else "about a second left"


def _never() -> bool:
    return False


IDLE_GUESS_S = HALF_S + SLOW_S + 1.0  # the short real runs, before the capacity is known


def load_or_calibrate(
    serving: Serving,
    context: dict[str, Any],
    remeasure: bool = False,
    should_stop: Callable[[], bool] = _never,
) -> Iterator[Event | ServiceModel]:
    """The cached calibration for `context`, or a new one (progress events with the time
    left, then the ServiceModel with the machine's contention while it was measured). With
    several instances, each size is timed with that many batches running at once, as they
    do when the server is busy. `should_stop()` true: it ends without a ServiceModel, and
    nothing is cached."""
    path = calibration_path(context)
    instances = int(context["instances"])
    rng = np.random.default_rng(0)

    def make(n: int) -> list[list[int]]:
        """One batch of request keys per instance."""
        keys = rng.integers(0, 1 << 30, n * instances).tolist()
        return [keys[i * n : (i + 1) * n] for i in range(instances)]

    buffers: dict[int, dict[tuple[str, int], np.ndarray]] = {}

    def one(keys: list[int]) -> object:
        """Stacked by the instance into its own arrays, as the serving loop does."""
        mine = buffers.setdefault(threading.get_ident(), {})
        return serving.run_batch(serving.stack(keys, mine))

    def run(batches: list[list[int]]) -> object:
        """One batch per instance, at once (as a busy server runs them)."""
        threads = [threading.Thread(target=one, args=(b,)) for b in batches[1:]]
        for th in threads:
            th.start()
        out = one(batches[0])
        for th in threads:
            th.join()
        return out

    if not remeasure:
        cached, notice = read_calibration(path, ServiceModel.from_json, "calibration")
        if notice is not None:
            yield notice
        if cached is not None:
            ratio = speed_now(run, make, cached)
            drift = drift_notice(
                f"batches of {cached.sizes[-1]}", ratio, path, "Recalibrate What-if"
            )
            if drift is not None:
                yield drift
            yield cached
            return

    window = Window()  # how busy the machine was while it was measured
    started = time.perf_counter()
    model: ServiceModel | None = None
    timing_t0: float | None = None
    for item in calibrate(run, make, list(context["sizes"]), context, should_stop=should_stop):
        if isinstance(item, ServiceModel):
            model = item
        elif isinstance(item, Progress) and item.total is not None:
            timing_t0 = timing_t0 or time.perf_counter()
            left = time_left(time.perf_counter() - timing_t0, item.done, item.total, IDLE_GUESS_S)
            yield _progress(started, left, item.message)
        elif isinstance(item, Progress):
            yield _progress(started, None, item.message)
        else:
            yield item
    if model is None:  # stopped
        return
    idle_t0 = time.perf_counter()
    for step in measure_idle_slowdown(serving, model, should_stop):
        if isinstance(step, LoopRatios):
            # slow stretches from the batches timed back to back, each size's in order. Not
            # the short real runs' batches: those that start busy were often queued by a
            # slow one, and those after idling run slow in runs of 5-7 (the idle slowdown,
            # drawn apart; bench/results/serve_slow_batches.md, 30% load). Fitted, they
            # made a busy server's batches slow in stretches of 5-8 (bench/results/
            # serve_twin.md, runs 4 and 7: p50 over-predicted 4-11x at 85% load).
            ordered = [model.samples[n] / model.median(n) for n in model.sizes]
            stretches = SlowStretches.fit(ordered)
            model = dataclasses.replace(
                model,
                idle_slowdown=step.idle,
                stretches=stretches,
                send_late=step.send_late,
                wake_late=step.wake_late,
                turnaround=step.turnaround,
            )
        elif isinstance(step, Progress) and step.total:
            left = max(step.total - step.done, 0.0)
            yield _progress(started, left, step.message)
        else:
            yield step
    if should_stop():
        return
    contention = window.done()
    model = dataclasses.replace(model, contention=contention)
    if contention is not None and contention.busy:
        yield Notice("warning", busy_calibration(contention))
    write_calibration(path, model.to_json())
    took = time.perf_counter() - started
    idle = time.perf_counter() - idle_t0
    yield Progress("calibrate", took, took, f"calibrated in {took:.0f} s ({idle:.0f} s of it "
                   "serving on the real loop)")  # fmt: skip
    yield model


def _progress(started: float, left: float | None, message: str) -> Progress:
    """Progress in seconds: so far, and so far plus the estimate left (None: not yet known)."""
    so_far = round(time.perf_counter() - started, 1)
    return Progress(
        "calibrate", so_far, None if left is None else round(so_far + left, 1),
        f"{message}; {_left_text(left)}",
    )  # fmt: skip


def busy_calibration(contention: Contention) -> str:
    """The warning for a calibration measured on a busy machine, with its numbers."""
    why = "; ".join(contention.reasons())
    return (
        f"calibrated busy: {why} (over {contention.window_s:.0f} s) - predictions may be "
        "off; recalibrate when the machine is quieter"
    )
