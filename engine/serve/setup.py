"""Getting a prepared model ready to serve: one request is one sample, a pool of distinct
request inputs (content keys map onto it), and whether the model takes stacked batches."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.backends.base import Feeds, Prepared
from engine.errors import InputError, one_line
from engine.events import Notice
from engine.serve.batching import BatchPolicy

POOL = 8  # distinct request inputs; a request's content key picks one


@dataclasses.dataclass
class Serving:
    """What the loop and the calibration need from a prepared model."""

    request_feeds: Callable[[int], Feeds]
    run_batch: Callable[[Feeds], Any]
    policy: BatchPolicy
    notices: list[Notice]
    cost: BatchCost | None = None  # measured at PROBE_BATCH when max_batch is above it
    timed_top: int = 0  # the largest batch run so far and worth timing (0: max_batch)

    def largest_timed(self) -> int:
        return self.timed_top or self.policy.max_batch

    def stacked(self, n: int) -> Feeds:
        """A batch of `n` requests (keys 0..n-1)."""
        return self.stack(list(range(n)))

    def stack(
        self, keys: list[int], buffers: dict[tuple[str, int], np.ndarray] | None = None
    ) -> Feeds:
        """The requests with these content keys stacked along the batch axis."""
        return stack_requests(self.request_feeds, keys, buffers)


def stack_requests(
    request_feeds: Callable[[int], Feeds],
    keys: list[int],
    buffers: dict[tuple[str, int], np.ndarray] | None = None,
) -> Feeds:
    """Requests stacked along the batch axis. With `buffers` (one dict per instance: a
    batch is stacked only after the previous one ran), into arrays kept per input and
    size: fresh arrays of a few MB cost page faults on every batch (8% of the demo CNN's
    throughput at batch 8)."""
    parts = [request_feeds(k) for k in keys]
    if len(parts) == 1:
        return parts[0]
    out: Feeds = {}
    for name in parts[0]:
        arrays = [p[name] for p in parts]
        if buffers is None:
            out[name] = np.concatenate(arrays)
            continue
        key = (name, 0)  # one array per input, of the largest batch yet: a batch of n
        buf = buffers.get(key)  # is its first n rows (one per size grew to GBs by 4096)
        rows = sum(a.shape[0] for a in arrays)
        tail, dtype = arrays[0].shape[1:], arrays[0].dtype
        if buf is None or buf.shape[0] < rows or buf.shape[1:] != tail or buf.dtype != dtype:
            buf = buffers[key] = np.empty((rows, *tail), dtype)
        out[name] = np.concatenate(arrays, out=buf[:rows])
    return out


def prepare_serving(
    prepared: Prepared,
    policy: BatchPolicy,
    model_path: str,
    timed_only: bool = False,
    warm_all: bool = True,
) -> Serving:
    """The request pool, and the policy this model can serve: a model without a batch
    dimension serves batch 1 (said in a notice); one that takes 2 but not `max_batch`
    is refused in one line, as is a `max_batch` whose batches (one per instance) would
    not fit in memory, estimated before the first runs. `timed_only` (simulate: batches
    are timed, not served): sizes whose batch would take more than TIMED_BATCH_S or
    TIMED_MEMORY are not run at all (`timed_top`); the calibration extrapolates them.
    `warm_all` false (a calibration, which warms each size it times): only the largest
    size is run here, not every size up to it (for 32, 528 samples: 18 s of MiniLM's 44 s
    calibration; `warm` does the rest before a real loop serves)."""
    pool = [prepared.make_feeds(i) for i in range(POOL)]

    def request_feeds(key: int) -> Feeds:
        return pool[key % POOL]

    serving = Serving(request_feeds, prepared.run_batch, policy, [])
    if policy.max_batch == 1:
        prepared.run_batch(serving.stacked(1))
        return serving
    if prepared.batch != 1:
        return _batch_one(serving, f"the model runs a fixed batch of {prepared.batch}")
    try:
        prepared.run_batch(serving.stacked(2))
    except Exception as exc:
        return _batch_one(serving, f"it has no batch dimension ({one_line(exc, 160)})")
    if policy.max_batch > PROBE_BATCH:
        serving.cost = _probe_cost(serving, prepared)
        if timed_only:
            serving.timed_top = serving.cost.largest(policy.max_batch)
        else:
            check_batch_fits(serving, policy.max_batch, policy.instances, model_path)
    top = serving.largest_timed()
    warm(serving, warmup_sizes(top) if warm_all else [top], model_path)
    return serving


def warm(serving: Serving, sizes: list[int], model_path: str) -> None:
    """Each batch shape once: the engine sizes its buffers for a shape the first time it
    runs it (no steady state); the largest first, so they grow once. A size the model
    cannot take is refused in one line."""
    for n in sizes:
        try:
            serving.run_batch(serving.stacked(n))
        except Exception as exc:
            raise InputError(
                f"the model cannot take a batch of {n} ({one_line(exc, 200)}); lower --max-batch",
                model_path,
            ) from exc


PROBE_BATCH = 64  # the memory and time a batch takes are measured at this size first
TIMED_BATCH_S = 1.0  # simulate times no batch estimated to take longer than this
TIMED_MEMORY = 1e9  # nor one estimated to take more memory (bytes) than this


@dataclasses.dataclass(frozen=True)
class BatchCost:
    """What one more sample in a batch costs, measured between batches of 2 and
    PROBE_BATCH: the memory the process grew by (the engine's activations grow with the
    batch, and it keeps them) and the time (a batch of 4,096 of the demo transformer
    took 20 s and 6.6 GB)."""

    bytes_per_sample: float
    s_per_sample: float

    def largest(self, max_batch: int) -> int:
        """The largest of PROBE_BATCH and the powers of two up to `max_batch` (or itself)
        whose batch is estimated within TIMED_BATCH_S and TIMED_MEMORY."""
        n, best = PROBE_BATCH, PROBE_BATCH
        while n < max_batch:
            n = min(2 * n, max_batch)
            if n * self.s_per_sample > TIMED_BATCH_S or n * self.bytes_per_sample > TIMED_MEMORY:
                break
            best = n
        return best

    def describe(self, n: int) -> str:
        return (
            f"a batch of {n:,} would take about {n * self.s_per_sample:,.1f} s and "
            f"{n * self.bytes_per_sample / 1e9:,.1f} GB (measured at batches of 2 and "
            f"{PROBE_BATCH})"
        )


def _probe_cost(serving: Serving, prepared: Prepared) -> BatchCost:
    import psutil

    me = psutil.Process()
    before = me.memory_info().rss
    t0 = time.perf_counter()
    prepared.run_batch(serving.stacked(2))
    t2 = time.perf_counter() - t0
    t0 = time.perf_counter()
    prepared.run_batch(serving.stacked(PROBE_BATCH))
    t64 = time.perf_counter() - t0
    grown = max(0, me.memory_info().rss - before)
    return BatchCost(grown / (PROBE_BATCH - 2), max(t64 - t2, t64 / 2) / (PROBE_BATCH - 2))


def check_batch_fits(serving: Serving, max_batch: int, instances: int, path: str) -> None:
    """Before batches of `max_batch` run (one per instance at once): their estimated
    memory, refused in one line when it would not fit."""
    from engine.model.sizes import check_memory

    if serving.cost is None or max_batch <= PROBE_BATCH:
        return
    each = "" if instances == 1 else f", one on each of {instances} instances"
    check_memory(
        serving.cost.bytes_per_sample * (max_batch - PROBE_BATCH) * instances,
        f"batches of {max_batch:,} (about {serving.cost.bytes_per_sample / 1e6:,.2f} MB a "
        f"sample, as measured at batches of 2 and {PROBE_BATCH}{each})",
        "lower --max-batch",
        path,
    )


def warmup_sizes(max_batch: int) -> list[int]:
    """Every batch size up to 64, then powers of two, then the max (largest first)."""
    sizes = set(range(1, min(max_batch, 64) + 1)) | {max_batch}
    s = 128
    while s < max_batch:
        sizes.add(s)
        s *= 2
    return sorted(sizes, reverse=True)


def _batch_one(serving: Serving, why: str) -> Serving:
    serving.policy = dataclasses.replace(serving.policy, max_batch=1, preferred=())
    serving.notices.append(Notice("warning", f"serving batch 1: {why}"))
    return serving
