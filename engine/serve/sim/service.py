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
import itertools
import math
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import OpScopeError
from engine.events import Event, Notice, Progress
from engine.measure.contention import Contention
from engine.serve.sim import lateness
from engine.serve.sim.lateness import Lateness
from engine.serve.sim.slow_stretches import SlowStretches


@dataclass(frozen=True)
class ServiceModel:
    """Measured service times (seconds) per batch size, and what they were measured on."""

    samples: dict[int, np.ndarray]  # back to back
    context: dict[str, Any]
    idle_slowdown: dict[int, dict[float, np.ndarray]] = dataclasses.field(default_factory=dict)
    send_late: Lateness = dataclasses.field(default_factory=dict)
    stretches: SlowStretches | None = None  # slow stretches with memory (slow_stretches.py)
    wake_late: Lateness = dataclasses.field(default_factory=dict)
    turnaround: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    after_larger: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    after_same: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    contention: Contention | None = None  # how busy the machine was while it was measured
    # idle_slowdown: batch size -> idle gap before it (s, a bucket's lower edge) -> how much
    # slower batches ran after such a gap in the real loop (ratios to the back-to-back
    # median: 1.5 = 50% slower; sim/idle_cost.py)
    # send_late: how late a request reaches the server after its scheduled time (s), by
    # the server's state then, and wake_late: how late the batcher starts after its delay
    # expired (one pool since calibration version 16; by state in 15), both from the real
    # loop's own runs (sim/lateness.py). An older calibration's
    # single pool of send lateness is read as one state's, drawn for every request.
    # turnaround: by batch size, how long after a batch of that size ended its instance
    # took the next one it could have taken at once (s): the loop's bookkeeping.
    # after_larger, after_same: the samples of each size split by the batch timed just
    # before it, larger, or the same size or smaller (see `calibrate`); empty before
    # calibration version 15.

    @property
    def sizes(self) -> list[int]:
        return sorted(self.samples)

    def _medians(self) -> list[float]:
        """The measured sizes' medians, computed once (a frozen model: its samples stay)."""
        cache = self.__dict__.get("_meds")
        if cache is None:
            cache = [float(np.median(self.samples[s])) for s in self.sizes]
            object.__setattr__(self, "_meds", cache)
        return cache

    def median(self, n: int) -> float:
        """Median service time of a batch of `n`, interpolated linearly between measured
        sizes and extrapolated from the last two beyond them."""
        sizes = self.sizes
        meds = self._medians()
        if n in self.samples:
            return meds[sizes.index(n)]
        if len(sizes) == 1:
            return meds[0] * n / sizes[0]
        if n > sizes[-1]:
            slope = (meds[-1] - meds[-2]) / (sizes[-1] - sizes[-2])
            return meds[-1] + slope * (n - sizes[-1])
        return float(np.interp(n, sizes, meds))

    def table(self, max_batch: int, after: str = "") -> list[list[float]]:
        """For each size 0..max_batch, the service times to draw from: the measured samples
        of that size, or of the nearest measured size below rescaled to the interpolated
        median (every sample, so the draws keep the measured distribution exactly).
        `after` "larger" or "same": those timed after a larger batch, or after one of the
        same size or smaller, where a size has POOL_LEAST of them (else all its samples)."""
        tables: dict[tuple[int, str], list[list[float]]] = self.__dict__.setdefault("_tables", {})
        if (max_batch, after) in tables:  # every simulated trial of a search draws from one
            return tables[max_batch, after]
        pool = {"larger": self.after_larger, "same": self.after_same}.get(after, {})
        out: list[list[float]] = [[0.0]]
        sizes, meds = self.sizes, self._medians()
        for n in range(1, max_batch + 1):
            i = max(bisect_right(sizes, n) - 1, 0)  # the nearest measured size below
            scale = self.median(n) / meds[i] if meds[i] > 0 else 1.0
            got = pool.get(sizes[i])
            if got is None or got.size < POOL_LEAST:
                got = self.samples[sizes[i]]
            out.append((got * scale).tolist())
        tables[max_batch, after] = out
        return out

    def slowdown_table(self, max_batch: int) -> list[tuple[list[float], list[list[float]]]]:
        """For each size 0..max_batch: the pauses measured (ascending) and, for each pause,
        the slowdowns to draw from (those of the nearest measured size below)."""
        out: list[tuple[list[float], list[list[float]]]] = [([], [])]
        sizes = sorted(self.idle_slowdown)
        rows: dict[int, tuple[list[float], list[list[float]]]] = {}
        for n in range(1, max_batch + 1):
            i = bisect_right(sizes, n) - 1
            base = sizes[max(i, 0)] if sizes else 0
            if base not in rows:  # one row per measured size, shared by the sizes above it
                by_gap = self.idle_slowdown.get(base, {})
                gaps = sorted(by_gap)
                rows[base] = (gaps, [by_gap[g].tolist() for g in gaps])
            out.append(rows[base])
        return out

    def speed_ratio(self, sizes: np.ndarray, durations: np.ndarray) -> float:
        """How long real batches of these sizes took against this calibration's medians for
        them: the ratio of the sums (1.1: 10% slower than calibrated; NaN: no batches)."""
        sizes, counts = np.unique(np.asarray(sizes, dtype=np.int64), return_counts=True)
        expected = sum(self.median(int(n)) * int(c) for n, c in zip(sizes, counts, strict=True))
        return float(np.sum(durations) / expected) if expected > 0 else float("nan")

    def capacity(self, max_batch: int, instances: int = 1) -> float:
        """Requests per second at full batches: an upper bound on sustainable load."""
        return instances * max_batch / self.median(max_batch)

    def to_json(self) -> dict[str, Any]:
        return {
            "context": self.context,
            "sizes": self.sizes,
            "median_ms": {str(s): self.median(s) * 1e3 for s in self.sizes},
            "samples_ms": {str(s): (self.samples[s] * 1e3).round(6).tolist() for s in self.sizes},
            "send_late_us": lateness.to_json(self.send_late),
            "wake_late_us": lateness.to_json(self.wake_late),
            "turnaround_us": lateness.sizes_to_json(self.turnaround),
            "after_larger_ms": lateness.sizes_to_json(self.after_larger, "ms"),
            "after_same_ms": lateness.sizes_to_json(self.after_same, "ms"),
            "idle_slowdown": {
                str(n): {f"{g * 1e3:g}": v.round(6).tolist() for g, v in sorted(by.items())}
                for n, by in sorted(self.idle_slowdown.items())
            },
            "slow_stretches": self.stretches.to_json() if self.stretches else None,
            "contention": self.contention.to_json() if self.contention else None,
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
                int(n): {
                    float(k) / 1e3: np.asarray([float(x) for x in v], dtype=np.float64)
                    for k, v in by.items()
                }
                for n, by in (data.get("idle_slowdown") or {}).items()
            }
            send = lateness.from_json(data.get("send_late_us"), "send lateness")
            wake = lateness.from_json(data.get("wake_late_us"), "wake lateness")
            turn = lateness.sizes_from_json(data.get("turnaround_us"), "turnaround")
            larger, same = (
                lateness.sizes_from_json(data.get(key), "times by the batch before", "ms", math.inf)
                for key in ("after_larger_ms", "after_same_ms")
            )
            flat = data.get("send_lateness_us")  # before calibration version 15: one pool
            if flat and not send:
                send = lateness.from_json({"running": flat}, "send lateness")
            stretches_json = data.get("slow_stretches")
            stretches = SlowStretches.from_json(stretches_json) if stretches_json else None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise OpScopeError(f"calibration data is malformed ({exc!r})") from exc
        if not samples or any(
            s < 1 or v.size == 0 or not np.all(np.isfinite(v)) or np.any(v <= 0)
            for s, v in samples.items()
        ):
            raise OpScopeError("calibration data is malformed (empty or non-positive times)")
        if any(
            g <= 0 or v.size == 0 or not np.all(v > 0)
            for by in idle.values()
            for g, v in by.items()
        ):
            raise OpScopeError("calibration data is malformed (idle penalties)")
        if any(
            n not in samples or v.size == 0 or not np.all(np.isfinite(v)) or np.any(v <= 0)
            for pool in (larger, same)
            for n, v in pool.items()
        ):
            raise OpScopeError("calibration data is malformed (times by the batch before)")
        contention = Contention.from_json(data.get("contention"))  # None: not measured
        return cls(samples, context, idle, send, stretches, wake, turn, larger, same, contention)


