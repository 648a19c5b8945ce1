"""Generating models in fewer bytes: weight-only quantized (every MatMul's weight, the LM
head's too, in 4 or 8 bits with a scale per block of 32 by default: ONNX Runtime's
MatMulNBits, built by its MatMulNBitsQuantizer; activations left float), or fp16 throughout
(weights, activations and the KV cache; ONNX Runtime's float16 converter). Decode reads the
weights once per token, so fewer weight bytes is fewer bytes per token. A weight-only build
may keep chosen MatMuls at a higher precision (INT8, or FP32) and take another block size or
accuracy level (`WeightSettings`: what a search for an accuracy target tries). Built once
per model and settings into OpScope's cache as a folder like the original (config and
tokenizer copied)."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine import cache
from engine.backends.genai.model import CONFIG_FILE, LLMConfig
from engine.errors import ModelError, one_line
from engine.model.info import files_sha256

PRECISIONS = ("fp32", "fp16", "int8-weights", "int4-weights")
BLOCK_SIZE = 32
# accuracy_level 4: MatMulNBits multiplies with int8 activations (VNNI/AMX dot products);
# the weights' dequantization error dominates either way
ACCURACY_LEVEL = 4
BUILDER_VERSION = 1  # the default settings' key is unchanged by WeightSettings (same build)


@dataclass(frozen=True)
class WeightSettings:
    """A weight-only build: `bits` per weight in blocks of `block_size`, MatMulNBits'
    `accuracy_level` (4: int8 activations, 1: fp32), the MatMuls in `int8_nodes` at 8 bits
    (of a 4-bit build) and those in `fp32_nodes` left unquantized."""

    bits: int
    block_size: int = BLOCK_SIZE
    accuracy_level: int = ACCURACY_LEVEL
    int8_nodes: tuple[str, ...] = ()
    fp32_nodes: tuple[str, ...] = ()

    def params(self) -> dict[str, Any]:
        """The build's parameters (its cache key); the default settings' as before."""
        params: dict[str, Any] = {
            "bits": self.bits,
            "block_size": self.block_size,
            "symmetric": True,
            "accuracy_level": self.accuracy_level,
        }
        if self.int8_nodes:
            params["int8_nodes"] = sorted(self.int8_nodes)
        if self.fp32_nodes:
            params["fp32_nodes"] = sorted(self.fp32_nodes)
        return params

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> WeightSettings:
        return cls(
            int(params["bits"]),
            int(params["block_size"]),
            int(params["accuracy_level"]),
            tuple(params.get("int8_nodes") or ()),
            tuple(params.get("fp32_nodes") or ()),
        )

    def describe(self) -> str:
        """'INT4 blocks of 32, accuracy level 4, 6 MatMuls in INT8'."""
        parts = [f"INT{self.bits} blocks of {self.block_size}",
                 f"accuracy level {self.accuracy_level}"]  # fmt: skip
        if self.int8_nodes:
            parts.append(f"{len(self.int8_nodes)} MatMul(s) in INT8")
        if self.fp32_nodes:
            parts.append(f"{len(self.fp32_nodes)} MatMul(s) in FP32")
        return ", ".join(parts)


def default_settings(precision: str) -> WeightSettings | None:
    """A weight-only precision's default build; None for fp32 and fp16."""
    if precision == "int4-weights":
        return WeightSettings(4)
    if precision == "int8-weights":
        return WeightSettings(8)
    return None


def variant_bytes(folder: Path) -> int:
    """The model's bytes on disk (the ONNX file and its external data)."""
    return sum(f.stat().st_size for f in folder.iterdir()
               if f.is_file() and (f.suffix == ".onnx" or f.name.endswith(".data")))  # fmt: skip


