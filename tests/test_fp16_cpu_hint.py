"""FP16 on the CPU provider says what happened (issue 53: no hint that the CPU provider has
few FP16 kernels): ONNX Runtime's inserted Casts counted from the graph it runs, in one
warning line of `opscope bench`, which the window shows as the run's warning."""

from __future__ import annotations

import pytest

from engine.backends.ort.fp16_cpu import fp16_cpu_warning
from engine.config import RunConfig
from tests.conftest import DEMO_TRANSFORMER
from tests.test_cli import opscope

FP16 = RunConfig(precision="fp16")


def test_only_fp16_on_the_cpu_provider_gets_the_line() -> None:
    assert fp16_cpu_warning(RunConfig(), "CPUExecutionProvider", 3) is None
    assert fp16_cpu_warning(FP16, "CUDAExecutionProvider", 3) is None
    assert fp16_cpu_warning(FP16, "CPUExecutionProvider", 67) == (
        "FP16 on the CPU provider: it has FP16 kernels for few ops; ONNX Runtime inserted 67 "
        "Cast nodes to run the others in FP32, so expect it slower than FP32 (FP16 pays off "
        "on a GPU)"
    )
    said = fp16_cpu_warning(FP16, "CPUExecutionProvider", None)
    assert said is not None and "the others run through Casts to FP32" in said


@pytest.mark.slow
def test_bench_fp16_on_the_cpu_warns_once_with_the_casts_inserted() -> None:
    proc = opscope("bench", DEMO_TRANSFORMER, "--precision", "fp16", "--provider", "cpu",
                   "--duration", "0.3", "--threads", "1", check=True)  # fmt: skip
    lines = [ln for ln in proc.stderr.splitlines() + proc.stdout.splitlines()
             if "FP16 on the CPU provider" in ln]  # fmt: skip
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("warning: FP16 on the CPU provider") and "Cast node" in lines[0]
    n = int(lines[0].split("inserted ")[1].split()[0])
    assert n > 0  # counted from the graph ONNX Runtime runs, not assumed
    fp32 = opscope("bench", DEMO_TRANSFORMER, "--provider", "cpu", "--duration", "0.3",
                   "--threads", "1", check=True)  # fmt: skip
    assert "FP16 on the CPU" not in fp32.stderr + fp32.stdout
