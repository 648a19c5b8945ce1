"""The demo transformer as a .pt2 program: torch eager vs torch.compile vs ONNX Runtime.

Builds the demo transformer from resources/models/build_demo_models.py's module definitions
(same seed), saves it with torch.export.save, then runs every cell as a full `run_bench`
(warm-up discarded, raw samples, accuracy against the FP32 baseline of the same engine on
the same seeded inputs). Input 1x128 token ids. Run:
    .venv/bin/python bench/torch_vs_ort.py [--seconds 3] [--out bench/results/torch_vs_ort.txt]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.cli.results import RunResult  # noqa: E402
from engine.config import RunConfig  # noqa: E402
from engine.model.workload import JobInputs, Workload  # noqa: E402
from engine.run.bench import BenchRequest, run_bench  # noqa: E402
from engine.run.timing import TimingPlan  # noqa: E402

CELLS = [
    ("torch eager", RunConfig(engine="torch", fusion="off", precision="fp32")),
    ("torch eager", RunConfig(engine="torch", fusion="off", precision="bf16")),
    ("torch eager", RunConfig(engine="torch", fusion="off", precision="int8-dynamic")),
    ("torch.compile", RunConfig(engine="torch", fusion="all", precision="fp32")),
    ("torch.compile", RunConfig(engine="torch", fusion="all", precision="int8-dynamic")),
    ("onnxruntime", RunConfig(engine="onnxruntime", fusion="all", precision="fp32")),
    ("onnxruntime", RunConfig(engine="onnxruntime", fusion="all", precision="int8-dynamic")),
]


def build_pt2(out: Path) -> Path:
    """The demo transformer, exported with dynamic batch and sequence, as a .pt2 file."""
    import torch

    spec = importlib.util.spec_from_file_location(
        "build_demo_models", ROOT / "resources/models/build_demo_models.py"
    )
    assert spec and spec.loader
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    torch.manual_seed(demo.SEED)
    model = demo.TransformerClassifier()
    demo.randomize_norms(model)
    model.eval()
    batch = torch.export.Dim("batch", min=1, max=1024)
    seq = torch.export.Dim("sequence", min=1, max=demo.MAX_POSITIONS)
    example = torch.randint(0, demo.VOCAB_SIZE, (2, 32))
    program = torch.export.export(model, (example,), dynamic_shapes=({0: batch, 1: seq},))
    path = out / "demo_transformer.pt2"
    torch.export.save(program, str(path))
    return path


def run_cell(path: Path, cfg: RunConfig, seconds: float) -> tuple[RunResult, float]:
    result = RunResult()
    req = BenchRequest(
        Workload(str(path), cfg, JobInputs(shapes={"input_ids": (1, 128)})),
        timing=TimingPlan(warmup_runs=10, warmup_s=0.5, min_runs=50, duration_s=seconds),
    )
    t0 = time.perf_counter()
    for ev in run_bench(req):
        result.feed(ev)
    return result, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--threads", type=int, default=0, help="0: one per physical core")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/torch_vs_ort.txt")
    args = parser.parse_args(argv)
    import onnxruntime
    import torch

    cpu = platform.processor() or platform.machine()
    lines = [
        f"demo transformer (.pt2), input_ids 1x128; {cpu}, "
        f"threads {args.threads or 'default'}, load average {os.getloadavg()[0]:.1f}; "
        f"torch {torch.__version__}, "
        f"onnxruntime {onnxruntime.__version__}; {args.seconds} s per cell",
        "accuracy: vs the same engine's FP32 (torch: FP32 eager; ORT: FP32 exported model)",
        "",
        f"{'engine':<15}{'precision':<14}{'p50 ms':>9}{'p90 ms':>9}{'n':>7}"
        f"{'cosine':>10}{'max abs':>10}{'setup s':>9}",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = build_pt2(Path(tmp))
        for label, cell in CELLS:
            cfg = dataclasses.replace(cell, threads=args.threads)
            res, _ = run_cell(path, cfg, args.seconds)
            assert res.timing and res.variant
            lat = res.timing.latency
            acc = res.accuracy
            setup = res.variant.details.get("compile_s") or (
                res.variant.details.get("torch_export", {}).get("export_s")
                if cfg.engine == "onnxruntime"
                else res.variant.build_s
            )
            lines.append(
                f"{label:<15}{cfg.precision:<14}{lat.p50:>9.3f}{lat.p90:>9.3f}{lat.count:>7}"
                + (f"{acc.cosine:>10.6f}{acc.max_abs_err:>10.4f}" if acc else f"{'-':>10}{'-':>10}")
                + f"{float(setup or 0):>9.1f}"
            )
            print(lines[-1], flush=True)
    lines.append("")
    lines.append(
        "setup s: torch.compile time (first inference), ONNX export time (ORT; "
        "exported once, then cached), or quantization time (eager int8)"
    )
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
