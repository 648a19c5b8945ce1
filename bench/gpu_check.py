"""One report on what the GPU paths do on this machine: NVML and GPM telemetry, measured
peaks, CUDA and TensorRT providers with IO binding on the demo models (FP32, FP16, INT8),
CUDA graphs, the torch engine on CUDA (needs a CUDA build of torch), and the live engine
host on CUDA (GPU roofs measured with timing paused, throttle flags). Without an NVIDIA
GPU every part says it is unavailable and it exits 0.

Written on a machine without a GPU: the GPU branches have been reviewed by reading only.
Run:  .venv/bin/python bench/gpu_check.py [--seconds 2]
On a lent GPU machine, bench/device/README.md carries what it needs and runs it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.backends.ort.inference_session import gpu_present  # noqa: E402
from engine.cli.results import RunResult  # noqa: E402
from engine.config import RunConfig  # noqa: E402
from engine.model.workload import Workload  # noqa: E402
from engine.run import host_commands as cmds  # noqa: E402
from engine.run.bench import BenchRequest, run_bench  # noqa: E402
from engine.run.timing import TimingPlan  # noqa: E402

MODELS = {
    "demo_transformer": ROOT / "resources/models/demo_transformer.onnx",
    "demo_cnn": ROOT / "resources/models/demo_cnn.onnx",
}


def section(title: str, body: Callable[[], list[str]]) -> None:
    """Print a titled part of the report; an exception becomes its one-line reason."""
    print(f"\n== {title}")
    try:
        for line in body():
            print(f"   {line}")
    except Exception as exc:
        print(f"   unavailable: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")


def nvml_part() -> list[str]:
    from engine.machine.gpu_telemetry import GpuSampler, throttle_names

    sampler = GpuSampler()
    sampler.sample()
    time.sleep(0.5)
    values = sampler.sample()  # the second sample carries GPM metrics where supported
    sampler.close()
    lines = [f"{k} = {v:.1f}" for k, v in sorted(values.items())]
    mask = int(values.get("gpu0_throttle_reasons", 0))
    lines.append(f"throttle reasons now: {throttle_names(mask) or ['none']}")
    if not any("dram_bw_util" in k for k in values):
        lines.append("GPM metrics: not reported (GPU or driver without GPM)")
    return lines


def peaks_part() -> list[str]:
    from engine.machine.peaks import load_peaks
    from engine.machine.system import nvml_info

    gpus = nvml_info()["gpus"]
    peaks = load_peaks(remeasure=True, gpu=True)
    theo = gpus[0]["theoretical_gbps"] if gpus else None
    gpu = peaks.get("gpu") or {}
    lines = [
        f"cpu: {peaks['cpu']['memory_gbps']} GB/s, {peaks['cpu']['gflops']} GFLOP/s",
        f"gpu: {gpu}",
    ]
    if theo and gpu.get("memory_gbps"):
        lines.append(
            f"measured / theoretical bandwidth: {gpu['memory_gbps'] / theo:.0%} of {theo} GB/s"
        )
    return lines


def provider_part(provider: str, seconds: float) -> Callable[[], list[str]]:
    def body() -> list[str]:
        lines = []
        for name, path in MODELS.items():
            for precision in ("fp32", "fp16", "int8-dynamic"):
                req = BenchRequest(
                    Workload(str(path), RunConfig(precision=precision, provider=provider)),
                    timing=TimingPlan(
                        warmup_runs=10, warmup_s=0.5, min_runs=50, duration_s=seconds
                    ),
                    profile=False,
                    check_accuracy=True,
                )
                result = RunResult()
                try:
                    for ev in run_bench(req):
                        result.feed(ev)
                except Exception as exc:
                    why = " ".join(str(exc).split())[:200]
                    lines.append(f"{name} {precision}: failed: {why}")
                    continue
                s, t, a = result.started, result.timing, result.accuracy
                lines.append(
                    f"{name} {precision}: on {s.provider_used if s else '?'}  "
                    f"p50 {t.latency.p50:.3f} ms (n={t.latency.count})"
                    if t
                    else "no timing"
                )
                if a:
                    lines[-1] += f"  cosine {a.cosine:.5f}"
        return lines

    return body


def memory_and_graph_part() -> list[str]:
    """The memory job and the graph job on CUDA: device memory read by NVML at each stage,
    the weights' copy to the device (bytes, time, GB/s), and the graph as run with the
    provider each node ran on (CPU fallbacks counted)."""
    from engine.events import drive
    from engine.model.sizes import device_copy_text
    from engine.run.graph_job import GraphRequest, graph_job
    from engine.run.memory_job import MemoryRequest, memory_job

    lines = []
    for name, path in MODELS.items():
        config = RunConfig(provider="cuda")
        try:
            report = drive(
                memory_job(MemoryRequest(Workload(str(path), config), runs=5)), lambda _: None
            )
            device = report["measured"].get("device") or {}
            lines.append(
                f"{name} memory: on {report.get('provider_used')}, device "
                f"{device.get('scope') or 'not read'} {device.get('bytes')}"
            )
            copied = device_copy_text(report["load"].get("weights_to_device"))
            lines.append(f"{name} {copied or 'weights to the GPU: not measured (not on CUDA)'}")
            for precision in ("fp32", "int8-dynamic"):  # INT8 on CUDA: which ops fall back
                graph = drive(
                    graph_job(
                        GraphRequest(
                            Workload(str(path), RunConfig(provider="cuda", precision=precision))
                        )
                    ),
                    lambda _: None,
                )
                providers = (graph["views"].get("run") or {}).get("providers") or {}
                on_cpu = sorted(n for n, p in providers.items() if p.startswith("CPU"))
                lines.append(
                    f"{name} {precision} graph: {len(providers)} nodes ran; on CPU: "
                    f"{len(on_cpu)} {on_cpu[:6]}"
                )
        except Exception as exc:
            lines.append(f"{name}: failed: {' '.join(str(exc).split())[:200]}")
    return lines


def cuda_graph_part() -> list[str]:
    import numpy as np
    import onnxruntime as ort

    path = MODELS["demo_cnn"]
    sess = ort.InferenceSession(
        str(path),
        providers=[("CUDAExecutionProvider", {"enable_cuda_graph": "1"}), "CPUExecutionProvider"],
    )
    if sess.get_providers()[0] != "CUDAExecutionProvider":
        raise RuntimeError("CUDA provider not obtained")
    rng = np.random.default_rng(0)
    feeds = {
        i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(
            np.float32
        )
        for i in sess.get_inputs()
    }  # demo_cnn: one float image
    binding = sess.io_binding()
    for k, v in feeds.items():
        binding.bind_ortvalue_input(k, ort.OrtValue.ortvalue_from_numpy(v, "cuda", 0))
    for o in sess.get_outputs():
        binding.bind_output(o.name, "cuda", 0)
    times = []
    for _ in range(200):  # the first run captures the graph; the rest replay it
        t0 = time.perf_counter()
        sess.run_with_iobinding(binding)
        binding.synchronize_outputs()
        times.append(time.perf_counter() - t0)
    return [
        f"demo_cnn with CUDA graph: p50 {np.median(times[10:]) * 1e3:.3f} ms "
        f"(first run, capture: {times[0] * 1e3:.1f} ms)"
    ]


def torch_cuda_part() -> list[str]:
    """The torch engine on CUDA: eager/compiled, fp32/bf16/fp16, synchronised timing, and
    torch.profiler with CUDA activity, on a small MLP saved as .pt2."""
    import tempfile

    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(f"torch {torch.__version__} sees no CUDA device (a CPU build?)")
    from tests.torch_models import mlp, save_pt2

    lines = [f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}"]
    with tempfile.TemporaryDirectory() as tmp:
        path = save_pt2(mlp(), torch.randn(2, 16), Path(tmp) / "mlp.pt2")
        for fusion, precision in (
            ("off", "fp32"),
            ("off", "bf16"),
            ("off", "fp16"),
            ("all", "fp32"),
        ):
            config = RunConfig(engine="torch", provider="cuda", fusion=fusion, precision=precision)  # type: ignore[arg-type]
            req = BenchRequest(
                Workload(str(path), config),
                timing=TimingPlan(warmup_runs=10, warmup_s=0.3, min_runs=50, duration_s=1.0),
                profile=fusion == "off" and precision == "fp32",
                profile_runs=10,
            )
            result = RunResult()
            for ev in run_bench(req):
                result.feed(ev)
            t, a, s = result.timing, result.accuracy, result.started
            line = (
                f"{'compiled' if fusion == 'all' else 'eager'} {precision}: on "
                f"{s.provider_used if s else '?'}  p50 {t.latency.p50:.3f} ms "
                f"(n={t.latency.count})"
                if t
                else "no timing"
            )
            if a:
                line += f"  cosine {a.cosine:.5f}"
            if result.profile:
                line += f"  profiled {len(result.profile.ops)} ops"
            lines.append(line)
    return lines


def live_host_part() -> list[str]:
    """The app's engine host on CUDA: a run, its profile, GPU roofs (peaks measured by the
    host when none are cached) and any throttle flag."""
    import multiprocessing as mp

    from engine.events import CommandFailed, Notice, OpProfile, PeaksMeasured, RunStarted
    from engine.run.host import host_main
    from engine.run.wire import PipeConnection

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    conn = PipeConnection(parent)  # wire messages, as the window sends them
    proc = ctx.Process(target=host_main, args=(child,), daemon=True)
    proc.start()
    child.close()
    events: list[object] = []
    conn.send(cmds.Apply(RunConfig(provider="cuda")))
    conn.send(cmds.Load(str(MODELS["demo_cnn"])))
    end = time.monotonic() + 120
    while time.monotonic() < end and not any(
        isinstance(e, (OpProfile, CommandFailed)) for e in events
    ):
        if conn.poll(0.2):
            events.extend(conn.recv())
    time.sleep(3)
    while conn.poll(0.2):
        events.extend(conn.recv())
    conn.send(cmds.Shutdown())
    proc.join(20)
    started = [e for e in events if isinstance(e, RunStarted)]
    peaks = [e for e in events if isinstance(e, PeaksMeasured)]
    lines = [
        f"run on {started[-1].provider_used if started else 'nothing (no RunStarted)'}",
        f"profile: {'yes' if any(isinstance(e, OpProfile) for e in events) else 'no'}",
        "peaks measured by the host: "
        + (str(peaks[-1].peaks.get("gpu")) if peaks else "no (cached already, or not needed)"),
    ]
    lines += [f"notice ({e.level}): {e.message}" for e in events if isinstance(e, Notice)]
    lines += [f"failed: {e.message}" for e in events if isinstance(e, CommandFailed)]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    print(f"OpScope GPU check — NVIDIA GPU present: {gpu_present()}")
    section("NVML / GPM telemetry", nvml_part)
    if not gpu_present():
        for title in (
            "measured GPU peaks",
            "CUDA provider, IO binding",
            "TensorRT provider, IO binding",
            "memory and graph jobs on CUDA",
            "CUDA graphs",
            "torch engine on CUDA",
            "live engine host on CUDA",
        ):
            print(f"\n== {title}\n   unavailable: no NVIDIA GPU (NVML sees none)")
        return 0
    section("measured peaks", peaks_part)
    section("CUDA provider, IO binding", provider_part("cuda", args.seconds))
    section("TensorRT provider, IO binding", provider_part("tensorrt", args.seconds))
    section("memory and graph jobs on CUDA", memory_and_graph_part)
    section("CUDA graphs", cuda_graph_part)
    section("torch engine on CUDA", torch_cuda_part)
    section("live engine host on CUDA", live_host_part)
    return 0


if __name__ == "__main__":
    sys.exit(main())