FEW_RUNS = 3  # runs of a slow batch size enough for its median
IDLE_FROM_S = 0.0005  # a batch after an idle gap this long or longer: after idling
POOL_LEAST = 8  # samples of a size after a larger batch (or not) enough to draw from
RUN_MEAN = 2.0  # the calibration times each size in runs this long on average
MAX_SIZE_S = 3.0  # seconds of timing one batch size takes at most, past FEW_RUNS


def calibration_sizes(max_batch: int) -> list[int]:
    """1, powers of two, and max_batch itself."""
    sizes = {1, max_batch}
    s = 2
    while s < max_batch:
        sizes.add(s)
        s *= 2
    return sorted(sizes)


def time_batches(
    run_batch: Callable[[Any], object],
    make_batch: Callable[[int], Any],
    n: int,
    runs: int,
    min_s: float,
    warmup: int,
    most: int,
) -> np.ndarray:
    """Seconds each of `run_batch(make_batch(n))` back to back, after `warmup` runs
    discarded: at least `runs` runs and `min_s` seconds, at most `most` runs; a size
    whose runs take long stops after FEW_RUNS runs and MAX_SIZE_S seconds (40 runs of a
    batch of 4096 took minutes)."""
    start = time.perf_counter()
    for _ in range(warmup):
        run_batch(make_batch(n))
        if time.perf_counter() - start > MAX_SIZE_S / 4:
            break
    times: list[float] = []
    start = time.perf_counter()
    while (len(times) < runs or time.perf_counter() - start < min_s) and len(times) < most:
        if len(times) >= FEW_RUNS and time.perf_counter() - start > MAX_SIZE_S:
            break
        t0 = time.perf_counter()
        run_batch(make_batch(n))
        times.append(time.perf_counter() - t0)
    return np.asarray(times)


