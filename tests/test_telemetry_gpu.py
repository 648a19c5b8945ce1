"""GPU telemetry with a fake pynvml, NVML absence, throttle notices, and telemetry recorded
by CLI sessions."""

from __future__ import annotations

import ctypes
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engine.events import Notice, RunEnded, Telemetry
from engine.machine.gpu_telemetry import GpuSampler, GpuUnavailable, ThrottleWatch, throttle_names
from engine.run.cli_telemetry import RunTelemetry
from tests.test_system import _LibraryNotFound, _NVMLError, fake_nvml


class _Metric(ctypes.Structure):
    _fields_ = [
        ("metricId", ctypes.c_uint),
        ("nvmlReturn", ctypes.c_int),
        ("value", ctypes.c_double),
    ]


class _MetricsGet(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("numMetrics", ctypes.c_uint),
        ("sample1", ctypes.c_void_p),
        ("sample2", ctypes.c_void_p),
        ("metrics", _Metric * 8),
    ]


def sampling_nvml(gpm: bool = True, throttle: int = 0x4) -> Any:
    """fake_nvml plus the live readings, in NVML's own units (mW, KB/s, bytes)."""
    nvml = fake_nvml()
    seen: list[tuple[int, int]] = []

    def metrics_get(req: Any) -> Any:
        for k in range(req.numMetrics):
            req.metrics[k].value = 10.0 * (k + 1)
            req.metrics[k].nvmlReturn = 0
        seen.append((req.numMetrics, req.version))
        return req

    extra = dict(
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
        NVML_TEMPERATURE_GPU=0,
        NVML_PCIE_UTIL_TX_BYTES=0,
        NVML_PCIE_UTIL_RX_BYTES=1,
        nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=87, memory=42),
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=80 * 2**30, used=3 * 2**30),
        nvmlDeviceGetPowerUsage=lambda h: 312500,
        nvmlDeviceGetClockInfo=lambda h, kind: 1755 if kind == 1 else 2619,
        nvmlDeviceGetTemperature=lambda h, sensor: 61,
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: throttle,
        nvmlDeviceGetPcieThroughput=lambda h, c: 1000 if c == 0 else 2000,
        nvmlGpmQueryDeviceSupport=lambda h: SimpleNamespace(isSupportedDevice=int(gpm)),
        nvmlGpmSampleAlloc=lambda: ctypes.c_void_p(1),
        nvmlGpmSampleGet=lambda h, s: s,
        nvmlGpmSampleFree=lambda s: None,
        c_nvmlGpmMetricsGet_t=_MetricsGet,
        NVML_GPM_METRICS_GET_VERSION=1,
        NVML_GPM_METRIC_DRAM_BW_UTIL=10,
        NVML_GPM_METRIC_SM_UTIL=2,
        NVML_GPM_METRIC_SM_OCCUPANCY=3,
        NVML_GPM_METRIC_ANY_TENSOR_UTIL=5,
        nvmlGpmMetricsGet=metrics_get,
        gpm_calls=seen,
    )
    for k, v in extra.items():
        setattr(nvml, k, v)
    return nvml


def test_metric_names_and_units() -> None:
    sampler = GpuSampler(sampling_nvml(gpm=False))
    values = sampler.sample()
    sampler.close()
    assert values == {
        "gpu0_util_percent": 87.0,
        "gpu0_mem_util_percent": 42.0,
        "gpu0_mem_used_mb": 3072.0,
        "gpu0_power_w": 312.5,
        "gpu0_sm_clock_mhz": 1755.0,
        "gpu0_mem_clock_mhz": 2619.0,
        "gpu0_temp_c": 61.0,
        "gpu0_throttle_reasons": 4.0,
        "gpu0_pcie_tx_mbps": pytest.approx(1.024),
        "gpu0_pcie_rx_mbps": pytest.approx(2.048),
    }


def test_gpm_metrics_from_the_second_sample_on() -> None:
    nvml = sampling_nvml(gpm=True)
    sampler = GpuSampler(nvml)
    assert "gpu0_dram_bw_util_percent" not in sampler.sample()  # one sample: no interval yet
    values = sampler()
    assert values["gpu0_dram_bw_util_percent"] == 10.0
    assert values["gpu0_sm_util_percent"] == 20.0
    assert values["gpu0_sm_occupancy_percent"] == 30.0
    assert values["gpu0_tensor_util_percent"] == 40.0
    assert nvml.gpm_calls == [(4, 1)]


def test_unsupported_metrics_are_left_out() -> None:
    nvml = sampling_nvml(gpm=False)

    def not_supported(*_: Any) -> int:
        raise _NVMLError("NotSupported")

    nvml.nvmlDeviceGetPowerUsage = not_supported
    nvml.nvmlDeviceGetPcieThroughput = not_supported
    values = GpuSampler(nvml).sample()
    assert "gpu0_power_w" not in values and "gpu0_pcie_tx_mbps" not in values
    assert values["gpu0_util_percent"] == 87.0


def test_absent_nvml_raises_gpu_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(GpuUnavailable, match="NVML library not found"):
        GpuSampler(fake_nvml(init_error=_LibraryNotFound))
    with pytest.raises(GpuUnavailable, match="no NVIDIA GPU"):
        GpuSampler(fake_nvml(count=0))
    import pynvml

    def boom() -> None:
        raise pynvml.NVMLError_LibraryNotFound()

    monkeypatch.setattr(pynvml, "nvmlInit", boom)
    with pytest.raises(GpuUnavailable) as info:
        GpuSampler()
    assert info.value.reason == "no NVIDIA driver (NVML library not found)"


def test_throttle_watch_ignores_idle_and_app_clocks() -> None:
    assert throttle_names(0x44) == ["software power cap", "hardware thermal slowdown"]
    watch = ThrottleWatch()
    watch.feed({"gpu0_throttle_reasons": 0x1 | 0x2, "cpu_percent": 50.0})
    assert watch.notice() is None
    watch.feed({"gpu0_throttle_reasons": 0x4})
    watch.feed({"gpu1_throttle_reasons": 0x40})
    assert watch.notice() == Notice(
        "warning", "GPU throttled during the run: software power cap, hardware thermal slowdown"
    )


def test_run_telemetry_interleaves_and_flags_throttling() -> None:
    import time

    def run() -> Any:
        for _ in range(3):
            time.sleep(0.03)
            yield Notice("info", "tick")
        yield RunEnded("ok")

    rt = RunTelemetry(interval_s=0.01, samplers=[lambda: {"gpu0_throttle_reasons": 8.0}])
    events = list(rt.interleave(run()))
    assert isinstance(events[-1], RunEnded)
    assert events[-2] == Notice("warning", "GPU throttled during the run: hardware slowdown")
    assert sum(isinstance(e, Telemetry) for e in events) >= 3


def test_cli_session_records_telemetry(tmp_path: Path) -> None:
    from engine.session.store import open_session_file
    from tests.conftest import DEMO_CNN
    from tests.test_cli import FAST, opscope

    session = tmp_path / "t.opscope"
    proc = opscope("bench", DEMO_CNN, *FAST, "--no-accuracy", "--session", session)
    assert proc.returncode == 0, proc.stderr
    reader = open_session_file(session)
    run_id = reader.runs()[-1].id
    telemetry = reader.telemetry(run_id)
    assert "cpu_percent" in telemetry and len(telemetry["cpu_percent"][0]) >= 2
    assert "rss_mb" in telemetry
