"""What a simulated LLM serving run comes to: TTFT (arrival to first token), TPOT (per
request, (last - first) / (n - 1)), inter-token latencies (every gap between two tokens
of one sequence), end-to-end latency, throughput over the run's span (first arrival to
last token), and goodput: the requests per second that met every SLO given."""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.measure.stats import latency_stats
from engine.serve.llm.instance import Book

QUANTILES = (0.5, 0.9, 0.99)


def _pcts(ms: np.ndarray) -> dict[str, Any]:
    s = latency_stats(ms * 1e6)
    return {"count": s.count, "p50": s.p50, "p90": s.p90, "p99": s.p99, "mean": s.mean,
            "max": s.max}  # fmt: skip


def summarize_llm(
    book: Book, slo_ttft_ms: float | None = None, slo_tpot_ms: float | None = None
) -> dict[str, Any]:
    arrival = np.asarray(book.arrival)
    first, done = np.asarray(book.first), np.asarray(book.done)
    output = np.asarray(book.output, np.int64)
    prompt = np.asarray(book.prompt, np.int64)
    ttft = (first - arrival) * 1e3
    many = output > 1
    tpot = np.full(arrival.size, np.nan)
    tpot[many] = (done[many] - first[many]) / (output[many] - 1) * 1e3
    span = float(done.max() - arrival.min()) if arrival.size else 0.0
    per_s = 1.0 / span if span > 0 else float("nan")
    result: dict[str, Any] = {
        "requests": {
            "count": int(arrival.size),
            "prompt_tokens_mean": float(prompt.mean()) if prompt.size else float("nan"),
            "output_tokens_mean": float(output.mean()) if output.size else float("nan"),
        },
        "ttft_ms": _pcts(ttft),
        "tpot_ms": _pcts(tpot[many]),
        "itl_ms": itl_stats(book),
        "e2e_ms": _pcts((done - arrival) * 1e3),
        "throughput": {
            "tokens_per_s": float(output.sum()) * per_s,
            "prompt_tokens_per_s": float(prompt.sum()) * per_s,
            "requests_per_s": arrival.size * per_s,
        },
        "span_s": span,
        "decode_batch_mean": _mean_batch(book),
    }
    result["goodput"] = goodput(ttft, tpot, slo_ttft_ms, slo_tpot_ms, per_s)
    if book.prefix_blocks:
        cached = np.asarray(book.cached, np.int64)
        result["prefix_cache"] = {
            "blocks": book.prefix_blocks,
            "hit_rate": float(cached.sum() / prompt.sum()) if prompt.sum() else 0.0,
            "requests_hit": int((cached > 0).sum()),
            "cached_tokens": int(cached.sum()),
        }
    return result


def goodput(
    ttft_ms: np.ndarray,
    tpot_ms: np.ndarray,
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    per_s: float,
) -> dict[str, Any] | None:
    """Requests that met every SLO given (a one-token request has no TPOT to miss)."""
    if slo_ttft_ms is None and slo_tpot_ms is None:
        return None
    good = np.ones(ttft_ms.size, bool)
    if slo_ttft_ms is not None:
        good &= ttft_ms <= slo_ttft_ms
    if slo_tpot_ms is not None:
        good &= np.isnan(tpot_ms) | (tpot_ms <= slo_tpot_ms)
    count = int(good.sum())
    return {
        "requests_per_s": count * per_s,
        "share": count / ttft_ms.size if ttft_ms.size else float("nan"),
        "count": count,
        "slo_ttft_ms": slo_ttft_ms,
        "slo_tpot_ms": slo_tpot_ms,
    }


def _mean_batch(book: Book) -> float:
    seg = book.segments()
    m = seg[:, 4]
    if not m.size:
        return float("nan")
    return float(np.sum(m * seg[:, 5]) / m.sum())


