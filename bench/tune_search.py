"""How well the tuner's optuna search does within a budget: every config of a space run
once for real (exhaustive), then the search replayed over those measurements with several
seeds and a budget of a third of the space: the best it finds against the exhaustive best.
The goal: at least 95% of the exhaustive best in at most a third of the evaluations, in
every seed. Replaying the measured trials judges the search, not the machine's drift
between runs; `--save` keeps the measurements in a JSON file and `--replay` judges the
search again on them (several files: each judged on its own) without measuring anew.
`--median-of` judges also on each config's median over the files (passes scaled by their
level); `--variant NAME` replays one of VARIANTS, `--variants` compares them all.
Run:
    .venv/bin/python bench/tune_search.py [--seconds 1.5] [--seeds 50] [--save M.json]
    .venv/bin/python bench/tune_search.py --replay M1.json M2.json M3.json --median-of \
        [--seeds 100] [--variant NAME | --variants [--part 1/2]]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402

from engine.config import RunConfig  # noqa: E402
from engine.events import drive  # noqa: E402
from engine.hostinfo import cpu_isa, cpu_model  # noqa: E402
from engine.model.workload import Workload  # noqa: E402
from engine.tune.design import Design  # noqa: E402
from engine.tune.search import Goal, tune  # noqa: E402
from engine.tune.space import Space, size  # noqa: E402
from engine.tune.trial import Trial, run_trial  # noqa: E402

MODELS = ("demo_cnn", "demo_transformer")
SPACE: Space = {
    "precision": ["fp32", "int8-dynamic", "int8-static"],
    "fusion": ["basic", "all"],
    "batch": [1, 2, 4, 8],
    "threads": [1, 2],
}
GOAL = Goal("throughput", 0.99)
# the designs --variants compares ("before": the search before issue #14's work; optuna's TPE
# is multivariate by default for one objective)
# (spread and refine: shares of the budget; of 16: 0.25 = 4, 0.375 = 6, 0.5 = 8)
PLAIN = {"spread": 0.0, "refine": 0.0}
VARIANTS = {
    "random sampler": Design(ordinal=False, multivariate=False, sampler="random", **PLAIN),
    "TPE, categorical, multivariate (before)": Design(ordinal=False, **PLAIN),
    "TPE, categorical, univariate": Design(ordinal=False, multivariate=False, **PLAIN),
    "TPE, ordinal, univariate": Design(multivariate=False, **PLAIN),
    "TPE, ordinal, multivariate (mv)": Design(**PLAIN),
    "TPE, ordinal, mv, startup 8": Design(startup=8, **PLAIN),
    "TPE, ordinal, mv, startup 3": Design(startup=3, **PLAIN),
    "TPE ordinal mv + spread 6": Design(spread=0.375, refine=0.0),
    "TPE ordinal mv + refine 6": Design(spread=0.0, refine=0.375),
    "TPE ordinal mv + spread 4 + refine 4": Design(spread=0.25, refine=0.25),
    "TPE ordinal mv + spread 6 + refine 6": Design(spread=0.375, refine=0.375),
    "TPE ordinal mv + spread 4 + refine 8 (chosen)": Design(spread=0.25, refine=0.5),
    "TPE ordinal mv + spread 8 + refine 8": Design(spread=0.5, refine=0.5),
    "TPE ordinal mv + spread 4 + refine 8 near the best 2": Design(near_top=2),
    "TPE ordinal mv + spread 4 + refine 8 near the best 3": Design(near_top=3),
    "TPE categorical univariate + spread 6 + refine 6": Design(ordinal=False, multivariate=False,
                                                    spread=0.375, refine=0.375),
    "random + spread 6 + refine 6": Design(sampler="random", spread=0.375, refine=0.375),
}  # fmt: skip
FIELDS = ("status", "p50_ms", "p99_ms", "samples_per_s", "cosine", "error")

Measured = dict[tuple[object, ...], Trial]


def key(space: Space, c: RunConfig) -> tuple[object, ...]:
    return tuple(getattr(c, k) for k in space)


def measure(name: str, seconds: float) -> Measured:
    """Every config of SPACE run once for real."""
    model = str(ROOT / "resources/models" / f"{name}.onnx")
    measured: Measured = {}

    def real(number: int, config: RunConfig) -> Trial:
        t = run_trial(number, Workload(model, config), seconds, None)
        measured[key(SPACE, config)] = t
        print(f"  {name} {config.short_label()}: {t.samples_per_s:.1f}/s cos {t.cosine:.4f}",
              flush=True)  # fmt: skip
        return t

    drive(tune(SPACE, RunConfig(), GOAL, real))
    return measured


def save(path: str, space: Space, seconds: float, sets: dict[str, Measured]) -> None:
    doc = {
        "cpu": f"{cpu_model()} ({cpu_isa()})",
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "seconds": seconds,
        "space": space,
        "models": {
            name: [
                {**{k: getattr(t.config, k) for k in space}, **{f: getattr(t, f) for f in FIELDS}}
                for t in measured.values()
            ]
            for name, measured in sets.items()
        },
    }
    Path(path).write_text(json.dumps(doc, indent=1) + "\n")


def load(path: str) -> tuple[dict[str, Any], dict[str, Measured]]:
    """The file's header and, per model, its measurements; a bad file: a one-line exit."""
    try:
        doc = json.loads(Path(path).read_text())
        space: Space = doc["space"]
        sets: dict[str, Measured] = {}
        for name, rows in doc["models"].items():
            measured: Measured = {}
            for i, row in enumerate(rows):
                config = dataclasses.replace(RunConfig(), **{k: row[k] for k in space})
                t = Trial(i + 1, config, **{f: row[f] for f in FIELDS})
                for f in FIELDS[1:-1]:
                    setattr(t, f, math.nan if getattr(t, f) is None else float(getattr(t, f)))
                measured[key(space, config)] = t
            if len(measured) != size(space):
                raise ValueError(f"{name} has {len(measured)} of {size(space)} configs")
            sets[name] = measured
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        sys.exit(f"tune_search: {path}: not a measurements file ({e})")
    return doc, sets


