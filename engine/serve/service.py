"""The simulator's service model: how long a batch of each size takes, drawn from times
measured on the real engine (a calibration pass), with sizes between the measured ones
interpolated. Drawing from the measured samples, not their mean, keeps their spread, which
is what makes a p99 come out right.

An engine that has been idle is slower: its thread pool has gone to sleep and its caches
have cooled (on a 2-vCPU VM, the demo CNN took 0.66 ms back to back and 1.05 ms after a
2 ms pause). So the calibration also times single requests after pauses of several
lengths, and a batch that starts after the server was idle for a while pays the penalty
measured for that pause (as a ratio: after a pause, a batch of 4 was as much slower as a
request of one)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import OpScopeError
from engine.events import Event, Progress


@dataclass(frozen=True)
class ServiceModel:
    """Measured service times (seconds) per batch size, and what they were measured on."""

    samples: dict[int, np.ndarray]  # back to back
    context: dict[str, Any]
    idle_penalty: dict[float, np.ndarray] = dataclasses.field(default_factory=dict)
    # pause before a batch (s) -> how much slower a request ran after such a pause (ratios
    # to the back-to-back median: 1.5 = 50% slower)

    @property
    def sizes(self) -> list[int]:
        return sorted(self.samples)

    def median(self, n: int) -> float:
        """Median service time of a batch of `n`, interpolated linearly between measured
        sizes and extrapolated from the last two beyond them."""
        sizes = self.sizes
        meds = [float(np.median(self.samples[s])) for s in sizes]
        if n in self.samples:
            return meds[sizes.index(n)]
        if len(sizes) == 1:
            return meds[0] * n / sizes[0]
        if n > sizes[-1]:
            slope = (meds[-1] - meds[-2]) / (sizes[-1] - sizes[-2])
            return meds[-1] + slope * (n - sizes[-1])
        return float(np.interp(n, sizes, meds))

    def table(self, max_batch: int) -> list[list[float]]:
        """For each size 0..max_batch, the service times to draw from: the measured samples
        of that size, or of the nearest measured size below rescaled to the interpolated
        median (every sample, so the draws keep the measured distribution exactly)."""
        out: list[list[float]] = [[0.0]]
        sizes = self.sizes
        for n in range(1, max_batch + 1):
            base = max((s for s in sizes if s <= n), default=sizes[0])
            src = self.samples[base]
            scale = self.median(n) / float(np.median(src))
            out.append((src * scale).tolist())
        return out

    def penalty_table(self) -> tuple[list[float], list[list[float]]]:
        """The pauses measured (ascending) and, for each, its extra times to draw from."""
        gaps = sorted(self.idle_penalty)
        return gaps, [self.idle_penalty[g].tolist() for g in gaps]

    def capacity(self, max_batch: int, instances: int = 1) -> float:
        """Requests per second at full batches: an upper bound on sustainable load."""
        return instances * max_batch / self.median(max_batch)

    def to_json(self) -> dict[str, Any]:
        return {
            "context": self.context,
            "sizes": self.sizes,
            "median_ms": {str(s): self.median(s) * 1e3 for s in self.sizes},
            "samples_ms": {str(s): (self.samples[s] * 1e3).round(6).tolist() for s in self.sizes},
            "idle_slowdown": {
                f"{g * 1e3:g}": v.round(6).tolist() for g, v in sorted(self.idle_penalty.items())
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServiceModel:
        """From untrusted JSON (a cache file, a session): every value checked."""
        try:
            samples = {
                int(k): np.asarray([float(x) for x in v], dtype=np.float64) / 1e3
                for k, v in data["samples_ms"].items()
            }
            context = dict(data.get("context") or {})
            idle = {
                float(k) / 1e3: np.asarray([float(x) for x in v], dtype=np.float64)
                for k, v in (data.get("idle_slowdown") or {}).items()
            }
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise OpScopeError(f"calibration data is malformed ({exc!r})") from exc
        if not samples or any(
            s < 1 or v.size == 0 or not np.all(np.isfinite(v)) or np.any(v <= 0)
            for s, v in samples.items()
        ):
            raise OpScopeError("calibration data is malformed (empty or non-positive times)")
        if any(g <= 0 or v.size == 0 or not np.all(v > 0) for g, v in idle.items()):
            raise OpScopeError("calibration data is malformed (idle penalties)")
        return cls(samples, context, idle)


def calibration_sizes(max_batch: int) -> list[int]:
    """1, powers of two, and max_batch itself."""
    sizes = {1, max_batch}
    s = 2
    while s < max_batch:
        sizes.add(s)
        s *= 2
    return sorted(sizes)


IDLE_GAPS_S = (0.0005, 0.001, 0.002, 0.005, 0.02)


def calibrate(
    run_batch: Callable[[Any], object],
    make_batch: Callable[[int], Any],
    sizes: list[int],
    context: dict[str, Any],
    runs: int = 40,
    min_s: float = 0.25,
    warmup: int = 3,
    gaps_s: tuple[float, ...] = IDLE_GAPS_S,
    gap_runs: int = 30,
) -> Iterator[Event | ServiceModel]:
    """Time `run_batch(make_batch(n))` for each size back to back (warm-up discarded; at
    least `runs` runs and `min_s` seconds each), then single requests after each pause in
    `gaps_s`; yields progress, then the ServiceModel. Each run gets a batch made afresh
    (untimed), as the serving loop stacks each batch anew: fresh buffers cost the engine
    more now and then than one buffer reused."""
    samples: dict[int, np.ndarray] = {}
    for k, n in enumerate(sizes):
        yield Progress("calibrate", k, len(sizes), f"timing batches of {n}")
        for _ in range(warmup):
            run_batch(make_batch(n))
        times: list[float] = []
        start = time.perf_counter()
        while len(times) < runs or time.perf_counter() - start < min_s:
            feeds = make_batch(n)
            t0 = time.perf_counter()
            run_batch(feeds)
            times.append(time.perf_counter() - t0)
            if len(times) >= 20 * runs:
                break
        samples[n] = np.asarray(times)
    warm = float(np.median(samples[sizes[0]]))
    idle: dict[float, np.ndarray] = {}
    for gap in gaps_s:
        yield Progress("calibrate", len(sizes), len(sizes), f"timing after {gap * 1e3:g} ms idle")
        times = []
        for _ in range(gap_runs):
            feeds = make_batch(sizes[0])
            time.sleep(gap)
            t0 = time.perf_counter()
            run_batch(feeds)
            times.append(time.perf_counter() - t0)
        idle[gap] = np.asarray(times) / warm
    yield Progress("calibrate", len(sizes), len(sizes), "calibrated")
    yield ServiceModel(samples, context, idle)
