"""Variant effect on the demo models: precision x fusion, p50 latency and accuracy vs FP32.

Every cell is a full `run_bench` (warm-up discarded, raw samples, accuracy against the FP32
model on the same seeded inputs). Cells are run in interleaved rounds so machine noise hits
every config alike; p50 is taken over the samples of all rounds. Run:
    .venv/bin/python bench/variants.py [--seconds 2] [--rounds 2] [--out bench/results/variants.md]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402

from engine.cli.results import RunResult  # noqa: E402
from engine.config import RunConfig  # noqa: E402
from engine.model.workload import Workload  # noqa: E402
from engine.run.bench import BenchRequest, run_bench  # noqa: E402
from engine.run.timing import TimingPlan  # noqa: E402

MODELS = {
    "demo_transformer (1x128)": (ROOT / "resources/models/demo_transformer.onnx", {}),
    "demo_cnn (1x3x64x64)": (ROOT / "resources/models/demo_cnn.onnx", {}),
}
PRECISIONS = ["fp32", "fp16", "int8-dynamic", "int8-static"]
FUSIONS = ["off", "all"]


def run_cell(path: Path, cfg: RunConfig, seconds: float) -> RunResult:
    result = RunResult()
    req = BenchRequest(
        Workload(str(path), cfg),
        timing=TimingPlan(warmup_runs=10, warmup_s=0.5, min_runs=50, duration_s=seconds),
    )
    for ev in run_bench(req):
        result.feed(ev)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench/results/variants.md"))
    args = ap.parse_args()
    lines = [
        "| model | precision | fusion | nodes | p50 ms | vs FP32/all | samples | cosine "
        "| max abs err | top-1 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, (path, _) in MODELS.items():
        samples: dict[tuple[str, str], list[np.ndarray]] = {}
        last: dict[tuple[str, str], RunResult] = {}
        for r in range(args.rounds):
            cells = [(p, f) for p in PRECISIONS for f in FUSIONS]
            if r % 2:
                cells.reverse()
            for precision, fusion in cells:
                cfg = RunConfig(precision=precision, fusion=fusion)  # type: ignore[arg-type]
                res = run_cell(path, cfg, args.seconds)
                samples.setdefault((precision, fusion), []).append(res.latencies_ns)
                last[(precision, fusion)] = res
                print(
                    f"{label} {precision:13s} {fusion:4s} round {r}: "
                    f"p50 {np.median(res.latencies_ns) / 1e6:.3f} ms",
                    flush=True,
                )
        base = float(np.median(np.concatenate(samples[("fp32", "all")]))) / 1e6
        for precision in PRECISIONS:
            for fusion in FUSIONS:
                lat = np.concatenate(samples[(precision, fusion)]) / 1e6
                res = last[(precision, fusion)]
                acc = res.accuracy
                p50 = float(np.median(lat))
                nodes = res.variant.nodes if res.variant else None
                cos = f"{acc.cosine:.5f}" if acc else "baseline"
                err = f"{acc.max_abs_err:.3g}" if acc else "–"
                top1 = (
                    f"{acc.top1_agreement:.0%}" if acc and acc.top1_agreement is not None else "–"
                )
                lines.append(
                    f"| {label} | {precision} | {fusion} | {nodes} | {p50:.3f} | "
                    f"{base / p50:.2f}x | {lat.size} | {cos} | {err} | {top1} |"
                )
    publish("\n".join(lines), args.out, lead="\n")


if __name__ == "__main__":
    main()