class _Gaps:
    """Every inter-token gap of the run without listing them: stretch firsts with their
    weights, arithmetic runs d0 + k*dd (k = 1..m-1) each counting for `batch` sequences,
    and each sequence's first gap (its second token after its first)."""

    def __init__(self, book: Book) -> None:
        seg = book.segments()
        self.first = seg[:, 0] * 1e3
        self.first_w = seg[:, 1].copy()
        self.d0 = seg[:, 2] * 1e3
        self.dd = seg[:, 3] * 1e3
        self.runs = seg[:, 4] - 1.0
        self.batch = seg[:, 5].copy()
        if book.paid:
            self._spread_extras(book)
        gaps = np.asarray(book.first_gap) * 1e3
        self.own = np.sort(gaps[np.isfinite(gaps)])
        # at_most's lookups: the firsts sorted with their weights summed (most stretches
        # are one step long), the runs of equal gaps (dd 0) the same way, the growing runs
        # apart
        order = np.argsort(self.first)  # ties: any order sums the same
        self._firsts = self.first[order]
        self._first_w = np.cumsum(self.first_w[order])
        flat = (self.runs > 0) & (self.dd <= 0)
        order = np.argsort(self.d0[flat])
        self._flat = self.d0[flat][order]
        self._flat_w = np.cumsum((self.runs * self.batch)[flat][order])
        grow = (self.runs > 0) & (self.dd > 0)
        self._d0, self._dd = self.d0[grow], self.dd[grow]
        self._runs, self._batch = self.runs[grow], self.batch[grow]

    def _spread_extras(self, book: Book) -> None:
        """The stretches whose steps 1 .. paid - 1 paid an extra: those steps become gaps
        of their own (d0 + k*dd + extra k, for `batch` sequences each, counted with the
        firsts), the run the steps after them."""
        pairs = np.asarray(book.paid, np.int64).reshape(-1, 2)
        at, row = pairs[:, 0], pairs[:, 1]
        width = max(len(r) for r in book.extra_rows)
        rows = np.zeros((len(book.extra_rows), width))
        lengths = np.zeros(len(book.extra_rows), np.int64)
        for i, r in enumerate(book.extra_rows):
            rows[i, : len(r)], lengths[i] = r, len(r)
        paid = np.minimum(self.runs[at] + 1.0, lengths[row]).astype(np.int64)
        k = np.arange(1, width)
        mine = k[None, :] < paid[:, None]  # step k of each stretch paid its extra
        d0, dd = self.d0[at], self.dd[at]
        gaps = d0[:, None] + k[None, :] * dd[:, None] + rows[row, 1:] * 1e3
        weights = np.broadcast_to(self.batch[at][:, None], gaps.shape)
        self.first = np.concatenate([self.first, gaps[mine]])
        self.first_w = np.concatenate([self.first_w, weights[mine]])
        shift = paid - 1.0  # the run starts after the last step that paid
        self.d0[at] = d0 + shift * dd
        self.runs[at] -= shift

    def total(self) -> float:
        return float(self.first_w.sum() + (self.runs * self.batch).sum() + self.own.size)

    def at_most(self, v: float) -> float:
        """How many gaps are <= v (ms)."""
        n = 0.0
        for values, weights in ((self._firsts, self._first_w), (self._flat, self._flat_w)):
            i = int(np.searchsorted(values, v, side="right"))
            n += float(weights[i - 1]) if i else 0.0
        # a growing run's gaps d0 + k*dd, k = 1..runs: those <= v, none when its first is not
        k = np.floor((v - self._d0) / self._dd)
        np.clip(k, 0.0, self._runs, out=k)
        n += float(k @ self._batch)
        return n + float(np.searchsorted(self.own, v, side="right"))

    def bounds(self) -> tuple[float, float]:
        values = [self.first[self.first_w > 0], self.own]
        run = self.runs > 0
        values += [self.d0[run] + self.dd[run], self.d0[run] + self.dd[run] * self.runs[run]]
        flat = np.concatenate(values)
        return float(flat.min()), float(flat.max())

    def sum(self) -> float:
        r = self.runs
        runs = self.batch * (r * self.d0 + self.dd * r * (r + 1) / 2)
        return float((self.first * self.first_w).sum() + runs.sum() + self.own.sum())


def itl_stats(book: Book) -> dict[str, Any]:
    """Inter-token latency percentiles (the lower value at each quantile, found by
    bisection over the counted gaps), their count, mean and max."""
    gaps = _Gaps(book)
    total = gaps.total()
    nan = float("nan")
    if total <= 0:
        return {"count": 0, "p50": nan, "p90": nan, "p99": nan, "mean": nan, "max": nan}
    lo0, hi0 = gaps.bounds()
    out: dict[str, Any] = {"count": round(total)}
    for q in QUANTILES:
        lo, hi = lo0, hi0
        want = q * total
        for _ in range(64):
            if hi - lo <= 1e-9 * max(hi, 1e-9):
                break
            mid = 0.5 * (lo + hi)
            if gaps.at_most(mid) >= want:
                hi = mid
            else:
                lo = mid
        out[f"p{round(q * 100)}"] = hi
    out["mean"] = gaps.sum() / total
    out["max"] = hi0
    return out