def median_of(
    files: list[tuple[str, dict[str, Any], dict[str, Measured]]],
) -> tuple[str, dict[str, Any], dict[str, Measured]]:
    """Per model and config, the median throughput over the files' passes, each pass first
    scaled by its level (the geometric mean over its configs: a pass the machine's other
    load slowed throughout counts as much as a quiet one): an outlier of one pass (a lull
    in the load) no longer makes the exhaustive best."""
    label = "median of " + ", ".join(f[0] for f in files)
    sets: dict[str, Measured] = {}
    for name in files[0][2]:
        runs = [f[2][name] for f in files if name in f[2]]
        levels = [
            math.exp(statistics.fmean(math.log(t.samples_per_s) for t in m.values()
                                      if t.status == "ok" and t.samples_per_s > 0))
            for m in runs
        ]  # fmt: skip
        level = statistics.fmean(levels)
        sets[name] = {}
        for k, first in runs[0].items():
            values = [m[k].samples_per_s / lv * level for m, lv in zip(runs, levels, strict=True)
                      if m[k].status == "ok"]  # fmt: skip
            if len(values) == len(runs):
                first = dataclasses.replace(first, samples_per_s=statistics.median(values))
            sets[name][k] = first
    return label, files[0][1], sets


def exhaustive_best(measured: Measured) -> Trial:
    feasible = [t for t in measured.values() if GOAL.feasible(t)]
    return min(feasible, key=GOAL.loss)


def replay_ratios(
    space: Space, measured: Measured, seeds: int, design: Design | None = None
) -> list[float]:
    """The search over the measurements (it sees a config's result only once it asks for
    it), seed by seed: the best it finds over the exhaustive best."""
    best = exhaustive_best(measured).samples_per_s
    budget = size(space) // 3

    def replay(number: int, config: RunConfig) -> Trial:
        return dataclasses.replace(measured[key(space, config)], number=number)

    ratios = []
    for seed in range(seeds):
        found = drive(tune(space, RunConfig(), GOAL, replay, budget=budget, seed=seed,
                           design=design))  # fmt: skip
        ratios.append((found.best.samples_per_s if found.best else 0.0) / best)
    return ratios


