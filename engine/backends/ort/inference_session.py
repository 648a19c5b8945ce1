"""Turn a RunConfig into ONNX Runtime session options (a pure plan), then open the session.

Planning is pure so it can be tested without ONNX Runtime; opening reports the provider
ONNX Runtime actually obtained, because it silently falls back to CPU.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine import interrupt
from engine.config import RunConfig
from engine.errors import ConfigError, ModelError
from engine.hostinfo import gpu_count

if TYPE_CHECKING:
    import onnxruntime

FUSION_LEVELS = {
    "off": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "layout": "ORT_ENABLE_LAYOUT",
    "all": "ORT_ENABLE_ALL",
}
PROVIDER_NAMES = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
}
SHORT_NAMES = {v: k for k, v in PROVIDER_NAMES.items()}


PROFILING_LOG_SEVERITY = 4  # ORT's FATAL only: the profiler's cap is ours to report


@dataclass(frozen=True)
class SessionPlan:
    """Everything needed to build `SessionOptions` and the provider list."""

    graph_optimization_level: str
    intra_op_threads: int
    inter_op_threads: int
    config_entries: tuple[tuple[str, str], ...]
    providers: tuple[tuple[str, dict[str, str]], ...]
    enable_profiling: bool = False
    profile_prefix: str | None = None
    optimized_model_path: str | None = None
    log_severity: int = 3  # errors only; we report fallbacks ourselves
    requested: str = "CPUExecutionProvider"
    notes: tuple[str, ...] = field(default=())


def plan_session(
    config: RunConfig,
    *,
    gpu_present: bool,
    profiling: bool = False,
    profile_prefix: str | None = None,
    optimized_model_path: str | None = None,
    trt_cache_dir: str | None = None,
) -> SessionPlan:
    """Map a config onto ORT options. Pure: no ORT import, no I/O."""
    cfg = config.resolved()
    if cfg.engine != "onnxruntime":
        raise ConfigError(f"engine {cfg.engine!r} does not use ONNX Runtime sessions")
    provider = cfg.provider
    notes: list[str] = []
    if provider == "auto":
        provider = "cuda" if gpu_present else "cpu"
        notes.append(
            f"provider auto -> {provider}" + ("" if gpu_present else " (no NVIDIA GPU found)")
        )
    cuda_opts: dict[str, str] = {"device_id": "0"}
    chain: list[tuple[str, dict[str, str]]] = []
    if provider == "tensorrt":
        trt_opts = {"device_id": "0", "trt_fp16_enable": str(cfg.precision == "fp16")}
        if trt_cache_dir:
            trt_opts.update(
                trt_engine_cache_enable="True",
                trt_engine_cache_path=trt_cache_dir,
                trt_timing_cache_enable="True",
                trt_timing_cache_path=trt_cache_dir,
            )
        chain.append(("TensorrtExecutionProvider", trt_opts))
        chain.append(("CUDAExecutionProvider", cuda_opts))
    elif provider == "cuda":
        chain.append(("CUDAExecutionProvider", cuda_opts))
    chain.append(("CPUExecutionProvider", {}))
    entries = [
        ("session.intra_op.allow_spinning", "1" if cfg.spinning else "0"),
        ("session.inter_op.allow_spinning", "1" if cfg.spinning else "0"),
    ]
    return SessionPlan(
        graph_optimization_level=FUSION_LEVELS[cfg.fusion],
        intra_op_threads=cfg.threads,
        inter_op_threads=1,
        config_entries=tuple(entries),
        providers=tuple(chain),
        enable_profiling=profiling,
        profile_prefix=profile_prefix,
        optimized_model_path=optimized_model_path,
        # a profiling session's own ERROR lines (its event cap's colour-coded "Maximum
        # number of events reached") never reach the terminal raw: the pass says it
        log_severity=PROFILING_LOG_SEVERITY if profiling else 3,
        requested=PROVIDER_NAMES[provider],
        notes=tuple(notes),
    )


@dataclass
class OpenSession:
    """An ORT session and the truth about where it runs."""

    session: onnxruntime.InferenceSession
    providers_obtained: tuple[str, ...]
    requested: str
    create_s: float
    fallback_reason: str | None = None

    @property
    def provider_used(self) -> str:
        return self.providers_obtained[0] if self.providers_obtained else "unknown"

    @property
    def fell_back(self) -> bool:
        return self.provider_used != self.requested


def build_options(plan: SessionPlan) -> onnxruntime.SessionOptions:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, plan.graph_optimization_level)
    so.intra_op_num_threads = plan.intra_op_threads
    so.inter_op_num_threads = plan.inter_op_threads
    so.log_severity_level = plan.log_severity
    for key, value in plan.config_entries:
        so.add_session_config_entry(key, value)
    if plan.enable_profiling:
        so.enable_profiling = True
        if plan.profile_prefix:
            so.profile_file_prefix = plan.profile_prefix
    if plan.optimized_model_path:
        so.optimized_model_filepath = plan.optimized_model_path
    return so


def open_session(model_path: str | Path, plan: SessionPlan) -> OpenSession:
    """Create the session; ORT failures become one-line `ModelError`s."""
    import time

    so = build_options(plan)
    t0 = time.perf_counter()
    try:
        sess, log = create_session(str(model_path), so, list(plan.providers))
    except Exception as exc:  # ORT raises Fail/InvalidGraph/NotImplemented/RuntimeError
        raise ModelError(explain_ort_error(exc), model_path) from exc
    opened = OpenSession(
        sess, tuple(sess.get_providers()), plan.requested, time.perf_counter() - t0
    )
    if opened.fell_back:
        opened.fallback_reason = fallback_reason(log)
    return opened


_gpu_libraries_tried = False


def load_gpu_libraries() -> None:
    """CUDA and cuDNN from pip's `nvidia-*` packages (where torch or the user installed
    them), loaded once per process before the first GPU session, as ONNX Runtime asks
    (`onnxruntime.preload_dlls`): without it the CUDA provider finds them only on
    LD_LIBRARY_PATH. Quiet, and never raises: a missing library shows later as the
    provider's fallback, with ORT's reason."""
    global _gpu_libraries_tried
    if _gpu_libraries_tried:
        return
    _gpu_libraries_tried = True
    import importlib.util

    import onnxruntime as ort

    if importlib.util.find_spec("nvidia") is None or not hasattr(ort, "preload_dlls"):
        return
    with (
        CapturedStderr(),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.suppress(Exception),
    ):
        ort.preload_dlls()


def create_session(
    model: str | bytes, options: Any, providers: list[Any]
) -> tuple[onnxruntime.InferenceSession, str]:
    """`onnxruntime.InferenceSession`, with what ORT wrote meanwhile kept, not shown: its
    native log (fd 2), its Python warnings, and the provider fallback it prints to stdout
    ("EP Error" blocks when TensorRT's libraries are missing). Returns the session and that
    text."""

    names = [p[0] if isinstance(p, tuple) else p for p in providers]
    if any(n in GPU_PROVIDERS for n in names):
        load_gpu_libraries()
    import warnings

    printed = io.StringIO()
    with (
        CapturedStderr() as captured,
        contextlib.redirect_stdout(printed),
        warnings.catch_warnings(record=True) as warned,
    ):
        warnings.simplefilter("always")
        kind = stoppable_session_class()
        sess = interrupt.native(lambda: kind(model, sess_options=options, providers=providers))
    said = "".join(f"{w.message}\n" for w in warned)
    return sess, said + captured.text + printed.getvalue()


def fallback_reason(log: str) -> str | None:
    """Why ORT dropped a GPU provider, from what it logged while creating the session."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", log)
    if "Please install TensorRT libraries" in plain:
        return (
            "TensorRT's libraries (libnvinfer) were not found: install TensorRT 10 and put "
            "its lib folder on LD_LIBRARY_PATH"
        )
    m = re.search(r"with error: ([^\n]+)", plain)
    if m:
        return m.group(1).strip()
    m = re.search(r"No registered plugin EP device found for '(\w+)'", plain)
    if m:
        return f"no device found for {m.group(1)}"
    lines = [ln for ln in plain.splitlines() if "[E:" in ln or "Failed" in ln]
    return lines[0].split("]", 2)[-1].strip()[:300] if lines else None


