"""GPU paths: skipped without an NVIDIA GPU (here); the gpu_check script runs everywhere."""

from __future__ import annotations

import subprocess
import sys

import pytest

from engine.backends.ort.inference_session import gpu_present
from tests.conftest import DEMO_CNN, ROOT


def test_gpu_check_script_exits_0() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--seconds", "0.3"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "== CUDA graphs" in proc.stdout
    if not gpu_present():
        assert "unavailable: no NVIDIA GPU" in proc.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_present(), reason="no NVIDIA GPU (NVML sees none)")
def test_cuda_bench_uses_io_binding() -> None:
    from engine.cli.results import RunResult
    from engine.config import RunConfig
    from engine.model.workload import Workload
    from engine.run.bench import BenchRequest, run_bench
    from engine.run.timing import TimingPlan

    req = BenchRequest(
        Workload(str(DEMO_CNN), RunConfig(provider="cuda")),
        timing=TimingPlan(warmup_runs=5, warmup_s=0.1, min_runs=20, duration_s=0.3),
    )
    result = RunResult()
    for ev in run_bench(req):
        result.feed(ev)
    assert result.started and result.started.provider_used == "CUDAExecutionProvider"
    assert result.timing and result.timing.latency.count >= 20


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_present(), reason="no NVIDIA GPU (NVML sees none)")
def test_gpu_sampler_and_peaks_on_a_real_gpu() -> None:
    from engine.machine.gpu_telemetry import GpuSampler
    from engine.machine.peaks import measure_gpu_peaks

    sampler = GpuSampler()
    values = sampler.sample()
    sampler.close()
    assert values["gpu0_mem_used_mb"] > 0 and "gpu0_throttle_reasons" in values
    peaks = measure_gpu_peaks()
    assert peaks and peaks["memory_gbps"] > 100 and peaks["gflops"] > 1000


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_present(), reason="no NVIDIA GPU (NVML sees none)")
def test_the_memory_report_on_cuda_has_device_memory_and_the_weights_copy() -> None:
    from engine.config import RunConfig
    from engine.events import drive
    from engine.model.workload import Workload
    from engine.run.memory_job import MemoryRequest, memory_job

    req = MemoryRequest(Workload(str(DEMO_CNN), RunConfig(provider="cuda")), runs=3)
    report = drive(memory_job(req), lambda _: None)
    assert report["provider_used"] == "CUDAExecutionProvider"
    assert report["measured"]["device"]["bytes"]["steady"] > 0
    copy = report["load"]["weights_to_device"]
    assert copy["device"] == "cuda" and copy["bytes"] == report["weights_bytes"]["total"]
    assert copy["seconds"] > 0 and copy["gb_s"] > 0