def llm_variant(
    llm: LLMConfig,
    precision: str,
    settings: WeightSettings | None = None,
    model_hash: str | None = None,
) -> tuple[Path, dict[str, Any]]:
    """The folder to run for `precision` (the original for fp32) and what building took;
    a weight-only precision's build is `settings` (default: its default settings).
    `model_hash`: the model's files' sha256 when the caller has it (a search builds many)."""
    if precision == "fp32":
        return llm.folder, {"precision": "fp32"}
    if precision not in PRECISIONS:
        raise ModelError(f"precision must be one of {', '.join(PRECISIONS)}", str(llm.folder))
    import onnxruntime

    params: dict[str, Any] = {"fp16": True, "keep_io_types": False}
    if precision != "fp16":
        settings = settings or default_settings(precision)
        assert settings is not None
        params = settings.params()
    digest = model_hash or files_sha256([llm.model_file])
    key = cache.cache_key({"model": digest, "params": params,
                           "ort": onnxruntime.__version__, "builder": BUILDER_VERSION})  # fmt: skip
    hit = cache.cached_entry("llm-variants", key)
    if hit is not None:
        return hit, {**cache.read_meta(hit), "cached": True}
    staging = cache.Staging("llm-variants", key)
    t0 = time.perf_counter()
    try:
        build = _to_fp16 if precision == "fp16" else _quantize
        build(llm.model_file, staging.path / llm.model_file.name, params)
        for f in llm.folder.iterdir():  # the config, the tokenizer: everything but the model
            if f.is_file() and f.name != llm.model_file.name and not f.name.endswith(".data"):
                shutil.copy(f, staging.path / f.name)
    except BaseException as exc:
        staging.discard()
        if isinstance(exc, Exception) and not isinstance(exc, ModelError):
            raise ModelError(f"cannot build the {precision} weights ({one_line(exc)})",
                             str(llm.model_file)) from exc  # fmt: skip
        raise
    meta = {"precision": precision, "params": params, "build_s": time.perf_counter() - t0}
    folder = staging.commit(meta)
    if not (folder / CONFIG_FILE).is_file():
        raise ModelError("the quantized folder lost its config", str(folder))
    return folder, {**meta, "cached": False}


def _quantize(src: Path, out: Path, params: dict[str, Any]) -> None:
    """Every MatMul with a constant weight in `params["bits"]`, but `fp32_nodes` (left as
    they are) and `int8_nodes` (a second pass at 8 bits, same blocks)."""
    import logging

    import onnx

    model = onnx.load(str(src))
    int8 = set(params.get("int8_nodes") or ())
    fp32 = set(params.get("fp32_nodes") or ())
    matmuls = {n.name for n in model.graph.node if n.op_type == "MatMul"}
    unknown = (int8 | fp32) - matmuls
    if unknown:
        raise ModelError(f"no MatMul named {sorted(unknown)[0]!r} in the model", str(src))
    quiet = logging.getLogger("onnxruntime.quantization")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # it logs every MatMul it quantizes
    try:
        model = _nbits(model, params, params["bits"], int8 | fp32)
        if int8:  # the rest are MatMulNBits now: only these are MatMuls still to quantize
            model = _nbits(model, params, 8, (matmuls - int8) | fp32)
    finally:
        quiet.setLevel(level)
    onnx.save(model, str(out))


def _nbits(model: Any, params: dict[str, Any], bits: int, exclude: set[str]) -> Any:
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    config = DefaultWeightOnlyQuantConfig(
        block_size=params["block_size"],
        is_symmetric=params["symmetric"],
        accuracy_level=params["accuracy_level"],
        bits=bits,
    )
    quant = MatMulNBitsQuantizer(model, nodes_to_exclude=sorted(exclude), algo_config=config)
    quant.process()
    return quant.model.model


def _to_fp16(src: Path, out: Path, params: dict[str, Any]) -> None:
    """Every float tensor in fp16, the model's inputs and outputs too (`keep_io_types` off):
    the past and present, so the KV cache is fp16 (half the bytes per token)."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = onnx.load(str(src))
    converted = convert_float_to_float16(
        model, keep_io_types=params["keep_io_types"], disable_shape_infer=True
    )
    onnx.save(converted, str(out))
