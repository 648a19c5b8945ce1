"""Getting a prepared model ready to serve: one request is one sample, a pool of distinct
request inputs (content keys map onto it), and whether the model takes stacked batches."""

from __future__ import annotations

import dataclasses
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
        key = (name, len(arrays))
        buf = buffers.get(key)
        shape = (sum(a.shape[0] for a in arrays), *arrays[0].shape[1:])
        if buf is None or buf.shape != shape or buf.dtype != arrays[0].dtype:
            buf = buffers[key] = np.empty(shape, arrays[0].dtype)
        out[name] = np.concatenate(arrays, out=buf)
    return out


def prepare_serving(prepared: Prepared, policy: BatchPolicy, model_path: str) -> Serving:
    """The request pool, and the policy this model can serve: a model without a batch
    dimension serves batch 1 (said in a notice); one that takes 2 but not `max_batch`
    is refused in one line."""
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
    for n in warmup_sizes(policy.max_batch):  # each batch shape once: the engine sizes its
        try:  # buffers for a shape the first time it runs it, which is no steady state
            prepared.run_batch(serving.stacked(n))
        except Exception as exc:
            raise InputError(
                f"the model cannot take a batch of {n} ({one_line(exc, 200)}); lower --max-batch",
                model_path,
            ) from exc
    return serving


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