LEVEL_MOVED = 0.10  # a warning when the calibration's first and last thirds differ more


def level_notice(ratios: np.ndarray) -> Notice | None:
    """A warning when the batches of the calibration's first third and last third (each
    batch's time over its size's median, in the order they ran) differ by more than
    LEVEL_MOVED in median. With one thread per core, the demo transformer on a shared
    2-vCPU machine ran at one of two speeds 20% apart for seconds at a time; a calibration
    that straddles both is off for either (bench/results/serve_calibration_spread.md), and
    near capacity the prediction with it."""
    third = ratios.size // 3
    if third < 3:
        return None
    a, b = float(np.median(ratios[:third])), float(np.median(ratios[-third:]))
    if a <= 0 or abs(b / a - 1) <= LEVEL_MOVED:
        return None
    return Notice(
        "warning",
        f"calibration: the engine's speed moved {b / a - 1:+.0%} while it was timed (its "
        "last batches against its first, every size); predictions near capacity move with "
        "it. Recalibrate when the machine is quieter, or give the engine fewer threads than "
        "cores (the serving loop's own threads need one)",
    )


def calibration_counts(
    estimates: dict[int, float], runs: int, min_s: float, most: int
) -> dict[int, int]:
    """How many batches of each size to time, from one batch's estimated seconds: at least
    `runs` and `min_s` seconds' worth, at most `most`; a size whose runs take long gets
    FEW_RUNS, or as many as fit in MAX_SIZE_S (40 runs of a batch of 4096 took minutes)."""
    out: dict[int, int] = {}
    for n, t in estimates.items():
        want = max(runs, math.ceil(min_s / t) if t > 0 else runs)
        if t * runs > MAX_SIZE_S:
            want = max(FEW_RUNS, int(MAX_SIZE_S / t))
        out[n] = min(want, most)
    return out


PROGRESS_S = 0.5  # the calibration says how far it is at most this often


def _never() -> bool:
    return False


