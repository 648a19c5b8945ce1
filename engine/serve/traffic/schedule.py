"""Traffic: when requests arrive and what they ask for, seeded and known in advance.

Specs: `poisson:RATE`, `constant:RATE`, `bursts:BASE,PEAK,PERIOD_S,DUTY` (Poisson at BASE/s
with PEAK/s for the first DUTY share of every PERIOD_S seconds), `ramp:FROM,TO` (Poisson
whose rate moves linearly over the run: finds the knee), `trace:FILE` (a trace replayed, in
any format of engine/serve/traffic/trace_formats.py; `trace:FILE@speed=X,start=S` replays a window
of it faster) and `closed:N` (N clients, each sending when its last reply arrived: a closed
loop, labelled as such, with no schedule).

Request content: a share `repeat` of requests repeat an earlier distinct request, chosen
with Zipf-like popularity (the earliest distinct requests are the most popular), so a
response cache has something to absorb. A trace's key column replaces this.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from engine.errors import ConfigError
from engine.serve.traffic.trace_file import MAX_REQUESTS

KINDS = ("poisson", "constant", "bursts", "ramp", "trace", "closed")
ZIPF_S = 1.2  # popularity exponent of repeated requests
MAX_DURATION_S = 7 * 86_400.0  # the longest --duration (engine/cli/arg_types.py)


@dataclass(frozen=True)
class TrafficSpec:
    """A parsed traffic spec; `text` is what the user wrote (for labels and JSON)."""

    kind: str
    text: str
    rate: float = 0.0  # poisson, constant
    base: float = 0.0  # bursts
    peak: float = 0.0
    period_s: float = 0.0
    duty: float = 0.0
    start_rate: float = 0.0  # ramp
    end_rate: float = 0.0
    path: str | None = None  # trace
    speed: float = 1.0  # trace: replayed this many times faster
    start_s: float = 0.0  # trace: the window starts this far into it
    clients: int = 0  # closed

    @property
    def closed(self) -> bool:
        return self.kind == "closed"

    def mean_rate(self) -> float:
        """Requests per second averaged over a run (a trace's over its window, read; 0 for a
        closed loop)."""
        if self.kind in ("poisson", "constant"):
            return self.rate
        if self.kind == "bursts":
            return self.base + (self.peak - self.base) * self.duty
        if self.kind == "ramp":
            return 0.5 * (self.start_rate + self.end_rate)
        if self.kind == "trace" and self.path:
            return trace_rate(self.path, self.speed, self.start_s)
        return 0.0

    def scaled(self, factor: float) -> TrafficSpec:
        """The same shape at `factor` times the rate (the capacity search moves this): a
        trace replayed `factor` times faster."""
        if self.kind == "closed":
            raise ConfigError(f"traffic {self.text}: cannot be scaled (use a rate pattern)")
        if self.kind == "trace":
            faster = replace(self, speed=self.speed * factor)
            return replace(faster, text=faster.describe())
        spec = replace(
            self,
            rate=self.rate * factor,
            base=self.base * factor,
            peak=self.peak * factor,
            start_rate=self.start_rate * factor,
            end_rate=self.end_rate * factor,
        )
        return replace(spec, text=spec.describe())

    def describe(self) -> str:
        if self.kind in ("poisson", "constant"):
            return f"{self.kind}:{self.rate:g}"
        if self.kind == "bursts":
            return f"bursts:{self.base:g},{self.peak:g},{self.period_s:g},{self.duty:g}"
        if self.kind == "ramp":
            return f"ramp:{self.start_rate:g},{self.end_rate:g}"
        if self.kind == "trace":
            opts = [f"speed={self.speed:g}"] * (self.speed != 1) + [f"start={self.start_s:g}"] * (
                self.start_s != 0
            )
            return f"trace:{self.path}" + ("@" + ",".join(opts) if opts else "")
        return f"closed:{self.clients}"

    def to_json(self) -> dict[str, Any]:
        keep = {
            "poisson": ("rate",),
            "constant": ("rate",),
            "bursts": ("base", "peak", "period_s", "duty"),
            "ramp": ("start_rate", "end_rate"),
            "trace": ("path", "speed", "start_s"),
            "closed": ("clients",),
        }[self.kind]
        data = asdict(self)
        return {"kind": self.kind, "spec": self.text, **{k: data[k] for k in keep}}


def with_trace_file(text: str, swap: Callable[[str], str]) -> str:
    """A `trace:FILE[@options]` spec with its file swapped for `swap(FILE)` (a window or a
    command on a host sends the trace there first); any other spec as it is."""
    kind, sep, args = text.strip().partition(":")
    if not sep or kind.lower() != "trace" or not args:
        return text
    path, at, rest = args.partition("@")
    return f"trace:{swap(path)}{at}{rest}"


def parse_traffic(text: str) -> TrafficSpec:
    """A spec from its text; a ConfigError naming what is wrong otherwise."""
    kind, sep, args = text.strip().partition(":")
    kind = kind.lower()
    if not sep or kind not in KINDS:
        raise ConfigError(
            f"traffic {text!r}: expected one of poisson:RATE, constant:RATE, "
            "bursts:BASE,PEAK,PERIOD_S,DUTY, ramp:FROM,TO, trace:FILE.csv, closed:N"
        )
    if kind == "trace":
        if not args:
            raise ConfigError(f"traffic {text!r}: trace needs a file (trace:FILE.csv)")
        path, speed, start = _trace_options(text, args)
        return TrafficSpec("trace", text, path=path, speed=speed, start_s=start)
    values = _numbers(text, args)
    if kind in ("poisson", "constant"):
        (rate,) = _count(text, values, 1)
        return TrafficSpec(kind, text, rate=_positive(text, "rate", rate))
    if kind == "bursts":
        base, peak, period, duty = _count(text, values, 4)
        if base < 0 or not math.isfinite(base):
            raise ConfigError(f"traffic {text!r}: base rate must be 0 or more, got {base:g}")
        _positive(text, "peak rate", peak)
        _positive(text, "period", period)
        if not 0 < duty < 1:
            raise ConfigError(f"traffic {text!r}: duty must be between 0 and 1, got {duty:g}")
        return TrafficSpec(kind, text, base=base, peak=peak, period_s=period, duty=duty)
    if kind == "ramp":
        start, end = _count(text, values, 2)
        if start < 0 or end < 0 or max(start, end) <= 0 or not math.isfinite(start + end):
            raise ConfigError(f"traffic {text!r}: ramp rates must be 0 or more, one positive")
        return TrafficSpec(kind, text, start_rate=start, end_rate=end)
    (clients,) = _count(text, values, 1)
    if clients < 1 or clients != int(clients) or clients > 10_000:
        raise ConfigError(f"traffic {text!r}: closed needs 1 to 10000 clients")
    return TrafficSpec(kind, text, clients=int(clients))


@dataclass(frozen=True)
class Schedule:
    """Requests in arrival order: scheduled time (s from the start), content key, and an
    input size when a trace gives one. Empty for a closed loop (its clients send)."""

    times: np.ndarray  # float64, non-decreasing
    keys: np.ndarray  # int64
    sizes: np.ndarray | None = None  # int64, a trace's size column or prompt tokens
    outputs: np.ndarray | None = None  # int64, an LLM trace's output tokens
    hash_ids: tuple[tuple[int, ...], ...] | None = None  # Mooncake's prompt blocks
    format: str = ""  # a trace's format (engine/serve/traffic/trace_formats.py)
    note: str = ""  # what planning it cut, in a line (`within`)

    def __len__(self) -> int:
        return int(self.times.size)

    def within(self, duration_s: float, what: str) -> Schedule:
        """The requests a run in real time serves: those due within `duration_s`, the cut
        said in `note` (the first N requests of a trace or of a slow rate can lie hours or
        centuries apart: nothing may wait for them past --duration)."""
        n = arrivals_within(self.times, duration_s, what)
        if n == len(self):
            return self

        def cut(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[:n]

        return Schedule(
            self.times[:n], self.keys[:n], cut(self.sizes), cut(self.outputs),
            self.hash_ids[:n] if self.hash_ids is not None else None, self.format,
            cut_note(self.times, n, duration_s, what),
        )  # fmt: skip


def arrivals_within(times: np.ndarray, duration_s: float, what: str) -> int:
    """How many of `times` (sorted) are due within `duration_s`; a ConfigError in one line
    when none is."""
    n = int(np.searchsorted(times, duration_s, side="right"))
    if n == 0 and times.size:
        raise ConfigError(
            f"{what}: the first request is due {span_words(float(times[0]))} in, past "
            f"--duration {duration_s:g} s: nothing to serve"
        )
    return n


def cut_note(times: np.ndarray, n: int, duration_s: float, what: str) -> str:
    """The line that says `times` were cut to their first `n` at `duration_s`."""
    last = float(times[-1])
    return (
        f"{what}: the {times.size:,} requests arrive over {span_words(last)}, past --duration "
        f"{duration_s:g} s: serving the {n:,} due within it"
        + (f" (--duration {math.ceil(last):d} serves them all)" if last <= MAX_DURATION_S else "")
    )


def span_words(seconds: float) -> str:
    """A span in the unit that reads best: 42.5 s, 3.2 h, 12 days, 100 years."""
    for unit, size in (("years", 365.25 * 86400), ("days", 86400.0), ("h", 3600.0)):
        if seconds >= 2 * size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def make_schedule(
    spec: TrafficSpec,
    duration_s: float,
    seed: int = 0,
    repeat: float = 0.0,
    requests: int | None = None,
) -> Schedule:
    """The arrivals of `spec` over `duration_s` (or its first `requests`), seeded."""
    if not 0.0 <= repeat < 1.0:
        raise ConfigError(f"repeat must be at least 0 and below 1, got {repeat:g}")
    rng = np.random.default_rng(seed)
    if spec.kind == "closed":
        return Schedule(np.empty(0), np.empty(0, np.int64))
    if spec.kind == "trace":
        assert spec.path is not None
        return _trace_schedule(spec, duration_s, rng, repeat, requests)
    if requests is not None:  # long enough for `requests` arrivals at the mean rate
        duration_s = 1.2 * requests / spec.mean_rate() + 1.0
    expected = spec.mean_rate() * duration_s
    if expected > MAX_REQUESTS:
        raise ConfigError(
            f"traffic {spec.text} over {duration_s:g} s is {expected:,.0f} requests; "
            f"at most {MAX_REQUESTS:,} fit in memory"
        )
    if spec.kind == "constant":
        times = np.arange(0.0, duration_s, 1.0 / spec.rate)
    else:
        times = _poisson_times(rng, spec, duration_s)
    if requests is not None:
        times = times[:requests]
    return Schedule(times, repeat_keys(rng, times.size, repeat))


def trace_rate(path: str, speed: float = 1.0, start_s: float = 0.0) -> float:
    """A trace's mean arrival rate over its window (requests/s, as replayed)."""
    from engine.serve.traffic.trace_formats import read_cached

    times = read_cached(path).times
    window = times[int(np.searchsorted(times, start_s, side="left")) :]
    if window.size < 2 or window[-1] <= window[0]:
        return 0.0
    return float((window.size - 1) / (window[-1] - window[0]) * speed)


