"""Generating models in fewer bytes: weight-only quantized (every MatMul's weight, the LM
head's too, in 4 or 8 bits with a scale per block of 32: ONNX Runtime's MatMulNBits, built
by its MatMulNBitsQuantizer; activations left float), or fp16 throughout (weights,
activations and the KV cache; ONNX Runtime's float16 converter). Decode reads the weights
once per token, so fewer weight bytes is fewer bytes per token. Built once per model and
settings into OpScope's cache as a folder like the original (config and tokenizer copied)."""

from __future__ import annotations

import shutil
import time
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
BUILDER_VERSION = 1


def llm_variant(llm: LLMConfig, precision: str) -> tuple[Path, dict[str, Any]]:
    """The folder to run for `precision` (the original for fp32) and what building took."""
    if precision == "fp32":
        return llm.folder, {"precision": "fp32"}
    if precision not in PRECISIONS:
        raise ModelError(f"precision must be one of {', '.join(PRECISIONS)}", str(llm.folder))
    import onnxruntime

    params: dict[str, Any] = {"fp16": True, "keep_io_types": False}
    if precision != "fp16":
        bits = 4 if precision == "int4-weights" else 8
        params = {"bits": bits, "block_size": BLOCK_SIZE, "symmetric": True,
                  "accuracy_level": ACCURACY_LEVEL}  # fmt: skip
    key = cache.cache_key({"model": files_sha256([llm.model_file]), "params": params,
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
    import logging

    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    model = onnx.load(str(src))
    config = DefaultWeightOnlyQuantConfig(
        block_size=params["block_size"],
        is_symmetric=params["symmetric"],
        accuracy_level=params["accuracy_level"],
        bits=params["bits"],
    )
    quiet = logging.getLogger("onnxruntime.quantization")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # it logs every MatMul it quantizes
    try:
        quant = MatMulNBitsQuantizer(model, algo_config=config)
        quant.process()
    finally:
        quiet.setLevel(level)
    onnx.save(quant.model.model, str(out))


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