class CapturedStderr:
    """Collect what native code writes to fd 2 (ORT's logger) while the block runs."""

    def __enter__(self) -> CapturedStderr:
        import sys
        import tempfile

        self.text = ""
        try:
            sys.stderr.flush()
            self._saved = os.dup(2)
        except (OSError, ValueError, AttributeError):  # no real fd 2, or no sys.stderr
            self._saved = -1
            return self
        self._tmp = tempfile.TemporaryFile()
        os.dup2(self._tmp.fileno(), 2)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._saved < 0:
            return
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._tmp.seek(0)
        self.text = self._tmp.read().decode(errors="replace")
        self._tmp.close()


def explain_ort_error(exc: BaseException, verb: str = "load") -> str:
    """Turn an ORT exception into one readable line; `verb` says what failed: "load" (the
    session) or "run" (an inference)."""
    text = " ".join(str(exc).split())
    text = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    m = re.search(r"Could not find an implementation for (\S+)", text)
    if m:
        return f"unsupported operator {m.group(1)} on this provider (no kernel in ONNX Runtime)"
    m = re.search(r"(\S+) is not a registered function/op", text)
    if m:
        return f"unsupported operator {m.group(1)} (not registered in ONNX Runtime)"
    if "Load model from" in text and "failed" in text:
        text = text.split("failed:", 1)[-1].strip()
    text = re.sub(r"^Non-zero status code returned while running ", "", text)
    text = re.sub(r"\s*Status Message:\s*(/\S+:\d+ \S+.*?\] : \d+ : \w+ : )?", ": ", text)
    what = "cannot load the model" if verb == "load" else "failed running the model"
    return f"ONNX Runtime {what}: {text[:400]}"


