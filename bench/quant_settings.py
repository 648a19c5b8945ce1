"""Quantization settings study: which ONNX Runtime INT8 settings are fast AND accurate on this CPU.

For both demo models (transformer: input_ids int64 [1, 128]; CNN: image float32 [1, 3, 64, 64]),
build variants with ORT's own tools and measure them side by side in one process:
- FP32 (reference), FP16 (onnxruntime.transformers.float16, keep_io_types);
- INT8 dynamic: weight QInt8/QUInt8 x reduce_range x per_channel x with/without quant_pre_process
  (without = the file minus its initializer value_info, which breaks quantize_dynamic; one row
  shows the file as is), plus op_types_to_quantize=MatMul,Gemm and session.x64quantprecision=1;
- INT8 static (pre-processed, MinMax on 16 seeded random batches): QDQ/QOperator x S8S8/U8S8/U8U8
  (activation/weight) x per_channel x reduce_range, plus extra_options and a session entry that
  can change QDQ fusion on CPU.
Sessions: intra_op_num_threads=2, session.intra_op.allow_spinning=0, ORT_ENABLE_ALL. Timing is
interleaved: each round runs every candidate for --slot-ms in a shuffled order (2 re-warm runs
first; round 0 is not recorded), so machine noise hits all alike. p50 is taken over the raw
samples of all rounds (n); "spread" = range of the per-round p50s / p50, "best rd" = the lowest
per-round p50. Accuracy vs FP32: worst cosine and max abs error of the logits over 4 seeded random
batches. "nodes": node count of the graph ORT runs (via optimized_model_filepath). "(engine)"
marks the settings engine/backends/ort/variants.py uses today.

Run from the repository root (about 5 minutes on 2 idle cores; also writes
bench/results/quant_settings.txt):  .venv/bin/python bench/quant_settings.py
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)
from onnxruntime.quantization.shape_inference import quant_pre_process
from results_file import publish

ROOT = Path(__file__).resolve().parents[1]
MODELS = {
    "transformer": ROOT / "resources/models/demo_transformer.onnx",
    "cnn": ROOT / "resources/models/demo_cnn.onnx",
}
WEIGHT_OPS = {"transformer": ["MatMul", "Gemm"], "cnn": ["Conv", "Gemm"]}
THREADS = 2
EVAL_BATCHES = 4
CALIB_BATCHES = 16
ACCURATE = 0.999  # cosine threshold for "accurate" in the summary
S8, U8 = QuantType.QInt8, QuantType.QUInt8
TYPES = {"S8S8": (S8, S8), "U8S8": (U8, S8), "U8U8": (U8, U8)}
MINMAX = CalibrationMethod.MinMax
# extra_options that can change QDQ fusion or kernels on CPU (tried on QDQ U8S8 pc=0 rr=1)
QDQ_OPTIONS = {
    "ActivationSymmetric": True,
    "WeightSymmetric": False,
    "DedicatedQDQPair": True,
    "QDQKeepRemovableActivations": True,
    "ForceQuantizeNoInputCheck": True,
}
Feeds = dict[str, np.ndarray]


@dataclass
class Candidate:
    method: str
    settings: str
    build: Callable[[Path], object]  # writes the model file to the given path
    config: dict[str, str] = field(default_factory=dict)  # extra session config entries
    session: ort.InferenceSession | None = None
    ops: Counter[str] = field(default_factory=Counter)
    samples: list[int] = field(default_factory=list)  # ns, all rounds
    round_p50: list[float] = field(default_factory=list)
    cosine: float = 1.0
    max_err: float = 0.0
    error: str = ""  # why the build failed, if it did

    @property
    def p50_ms(self) -> float:
        return float(np.median(self.samples)) / 1e6


def make_feeds(model: str, rng: np.random.Generator) -> Feeds:
    if model == "transformer":
        return {"input_ids": rng.integers(0, 1000, (1, 128), dtype=np.int64)}
    return {"image": rng.standard_normal((1, 3, 64, 64), dtype=np.float32)}


def open_session(
    path: Path, config: dict[str, str], optimized: Path | None = None
) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    for key, value in config.items():
        so.add_session_config_entry(key, value)
    if optimized is not None:
        so.optimized_model_filepath = str(optimized)
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


class Calibration(CalibrationDataReader):  # type: ignore[misc]
    """16 seeded random batches (seed 1; the evaluation batches use seed 0)."""

    def __init__(self, model: str) -> None:
        rng = np.random.default_rng(1)
        self.batches = iter([make_feeds(model, rng) for _ in range(CALIB_BATCHES)])

    def get_next(self) -> Feeds | None:
        return next(self.batches, None)


def strip_initializer_value_info(src: Path, out: Path) -> None:
    """Drop value_info naming initializers: quantize_dynamic transposes Gemm weights but keeps
    those entries, so shape inference fails ("Inferred shape and existing shape differ")."""
    model = onnx.load(src)
    inits = {t.name for t in model.graph.initializer}
    kept = [vi for vi in model.graph.value_info if vi.name not in inits]
    del model.graph.value_info[:]
    model.graph.value_info.extend(kept)
    onnx.save(model, str(out))


def grid(model: str, src: Path, pre: Path, raw: Path) -> Iterator[Candidate]:
    """All candidates for one model, FP32 first. Each builder writes its model to a path.

    pre: the model after quant_pre_process; raw: the model without initializer value_info.
    """

    def fp16(out: Path) -> None:
        from onnxruntime.transformers.float16 import convert_float_to_float16

        onnx.save(convert_float_to_float16(onnx.load(src), keep_io_types=True), str(out))

    def dynamic(source: Path, **kw: Any) -> Callable[[Path], None]:
        return lambda out: quantize_dynamic(source, out, **kw)

    def static(types: str, **kw: Any) -> Callable[[Path], None]:
        act, wt = TYPES[types]
        common = {"activation_type": act, "weight_type": wt, "calibrate_method": MINMAX}
        return lambda out: quantize_static(pre, out, Calibration(model), **common, **kw)

    yield Candidate("fp32", "original", lambda out: shutil.copyfile(src, out))
    yield Candidate("fp16", "keep_io_types", fp16)
    for wt, rr, pc, use_pre in product((S8, U8), (False, True), (False, True), (True, False)):
        label = f"w={'S8' if wt == S8 else 'U8'} rr={rr:d} pc={pc:d} pre={use_pre:d}"
        label += " (engine)" if (wt, rr, pc, use_pre) == (S8, False, False, True) else ""
        build = dynamic(pre if use_pre else raw, weight_type=wt, reduce_range=rr, per_channel=pc)
        yield Candidate("dynamic", label, build)
    build = dynamic(src, weight_type=S8, reduce_range=True)
    yield Candidate("dynamic", "w=S8 rr=1 pc=0 pre=0 as-is (initializer value_info)", build)
    build = dynamic(pre, weight_type=S8, reduce_range=False, per_channel=False)
    precise = {"session.x64quantprecision": "1"}
    yield Candidate("dynamic", "w=S8 rr=0 pc=0 pre=1 +sess x64quantprecision=1", build, precise)
    build = dynamic(pre, weight_type=S8, reduce_range=True, op_types_to_quantize=["MatMul", "Gemm"])
    yield Candidate("dynamic", "w=S8 rr=1 pc=0 pre=1 +ops=MatMul,Gemm", build)
    qdq, qop = QuantFormat.QDQ, QuantFormat.QOperator
    for fmt, types, pc, rr in product((qdq, qop), TYPES, (False, True), (False, True)):
        label = f"{fmt.name} {types} pc={pc:d} rr={rr:d}"
        label += " (engine)" if (fmt, types, pc, rr) == (qdq, "S8S8", True, False) else ""
        build = static(types, quant_format=fmt, per_channel=pc, reduce_range=rr)
        yield Candidate("static", label, build)
    # Options that can change fusion/speed, on top of QDQ U8S8 per-tensor reduce_range.
    base = {"quant_format": qdq, "per_channel": False, "reduce_range": True}
    for key, value in QDQ_OPTIONS.items():
        build = static("U8S8", extra_options={key: value}, **base)
        yield Candidate("static", f"QDQ U8S8 pc=0 rr=1 +{key}={value}", build)
    ops = WEIGHT_OPS[model]
    build = static("U8S8", op_types_to_quantize=ops, **base)
    yield Candidate("static", f"QDQ U8S8 pc=0 rr=1 +ops={','.join(ops)}", build)
    build, allow = static("S8S8", **base), {"session.qdqisint8allowed": "1"}
    yield Candidate("static", "QDQ S8S8 pc=0 rr=1 +sess qdqisint8allowed=1", build, allow)


def prepare(model: str, work: Path, evals: list[Feeds]) -> list[Candidate]:
    """Build every variant, open its session, count its optimized nodes, measure accuracy."""
    src = MODELS[model]
    pre, raw = work / f"{model}.pre.onnx", work / f"{model}.raw.onnx"
    quant_pre_process(str(src), str(pre), skip_symbolic_shape=False)
    strip_initializer_value_info(src, raw)
    cands = list(grid(model, src, pre, raw))
    reference: list[np.ndarray] = []
    for i, cand in enumerate(cands):
        path, opt = work / f"{model}.{i}.onnx", work / f"{model}.{i}.opt.onnx"
        t0 = time.perf_counter()
        try:
            cand.build(path)
        except Exception as exc:  # a failing setting is a result too
            cand.error = " ".join(f"{type(exc).__name__}: {exc}".split())[:150]
            print(f"  FAILED {model} {cand.settings}: {cand.error}", flush=True)
            continue
        open_session(path, cand.config, opt)  # only wanted: the saved optimized graph
        cand.ops = Counter(n.op_type for n in onnx.load(opt).graph.node)
        cand.session = open_session(path, cand.config)
        outs = [cand.session.run(None, feeds)[0].astype(np.float64).ravel() for feeds in evals]
        if i == 0:
            reference = outs
        pairs = list(zip(reference, outs, strict=True))
        cand.cosine = min(float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) for a, b in pairs)
        cand.max_err = max(float(np.abs(a - b).max()) for a, b in pairs)
        print(f"  built {model} {cand.settings} in {time.perf_counter() - t0:.1f} s", flush=True)
    return cands


def time_interleaved(
    cands: list[Candidate], feeds: Feeds, rounds: int, slot_s: float, seed: int = 0
) -> None:
    """Shuffled rounds (round 0 is warm-up); a slot: 2 re-warm runs, then slot_s of runs (min 5)."""
    rng = np.random.default_rng(seed)
    cands = [c for c in cands if c.session is not None]
    for r in range(rounds + 1):
        for idx in rng.permutation(len(cands)):
            cand = cands[idx]
            assert cand.session is not None
            run = cand.session.run
            run(None, feeds)
            run(None, feeds)
            samples: list[int] = []
            end = time.perf_counter_ns() + int(slot_s * 1e9)
            while True:
                t0 = time.perf_counter_ns()
                run(None, feeds)
                t1 = time.perf_counter_ns()
                samples.append(t1 - t0)
                if t1 >= end and len(samples) >= 5:
                    break
            if r > 0:
                cand.samples.extend(samples)
                cand.round_p50.append(float(np.median(samples)) / 1e6)
        print(f"  round {r}/{rounds} done", flush=True)


def report(model: str, cands: list[Candidate]) -> list[str]:
    fp32 = cands[0].p50_ms
    head = (
        f"{'model':11s} {'method':8s} {'settings':52s} {'nodes':>5s} {'p50 ms':>7s} "
        f"{'n':>5s} {'spread':>6s} {'best rd':>7s} {'speedup':>7s} {'cosine':>8s} "
        f"{'max abs err':>11s}"
    )
    lines = [head, "-" * len(head)]
    for c in cands:
        if c.error:
            lines.append(f"{model:11s} {c.method:8s} {c.settings:52s} build failed: {c.error}")
            continue
        spread = (max(c.round_p50) - min(c.round_p50)) / c.p50_ms
        lines.append(
            f"{model:11s} {c.method:8s} {c.settings:52s} {c.ops.total():5d} "
            f"{c.p50_ms:7.2f} {len(c.samples):5d} {spread:6.0%} {min(c.round_p50):7.2f} "
            f"{fp32 / c.p50_ms:6.2f}x {c.cosine:8.5f} {c.max_err:11.2e}"
        )
    lines.append("")
    for method in ("dynamic", "static"):
        ok = [c for c in cands if c.method == method and not c.error and c.cosine >= ACCURATE]
        if ok:
            best = min(ok, key=lambda c: c.p50_ms)
            lines.append(
                f"fastest accurate {method} (cosine >= {ACCURATE}): {best.settings}  "
                f"{best.p50_ms:.2f} ms, {fp32 / best.p50_ms:.2f}x"
            )
            if method == "static":
                lines.append(f"  op types after optimization: {dict(best.ops.most_common())}")
    engine = next((c for c in cands if c.method == "static" and "(engine)" in c.settings), None)
    if engine is not None and not engine.error:
        lines.append(
            f"engine static ({engine.settings}) op types after optimization: "
            f"{dict(engine.ops.most_common())}"
        )
    return [*lines, ""]


def environment(args: argparse.Namespace) -> list[str]:
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    cpu_fields = [line.split(":", 1) for line in info.splitlines() if ":" in line]
    fields = {key.strip(): value.strip() for key, value in cpu_fields}
    cpu, flags = fields.get("model name", platform.machine()), set(fields.get("flags", "").split())
    isa = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8") if f in flags]
    return [
        f"# quant_settings  {time.strftime('%Y-%m-%d %H:%M')}  onnxruntime {ort.__version__}"
        f"  onnx {onnx.__version__}",
        f"# CPU {cpu}, ISA {' '.join(isa) or '?'}; threads={THREADS}, spinning off,"
        f" ORT_ENABLE_ALL; {args.rounds} rounds x {args.slot_ms} ms per candidate;"
        f" load avg at start {os.getloadavg()[0]:.2f}",
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--slot-ms", type=int, default=100)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/quant_settings.txt")
    args = parser.parse_args()
    logging.getLogger().setLevel(logging.ERROR)  # the quantizer's INFO/WARNING chatter
    ort.set_default_logger_severity(3)  # e.g. the NCHWc warning when saving optimized graphs
    lines = environment(args)
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="quant_settings.") as tmp:
        for model in args.models:
            rng = np.random.default_rng(0)
            evals = [make_feeds(model, rng) for _ in range(EVAL_BATCHES)]
            cands = prepare(model, Path(tmp), evals)
            time_interleaved(cands, evals[0], args.rounds, args.slot_ms / 1000)
            lines += report(model, cands)
            del cands  # close this model's sessions before the next model's
    lines.append(
        f"# total {time.perf_counter() - t_start:.0f} s; load avg at end "
        f"{os.getloadavg()[0]:.2f} (other processes on the machine add noise)"
    )
    publish("\n".join(lines), args.out, lead="\n")


if __name__ == "__main__":
    main()
