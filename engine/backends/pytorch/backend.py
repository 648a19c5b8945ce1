"""The PyTorch backend: run a PyTorch file natively, eager or `torch.compile`d, yielding the
same events as ONNX Runtime (so JSON, sessions, compare and reports work alike).

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

from engine.backends.base import PrepareRequest, batch_of, feed_shapes
from engine.backends.pytorch.load import (
    TorchModel,
    fixed_batch_note,
    import_torch,
    input_shapes,
    load_torch,
    make_inputs,
)
from engine.config import RunConfig
from engine.errors import ConfigError, InputError, ModelError, one_line
from engine.events import Event, ModelLoaded, Notice, Progress, RunStarted, VariantReady
from engine.measure.accuracy import compare_outputs, generated_samples
from engine.model.eval_data import EvalData, read_eval_data
from engine.model.info import ModelInfo, ValueInfo, files_sha256
from engine.model.inputs import Feeds, describe_feeds


@dataclass
class TorchPrepared:
    """A PyTorch model loaded, converted for the config, on its device, with inputs."""

    model: TorchModel
    config: RunConfig
    device: str  # "cpu" | "cuda"
    fn: Callable[..., Any]  # the module as run (quantized and/or compiled)
    feeds: Feeds
    feeds_for: Callable[[int], Feeds]
    eval_data: EvalData | None = None  # the user's samples (all of them), when given
    _run: Callable[[], object] = lambda: None

    @property
    def batch(self) -> int:
        return batch_of(self.feeds, self.eval_data.axes if self.eval_data else None)

    @property
    def provider_used(self) -> str:
        return f"torch-{self.device}"

    def make_feeds(self, index: int) -> Feeds:
        return self.feeds_for(index)

    def run_once(self) -> object:
        """One timed inference on `feeds` (synchronised on CUDA)."""
        return self._run()

    def run_batch(self, feeds: Feeds) -> list[np.ndarray]:
        """One inference on any feeds of the model's signature; outputs on the host."""
        import torch

        args = self.tensors(feeds)
        with torch.inference_mode(), self.autocast():
            out = self.fn(*args)
        leaves = torch.utils._pytree.tree_leaves(out)
        return [t.detach().cpu().numpy() for t in leaves if isinstance(t, torch.Tensor)]

    def accuracy(self, generated: bool) -> Iterator[Event]:
        """This config's outputs vs the FP32 eager module's, same inputs and device."""
        data = self.eval_data
        count = max(1, generated_samples() // max(self.config.batch, 1))
        batches = data.batches if data else [self.make_feeds(i) for i in range(count)]
        said = "your data" if data else f"generated: {len(batches)} batch(es) of random inputs"
        yield Progress(
            "accuracy", 0, len(batches), f"comparing with the FP32 eager model on {said}"
        )
        ref = [self.outputs(self.model.module, f, autocast=False) for f in batches]
        got = [self.outputs(self.fn, f, autocast=True) for f in batches]
        names = self.model.output_names or [f"output_{i}" for i in range(len(ref[0]))]
        if len(names) != len(ref[0]):
            names = [f"output_{i}" for i in range(len(ref[0]))]
        result = compare_outputs(names, ref, got, data.labels if data else None, feeds=batches)
        yield dataclasses.replace(result, baseline="fp32 eager (torch)", data=said)

    def profile(self, runs: int, timed_mean_ms: float | None) -> Iterator[Event]:
        """A torch.profiler pass over `run_once` (timing never sees it)."""
        from engine.backends.pytorch.profiler import torch_profile_pass

        return torch_profile_pass(
            self.run_once, runs=runs, cuda=self.device == "cuda", timed_mean_ms=timed_mean_ms
        )

    def close(self) -> None:
        self._run = lambda: None

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


def prepare_torch(req: PrepareRequest) -> Generator[Event, None, TorchPrepared]:
    """Load, pick the device, make inputs, quantize / compile, check one inference."""
    path, given = req.workload.model, req.workload.inputs
    if Path(path).suffix.lower() == ".onnx":
        raise ModelError(
            "is an ONNX model; the torch engine runs PyTorch files (.pt2, .pt, "
            ".pth): run it on ONNX Runtime",
            path,
        )
    torch = import_torch()
    config = req.workload.config.resolved()
    yield Progress("load", 0, None, f"loading {Path(path).name} (PyTorch)")
    t0 = time.perf_counter()
    model = load_torch(path)
    load_s = time.perf_counter() - t0
    info = describe_torch(model)
    yield ModelLoaded(info)
    device = _device(torch, config)
    torch.set_num_threads(config.threads)
    eval_data: EvalData | None = None
    if given.inputs_npz:
        npz, labels = given.inputs_npz, given.labels_npy
        eval_data = read_eval_data(
            npz, lambda f: _load_npz(str(f), model), info, config.batch, labels
        )
        feeds = eval_data.batches[0]

        def make_feeds(i: int) -> Feeds:
            return feeds
    else:
        shapes = input_shapes(model, config.batch, given.shapes)
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
    prepared = TorchPrepared(model, config, device, fn, feeds, make_feeds, eval_data)
    args = prepared.tensors(feeds)
    sync = torch.cuda.synchronize if device == "cuda" else None

    def run_once() -> object:
        with torch.inference_mode(), prepared.autocast():
            out = fn(*args)
        if sync is not None:
            sync()
        return out

    prepared._run = run_once
    if config.fusion == "all":
        yield Progress("compile", 0, None, "torch.compile: compiling on the first inference")
    try:
        run_once()
    except Exception as exc:
        raise InputError(
            f"the model failed on inputs {describe_feeds(feeds)}: {one_line(exc)}; "
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
    used = prepared.provider_used
    yield RunStarted(
        config, config.provider, used, (used,), feed_shapes(feeds), prepared.batch, load_s
    )
    return prepared


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
        raise InputError(f"cannot read inputs ({one_line(exc)})", path) from exc
    missing = {i.name for i in model.inputs} - set(feeds)
    if missing:
        raise ModelError(f"inputs file lacks {', '.join(sorted(missing))}", path)
    return feeds
