"""INT8 against its accuracy target, before and after, on the CPU at hand: for each model,
FP32, the default INT8 settings (no target: --min-cosine 0.01) and INT8 held to cosine 0.99
(the settings the search chose, the nodes it kept in FP32), timed by `opscope bench` in
interleaved rounds (this machine's speed drifts 10-20% over minutes), with the accuracy
each reached. Models: the two demos, and the BERT-class models with trained weights that
were built (MiniLM-L6: bench/models/minilm_onnx.py; paraphrase-MiniLM-L3 and SPLADE-tiny:
bench/models/bert_zoo.py; 64 real sentences are the evaluation data, 64 others calibrate).
Run:
    .venv/bin/python bench/int8_target.py [--rounds 3] [--seconds 4] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402

from engine.hostinfo import cpu_isa, cpu_model  # noqa: E402

BENCH_MODELS = Path.home() / ".cache" / "opscope-bench"
MINILM = BENCH_MODELS / "minilm"
TRAINED = (  # (label, folder): built by bench/models/minilm_onnx.py and bert_zoo.py
    ("MiniLM-L6 (trained)", MINILM),
    ("paraphrase-MiniLM-L3 (trained)", BENCH_MODELS / "paraphrase-minilm-l3"),
    ("SPLADE-tiny MLM (trained)", BENCH_MODELS / "splade-tiny"),
)


def models() -> list[tuple[str, Path, list[str]]]:
    out = [
        ("demo_transformer", ROOT / "resources/models/demo_transformer.onnx", []),
        ("demo_cnn", ROOT / "resources/models/demo_cnn.onnx", []),
    ]
    for label, folder in TRAINED:
        if (folder / "model.onnx").is_file():
            data = ["--inputs", str(folder / "eval_inputs.npz"),
                    "--calibration", str(folder / "calib_inputs.npz"), "--batch", "8"]  # fmt: skip
            out.append((label, folder / "model.onnx", data))
    return out


def bench(model: Path, extra: list[str], seconds: float) -> dict:  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        proc = subprocess.run(
            [sys.executable, "-m", "app.entry", "bench", str(model), "--duration", str(seconds),
             "--no-live", "--json", str(out), *extra],
            cwd=ROOT, capture_output=True, text=True, timeout=3600,
        )  # fmt: skip
        if proc.returncode != 0:
            return {"error": proc.stderr.strip().splitlines()[-1]}
        return json.loads(out.read_text())  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--out", default=str(ROOT / "bench/results/int8_target.md"))
    args = ap.parse_args()
    lines = [
        f"# INT8 held to an accuracy target ({time.strftime('%Y-%m-%d')})",
        "",
        f"CPU: {cpu_model()} (instruction set for INT8: **{cpu_isa()}**). p50 is the median "
        f"over {args.rounds} interleaved rounds of {args.seconds:g} s; speedup = FP32 p50 / "
        "variant p50. Cosine: the worst output against FP32.",
        "",
        "| model | precision | target | p50 ms | speedup | cosine | met | settings "
        "| kept in FP32 | attempts |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for name, path, extra in models():
        configs = [("fp32", None), ("int8-dynamic", 0.01), ("int8-dynamic", 0.99)]
        if extra:  # calibration data: static too
            configs += [("int8-static", 0.01), ("int8-static", 0.99)]
        else:
            configs += [("int8-static", 0.99)]
        for cfg in configs:  # once untimed: builds and searches land in the cache
            target = ["--min-cosine", str(cfg[1])] if cfg[1] else []
            bench(path, [*extra, "--precision", cfg[0], *target], 0.5)
        p50: dict[tuple[str, float | None], list[float]] = {c: [] for c in configs}
        last: dict[tuple[str, float | None], dict] = {}  # type: ignore[type-arg]
        for _ in range(args.rounds):
            for cfg in configs:
                target = ["--min-cosine", str(cfg[1])] if cfg[1] else []
                r = bench(path, [*extra, "--precision", cfg[0], *target], args.seconds)
                last[cfg] = r
                if "latency_ms" in r:
                    p50[cfg].append(r["latency_ms"]["p50"])
        base = statistics.median(p50[("fp32", None)]) if p50[("fp32", None)] else float("nan")
        for cfg in configs:
            r = last[cfg]
            if "error" in r:
                lines.append(f"| {name} | {cfg[0]} | {cfg[1]} | error: {r['error']} |||||||")
                continue
            med = statistics.median(p50[cfg])
            v = r.get("variant") or {}
            acc = r.get("accuracy") or {}
            kept = v.get("excluded_nodes") or []
            settings = ", ".join(f"{k}={x}" for k, x in (v.get("settings") or {}).items())
            lines.append(
                f"| {name} | {cfg[0]} | {cfg[1] if cfg[1] else '-'} | {med:.3f} | "
                f"{base / med:.2f}x | {acc.get('cosine', 1.0) if acc else 1.0:.5f} | "
                f"{'-' if cfg[0] == 'fp32' else ('yes' if v.get('met') else 'NO')} | "
                f"{settings or ('defaults' if cfg[0] != 'fp32' else '-')} | "
                f"{len(kept)}{': ' + ', '.join(kept[:3]) if kept else ''} | "
                f"{len(v.get('attempts') or []) or '-'} |"
            )
            print(lines[-1], flush=True)
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
