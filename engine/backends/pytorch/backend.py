"""`--engine torch`: run a PyTorch file natively, eager or `torch.compile`d, and yield the
same events as the ONNX Runtime path (so JSON, sessions, compare and reports work alike).

Knobs for this engine: fusion `off` = eager, `all` = `torch.compile`; precision fp32, bf16
or fp16 (autocast) or int8-dynamic (Linear layers, CPU); provider cpu, cuda or auto;
threads (`torch.set_num_threads`). Spinning has no meaning here and is ignored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.pytorch.load import (
    TorchModel,
    fixed_batch_note,
    import_torch,
    input_shapes,
    load_torch,
    make_inputs,
)
from engine.config import RunConfig
from engine.errors import ConfigError, InputError, ModelError
from engine.events import Event, ModelLoaded, Notice, Progress, RunEnded, RunStarted, VariantReady
from engine.measure.accuracy import compare_outputs
from engine.model.info import ModelInfo, ValueInfo, files_sha256
from engine.run.bench import ACCURACY_BATCHES, BenchRequest
from engine.run.timing import TimingSamples, time_inferences

Feeds = dict[str, np.ndarray]


@dataclass
class TorchPrepared:
    """A PyTorch model loaded, converted for the config, on its device, with inputs."""

    model: TorchModel
    config: RunConfig
    device: str  # "cpu" | "cuda"
    fn: Callable[..., Any]  # the module as run (quantized and/or compiled)
    feeds: Feeds
    make_feeds: Callable[[int], Feeds]
    run_once: Callable[[], object]

    def outputs(self, fn: Callable[..., Any], feeds: Feeds, autocast: bool) -> list[np.ndarray]:
        """Run `fn` on `feeds`, outputs as float64 numpy arrays (for accuracy)."""
        import torch

        args = self.tensors(feeds)
        with torch.inference_mode(), self.autocast() if autocast else contextlib.nullcontext():
            out = fn(*args)
        leaves = torch.utils._pytree.tree_leaves(out)
        return [
            t.detach().float().cpu().numpy().astype(np.float64)
            for t in leaves
            if isinstance(t, torch.Tensor)
        ]

    def tensors(self, feeds: Feeds) -> list[Any]:
        import torch

        return [torch.from_numpy(feeds[i.name]).to(self.device) for i in self.model.inputs]

    def autocast(self) -> Any:
        import torch

        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.config.precision)
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device, dtype=dtype)


def check_config(config: RunConfig) -> None:
    """Refuse knob values that mean nothing to the torch engine."""
    if config.fusion not in ("off", "all"):
        raise ConfigError(
            f"engine torch: fusion must be off (eager) or all (torch.compile); "
            f"got {config.fusion!r}"
        )
    if config.precision not in ("fp32", "bf16", "fp16", "int8-dynamic"):
        raise ConfigError(
            f"engine torch: precision must be fp32, bf16, fp16 or int8-dynamic; "
            f"got {config.precision!r}"
        )
    if config.provider == "tensorrt":
        raise ConfigError("engine torch: provider must be cpu, cuda or auto (not tensorrt)")


def run_torch(req: BenchRequest) -> Iterator[Event]:
    """The whole run on the torch engine: prepare, time, accuracy, profile."""
    prepared = yield from prepare_torch(req)
    samples = TimingSamples(np.empty(0, np.int64), np.empty(0, np.int64))
    batch = int(next(iter(prepared.feeds.values())).shape[0]) if prepared.feeds else 1
    yield from time_inferences(prepared.run_once, req.timing, batch, samples=samples)
    if req.check_accuracy and prepared.config.precision != "fp32":
        yield from torch_accuracy_pass(prepared, req.inputs_npz is None)
    if req.profile:
        from engine.backends.pytorch.profiler import torch_profile_pass

        timed = float(samples.latencies_ns.mean() / 1e6) if samples.latencies_ns.size else None
        yield from torch_profile_pass(
            prepared.run_once,
            runs=req.profile_runs,
            cuda=prepared.device == "cuda",
            timed_mean_ms=timed,
        )
    yield RunEnded("ok")


def prepare_torch(req: BenchRequest) -> Generator[Event, None, TorchPrepared]:
    """Load, pick the device, make inputs, quantize / compile, check one inference."""
    check_config(req.config)
    if Path(req.model_path).suffix.lower() == ".onnx":
        raise ModelError(
            "is an ONNX model; the torch engine runs PyTorch files (.pt2, .pt, "
            ".pth): run it on ONNX Runtime",
            req.model_path,
        )
    torch = import_torch()
    config = req.config.resolved()
    yield Progress("load", 0, None, f"loading {Path(req.model_path).name} (PyTorch)")
    t0 = time.perf_counter()
    model = load_torch(req.model_path)
    load_s = time.perf_counter() - t0
    info = describe_torch(model)
    yield ModelLoaded(info)
    device = _device(torch, config)
    torch.set_num_threads(config.threads)
    if req.inputs_npz:
        feeds = _load_npz(req.inputs_npz, model)

        def make_feeds(i: int) -> Feeds:
            return feeds
    else:
        shapes = input_shapes(model, config.batch, req.shapes)
        note = fixed_batch_note(model, config.batch, shapes)
        if note is not None:
            yield note
        feeds = make_inputs(model, shapes, seed=req.seed)

        def make_feeds(i: int) -> Feeds:
            return feeds if i == 0 else make_inputs(model, shapes, seed=req.seed + i)

    module = model.module.to(device) if device != "cpu" else model.module
    model = dataclasses.replace(model, module=module)
    fn: Callable[..., Any] = module
    details: dict[str, Any] = {
        "engine": "torch",
        "mode": "compiled" if config.fusion == "all" else "eager",
        "kind": model.kind,
    }
    t_build = time.perf_counter()
    if config.precision == "int8-dynamic":
        if device != "cpu":
            raise ConfigError("engine torch: int8-dynamic runs on the CPU only (provider cpu)")
        from engine.backends.pytorch.quantize import quantize_linear_int8

        yield Progress("variant", 0, None, "quantizing Linear layers to INT8 (dynamic)")
        fn, count = quantize_linear_int8(module)
        details["quantized_linears"] = count
        if not count:
            yield Notice("warning", "int8-dynamic: no Linear layers found; running FP32")
    if config.fusion == "all":
        fn = torch.compile(fn)
    prepared = TorchPrepared(model, config, device, fn, feeds, make_feeds, lambda: None)
    args = prepared.tensors(feeds)
    sync = torch.cuda.synchronize if device == "cuda" else None

    def run_once() -> object:
        with torch.inference_mode(), prepared.autocast():
            out = fn(*args)
        if sync is not None:
            sync()
        return out

    prepared.run_once = run_once
    if config.fusion == "all":
        yield Progress("compile", 0, None, "torch.compile: compiling on the first inference")
    try:
        run_once()
    except Exception as exc:
        raise InputError(
            f"the model failed on inputs {_describe(feeds)}: {_one_line(exc)}; "
            "set shapes with --shape NAME=AxB",
            model.path,
        ) from exc
    build_s = time.perf_counter() - t_build
    if config.fusion == "all":
        details["compile_s"] = build_s
        yield Notice("info", f"torch.compile took {build_s:.1f} s (first inference)")
    yield VariantReady(
        config.precision, model.path, build_s, False, info.nodes, info.nodes, details=details
    )
    used = f"torch-{device}"
    inputs = {k: (tuple(int(d) for d in a.shape), str(a.dtype)) for k, a in feeds.items()}
    batch = int(next(iter(feeds.values())).shape[0]) if feeds else 1
    yield RunStarted(config, config.provider, used, (used,), inputs, batch, load_s)
    return prepared


def torch_accuracy_pass(prepared: TorchPrepared, generated: bool) -> Iterator[Event]:
    """This config's outputs vs the FP32 eager module's, on the same inputs and device."""
    yield Progress("accuracy", 0, ACCURACY_BATCHES, "comparing with the FP32 eager model")
    batches = [prepared.make_feeds(i) for i in range(ACCURACY_BATCHES if generated else 1)]
    ref = [prepared.outputs(prepared.model.module, f, autocast=False) for f in batches]
    got = [prepared.outputs(prepared.fn, f, autocast=True) for f in batches]
    names = prepared.model.output_names or [f"output_{i}" for i in range(len(ref[0]))]
    if len(names) != len(ref[0]):
        names = [f"output_{i}" for i in range(len(ref[0]))]
    result = compare_outputs(names, ref, got)
    yield dataclasses.replace(result, baseline="fp32 eager (torch)")


def describe_torch(model: TorchModel) -> ModelInfo:
    """A ModelInfo for a PyTorch file: inputs, aten op counts, parameters."""
    torch = import_torch()
    p = Path(model.path)
    ops: Counter[str] = Counter()
    if model.program is not None:
        for node in model.program.graph.nodes:
            if node.op == "call_function":
                ops[_aten_name(node.target)] += 1
    else:
        for node in model.module.inlined_graph.nodes():
            ops[node.kind()] += 1
    params = list(model.module.parameters()) + list(model.module.buffers())
    inputs = tuple(
        ValueInfo(
            i.name,
            "tensor",
            i.dtype,
            None
            if i.shape is None
            else tuple("batch" if d in i.dynamic else s for d, s in enumerate(i.shape)),
        )
        for i in model.inputs
    )
    outputs = tuple(ValueInfo(n, "tensor", "float32", None) for n in model.output_names)
    return ModelInfo(
        path=str(p),
        sha256=files_sha256([p]),
        file_bytes=p.stat().st_size,
        ir_version=0,
        producer=f"torch {torch.__version__} ({model.kind})",
        opset={},
        inputs=inputs,
        outputs=outputs,
        nodes=sum(ops.values()),
        subgraph_nodes=0,
        op_types=dict(ops),
        params=sum(int(t.numel()) for t in params),
        param_bytes=sum(int(t.numel() * t.element_size()) for t in params),
    )


def _aten_name(target: Any) -> str:
    """`aten.linear.default` -> `aten::linear`, the name torch.profiler uses."""
    text = str(target)
    if text.startswith("aten."):
        text = "aten::" + text[5:]
    return text.removesuffix(".default")


def _device(torch: Any, config: RunConfig) -> str:
    cuda = bool(torch.cuda.is_available())
    if config.provider == "cuda" and not cuda:
        raise ConfigError(
            "engine torch: provider cuda, but torch sees no CUDA device "
            f"(torch {torch.__version__})"
        )
    return "cuda" if config.provider in ("cuda", "auto") and cuda else "cpu"


def _load_npz(path: str, model: TorchModel) -> Feeds:
    try:
        with np.load(path, allow_pickle=False) as data:
            feeds = {k: data[k] for k in data.files}
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read inputs ({_one_line(exc)})", path) from exc
    missing = {i.name for i in model.inputs} - set(feeds)
    if missing:
        raise ModelError(f"inputs file lacks {', '.join(sorted(missing))}", path)
    return feeds


def _describe(feeds: Feeds) -> str:
    return ", ".join(f"{k}={a.dtype}{list(a.shape)}" for k, a in feeds.items())


def _one_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[0][:300] if lines else type(exc).__name__