def gpu_present() -> bool:
    """True when NVML sees at least one NVIDIA GPU. Cheap; never raises."""
    return gpu_count() > 0


def one_node_model(op: str, dtype: Any, shape: list[int], two_inputs: bool = False) -> bytes:
    """A serialized one-node ONNX model `out = op(x[, y])` for the given dtype and shape."""
    import numpy as np
    from onnx import TensorProto, helper

    elem = TensorProto.FLOAT16 if dtype == np.float16 else TensorProto.FLOAT
    inputs = ["x", "y"] if two_inputs else ["x"]
    graph = helper.make_graph(
        [helper.make_node(op, inputs, ["out"])],
        "opscope_probe",
        [helper.make_tensor_value_info(n, elem, shape) for n in inputs],
        [helper.make_tensor_value_info("out", elem, shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


GPU_PROVIDERS = ("CUDAExecutionProvider", "TensorrtExecutionProvider")


def inference_fn(
    opened: OpenSession, feeds: dict[str, Any], device_id: int = 0
) -> Callable[[], object]:
    """One timed inference. On CPU: `session.run`. On CUDA/TensorRT: inputs copied to the
    device once and outputs left there (IO binding), synchronised after each run, so the
    timing is the GPU's work, not host copies. UNTESTED on a GPU (none where written)."""
    sess = opened.session
    stoppable = stoppable_run_options()
    if opened.provider_used not in GPU_PROVIDERS:
        import onnxruntime as ort

        base_run: Callable[..., object] = ort.InferenceSession.run  # no extra call per run
        return lambda: base_run(sess, None, feeds, stoppable)
    import onnxruntime as ort

    binding = sess.io_binding()
    for name, arr in feeds.items():
        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(arr, "cuda", device_id))
    for out in sess.get_outputs():
        binding.bind_output(out.name, "cuda", device_id)
    binding.synchronize_inputs()

    def run() -> object:
        sess.run_with_iobinding(binding, stoppable)
        binding.synchronize_outputs()
        return binding

    return run


def session_io(sess: onnxruntime.InferenceSession) -> dict[str, Any]:
    """Inputs and outputs as ORT sees them (for error messages)."""
    return {
        "inputs": [(i.name, i.type, i.shape) for i in sess.get_inputs()],
        "outputs": [(o.name, o.type, o.shape) for o in sess.get_outputs()],
    }


_run_options: Any = None
_session_class: Any = None


def stoppable_run_options() -> onnxruntime.RunOptions:
    """The run options of every run of this process's sessions: a signal sets their
    `terminate` (engine/interrupt.py), which ends a run between nodes and inside a Loop's
    iterations (a Loop of 10^12 iterations stopped in 15 ms). ONNX Runtime's own log of
    a failed run is kept quiet: its message is in the exception, said in one line."""
    global _run_options
    if _run_options is None:
        import onnxruntime as ort

        options = ort.RunOptions()
        options.log_severity_level = 4
        interrupt.on_signal(lambda: setattr(options, "terminate", True),
                            lambda: setattr(options, "terminate", False))  # fmt: skip
        _run_options = options
    return _run_options


def stoppable_session_class() -> type[onnxruntime.InferenceSession]:
    """`onnxruntime.InferenceSession` whose runs, when given no run options, take the
    stoppable ones: profiling passes, memory probes and input checks stop on a signal as
    the timed runs do."""
    global _session_class
    if _session_class is None:
        import onnxruntime as ort

        class StoppableSession(ort.InferenceSession):  # type: ignore[misc]
            def run(self, output_names: Any, input_feed: Any, run_options: Any = None) -> Any:
                interrupt.calling(self)  # stopped: its teardown (a profile's write) not waited on
                since = interrupt.command_count()
                try:
                    out = super().run(
                        output_names, input_feed, run_options or stoppable_run_options()
                    )
                except Exception:
                    if not interrupt.stopped(since):  # a failed run, not a stopped one
                        interrupt.returned(self)
                    raise
                interrupt.returned(self)
                return out

            def run_with_iobinding(self, iobinding: Any, run_options: Any = None) -> None:
                super().run_with_iobinding(iobinding, run_options or stoppable_run_options())

        _session_class = StoppableSession
    return _session_class  # type: ignore[no-any-return]