def _trace_schedule(
    spec: TrafficSpec,
    duration_s: float,
    rng: np.random.Generator,
    repeat: float,
    requests: int | None,
) -> Schedule:
    """A trace replayed from `start_s` into it, `speed` times faster, for `duration_s`
    (of replay) or its first `requests`."""
    from engine.errors import InputError
    from engine.serve.traffic.trace_formats import read_cached

    assert spec.path is not None
    trace = read_cached(spec.path)
    first = int(np.searchsorted(trace.times, spec.start_s, side="left"))
    times = (trace.times[first:] - spec.start_s) / spec.speed
    n = times.size
    if requests is not None:
        n = min(n, requests)
    elif duration_s > 0 and math.isfinite(duration_s):
        n = int(np.searchsorted(times, duration_s, side="right"))
    if n == 0:
        raise InputError(
            f"no request in the window (start {spec.start_s:g} s, the trace "
            f"spans {float(trace.times[-1]):g} s)",
            spec.path,
        )
    part = slice(first, first + n)

    def cut(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else a[part]

    keys = trace.keys[part] if trace.keys is not None else repeat_keys(rng, n, repeat)
    return Schedule(
        times[:n],
        keys,
        cut(trace.inputs),
        cut(trace.outputs),
        trace.hash_ids[part] if trace.hash_ids is not None else None,
        trace.format,
    )


def _poisson_times(rng: np.random.Generator, spec: TrafficSpec, duration_s: float) -> np.ndarray:
    """A non-homogeneous Poisson process by inversion: unit-rate arrivals mapped through
    the inverse of the cumulative rate Lambda(t) (exact for piecewise-linear rates)."""
    grid, cum = _cumulative_rate(spec, duration_s)
    total = float(cum[-1])
    n = int(rng.poisson(total))
    unit = np.sort(rng.uniform(0.0, total, n))
    times: np.ndarray = np.interp(unit, cum, grid)
    return times


def _cumulative_rate(spec: TrafficSpec, duration_s: float) -> tuple[np.ndarray, np.ndarray]:
    if spec.kind == "poisson":
        return np.array([0.0, duration_s]), np.array([0.0, spec.rate * duration_s])
    if spec.kind == "ramp":  # Lambda is quadratic: a fine grid makes interp near exact
        t = np.linspace(0.0, duration_s, 4097)
        slope = (spec.end_rate - spec.start_rate) / duration_s
        return t, spec.start_rate * t + 0.5 * slope * t * t
    # bursts: piecewise constant, PEAK for the first DUTY share of each period
    edges = [0.0]
    rates = []
    start = 0.0
    while start < duration_s:
        hi = min(start + spec.duty * spec.period_s, duration_s)
        edges.append(hi)
        rates.append(spec.peak)
        end = min(start + spec.period_s, duration_s)
        if end > hi:
            edges.append(end)
            rates.append(spec.base)
        start += spec.period_s
    t = np.array(edges)
    cum = np.concatenate([[0.0], np.cumsum(np.diff(t) * np.array(rates))])
    return t, cum


def repeat_keys(rng: np.random.Generator, n: int, repeat: float) -> np.ndarray:
    """Content keys: each request is new with probability 1 - repeat, otherwise a repeat
    of one of the distinct requests so far, the k-th earliest with weight ~ k^-ZIPF_S."""
    keys = np.arange(n, dtype=np.int64)
    if repeat <= 0 or n == 0:
        return keys
    is_repeat = rng.random(n) < repeat
    is_repeat[0] = False
    new = (~is_repeat).astype(np.int64)
    seen: np.ndarray = np.cumsum(new)
    distinct_before: np.ndarray = seen - new  # distinct keys seen before each request
    ids: np.ndarray = seen - 1  # a new request's key: its rank among distinct requests
    m: np.ndarray = distinct_before[is_repeat].astype(np.float64)
    u = rng.random(m.size)
    one_minus = 1.0 - ZIPF_S
    # inverse CDF of a density ~ x^-s on [1, m + 1): its floor is a rank in 1..m
    x = (1.0 + u * ((m + 1.0) ** one_minus - 1.0)) ** (1.0 / one_minus)
    ranks = np.clip(np.floor(x), 1, np.maximum(m, 1)).astype(np.int64)
    keys = ids.astype(np.int64)
    keys[is_repeat] = ranks - 1
    return keys


def _trace_options(text: str, args: str) -> tuple[str, float, float]:
    """'FILE' or 'FILE@speed=X,start=S' (what --trace-speed and --trace-start write)."""
    path, at, opts = args.rpartition("@")
    if not at or not re.fullmatch(r"((speed|start)=[^,]*)(,(speed|start)=[^,]*)*", opts):
        return args, 1.0, 0.0
    values = dict(o.split("=", 1) for o in opts.split(","))
    try:
        speed, start = float(values.get("speed", 1)), float(values.get("start", 0))
    except ValueError:
        raise ConfigError(f"traffic {text!r}: speed and start must be numbers") from None
    if not (speed > 0 and math.isfinite(speed)) or not (start >= 0 and math.isfinite(start)):
        raise ConfigError(f"traffic {text!r}: speed must be above 0 and start 0 or more")
    return path, speed, start


def with_trace_window(text: str, speed: float | None, start_s: float | None) -> str:
    """A trace spec with --trace-speed and --trace-start applied (other specs refuse them)."""
    if speed is None and start_s is None:
        return text
    spec = parse_traffic(text)
    if spec.kind != "trace":
        raise ConfigError("--trace-speed and --trace-start apply to trace:FILE traffic only")
    spec = replace(
        spec,
        speed=spec.speed if speed is None else speed,
        start_s=spec.start_s if start_s is None else start_s,
    )
    return spec.describe()


def _numbers(text: str, args: str) -> list[float]:
    try:
        return [float(a) for a in args.split(",") if a.strip()]
    except ValueError:
        raise ConfigError(f"traffic {text!r}: {args!r} are not numbers") from None


def _count(text: str, values: list[float], n: int) -> list[float]:
    if len(values) != n:
        raise ConfigError(f"traffic {text!r}: expected {n} number{'s' * (n > 1)}")
    return values


def _positive(text: str, what: str, value: float) -> float:
    if not value > 0 or not math.isfinite(value):
        raise ConfigError(f"traffic {text!r}: {what} must be positive, got {value:g}")
    return value
