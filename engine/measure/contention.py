"""How busy the machine was while something was measured.

A timing, a profile, a calibration, a trial or a peaks measurement on a shared machine is
only as good as the CPU it got. `ContentionProbe` reads the kernel's counters (psutil's
`cpu_times`, i.e. /proc/stat, and this process's own CPU time) at the start and the end of
a window and turns their difference into a `Contention`:

- `others_cpu`: CPUs' worth of time that every other process took (total busy time minus
  this process's), the mean over the window: 1.0 is one core kept busy by someone else;
- `app_cpu`: the part of `others_cpu` that was OpScope's own other processes (the window,
  another job), when the app named its root process (`OPSCOPE_ROOT_PID`);
- `steal`: CPUs' worth of time the hypervisor gave to other guests;
- `clock_ratio`: the cores' mean clock against their maximum, where the kernel says both;
- `nice`: this process's niceness (above 0: it yielded the CPU to others by choice);
- on a GPU run (a `GpuLoad` given, engine/machine/gpu_contention.py): `gpu_others`, the
  mean SM utilisation other processes had on the run's GPU (percent), and `gpu_throttle`,
  the clock slowdowns NVML reported (power cap, thermal, ...; idle is not one).

`verdict` is "busy" when others took a real share of the machine (`BUSY_OTHERS_CPU`, or a
tenth of its CPUs on a big one), when steal or a lowered clock did the same, or when the
measured process ran deprioritised while others wanted the CPU; "quiet" otherwise.
`line()` explains it in one line with the numbers.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

BUSY_OTHERS_CPU = 0.25  # CPUs: a quarter of a core taken by others moves a 2-core timing
BUSY_SHARE = 0.10  # ... or a tenth of a bigger machine's CPUs
BUSY_STEAL_CPU = 0.10  # CPUs stolen by the hypervisor
BUSY_CLOCK_RATIO = 0.80  # cores held below 80% of their maximum clock
BUSY_GPU_OTHERS = 10.0  # percent of the GPU's SMs kept busy by other processes
NICE_OTHERS_CPU = 0.05  # deprioritised and others wanted the CPU: starved, so busy
ROOT_ENV = "OPSCOPE_ROOT_PID"  # the app's root process: its tree is "OpScope's own"


@dataclass(frozen=True, slots=True)
class Contention:
    """How busy the machine was over one window (CPUs are core-equivalents, means)."""

    window_s: float
    cpus: int
    others_cpu: float
    steal: float
    own_cpu: float
    app_cpu: float | None = None
    clock_ratio: float | None = None
    nice: int = 0
    gpu_others: float | None = None  # other processes' SM utilisation, percent (GPU runs)
    gpu_throttle: str | None = None  # NVML's clock slowdowns seen, in words

    @property
    def verdict(self) -> str:
        return "busy" if self.reasons() else "quiet"

    @property
    def busy(self) -> bool:
        return bool(self.reasons())

    def reasons(self) -> list[str]:
        """What made the window busy, each a short phrase with its number (empty: quiet)."""
        out: list[str] = []
        limit = max(BUSY_OTHERS_CPU, BUSY_SHARE * self.cpus)
        if self.others_cpu >= limit:
            mine = ""
            if self.app_cpu is not None and self.app_cpu >= 0.05:
                mine = f", {self.app_cpu:.2f} of them OpScope's own window or jobs"
            out.append(f"other processes used {self.others_cpu:.2f} of {self.cpus} CPUs{mine}")
        if self.steal >= BUSY_STEAL_CPU:
            out.append(f"the hypervisor stole {self.steal:.2f} CPUs")
        if self.clock_ratio is not None and self.clock_ratio < BUSY_CLOCK_RATIO:
            out.append(f"the clock ran at {self.clock_ratio:.0%} of its maximum")
        if self.gpu_others is not None and self.gpu_others >= BUSY_GPU_OTHERS:
            out.append(f"other processes kept {self.gpu_others:.0f}% of the GPU busy")
        if self.gpu_throttle:
            out.append(f"the GPU's clocks were held down ({self.gpu_throttle})")
        if self.nice > 0 and self.others_cpu >= NICE_OTHERS_CPU and not out:
            out.append(
                f"the measured process ran deprioritised (nice {self.nice}) while others "
                f"used {self.others_cpu:.2f} CPUs"
            )
        return out

    def line(self) -> str:
        """One line: the verdict and the numbers behind it."""
        why = self.reasons()
        if why:
            return f"busy: {'; '.join(why)} over {self.window_s:.1f} s"
        nice = f", nice {self.nice}" if self.nice > 0 else ""
        return (
            f"quiet: others used {self.others_cpu:.2f} of {self.cpus} CPUs over "
            f"{self.window_s:.1f} s{nice}"
        )

    def short(self) -> str:
        """A few characters for a table cell: "quiet", "busy 1.9"."""
        return f"busy {self.others_cpu:.1f}" if self.busy else "quiet"

    def _rounded(self) -> Contention:
        """Itself with the numbers as its JSON keeps them (3 decimals)."""

        def r3(v: float | None) -> float | None:
            return None if v is None else round(v, 3)

        return dataclasses.replace(
            self, others_cpu=round(self.others_cpu, 3), steal=round(self.steal, 3),
            clock_ratio=r3(self.clock_ratio), own_cpu=round(self.own_cpu, 3),
            app_cpu=r3(self.app_cpu), window_s=round(self.window_s, 3),
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "others_cpu": round(self.others_cpu, 3),
            "steal": round(self.steal, 3),
            "clock_ratio": None if self.clock_ratio is None else round(self.clock_ratio, 3),
            "own_cpu": round(self.own_cpu, 3),
            "app_cpu": None if self.app_cpu is None else round(self.app_cpu, 3),
            "cpus": self.cpus,
            "nice": self.nice,
            "window_s": round(self.window_s, 3),
            "gpu_others": None if self.gpu_others is None else round(self.gpu_others, 1),
            "gpu_throttle": self.gpu_throttle,
            "line": self._rounded().line(),  # as the file's numbers say it, read back alike
        }

    @classmethod
    def from_json(cls, d: Any) -> Contention | None:
        """From `to_json`'s dict (a session file's, untrusted): None when it is not one."""
        if not isinstance(d, dict):
            return None
        try:
            app = d.get("app_cpu")
            clock = d.get("clock_ratio")
            gpu = d.get("gpu_others")
            throttle = d.get("gpu_throttle")
            return cls(
                window_s=float(d["window_s"]),
                cpus=int(d["cpus"]),
                others_cpu=float(d["others_cpu"]),
                steal=float(d.get("steal") or 0.0),
                own_cpu=float(d.get("own_cpu") or 0.0),
                app_cpu=None if app is None else float(app),
                clock_ratio=None if clock is None else float(clock),
                nice=int(d.get("nice") or 0),
                gpu_others=None if gpu is None else float(gpu),
                gpu_throttle=throttle if isinstance(throttle, str) else None,
            )
        except (KeyError, TypeError, ValueError):
            return None


def combine(parts: Iterable[Contention]) -> Contention | None:
    """Several windows as one: each figure the time-weighted mean (None for none)."""
    parts = [p for p in parts if p.window_s > 0]
    if not parts:
        return None
    total = sum(p.window_s for p in parts)

    def mean(values: list[tuple[float, float]]) -> float:
        return sum(v * w for v, w in values) / sum(w for _, w in values)

    apps = [(p.app_cpu, p.window_s) for p in parts if p.app_cpu is not None]
    clocks = [(p.clock_ratio, p.window_s) for p in parts if p.clock_ratio is not None]
    gpus = [(p.gpu_others, p.window_s) for p in parts if p.gpu_others is not None]
    throttles = sorted({t for p in parts if p.gpu_throttle for t in p.gpu_throttle.split(", ")})
    return Contention(
        window_s=total,
        cpus=max(p.cpus for p in parts),
        others_cpu=mean([(p.others_cpu, p.window_s) for p in parts]),
        steal=mean([(p.steal, p.window_s) for p in parts]),
        own_cpu=mean([(p.own_cpu, p.window_s) for p in parts]),
        app_cpu=mean(apps) if apps else None,
        clock_ratio=mean(clocks) if clocks else None,
        nice=max(p.nice for p in parts),
        gpu_others=mean(gpus) if gpus else None,
        gpu_throttle=", ".join(throttles) or None,
    )


class LoadTotal:
    """The machine's load over a run as running sums: what `combine` makes of all of its
    windows, without keeping them (a window a second: an hour's live run kept 3,600)."""

    def __init__(self) -> None:
        self.windows = 0
        self._w = self._others = self._steal = self._own = 0.0
        self._app = [0.0, 0.0]  # sum of value x weight, sum of weights (where present)
        self._clock = [0.0, 0.0]
        self._gpu = [0.0, 0.0]
        self._cpus = self._nice = 0
        self._throttles: set[str] = set()

    def add(self, c: Contention) -> None:
        if c.window_s <= 0:  # as combine: a window of no time weighs nothing
            return
        w = c.window_s
        self.windows += 1
        self._w += w
        self._others += c.others_cpu * w
        self._steal += c.steal * w
        self._own += c.own_cpu * w
        for sums, v in ((self._app, c.app_cpu), (self._clock, c.clock_ratio),
                        (self._gpu, c.gpu_others)):  # fmt: skip
            if v is not None:
                sums[0] += v * w
                sums[1] += w
        self._cpus = c.cpus if self.windows == 1 else max(self._cpus, c.cpus)
        self._nice = c.nice if self.windows == 1 else max(self._nice, c.nice)
        if c.gpu_throttle:
            self._throttles.update(c.gpu_throttle.split(", "))

    def combined(self) -> Contention | None:
        """Every window added as one, each figure the time-weighted mean (None for none)."""
        if not self.windows:
            return None

        def mean(sums: list[float]) -> float | None:
            return sums[0] / sums[1] if sums[1] else None

        w = self._w
        return Contention(
            window_s=w,
            cpus=self._cpus,
            others_cpu=self._others / w,
            steal=self._steal / w,
            own_cpu=self._own / w,
            app_cpu=mean(self._app),
            clock_ratio=mean(self._clock),
            nice=self._nice,
            gpu_others=mean(self._gpu),
            gpu_throttle=", ".join(sorted(self._throttles)) or None,
        )


@dataclass(frozen=True, slots=True)
class Counters:
    """One reading of the counters (seconds of CPU time, summed over CPUs)."""

    t: float
    busy_s: float
    steal_s: float
    own_s: float
    app_s: float | None
    clock_ratio: float | None
    gpu_mark: Any = None  # the GPU probe's own reading (a timestamp), when there is one


class GpuLoad(Protocol):
    """What the probe needs of a GPU's counters: a mark now, and since a mark the other
    processes' mean SM utilisation (percent, None: not known) and the slowdowns seen."""

    def mark(self) -> Any: ...

    def since(self, mark: Any) -> tuple[float | None, str | None]: ...


class ContentionProbe:
    """Reads the counters; `since(start)` is the contention from `start` to now. A reading
    costs about 0.05 ms (0.3-3 ms with an app tree to walk); take one per window, not one
    per inference."""

    def __init__(self, root_pid: int | None = None, gpu: GpuLoad | None = None) -> None:
        import psutil

        self.gpu = gpu
        self._psutil = psutil
        self._proc = psutil.Process()
        self.cpus = psutil.cpu_count() or 1
        if root_pid is None:
            raw = os.environ.get(ROOT_ENV, "")
            root_pid = int(raw) if raw.isdigit() else None
        self._root = None
        if root_pid is not None and root_pid != os.getpid():
            try:
                self._root = psutil.Process(root_pid)
            except psutil.Error:
                self._root = None

    def read(self) -> Counters:
        ps = self._psutil
        t = time.monotonic()
        ct = ps.cpu_times()
        idle = ct.idle + getattr(ct, "iowait", 0.0)
        steal = getattr(ct, "steal", 0.0)
        guest = getattr(ct, "guest", 0.0) + getattr(ct, "guest_nice", 0.0)
        busy = sum(ct) - idle - steal - guest  # guest time is counted in user already
        own = self._proc.cpu_times()
        own_s = own.user + own.system
        mark = self.gpu.mark() if self.gpu is not None else None
        return Counters(t, busy, steal, own_s, self._app_seconds(), self._clock_ratio(), mark)

    def since(self, start: Counters, end: Counters | None = None) -> Contention:
        end = end or self.read()
        dt = max(end.t - start.t, 1e-9)
        own = max(end.own_s - start.own_s, 0.0) / dt
        others = max(end.busy_s - start.busy_s, 0.0) / dt - own
        app = None
        if end.app_s is not None and start.app_s is not None:
            app = min(max(end.app_s - start.app_s, 0.0) / dt, max(others, 0.0))
        clocks = [c for c in (start.clock_ratio, end.clock_ratio) if c is not None]
        gpu_others, throttle = None, None
        if self.gpu is not None and start.gpu_mark is not None:
            try:
                gpu_others, throttle = self.gpu.since(start.gpu_mark)
            except Exception:  # a flaky NVML call says nothing rather than stop a run
                gpu_others, throttle = None, None
        return Contention(
            window_s=dt,
            cpus=self.cpus,
            others_cpu=max(others, 0.0),
            steal=max(end.steal_s - start.steal_s, 0.0) / dt,
            own_cpu=own,
            app_cpu=app,
            clock_ratio=min(clocks) if clocks else None,
            nice=_niceness(),
            gpu_others=gpu_others,
            gpu_throttle=throttle,
        )

    def _app_seconds(self) -> float | None:
        """CPU seconds of OpScope's other processes (the root's tree less this process),
        children already reaped included; None without a root."""
        if self._root is None:
            return None
        ps = self._psutil
        total = 0.0
        try:
            procs = [self._root, *self._root.children(recursive=True)]
        except ps.Error:
            return None
        me = os.getpid()
        for p in procs:
            if p.pid == me:
                continue
            try:
                c = p.cpu_times()
            except ps.Error:
                continue
            total += c.user + c.system
            total += getattr(c, "children_user", 0.0) + getattr(c, "children_system", 0.0)
        return total

    def _clock_ratio(self) -> float | None:
        try:
            f = self._psutil.cpu_freq()
        except (OSError, NotImplementedError, AttributeError):
            return None
        if f is None or not f.max or not f.current:
            return None  # a VM often reports no maximum: unknown, not slow
        return min(float(f.current) / float(f.max), 1.0)


def _niceness() -> int:
    try:
        return int(os.getpriority(os.PRIO_PROCESS, 0))
    except (AttributeError, OSError):
        return 0


class Window:
    """A probe started now; `done()` gives the contention since (safe to call repeatedly).
    A machine without the counters gives None rather than a guess."""

    def __init__(self, probe: ContentionProbe | None = None) -> None:
        try:
            self._probe = probe or ContentionProbe()
            self._start: Counters | None = self._probe.read()
        except Exception:  # no psutil counters here: say nothing rather than guess
            self._start = None

    def done(self) -> Contention | None:
        if self._start is None:
            return None
        try:
            return self._probe.since(self._start)
        except Exception:
            return None

    def lap(self) -> Contention | None:
        """The contention since the last lap (or the start), and a new lap begins."""
        if self._start is None:
            return None
        try:
            end = self._probe.read()
            out = self._probe.since(self._start, end)
        except Exception:
            return None
        self._start = end
        return out