def calibrate(
    run_batch: Callable[[Any], object],
    make_batch: Callable[[int], Any],
    sizes: list[int],
    context: dict[str, Any],
    runs: int = 40,
    min_s: float = 0.25,
    warmup: int = 3,
    should_stop: Callable[[], bool] = _never,
) -> Iterator[Event | ServiceModel]:
    """Time `run_batch(make_batch(n))` for every size, the sizes in short runs shuffled
    together (`calibration_order`) as a server under variable traffic runs them (warm-up
    discarded; at least `runs` runs and `min_s` seconds' worth of each); yields progress,
    then the ServiceModel, its samples also split by the batch before each (larger, or
    not). A batch's time includes making it: the serving loop stacks each batch anew, and
    an instance is busy while it does. Not size after size: batches of 1 shuffled among
    other sizes ran 4-9% slower than back to back, those of 2-8 up to 3%
    (bench/results/serve_calibration_spread.md, one thread), as the serving loop's batches
    ran slower than calibrated under variable traffic and faster under constant
    (serve_twin.md, runs 19-24); and a change of the machine's speed meets every size
    alike.

    Progress while timing is in expected seconds (`done` and `total`: the warm-up's
    estimate of each batch, summed over those timed and those planned; None while warming
    up), so a caller can turn it into time left. `should_stop()` is asked after every
    batch: true, the calibration ends with no ServiceModel (nothing half-measured is kept)."""
    estimates: dict[int, float] = {}
    for k, n in enumerate(sizes):
        yield Progress("calibrate", 0, None, f"warming up batches of {n} ({k + 1} of "
                       f"{len(sizes)} sizes)")  # fmt: skip
        took = [MAX_SIZE_S]
        start = time.perf_counter()
        for _ in range(max(warmup, 1)):
            t0 = time.perf_counter()
            run_batch(make_batch(n))
            took.append(time.perf_counter() - t0)
            if should_stop():
                return
            if time.perf_counter() - start > MAX_SIZE_S / 4:
                break
        estimates[n] = min(took)
    counts = calibration_counts(estimates, runs, min_s, 20 * runs)
    order = calibration_order(counts, np.random.default_rng(0))
    total = sum(estimates[n] * c for n, c in counts.items())
    times: dict[int, list[float]] = {n: [] for n in sizes}
    ratios_at: list[tuple[int, float]] = []
    expected, said = 0.0, -math.inf
    for n in order.tolist():
        now = time.perf_counter()
        if now - said >= PROGRESS_S:
            said = now
            yield Progress("calibrate", expected, total, f"timing batches of {sizes[0]}-"
                           f"{sizes[-1]} shuffled: batch {n}, {len(times[n])} of {counts[n]} "
                           "timed")  # fmt: skip
        t0 = time.perf_counter()
        run_batch(make_batch(n))
        t = time.perf_counter() - t0
        times[n].append(t)
        ratios_at.append((n, t))
        expected += estimates[n]
        if should_stop():
            return
    samples = {n: np.asarray(v) for n, v in times.items()}
    larger: dict[int, list[float]] = {n: [] for n in sizes}
    same: dict[int, list[float]] = {n: [] for n in sizes}
    for (prev, _), (n, t) in itertools.pairwise(ratios_at):
        (larger if prev > n else same)[n].append(t)
    medians = {n: float(np.median(v)) for n, v in samples.items()}
    ratios = np.asarray([t / medians[n] for n, t in ratios_at if medians[n] > 0])
    notice = level_notice(ratios)
    if notice is not None:
        yield notice
    yield Progress("calibrate", total, total, "batches timed")
    yield ServiceModel(
        samples,
        context,
        after_larger={n: np.asarray(v) for n, v in larger.items() if v},
        after_same={n: np.asarray(v) for n, v in same.items() if v},
    )


def calibration_order(counts: dict[int, int], rng: np.random.Generator) -> np.ndarray:
    """Every size `counts[n]` times, in runs of one size (geometric lengths, RUN_MEAN on
    average) shuffled together: a batch's time depends on the one before it (the demo
    CNN's batches of 1 ran 5-7% slower after a batch of 4-8 than after another of 1, of 2
    2-4%; of 3-8 within 2%), so the calibration times each size after larger batches and
    after its own, both often enough to draw from."""
    runs: list[list[int]] = []
    for n, count in counts.items():
        left = count
        while left > 0:
            length = min(int(rng.geometric(1 / RUN_MEAN)), left)
            runs.append([n] * length)
            left -= length
    order = rng.permutation(len(runs))
    return np.asarray([n for i in order for n in runs[i]], dtype=np.int64)
