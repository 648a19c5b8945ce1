"""Build the model file a precision asks for (FP16, INT8 dynamic, INT8 static), with
ONNX Runtime's own tools, cached on disk by model hash and variant parameters.

Quantization settings are the ones that measured fast *and* accurate (bench/quant_settings.py,
results in bench/results/quant_settings.txt; AVX2 CPU without VNNI):
- dynamic: signed INT8 weights with reduce_range (7-bit weights avoid the u8s8 saturation of
  AVX2's VPMADDUBSW: without it cosine to FP32 fell to 0.951 on the demo transformer, with
  it 0.9999 at the same 1.1-1.3x), never Conv (dynamic ConvInteger ran at 0.17x of FP32 on
  the demo CNN; CNNs want static quantization);
- static: QDQ with U8 activations and S8 weights, per channel, reduce_range (x86 ORT fuses
  QDQ into integer kernels only for U8 activations: S8S8 left 372 unfused Q/DQ nodes and
  ran at 0.5x; U8S8 gives the demo CNN 1.5-1.7x at cosine 0.9997).
"""

from __future__ import annotations

import contextlib
import io
import logging
import queue
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

from engine import cache
from engine.backends.ort.activation_matmuls import activation_matmuls
from engine.backends.ort.qdq_float_path import keep_float_path
from engine.backends.ort.quant_counts import (
    REFUSED,
    all_excluded,
    counted_types,
    nothing_quantized,
    quantized_counts,
    refusal_line,
    zero_quantized,
)
from engine.errors import ModelError, one_line
from engine.events import Notice, Progress, VariantReady
from engine.model.info import ModelInfo
from engine.model.inputs import Feeds

BUILDER_VERSION = 6  # 3: meta counts the quantized nodes; 4: static keeps float paths;
# 5: counts per op type, no build that quantized nothing, Constant weights folded; 6: an
# opset-11 source converted to 13 (per-channel weights)
CALIBRATION_BATCHES = 16

# Parameters that define each variant (they are part of the cache key).
VARIANT_PARAMS: dict[str, dict[str, Any]] = {
    "fp16": {"keep_io_types": True},
    "int8-dynamic": {
        "weight_type": "QInt8",
        "per_channel": False,
        "reduce_range": True,
        "op_types": ["MatMul", "Gemm", "Attention", "LSTM"],
        "preprocess": True,
    },
    "int8-static": {
        "format": "QDQ",
        "activation_type": "QUInt8",
        "weight_type": "QInt8",
        "per_channel": True,
        "reduce_range": True,
        "op_types": None,
        "method": "MinMax",
        "activation_matmuls": True,  # False: MatMuls of two activations stay FP32
        "preprocess": True,
    },
}


def variant_params(
    precision: str, settings: dict[str, Any] | None = None, exclude: Sequence[str] = ()
) -> dict[str, Any]:
    """The parameters of a variant: the defaults, `settings` over them (quantization knobs
    such as weight_type, per_channel, reduce_range, method), and the nodes kept in FP32."""
    params = dict(VARIANT_PARAMS[precision])
    unknown = set(settings or {}) - set(params)
    if unknown:
        raise ValueError(f"unknown {precision} settings: {sorted(unknown)}")
    params.update(settings or {})
    if exclude:
        params["nodes_to_exclude"] = sorted(exclude)
    return params


