"""The dynamic batcher's rules, as Triton's dynamic batcher applies them, written once and
used by both the real serving loop and the simulator.

- A request waits in one FIFO queue. When an instance is free, it takes a batch:
  `max_batch` at once if that many wait; else the largest preferred size that can be
  formed; else, once the oldest request has waited `delay_ms`, everything waiting (up to
  `max_batch`); otherwise it waits for more requests or for that delay to expire.
- `queue_limit` > 0: a request that arrives to a full queue is rejected.
- `timeout_ms` > 0: a request that has waited longer than that when a batch is formed is
  dropped as timed out (it never reaches the model).
- `instances` model instances serve batches concurrently.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from engine.errors import ConfigError


@dataclass(frozen=True)
class BatchPolicy:
    max_batch: int = 1
    preferred: tuple[int, ...] = ()
    delay_ms: float = 0.0
    queue_limit: int = 0  # 0: unbounded
    timeout_ms: float = 0.0  # 0: none
    instances: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.max_batch <= 4096:
            raise ConfigError(f"max batch must be 1 to 4096, got {self.max_batch}")
        bad = [p for p in self.preferred if not 1 <= p <= self.max_batch]
        if bad:
            raise ConfigError(
                f"preferred batch sizes must be 1 to max batch {self.max_batch}; got {bad}"
            )
        if not (0 <= self.delay_ms < 60_000 and math.isfinite(self.delay_ms)):
            raise ConfigError(f"queue delay must be 0 to 60000 ms, got {self.delay_ms:g}")
        if self.queue_limit < 0:
            raise ConfigError(f"queue limit must be 0 (none) or more, got {self.queue_limit}")
        if not (self.timeout_ms >= 0 and math.isfinite(self.timeout_ms)):
            raise ConfigError(f"timeout must be 0 (none) or more ms, got {self.timeout_ms:g}")
        if not 1 <= self.instances <= 64:
            raise ConfigError(f"instances must be 1 to 64, got {self.instances}")
        object.__setattr__(self, "preferred", tuple(sorted(set(self.preferred))))

    @property
    def delay_s(self) -> float:
        return self.delay_ms / 1e3

    @property
    def timeout_s(self) -> float:
        return self.timeout_ms / 1e3 if self.timeout_ms > 0 else math.inf

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["preferred"] = list(self.preferred)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BatchPolicy:
        """From `to_json()`'s shape (a command, a session): values checked, defaults for
        what is missing; a ConfigError for what does not fit."""
        try:
            return cls(
                max_batch=int(data.get("max_batch", 1)),
                preferred=tuple(int(p) for p in data.get("preferred") or ()),
                delay_ms=float(data.get("delay_ms", 0.0)),
                queue_limit=int(data.get("queue_limit", 0)),
                timeout_ms=float(data.get("timeout_ms", 0.0)),
                instances=int(data.get("instances", 1)),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"batching {data!r}: {exc}") from None

    def describe(self) -> str:
        parts = [f"max batch {self.max_batch}"]
        if self.preferred:
            parts.append("preferred " + ",".join(map(str, self.preferred)))
        parts.append(f"delay {self.delay_ms:g} ms")
        if self.instances > 1:
            parts.append(f"{self.instances} instances")
        if self.queue_limit:
            parts.append(f"queue limit {self.queue_limit}")
        if self.timeout_ms:
            parts.append(f"timeout {self.timeout_ms:g} ms")
        return ", ".join(parts)


def take(queued: int, oldest_wait_s: float, policy: BatchPolicy) -> tuple[int, float]:
    """(how many requests to take now, 0 to wait; how long to wait at most before asking
    again, math.inf for 'until the next arrival'). Timed-out requests are already gone."""
    if queued <= 0:
        return 0, math.inf
    if queued >= policy.max_batch:
        return policy.max_batch, 0.0
    for size in reversed(policy.preferred):
        if size <= queued:
            return size, 0.0
    if oldest_wait_s >= policy.delay_s - 1e-12:
        return queued, 0.0
    return 0, policy.delay_s - oldest_wait_s


class BatchRule:
    """`take` as tables, for the simulator's event loops to apply inline (a call per event,
    a million times, is what costs). With q requests queued, q below max batch: take
    `pick[q]` now; if that is 0, take all q once the oldest has waited `ripe` s, else ask
    again when it will have waited `delay` s (at t + (delay - waited), as `take` says).
    `grow[q]`: the queue length at which the answer can next change before that delay."""

    def __init__(self, policy: BatchPolicy) -> None:
        m = policy.max_batch
        self.pick = [max((p for p in policy.preferred if p <= q), default=0) for q in range(m)]
        sizes = sorted({*policy.preferred, m})
        self.grow = [1] + [next(s for s in sizes if s > q) for q in range(1, m)]
        self.delay = policy.delay_s
        self.ripe = policy.delay_s - 1e-12
