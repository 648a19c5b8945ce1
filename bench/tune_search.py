"""How well the tuner's optuna search does within a budget: every config of a space run
once for real (exhaustive), then the search replayed over those measurements with several
seeds and a budget of a third of the space: the best it finds against the exhaustive best.
The goal: at least 95% of the exhaustive best in at most a third of the evaluations.
Replaying the measured trials judges the search, not the machine's drift between runs.
Run:
    .venv/bin/python bench/tune_search.py [--seconds 1.5] [--seeds 10] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402

from engine.config import RunConfig  # noqa: E402
from engine.events import drive  # noqa: E402
from engine.hostinfo import cpu_isa, cpu_model  # noqa: E402
from engine.tune.search import Goal, tune  # noqa: E402
from engine.tune.space import size  # noqa: E402
from engine.tune.trial import Trial, run_trial  # noqa: E402

MODELS = ("demo_cnn", "demo_transformer")
SPACE = {
    "precision": ["fp32", "int8-dynamic", "int8-static"],
    "fusion": ["basic", "all"],
    "batch": [1, 2, 4, 8],
    "threads": [1, 2],
}


def key(c: RunConfig) -> tuple[object, ...]:
    return (c.precision, c.fusion, c.batch, c.threads)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--out", default=str(ROOT / "bench/results/tune_search.md"))
    args = ap.parse_args()
    n = size(SPACE)
    budget = n // 3
    lines = [
        f"# Tuner search within a budget ({time.strftime('%Y-%m-%d')})",
        "",
        f"CPU: {cpu_model()} ({cpu_isa()}). Space: "
        + " x ".join(f"{k} {','.join(map(str, v))}" for k, v in SPACE.items())
        + f" = {n} configs; objective throughput (samples/s), floor cosine 0.99; budget "
        f"{budget} (a third). Each config measured once ({args.seconds:g} s), then optuna's "
        f"TPE replayed over the measurements with {args.seeds} seeds.",
        "",
        "| model | exhaustive best (samples/s) | config | runs meeting 95% | median ratio "
        "| worst ratio |",
        "|---|---|---|---|---|---|",
    ]  # fmt: skip
    goal = Goal("throughput", 0.99)
    for name in MODELS:
        model = str(ROOT / "resources/models" / f"{name}.onnx")
        measured: dict[tuple[object, ...], Trial] = {}

        def real(
            number: int,
            config: RunConfig,
            model: str = model,
            measured: dict = measured,  # type: ignore[type-arg]
        ) -> Trial:
            t = run_trial(number, model, config, [], args.seconds, None)
            measured[key(config)] = t
            print(f"  {config.short_label()}: {t.samples_per_s:.1f}/s cos {t.cosine:.4f}",
                  flush=True)  # fmt: skip
            return t

        full = drive(tune(SPACE, RunConfig(), goal, real))
        best = full.best.samples_per_s if full.best else float("nan")

        def replay(
            number: int,
            config: RunConfig,
            measured: dict = measured,  # type: ignore[type-arg]
        ) -> Trial:
            return dataclasses.replace(measured[key(config)], number=number)

        ratios = []
        for seed in range(args.seeds):
            found = drive(tune(SPACE, RunConfig(), goal, replay, budget=budget, seed=seed))
            ratios.append((found.best.samples_per_s if found.best else 0.0) / best)
        hits = sum(r >= 0.95 for r in ratios)
        label = full.best.config.short_label() if full.best else "-"
        lines.append(
            f"| {name} | {best:.1f} | {label} | {hits}/{len(ratios)} | "
            f"{statistics.median(ratios):.3f} | {min(ratios):.3f} |"
        )
        print(lines[-1], flush=True)
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