def build_variant(
    info: ModelInfo,
    precision: str,
    calibration: Callable[[], Iterator[Feeds]] | None = None,
    calibration_id: str = "generated",
    calibration_count: int = CALIBRATION_BATCHES,
    settings: dict[str, Any] | None = None,
    exclude: Sequence[str] = (),
    reuse: Reuse | None = None,
) -> Iterator[Progress | Notice | VariantReady]:
    """Yield progress, then one `VariantReady` naming the file to run. `settings` and
    `exclude` change the quantization (see `variant_params`); both are in the cache key.
    `reuse` (a search building many variants of one model) carries what every attempt
    shares: the pre-processed model, and static INT8's calibrated ranges."""
    if precision == "fp32":
        yield VariantReady("fp32", info.path, 0.0, True, info.nodes)
        return
    if precision not in VARIANT_PARAMS:
        raise ModelError(f"unknown precision {precision!r}", info.path)
    import onnxruntime

    params = variant_params(precision, settings, exclude)
    if precision == "int8-static":
        params["calibration"] = calibration_id
    key = cache.cache_key(
        {
            "model": info.sha256,
            "precision": precision,
            "params": params,
            "ort": onnxruntime.__version__,
            "builder": BUILDER_VERSION,
        }
    )
    if key in REFUSED:  # quantized nothing before, in this process: the same answer
        raise ModelError(REFUSED[key], info.path)
    hit = cache.cached_entry("variants", key)
    if hit is not None:
        meta = cache.read_meta(hit)
        if meta.get("quantized_nodes") == 0 and not meta.get("all_excluded"):  # not INT8
            raise ModelError(refusal_line(meta), info.path)
        said = nothing_quantized(meta, info)
        if said:
            yield Notice("warning", said)
        yield VariantReady(
            precision,
            str(hit / "model.onnx"),
            float(meta.get("build_s", 0.0)),
            True,
            info.nodes,
            details=meta,
        )
        return
    yield Progress("variant", 0, None, f"building {precision} variant of {info.name}")
    staging = cache.Staging("variants", key)
    out = staging.path / "model.onnx"
    t0 = time.perf_counter()
    src: Path | None = None
    try:
        if precision == "fp16":
            _build_fp16(info, out)
        elif precision == "int8-dynamic":
            src = yield from _source(info, staging.path, reuse)
            _build_int8_dynamic(src, out, params)
        else:
            src = yield from _source(info, staging.path, reuse)
            if calibration is None:
                raise ModelError("INT8 static needs calibration data", info.path)
            ranges = reuse.ranges(params) if reuse is not None else None
            yield from _build_int8_static(
                src, out, calibration, calibration_count, params, ranges, reuse
            )
        counts = None
        if src is not None:  # INT8: what it quantized, and never a build that did nothing
            counts = quantized_counts(src, out, counted_types(precision, params, src), params)
            if not any(q for q, _ in counts.values()) and not all_excluded(params, src, counts):
                REFUSED[key] = zero_quantized(precision, params, src, counts)
                raise ModelError(REFUSED[key], info.path)
    except ModelError:
        staging.discard()
        raise
    except Exception as exc:
        staging.discard()
        raise ModelError(
            f"cannot build the {precision} variant: {one_line(exc)}", info.path
        ) from exc
    except BaseException:  # cancelled (GeneratorExit, KeyboardInterrupt): leave no debris
        staging.discard()
        raise
    build_s = time.perf_counter() - t0
    for leftover in staging.path.iterdir():  # pre-processed copies, shape-inference temps
        if not leftover.name.startswith("model.onnx") and leftover.is_file():
            leftover.unlink()
    meta = {
        "precision": precision,
        "params": params,
        "build_s": build_s,
        "source_sha256": info.sha256,
        "source": info.path,
    }
    if counts is not None:
        meta["quantized"] = counts
        meta["quantized_nodes"] = sum(q for q, _ in counts.values())
        if not meta["quantized_nodes"]:  # asked for: every quantizable node kept in FP32
            meta["all_excluded"] = True
    final = staging.commit(meta)
    said = nothing_quantized(meta, info)
    if said:
        yield Notice("warning", said)
    yield VariantReady(
        precision, str(final / "model.onnx"), build_s, False, info.nodes, details=meta
    )


def _build_fp16(info: ModelInfo, out: Path) -> None:
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = onnx.load(info.path)
    converted = convert_float_to_float16(model, keep_io_types=True)
    onnx.save(converted, str(out))


