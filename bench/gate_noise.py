"""How often `opscope gate` fails on noise, and how often it catches a real ~15% slowdown.

Records a pool of short runs of the demo transformer, each its own `opscope bench` process
(so the spread between processes is in the data): N runs of the base config and M runs of
a slower one (a longer sequence: more work per inference, a real slowdown, not a sleep),
interleaved so that both see the same machine. Then, on many random splits:
- false alarms: 5 base runs against 5 other base runs, gated at 5% (the gate's statistics,
  `gate_metric`, the same function the command calls);
- detection: 5 base runs against 5 slow runs;
- for contrast, the plain single-run `compare` (one process a side) on the same splits.
Run:
    .venv/bin/python bench/gate_noise.py [--runs 30 --slow-runs 15 --duration 1]
    .venv/bin/python bench/gate_noise.py --pool /tmp/gate_pool.opscope  # re-evaluate only
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402

from engine.analysis.deltas import Samples, compare_metric, metric_value  # noqa: E402
from engine.analysis.gate_stats import gate_metric  # noqa: E402
from engine.analysis.run_compare import run_samples  # noqa: E402
from engine.session.reader import SessionReader  # noqa: E402

MODEL = ROOT / "resources" / "models" / "demo_transformer.onnx"
BASE_SHAPE, SLOW_SHAPE = "input_ids=1x128", "input_ids=1x148"  # 15.6% more tokens
COMMON = ["--warmup", "3", "--threads", "1", "--no-live", "--no-accuracy"]
THRESHOLD = 5.0
K = 5


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return "unknown CPU"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "-"


def record_pool(path: Path, n: int, m: int, duration: float) -> float:
    """n base and m slow runs, interleaved (slow ones spread evenly); wall seconds."""
    order = ["slow" if (i + 1) * m // (n + m) > i * m // (n + m) else "base" for i in range(n + m)]
    t0 = time.perf_counter()
    for i, kind in enumerate(order):
        shape = SLOW_SHAPE if kind == "slow" else BASE_SHAPE
        argv = [sys.executable, "-m", "app.entry", "bench", str(MODEL), "--shape", shape,
                "--duration", f"{duration:g}", *COMMON, "--session", str(path)]  # fmt: skip
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"run {i + 1} failed: {proc.stderr.strip().splitlines()[-1:]}")
        print(f"  run {i + 1}/{n + m} ({kind}) done", file=sys.stderr)
    return time.perf_counter() - t0


def read_pool(path: Path) -> tuple[list[Samples], list[Samples]]:
    base: list[Samples] = []
    slow: list[Samples] = []
    with SessionReader.open(path) as reader:
        for run in reader.runs():
            if run.status != "ok":
                continue
            shape = (run.inputs.get("input_ids") or {}).get("shape")
            side = slow if shape == [1, 148] else base if shape == [1, 128] else None
            if side is not None:
                side.append(run_samples(reader, run))
    return base, slow


def rate(hits: int, n: int) -> str:
    return f"{hits}/{n} = {hits / n:.1%}"


def evaluate(
    base: list[Samples], slow: list[Samples], splits: int, metric: str, k: int
) -> tuple[list[str], dict[str, float]]:
    """Gate (and, at K = 5, single-run compare) on `splits` random splits of the pool."""
    rng = np.random.default_rng(k)
    alarms = caught = above_zero = single_alarms = single_caught = 0
    for s in range(splits):
        idx = rng.choice(len(base), size=2 * k, replace=False)
        b, c = [base[i] for i in idx[:k]], [base[i] for i in idx[k:]]
        slow_c = [slow[i] for i in rng.choice(len(slow), size=k, replace=False)]
        null = gate_metric(metric, b, c, threshold_pct=THRESHOLD, seed=s)
        alarms += null.regression
        above_zero += null.slowdown_bound_pct > 0  # calibration: 5% when exact
        caught += gate_metric(metric, b, slow_c, threshold_pct=THRESHOLD, seed=s).regression
        if k == K:
            single_alarms += compare_metric(metric, b[0], c[0], seed=s).regression(THRESHOLD)
            single_caught += compare_metric(metric, b[0], slow_c[0], seed=s).regression(THRESHOLD)
    rows = [
        f"| {metric} | gate, {k} + {k} runs | {rate(alarms, splits)} | "
        f"{rate(above_zero, splits)} | {rate(caught, splits)} |"
    ]
    if k == K:
        rows.append(
            f"| {metric} | single-run compare | {rate(single_alarms, splits)} | | "
            f"{rate(single_caught, splits)} |"
        )
    numbers = {"false": alarms / splits, "caught": caught / splits}
    return rows, numbers


def spread_line(name: str, runs: list[Samples], metric: str) -> tuple[str, float]:
    values = np.array([metric_value(metric, s) for s in runs])
    med = float(np.median(values))
    cv = float(values.std(ddof=1) / values.mean() * 100)
    return (
        f"| {name} | {len(runs)} | {values.min():.3f} | {med:.3f} | {values.max():.3f} | "
        f"{(values.max() - values.min()) / med * 100:.1f}% | {cv:.1f}% |",
        med,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30, help="base runs in the pool (default 30)")
    ap.add_argument("--slow-runs", type=int, default=20, help="slow runs (default 20)")
    ap.add_argument("--k", type=int, nargs="+", default=[3, 5, 10], help="runs a side (p50)")
    ap.add_argument("--duration", type=float, default=1.0, help="seconds per run (default 1)")
    ap.add_argument("--splits", type=int, default=200, help="random splits (default 200)")
    ap.add_argument("--pool", type=Path, help="evaluate this recorded pool, record nothing")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "gate_noise.md"))
    args = ap.parse_args()
    load_before = load()
    if args.pool:
        pool, wall = args.pool, float("nan")
    else:
        pool = Path(f"/tmp/gate_pool_{os.getpid()}.opscope")
        wall = record_pool(pool, args.runs, args.slow_runs, args.duration)
    load_after = load()
    base, slow = read_pool(pool)
    if len(base) < 2 * K or len(slow) < K:
        raise SystemExit(f"{pool}: {len(base)} base and {len(slow)} slow runs; need 10 and 5")
    spread = [
        "| config | runs | min p50 ms | median | max | range/median | CV |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    row_b, med_b = spread_line(f"base, {BASE_SHAPE}", base, "p50")
    row_s, med_s = spread_line(f"slow, {SLOW_SHAPE}", slow, "p50")
    spread += [row_b, row_s]
    pooled = gate_metric("p50", base, slow, threshold_pct=THRESHOLD)
    t0 = time.perf_counter()
    rows: list[str] = []
    for metric, ks in (("p50", args.k), ("p99", [K])):
        for k in ks:
            if len(base) >= 2 * k and len(slow) >= k:
                rows += evaluate(base, slow, args.splits, metric, k)[0]
    eval_s = time.perf_counter() - t0
    text = "\n".join(
        [
            "# opscope gate: false alarms and detection on a noisy machine",
            "",
            f"{time.strftime('%Y-%m-%d %H:%M')} UTC, {cpu_model()}, {os.cpu_count()} CPUs "
            f"(shared with other work); load average (1, 5, 15 min) "
            + (
                f"{load_before} before recording, {load_after} after. "
                if not args.pool
                else f"{load_before} at this evaluation (the pool was recorded earlier). "
            )
            + "Demo transformer, FP32, 1 intra-op thread, "
            f"{args.duration:g} s timed per run after warm-up, each run its own `opscope bench` "
            f"process; base and slow runs interleaved. Pool recorded in "
            + (f"{wall:.0f} s." if wall == wall else "an earlier session (re-evaluated)."),
            "",
            "## Spread of the per-run median between processes",
            "",
            *spread,
            "",
            f"The injected slowdown ({SLOW_SHAPE} against {BASE_SHAPE}: 15.6% more tokens) "
            f"measures {(med_s / med_b - 1) * 100:+.1f}% on the median of the runs' p50s and "
            f"{pooled.slowdown_pct:+.1f}% on the pooled p50 of all runs "
            f"(95% CI {pooled.slowdown_ci_pct[0]:+.1f}% .. {pooled.slowdown_ci_pct[1]:+.1f}%, "
            f"{len(base)} vs {len(slow)} runs).",
            "",
            f"## Gate at {THRESHOLD:g}%, one-sided 95%, on {args.splits} random splits",
            "",
            "False alarm: K base runs against K other base runs (identical configs). "
            "Detection: K base runs against K slow runs. The single-run `compare` row "
            f"takes the first run of each side of the same K = {K} split (its two-sided 95% "
            f"interval's lower bound above {THRESHOLD:g}%, as `opscope compare --max-regression 5` "
            "decides). Splits share runs, so they are not independent trials: the rates are "
            "estimates from one pool, on this machine, at this load.",
            "",
            "| metric | method | false alarms | bound > 0 (5% if exact) | detected |",
            "|---|---|---:|---:|---:|",
            *rows,
            "",
            f"(the evaluation took {eval_s:.0f} s.) 'bound > 0' counts the null splits whose "
            "one-sided 95% lower bound of the slowdown is above zero: a calibrated bound "
            "does so 5% of the time.",
        ]
    )
    publish(text, args.out)


if __name__ == "__main__":
    main()
