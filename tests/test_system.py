"""`opscope system`: machine inventory, NVML probing with fakes, peaks measurement and cache."""

from __future__ import annotations

import json
import math
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


def test_roofs_for_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.machine import theoretical
    from engine.measure.roofline import MemoryRoof, Roofs, simple_roofs

    monkeypatch.setattr(theoretical, "cpu_theoretical", lambda: None)  # no clock known

    data: dict[str, Any] = {
        "cpu": {"memory_gbps": 10.0, "gflops": 50.0},
        "gpu": {"memory_gbps": 3000.0, "gflops": 400000.0},
    }
    assert peaks.roofs_for(data, "CPUExecutionProvider") == simple_roofs(10.0, 50.0)
    assert peaks.roofs_for(data, "CUDAExecutionProvider") == simple_roofs(3000.0, 400000.0)
    assert peaks.roofs_for({**data, "gpu": None}, "CUDAExecutionProvider") is None
    levels = [{"name": "L1", "bytes": 65536, "gbps": 180.0}, {"name": "L2", "bytes": "x",
              "gbps": 120.0}, {"name": "L3", "gbps": -1}, {"name": "DRAM", "bytes": None,
              "gbps": 12.0}]  # fmt: skip
    cpu = {**data["cpu"], "levels": levels, "int_gops": 120.0}
    assert peaks.roofs_for({**data, "cpu": cpu}, "CPUExecutionProvider") == Roofs(
        (MemoryRoof("L1", 65536, 180.0), MemoryRoof("L2", math.inf, 120.0),
         MemoryRoof("DRAM", math.inf, 12.0)),
        50.0,
        120.0,
    )  # fmt: skip


def test_cache_levels_from_the_os(tmp_path: Path) -> None:
    from engine.machine.caches import CacheLevel, cache_levels

    for i, (level, kind, size, shared) in enumerate(
        [(1, "Data", "48K", "0"), (1, "Instruction", "32K", "0"), (2, "Unified", "2048K", "0"),
         (3, "Unified", "32M", "0-3,8-11")]
    ):  # fmt: skip
        d = tmp_path / f"index{i}"
        d.mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size),
                            ("shared_cpu_list", shared)):  # fmt: skip
            (d / name).write_text(f"{value}\n")
    assert cache_levels(tmp_path) == [
        CacheLevel("L1", 48 * 1024, 1), CacheLevel("L2", 2 * 2**20, 1),
        CacheLevel("L3", 32 * 2**20, 8),
    ]  # fmt: skip
    assert cache_levels(tmp_path / "missing") == []


def test_level_roofs_never_fall_towards_the_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """L1's short rows pay numpy's per-row overhead: measured below L2, its roof is L2's."""
    from engine.machine import level_bandwidth as lb
    from engine.machine.caches import CacheLevel

    rates = {16 * 1024: 150.0, 512 * 1024: 200.0, 8 * 2**20: 90.0}
    monkeypatch.setattr(lb, "stream_gbps", lambda ws, threads, repeats=5: rates.get(ws, 30.0))
    roofs = lb.level_roofs([CacheLevel("L1", 32 * 1024, 1), CacheLevel("L2", 2**20, 1),
                            CacheLevel("L3", 32 * 2**20, 2)], threads=2)  # fmt: skip
    assert [(r.name, r.gbps) for r in roofs] == [
        ("L1", 200.0),
        ("L2", 200.0),
        ("L3", 90.0),
        ("DRAM", 30.0),
    ]
    assert [r.capacity for r in roofs[:3]] == [64 * 1024, 2 * 2**20, 32 * 2**20]


def test_a_real_hierarchy_is_measured_quickly() -> None:
    """The stride-0 kernel on this machine: every level positive, DRAM last."""
    from engine.machine.caches import cache_levels
    from engine.machine.level_bandwidth import level_roofs

    roofs = level_roofs(cache_levels(), threads=1, repeats=1)
    assert roofs[-1].name == "DRAM" and all(r.gbps > 0.1 for r in roofs)


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
        "contention",
    ]
    assert data["peaks"]["trust"]["status"] in ("quiet", "busy", "implausible", "unknown",
                                                "legacy")  # fmt: skip
    assert data["cpu"]["model"] and data["cpu"]["cores"] >= 1
    assert "CPUExecutionProvider" in data["providers"]["usable"]
    assert data["peaks"]["cpu"]["memory_gbps"] > 0 and data["peaks"]["cpu"]["gflops"] > 0
    if not gpu_present():
        assert data["gpus"] == [] and data["gpu_reason"]
    assert "cpu roofs" in proc.stderr  # the summary goes to stderr when JSON is on stdout
    assert "\npeaks      " in proc.stderr and "\nmachine    " in proc.stderr  # busy, in words