class Reuse:
    """What a search's attempts share instead of computing it again: the model ORT's
    pre-processing made (once), and static INT8's calibrated tensor ranges, one file per
    calibration method and op types (ranges do not depend on per-channel, reduce-range or
    the nodes kept in FP32, so attempts that differ only in those calibrate once).
    `calibrations` counts the calibrations run, `preprocessed` the pre-processings."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.source: Path | None = None
        self.preprocessed = 0
        self.calibrations = 0

    def prepare(self, info: ModelInfo) -> Generator[Progress | Notice, None, Path]:
        """The pre-processed model, made on the first call."""
        if self.source is None or not self.source.is_file():
            shared = self.folder / "source"
            shared.mkdir(parents=True, exist_ok=True)
            self.source = yield from _preprocess(info, shared)
            self.preprocessed += 1
        return self.source

    def ranges(self, params: dict[str, Any]) -> Path:
        types = "-".join(sorted(params.get("op_types") or ["all"]))
        return self.folder / f"ranges-{params['method']}-{types}.json"


def _source(
    info: ModelInfo, folder: Path, reuse: Reuse | None
) -> Generator[Progress | Notice, None, Path]:
    """The model to quantize: pre-processed here, or once per search (`reuse`)."""
    if reuse is None:
        return (yield from _preprocess(info, folder))
    return (yield from reuse.prepare(info))


def _preprocess(info: ModelInfo, folder: Path) -> Generator[Progress | Notice, None, Path]:
    """ORT's recommended pre-processing (shape inference + basic fusion); optional."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from engine.backends.ort.shape_infer import symbolic_module

    with contextlib.suppress(ImportError, OSError, AttributeError):
        symbolic_module()  # loaded without onnxruntime.tools' __init__, which imports PyTorch
    yield Progress("variant", 0, None, "pre-processing for quantization")
    dst = folder / "preprocessed.onnx"
    try:
        # ORT's symbolic shape inference drops a temp file in the working directory when it
        # gives up; run it inside our staging folder so nothing lands in the user's.
        src, out = str(Path(info.path).resolve()), str(dst.resolve())  # before the chdir
        with _quiet_logs(), contextlib.chdir(folder):
            quant_pre_process(src, out, skip_symbolic_shape=False)
    except Exception as exc:
        yield Notice("info", f"quantization pre-processing skipped ({one_line(exc)})")
        dst = _without_initializer_shapes(info, folder)
    folded = _fold_constant_weights(dst)
    if folded:
        yield Notice(
            "info",
            f"{folded} Constant weight{'s' if folded > 1 else ''} folded into initializers "
            "so they can be quantized",
        )
    upgraded = _at_least_opset_13(dst)
    if upgraded:
        yield Notice("info", upgraded)
    return dst


PER_CHANNEL_OPSET = 13  # DequantizeLinear's `axis` (per-channel weights) came in opset 13


def _at_least_opset_13(path: Path) -> str | None:
    """The file the quantizer reads converted to opset 13 when it is older (ONNX's version
    converter): per-channel weights need DequantizeLinear's `axis`, which an opset-11 model
    (a PaddleOCR export) cannot hold; without it the quantizer writes a model ONNX Runtime
    refuses. Says what it did, or why it could not (then per-channel is left out)."""
    import onnx
    from onnx import version_converter

    model = onnx.load(str(path), load_external_data=False)
    old = _opset(model)
    if old >= PER_CHANNEL_OPSET:
        return None
    try:
        converted = version_converter.convert_version(model, PER_CHANNEL_OPSET)
        onnx.checker.check_model(converted)
    except Exception as exc:
        return (f"opset {old} kept (ONNX's converter to {PER_CHANNEL_OPSET} failed: "
                f"{one_line(exc)}): weights quantized per tensor")  # fmt: skip
    onnx.save(converted, str(path))
    return f"opset {old} converted to {PER_CHANNEL_OPSET} so weights can be quantized per channel"


def _source_opset(path: Path) -> int:
    import onnx

    return _opset(onnx.load(str(path), load_external_data=False))


def _opset(model: Any) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def _fold_constant_weights(path: Path) -> int:
    """The main graph's Constant nodes made initializers in the file the quantizer reads
    (ORT's quantizers quantize initializers only); how many. The file is rewritten only
    when there is one (its external data, if any, stays where it is: same folder)."""
    import onnx

    from engine.backends.ort.constant_weights import fold_constants

    model = onnx.load(str(path), load_external_data=False)
    if not any(n.op_type == "Constant" for n in model.graph.node):
        return 0
    folded = fold_constants(model)
    if folded:
        onnx.save(model, str(path))
    return folded


def _without_initializer_shapes(info: ModelInfo, folder: Path) -> Path:
    """A copy without value_info entries for initializers: exporters write them, and the
    quantizer's graph edits (Gemm -> transposed MatMul weights) leave them stale, which
    fails shape inference."""
    import onnx

    model = onnx.load(str(Path(info.path).resolve()))
    inits = {t.name for t in model.graph.initializer}
    kept = [v for v in model.graph.value_info if v.name not in inits]
    del model.graph.value_info[:]
    model.graph.value_info.extend(kept)
    out = folder / "stripped.onnx"
    onnx.save(model, str(out))
    return out


def _build_int8_dynamic(src: Path, out: Path, p: dict[str, Any]) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _quiet_logs():
        quantize_dynamic(
            str(src),
            str(out),
            weight_type=QuantType[p["weight_type"]],
            per_channel=p["per_channel"],
            reduce_range=p["reduce_range"],
            op_types_to_quantize=p["op_types"],
            nodes_to_exclude=p.get("nodes_to_exclude") or None,
        )


class _Stopped(Exception):
    """Raised into ORT's calibration loop when the build is cancelled: it ends there and
    then, instead of computing ranges and quantizing from the batches seen so far."""


