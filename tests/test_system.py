"""`opscope system`: machine inventory, NVML probing with fakes, peaks measurement and cache."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engine.backends.ort.inference_session import gpu_present
from engine.machine import peaks, system
from tests.test_cli import opscope


class _NVMLError(Exception):
    pass


class _LibraryNotFound(_NVMLError):
    pass


def fake_nvml(count: int = 1, init_error: type[Exception] | None = None) -> Any:
    """A pynvml stand-in with `count` H100-like GPUs."""

    def init() -> None:
        if init_error:
            raise init_error("fake")

    def max_clock(h: int, kind: int) -> int:
        return 2619 if kind == 2 else 1980  # mem MHz, SM MHz

    return SimpleNamespace(
        NVMLError=_NVMLError,
        NVMLError_LibraryNotFound=_LibraryNotFound,
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
        nvmlInit=init,
        nvmlShutdown=lambda: None,
        nvmlSystemGetDriverVersion=lambda: b"580.65.06",
        nvmlSystemGetCudaDriverVersion=lambda: 13000,
        nvmlDeviceGetCount=lambda: count,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: "NVIDIA H100 80GB HBM3",
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=80 * 10**9),
        nvmlDeviceGetMaxClockInfo=max_clock,
        nvmlDeviceGetMemoryBusWidth=lambda h: 5120,
        nvmlDeviceGetPowerManagementLimit=lambda h: 700000,
    )


def test_nvml_library_not_found_is_a_reason() -> None:
    out = system.nvml_info(fake_nvml(init_error=_LibraryNotFound))
    assert out == {"gpus": [], "reason": system.NO_DRIVER}


def test_nvml_other_failure_is_a_reason() -> None:
    out = system.nvml_info(fake_nvml(init_error=_NVMLError))
    assert out["gpus"] == [] and out["reason"].startswith("NVML failed to start")


def test_nvml_no_device() -> None:
    out = system.nvml_info(fake_nvml(count=0))
    assert out["gpus"] == [] and out["reason"] == system.NO_GPU


def test_nvml_gpu_facts_and_theoretical_bandwidth() -> None:
    out = system.nvml_info(fake_nvml())
    assert out["reason"] is None and out["driver"] == "580.65.06" and out["cuda"] == "13.0"
    (gpu,) = out["gpus"]
    assert gpu["name"] == "NVIDIA H100 80GB HBM3" and gpu["memory_gb"] == 80.0
    assert gpu["power_limit_w"] == 700.0
    # 2619 MHz x 5120 bits x 2 (DDR) / 8 bits per byte = 3352.3 GB/s
    assert gpu["theoretical_gbps"] == pytest.approx(3352.3, abs=0.1)


def test_real_nvml_absent_here(monkeypatch: pytest.MonkeyPatch) -> None:
    import pynvml

    def boom() -> None:
        raise pynvml.NVMLError_LibraryNotFound()

    monkeypatch.setattr(pynvml, "nvmlInit", boom)
    assert system.nvml_info() == {"gpus": [], "reason": system.NO_DRIVER}


def test_providers_usable_is_the_truth() -> None:
    p = system.providers_info()
    assert "CPUExecutionProvider" in p["available"] and "CPUExecutionProvider" in p["usable"]
    assert set(p["usable"]) <= set(p["available"])
    if not gpu_present():
        assert p["usable"] == ["CPUExecutionProvider"]


def test_versions_do_not_import_torch() -> None:
    v = system.versions()
    assert v["python"] and v["onnxruntime"] and v["numpy"]
    assert v["nvidia_driver"] is None


def test_small_measurements_are_positive() -> None:
    assert peaks.measure_memory_gbps(elements=2**20, repeats=1) > 0.1
    assert peaks.measure_cpu_gflops(n=128, repeats=1) > 0.01
    assert "name" in peaks.blas_info()


def test_peaks_cached_and_remeasured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))
    calls: list[int] = []

    def fake() -> dict[str, Any]:
        calls.append(1)
        return {"memory_gbps": 10.0 * len(calls), "gflops": 100.0}

    monkeypatch.setattr(peaks, "measure_cpu_peaks", fake)
    assert peaks.cached_peaks() is None
    first = peaks.load_peaks(gpu=False)
    assert first["cpu"]["memory_gbps"] == 10.0 and first["gpu"] is None
    assert peaks.load_peaks(gpu=False)["cpu"]["memory_gbps"] == 10.0
    assert len(calls) == 1
    assert peaks.load_peaks(remeasure=True, gpu=False)["cpu"]["memory_gbps"] == 20.0
    assert peaks.cached_peaks()["cpu"]["memory_gbps"] == 20.0  # type: ignore[index]
    assert peaks.peaks_path().parent == tmp_path / "peaks"
    assert json.loads(peaks.peaks_path().read_text())["key"]["cpu"] == system.cpu_model()


def test_corrupt_cache_is_ignored(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))
    peaks.peaks_path().parent.mkdir(parents=True)
    peaks.peaks_path().write_text("{not json")
    assert peaks.cached_peaks() is None


def test_roofs_for_provider() -> None:
    data = {
        "cpu": {"memory_gbps": 10.0, "gflops": 50.0},
        "gpu": {"memory_gbps": 3000.0, "gflops": 400000.0},
    }
    assert peaks.roofs_for(data, "CPUExecutionProvider") == (10.0, 50.0)
    assert peaks.roofs_for(data, "CUDAExecutionProvider") == (3000.0, 400000.0)
    assert peaks.roofs_for({**data, "gpu": None}, "CUDAExecutionProvider") is None


def test_cli_system_json() -> None:
    proc = opscope("system", "--json", "-")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert list(data) == [
        "cpu",
        "memory_gb",
        "os",
        "versions",
        "providers",
        "gpus",
        "gpu_reason",
        "peaks",
    ]
    assert data["cpu"]["model"] and data["cpu"]["cores"] >= 1
    assert "CPUExecutionProvider" in data["providers"]["usable"]
    assert data["peaks"]["cpu"]["memory_gbps"] > 0 and data["peaks"]["cpu"]["gflops"] > 0
    if not gpu_present():
        assert data["gpus"] == [] and data["gpu_reason"]
    assert "cpu peaks" in proc.stderr  # the summary goes to stderr when JSON is on stdout
