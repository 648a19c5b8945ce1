"""Config -> ONNX Runtime options is a pure function; opening reports the real provider."""

from pathlib import Path

import pytest

from engine.backends.ort.inference_session import (
    build_options,
    explain_ort_error,
    fallback_reason,
    open_session,
    plan_session,
)
from engine.config import RunConfig
from engine.errors import ModelError


def test_cpu_plan() -> None:
    plan = plan_session(RunConfig(fusion="off", threads=3), gpu_present=False)
    assert plan.graph_optimization_level == "ORT_DISABLE_ALL"
    assert plan.intra_op_threads == 3
    assert plan.providers == (("CPUExecutionProvider", {}),)
    assert ("session.intra_op.allow_spinning", "0") in plan.config_entries
    assert plan.requested == "CPUExecutionProvider"


@pytest.mark.parametrize(
    ("fusion", "level"),
    [
        ("basic", "ORT_ENABLE_BASIC"),
        ("extended", "ORT_ENABLE_EXTENDED"),
        ("layout", "ORT_ENABLE_LAYOUT"),
        ("all", "ORT_ENABLE_ALL"),
    ],
)
def test_fusion_levels(fusion: str, level: str) -> None:
    plan = plan_session(RunConfig(fusion=fusion), gpu_present=False)  # type: ignore[arg-type]
    assert plan.graph_optimization_level == level
    build_options(plan)  # every level name exists in this ONNX Runtime


def test_auto_picks_cuda_only_with_a_gpu() -> None:
    assert plan_session(RunConfig(), gpu_present=False).requested == "CPUExecutionProvider"
    gpu = plan_session(RunConfig(), gpu_present=True)
    assert [p for p, _ in gpu.providers] == ["CUDAExecutionProvider", "CPUExecutionProvider"]


def test_tensorrt_chain_and_cache() -> None:
    plan = plan_session(
        RunConfig(provider="tensorrt", precision="fp16"), gpu_present=True, trt_cache_dir="/tmp/trt"
    )
    names = [p for p, _ in plan.providers]
    assert names == ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    trt = dict(plan.providers[0][1])
    assert trt["trt_fp16_enable"] == "True"
    assert trt["trt_engine_cache_path"] == "/tmp/trt"


def test_spinning_on() -> None:
    plan = plan_session(RunConfig(spinning=True), gpu_present=False)
    assert ("session.intra_op.allow_spinning", "1") in plan.config_entries


def test_cuda_request_without_gpu_reports_the_fallback(zoo: dict[str, Path]) -> None:
    """ONNX Runtime silently runs CUDA requests on the CPU here; we must say so."""
    plan = plan_session(RunConfig(provider="cuda"), gpu_present=False)
    opened = open_session(zoo["dims_named"], plan)
    assert opened.requested == "CUDAExecutionProvider"
    if opened.provider_used == "CPUExecutionProvider":
        assert opened.fell_back


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("unsupported_op", "unsupported operator com.example:FancyOp"),
        ("session_fails", "bound to different types"),
    ],
)
def test_session_creation_failures(zoo: dict[str, Path], name: str, fragment: str) -> None:
    plan = plan_session(RunConfig(), gpu_present=False)
    with pytest.raises(ModelError) as err:
        open_session(zoo[name], plan)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_explain_strips_ort_prefixes() -> None:
    exc = RuntimeError(
        "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an "
        "implementation for Foo(7) node with name 'n'"
    )
    assert explain_ort_error(exc).startswith("unsupported operator Foo(7)")


def test_missing_tensorrt_libraries_read_as_one_reason() -> None:
    """What ONNX Runtime printed on an H200 without TensorRT (bench/results/gpu_check_h200.md)
    becomes the run's fallback reason, in one line."""
    printed = (
        "*************** EP Error ***************\n"
        "EP Error /onnxruntime_src/onnxruntime/python/onnxruntime_pybind_state.cc:729 void "
        "onnxruntime::python::RegisterTensorRTPluginsAsCustomOps(PySessionOptions&, const "
        "onnxruntime::ProviderOptions&) Please install TensorRT libraries as mentioned in the "
        "GPU requirements page, make sure they're in the PATH or LD_LIBRARY_PATH, and that "
        "your GPU is supported.\nFalling back to ['CUDAExecutionProvider', "
        "'CPUExecutionProvider'] and retrying.\n"
    )
    reason = fallback_reason(printed)
    assert reason and "TensorRT" in reason and "LD_LIBRARY_PATH" in reason and "\n" not in reason
    assert fallback_reason(
        "\x1b[0;93m[W:onnxruntime:Default] No registered plugin EP device found for "
        "'CUDAExecutionProvider' with device_id=0\x1b[m"
    ) == ("no device found for CUDAExecutionProvider")


def test_session_creation_keeps_what_ort_prints(capfd: pytest.CaptureFixture[str]) -> None:
    """Asking for a provider this build lacks: ORT's warning is kept for the reason, and
    nothing reaches the terminal."""
    from engine.backends.ort.inference_session import create_session, one_node_model

    sess, log = create_session(
        one_node_model("Identity", float, [1]),
        None,
        ["NoSuchExecutionProvider", "CPUExecutionProvider"],
    )
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert "NoSuchExecutionProvider" in log
    out, err = capfd.readouterr()
    assert "NoSuchExecutionProvider" not in out + err