def _build_int8_static(
    src: Path,
    out: Path,
    calibration: Callable[[], Iterator[Feeds]],
    count: int,
    p: dict[str, Any],
    ranges: Path | None = None,
    reuse: Reuse | None = None,
) -> Iterator[Progress]:
    """Static QDQ quantization in a worker thread so calibration progress can be yielded.
    `ranges`: a file of calibrated tensor ranges, read when it exists (no calibration),
    else written by this calibration for the next build."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    seen: queue.Queue[int] = queue.Queue()
    stop = threading.Event()
    # per channel needs opset 13 (the source was converted when it could be; if not, the
    # weights go per tensor rather than into a model ONNX Runtime refuses to load)
    per_channel = bool(p["per_channel"]) and _source_opset(src) >= PER_CHANNEL_OPSET
    calibrate = ranges is None or not ranges.is_file()

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.it = calibration()
            self.n = 0

        def get_next(self) -> Feeds | None:
            if stop.is_set():  # cancelled: end calibration here (the thread finishes)
                raise _Stopped
            item = next(self.it, None)
            if item is not None:
                self.n += 1
                seen.put(self.n)
            return item

    failure: list[BaseException] = []
    exclude = list(p.get("nodes_to_exclude") or [])
    if not p.get("activation_matmuls", True):
        exclude += [n for n in activation_matmuls(src) if n not in exclude]

    def work() -> None:
        try:
            with _quiet_logs():
                quantize_static(
                    str(src),
                    str(out),
                    Reader() if calibrate else None,
                    quant_format=QuantFormat[p["format"]],
                    activation_type=QuantType[p["activation_type"]],
                    weight_type=QuantType[p["weight_type"]],
                    per_channel=per_channel,
                    reduce_range=p["reduce_range"],
                    op_types_to_quantize=p["op_types"],
                    calibrate_method=CalibrationMethod[p["method"]],
                    nodes_to_exclude=exclude or None,
                    calibration_cache_path=str(ranges) if ranges is not None else None,
                )
            if p["op_types"]:  # only some op types quantized: the rest keep float inputs
                keep_float_path(out, p["op_types"], exclude)
        except BaseException as exc:  # re-raised in the generator's thread
            failure.append(exc)

    if calibrate and reuse is not None:
        reuse.calibrations += 1
    worker = threading.Thread(target=work, name="opscope-calibration", daemon=True)
    worker.start()
    done, said = (0, "calibrating") if calibrate else (count, "quantizing (ranges reused)")
    try:
        yield Progress("calibration", done, count, said)
        while worker.is_alive():
            try:
                done = seen.get(timeout=0.2)
                said = f"calibration batch {done}/{count}"
            except queue.Empty:
                if done >= count:
                    said = "quantizing weights"
            # every 0.2 s, a batch or not: a cancellation point for whoever drives this
            yield Progress("calibration", done, count, said)
    finally:
        # Never leave ORT running in a thread at interpreter exit (std::terminate).
        stop.set()
        worker.join()
    if failure:
        if ranges is not None and calibrate:
            ranges.unlink(missing_ok=True)  # never reuse a half-written file
        raise failure[0]
    yield Progress("calibration", count, count, "quantizing weights")


ORT_DEFAULT_SEVERITY = 2  # ONNX Runtime's default logger: warnings and above (never set here)
ORT_QUIET_SEVERITY = 4  # fatal only: a failed run's message is in its exception, our one line


class _quiet_logs:
    """ORT's quantizer logs chatty INFO/WARNING lines through `logging` and prints some
    (calibrate.py: "Collecting tensor data and making histogram ..."); hold both back (our
    own output is written after a build, never during one). The sessions the quantizer
    makes itself (the calibrator's) take ONNX Runtime's default logger: a run of theirs
    that fails (out of memory) printed its raw, colour-coded `[E:onnxruntime:...]` line on
    stderr (the probe fuzz, stop 61), while the failure is said in one line of ours (the
    settings "do not apply"); those sessions are made quiet too."""

    def __enter__(self) -> None:
        import onnxruntime as ort

        self.root = logging.getLogger()
        self.level = self.root.level
        self.root.setLevel(logging.ERROR)
        self.stdout = contextlib.redirect_stdout(io.StringIO())
        self.stdout.__enter__()
        ort.set_default_logger_severity(ORT_QUIET_SEVERITY)

    def __exit__(self, *exc: object) -> None:
        import onnxruntime as ort

        ort.set_default_logger_severity(ORT_DEFAULT_SEVERITY)
        self.stdout.__exit__(None, None, None)
        self.root.setLevel(self.level)
