"""NVIDIA GPU telemetry through NVML: utilisation, memory, power, clocks, temperature,
throttle reasons and PCIe traffic per GPU, plus GPM metrics (DRAM bandwidth utilisation,
SM occupancy, tensor activity) on GPUs that support GPM (Hopper and newer).

Metric names are `gpu{i}_<metric>_<unit>`, values floats, like engine/machine/cpu_telemetry.py's.
Written against nvidia-ml-py 13's pynvml; the real-GPU path has NOT run on a GPU here (the
naming and units are tested with a fake pynvml).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from engine.events import Notice
from engine.hostinfo import start_nvml

# nvmlClocksEventReason* bits (the same values as the older ClocksThrottleReason names).
THROTTLE_REASONS = {
    0x1: "idle",
    0x2: "application clocks",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clock setting",
}
BENIGN_THROTTLE = 0x1 | 0x2  # idle and application clocks are not a slowdown of the run

# GPM metric id -> our suffix (ids from pynvml: NVML_GPM_METRIC_*)
GPM_METRICS = {
    "NVML_GPM_METRIC_DRAM_BW_UTIL": "dram_bw_util_percent",
    "NVML_GPM_METRIC_SM_UTIL": "sm_util_percent",
    "NVML_GPM_METRIC_SM_OCCUPANCY": "sm_occupancy_percent",
    "NVML_GPM_METRIC_ANY_TENSOR_UTIL": "tensor_util_percent",
}


class GpuUnavailable(Exception):
    """No NVML, no driver or no GPU: `reason` says which, in words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class GpuSampler:
    """Samples every GPU NVML sees; call it (or `sample()`) from the telemetry thread."""

    def __init__(self, nvml: Any = None) -> None:
        nvml, reason = start_nvml(nvml)
        if nvml is None:
            raise GpuUnavailable(reason or "NVML unavailable")
        self._nvml = nvml
        count = nvml.nvmlDeviceGetCount()
        if not count:
            nvml.nvmlShutdown()
            raise GpuUnavailable("no NVIDIA GPU")
        self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        self._gpm: dict[int, list[Any]] = {}  # gpu index -> [previous sample, current sample]
        for i, h in enumerate(self._handles):
            try:
                if nvml.nvmlGpmQueryDeviceSupport(h).isSupportedDevice:
                    self._gpm[i] = [nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc(), False]
            except Exception:  # GPM absent (pre-Hopper, old driver, or old nvidia-ml-py)
                continue

    def __call__(self) -> dict[str, float]:
        return self.sample()

    def sample(self) -> dict[str, float]:
        """One reading of every GPU; a metric a GPU does not support is simply absent."""
        nvml = self._nvml
        out: dict[str, float] = {}
        for i, h in enumerate(self._handles):
            p = f"gpu{i}_"
            util = _try(nvml.nvmlDeviceGetUtilizationRates, h)
            if util is not None:
                out[p + "util_percent"] = float(util.gpu)
                out[p + "mem_util_percent"] = float(util.memory)
            mem = _try(nvml.nvmlDeviceGetMemoryInfo, h)
            if mem is not None:
                out[p + "mem_used_mb"] = mem.used / 2**20
            _put(out, p + "power_w", _try(nvml.nvmlDeviceGetPowerUsage, h), 1e-3)  # mW
            _put(out, p + "sm_clock_mhz", _try(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM))
            _put(
                out, p + "mem_clock_mhz", _try(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_MEM)
            )
            _put(
                out, p + "temp_c", _try(nvml.nvmlDeviceGetTemperature, h, nvml.NVML_TEMPERATURE_GPU)
            )
            reasons = (
                getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
            )
            _put(out, p + "throttle_reasons", _try(reasons, h))
            for name, counter in (
                ("pcie_tx_mbps", nvml.NVML_PCIE_UTIL_TX_BYTES),
                ("pcie_rx_mbps", nvml.NVML_PCIE_UTIL_RX_BYTES),
            ):
                _put(
                    out, p + name, _try(nvml.nvmlDeviceGetPcieThroughput, h, counter), 1024 / 1e6
                )  # KB/s -> MB/s
            if i in self._gpm:
                out.update(self._gpm_values(i, h, p))
        return out

    def _gpm_values(self, i: int, h: Any, prefix: str) -> dict[str, float]:
        """GPM metrics between the previous and this call's samples (none on the first)."""
        nvml = self._nvml
        slot = self._gpm[i]
        prev, cur, primed = slot
        try:
            nvml.nvmlGpmSampleGet(h, cur)
        except Exception:
            return {}
        slot[0], slot[1], slot[2] = cur, prev, True
        if not primed:
            return {}
        ids = [(getattr(nvml, k), v) for k, v in GPM_METRICS.items() if hasattr(nvml, k)]
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(ids)
        request.sample1 = prev
        request.sample2 = cur
        for k, (metric_id, _) in enumerate(ids):
            request.metrics[k].metricId = metric_id
        try:
            nvml.nvmlGpmMetricsGet(request)
        except Exception:
            return {}
        out: dict[str, float] = {}
        for k, (_, suffix) in enumerate(ids):
            metric = request.metrics[k]
            if metric.nvmlReturn == 0:  # NVML_SUCCESS
                out[prefix + suffix] = float(metric.value)
        return out

    def close(self) -> None:
        """Free GPM samples and shut NVML down."""
        for prev, cur, _ in self._gpm.values():
            _try(self._nvml.nvmlGpmSampleFree, prev)
            _try(self._nvml.nvmlGpmSampleFree, cur)
        self._gpm.clear()
        _try(self._nvml.nvmlShutdown)


def gpu_sampler_or_none() -> GpuSampler | None:
    """A GpuSampler when NVML sees a GPU, else None (never raises)."""
    try:
        return GpuSampler()
    except Exception:
        return None


def throttle_names(mask: int) -> list[str]:
    """The named reasons set in a clocks-event bitmask, low bits first."""
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


class ThrottleWatch:
    """Collects throttle bitmasks from telemetry values (from any thread); `notice()` names
    the real slowdowns of a whole run, `fresh()` only those not reported yet (for a live
    run, flagged when they first appear rather than hours later at its end)."""

    def __init__(self) -> None:
        self.mask = 0
        self._reported = 0
        self._lock = threading.Lock()

    def feed(self, values: dict[str, float]) -> None:
        for name, value in values.items():
            if name.endswith("_throttle_reasons"):
                with self._lock:
                    self.mask |= int(value) & ~BENIGN_THROTTLE

    def feed_many(self, samples: Iterable[dict[str, float]]) -> None:
        for values in samples:
            self.feed(values)

    def reset(self) -> None:
        """A new run: nothing seen, nothing reported."""
        with self._lock:
            self.mask = self._reported = 0

    def notice(self) -> Notice | None:
        """A warning naming the slowdowns seen, or None when the GPU ran unthrottled."""
        if not self.mask:
            return None
        return Notice(
            "warning", f"GPU throttled during the run: {', '.join(throttle_names(self.mask))}"
        )

    def fresh(self) -> Notice | None:
        """A warning naming slowdowns seen since the last call, or None."""
        with self._lock:
            new = self.mask & ~self._reported
            self._reported |= new
        if not new:
            return None
        return Notice(
            "warning", f"GPU throttling during this run: {', '.join(throttle_names(new))}"
        )


def _try(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # NotSupported on this GPU: leave the metric out
        return None


def _put(out: dict[str, float], name: str, value: Any, scale: float = 1.0) -> None:
    if isinstance(value, int | float):
        out[name] = float(value) * scale