def row(label: str, measured: Measured, ratios: list[float]) -> str:
    best = exhaustive_best(measured)
    hits = sum(r >= 0.95 for r in ratios)
    return (
        f"| {label} | {best.samples_per_s:.1f} | {best.config.short_label()} | "
        f"{hits}/{len(ratios)} | {statistics.median(ratios):.3f} | {min(ratios):.3f} |"
    )


def variants(
    files: list[tuple[str, dict[str, Any], dict[str, Measured]]], seeds: int, part: str
) -> str:
    """A table: each design of VARIANTS, on each model of each measurements file."""
    cols = [(f"{name} ({label})", header["space"], m) for label, header, sets in files
            for name, m in sets.items()]  # fmt: skip
    lines = [
        f"Search designs replayed with {seeds} seeds, budget a third of the space; per "
        "measurement set: seeds reaching 95% of the exhaustive best, median ratio, worst.",
        "",
        "| design | " + " | ".join(c[0] for c in cols) + " |",
        "|---" * (len(cols) + 1) + "|",
    ]
    i, n = (int(x) for x in part.split("/"))
    for label, design in list(VARIANTS.items())[i - 1 :: n]:
        cells = []
        for _, space, measured in cols:
            r = replay_ratios(space, measured, seeds, design)
            cells.append(
                f"{sum(x >= 0.95 for x in r)}/{len(r)}, {statistics.median(r):.3f}, {min(r):.3f}"
            )
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--save", help="keep the measurements in this JSON file")
    ap.add_argument("--replay", nargs="+", help="judge the search on these measurement files")
    ap.add_argument(
        "--median-of",
        action="store_true",
        help="with --replay: judge also on each config's median over the files' passes "
        "(each pass scaled by its level)",
    )
    ap.add_argument(
        "--variants",
        action="store_true",
        help="with --replay: compare the search designs in VARIANTS",
    )
    ap.add_argument("--variant", choices=list(VARIANTS), help="replay this design, not the default")
    ap.add_argument("--part", default="1/1", help="with --variants: every Nth design from I")
    ap.add_argument("--out", default=str(ROOT / "bench/results/tune_search.md"))
    args = ap.parse_args()
    if args.replay:
        files = [(Path(p).name, *load(p)) for p in args.replay]
        if args.median_of:
            files.append(median_of(files))
    if args.replay and args.variants:
        publish(variants(files, args.seeds, args.part), args.out)
        return
    if not args.replay:
        sets = {name: measure(name, args.seconds) for name in MODELS}
        if args.save:
            save(args.save, SPACE, args.seconds, sets)
        header = {"cpu": f"{cpu_model()} ({cpu_isa()})", "seconds": args.seconds, "space": SPACE}
        files = [("measured now", header, sets)]
    lines = [f"# Tuner search within a budget ({time.strftime('%Y-%m-%d')})", ""]
    for label, header, sets in files:
        space = header["space"]
        n = size(space)
        lines += [
            f"Measurements: {label} (CPU: {header['cpu']}). Space: "
            + " x ".join(f"{k} {','.join(map(str, v))}" for k, v in space.items())
            + f" = {n} configs; objective throughput (samples/s), floor cosine 0.99; budget "
            f"{n // 3} (a third). Each config measured once ({header['seconds']:g} s), then "
            f"the search ({args.variant or 'the default design'}) replayed over the "
            f"measurements with {args.seeds} seeds.",
            "",
            "| model | exhaustive best (samples/s) | config | runs meeting 95% | median ratio "
            "| worst ratio |",
            "|---|---|---|---|---|---|",
        ]  # fmt: skip
        for name, measured in sets.items():
            design = VARIANTS[args.variant] if args.variant else None
            lines.append(row(name, measured, replay_ratios(space, measured, args.seeds, design)))
            print(lines[-1], flush=True)
        lines.append("")
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
