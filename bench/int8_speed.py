"""How long INT8 takes to meet its accuracy target, before and after (#29): all-MiniLM-L6-v2
(bench/models/minilm_onnx.py: 64 real sentences to evaluate, 64 others to calibrate),
dynamic and static INT8 held to cosine 0.99, each built from a cold cache in its own
process, by the code before the change (a `git archive` of --before, default the commit
this work started from) and by this tree, side by side, interleaved (before, after, before,
after, ...). Each row has the load average beside it: the 2 cores are shared.

Each build is timed from the prepare request to its VariantReady; its Progress events are
timed too, and the time between one and the next is put down to the first one's phase
(pre-processing, calibration, quantizing, checking accuracy, timing, ranking nodes, ...).
Run:
    .venv/bin/python bench/int8_speed.py [--before REF] [--rounds 1] [--skip-before]
        [--out bench/results/int8_speed.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402

MINILM = Path.home() / ".cache" / "opscope-bench" / "minilm"
BEFORE = "61f3f78"  # the commit the faster search started from
GOALS = {"int8-dynamic": 30.0, "int8-static": 60.0}

# the child: one build, its Progress timeline, as JSON on stdout
CHILD = r"""
import json, sys, time
from engine import backends
from engine.backends.base import PrepareRequest
from engine.config import RunConfig
from engine.events import Progress, VariantReady
from engine.model.workload import JobInputs, Workload
model, precision, inputs, calib = sys.argv[1:5]
t0 = time.perf_counter()
timeline, ready = [], []
def on(ev):
    t = time.perf_counter() - t0
    if isinstance(ev, Progress):
        timeline.append((t, ev.message))
    elif isinstance(ev, VariantReady):
        ready.append((t, ev))
given = JobInputs(inputs_npz=inputs, calibration_npz=calib)
config = RunConfig(precision=precision, min_cosine=0.99, batch=8)
req = PrepareRequest(Workload(model, config, given))
prepared = backends.prepare(req, on)
t_ready, v = ready[-1]
int8 = v.details.get("int8") or {}
print(json.dumps({"ready_s": t_ready, "build_s": v.build_s, "met": int8.get("met"),
                  "cosine": int8.get("cosine"), "attempts": len(int8.get("attempts") or []),
                  "excluded": int8.get("excluded_nodes"), "search": int8.get("search"),
                  "timeline": timeline}))
prepared.close()
"""

PHASES = (  # (phase, words in a Progress message), first match wins
    ("pre-processing", ("pre-processing",)),
    ("ranking nodes", ("sensitivity of", "ranking")),
    ("calibration", ("calibrat",)),
    ("quantizing", ("quantizing", "building", "trying", "keeping", "round", "met with",
                    "the same nodes")),
    ("checking accuracy", ("checking accuracy",)),
    ("timing", ("timing",)),
    ("loading, session", ("loading", "session", "creating")),
)  # fmt: skip


def phase(message: str) -> str:
    text = message.split(": ", 1)[-1] if message.startswith("attempt ") else message
    low = text.lower()
    for name, words in PHASES:
        if any(w in low for w in words):
            return name
    return "other"


def phases(timeline: list[list[object]], end: float) -> dict[str, float]:
    out: dict[str, float] = {}
    for (t, msg), nxt in zip(timeline, [*timeline[1:], [end, ""]], strict=True):
        span = min(float(nxt[0]), end) - float(t)  # type: ignore[arg-type]
        if span > 0:
            out[phase(str(msg))] = out.get(phase(str(msg)), 0.0) + span
    return out


def build(tree: Path, precision: str) -> dict:  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory(prefix="opscope-int8-speed-") as cache:
        env = {**os.environ, "PYTHONPATH": str(tree), "OPSCOPE_CACHE_DIR": cache}
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(MINILM / "model.onnx"), precision,
             str(MINILM / "eval_inputs.npz"), str(MINILM / "calib_inputs.npz")],
            cwd=tree, env=env, capture_output=True, text=True, timeout=3600,
        )  # fmt: skip
        wall = time.perf_counter() - t0
        load1 = os.getloadavg()[0]
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1], "wall_s": wall}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out.update(wall_s=wall, load=(load0, load1), phases=phases(out["timeline"], out["ready_s"]))
    return out  # type: ignore[no-any-return]


def before_tree(ref: str, folder: Path) -> Path:
    archive = folder / "before.tar"
    subprocess.run(["git", "archive", "-o", str(archive), ref], cwd=ROOT, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(folder / "before", filter="data")
    return folder / "before"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--before", default=BEFORE, help="git ref of the code before")
    ap.add_argument("--skip-before", action="store_true", help="time this tree only")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--precision", action="append", choices=sorted(GOALS))
    ap.add_argument("--out", default=str(ROOT / "bench/results/int8_speed.md"))
    args = ap.parse_args()
    if not (MINILM / "model.onnx").is_file():
        sys.exit(f"{MINILM / 'model.onnx'}: not built (run bench/models/minilm_onnx.py)")
    precisions = args.precision or sorted(GOALS)
    rows: list[tuple[str, str, dict]] = []  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory() as tmp:
        trees = [("after", ROOT)]
        if not args.skip_before:
            trees.insert(0, (f"before ({args.before})", before_tree(args.before, Path(tmp))))
        for _ in range(args.rounds):
            for precision in precisions:
                for label, tree in trees:
                    r = build(tree, precision)
                    rows.append((label, precision, r))
                    print(label, precision, {k: v for k, v in r.items() if k != "timeline"},
                          flush=True)  # fmt: skip
    lines = [
        f"# INT8 to cosine 0.99 on all-MiniLM-L6-v2: build time ({time.strftime('%Y-%m-%d')})",
        "",
        "Each build from a cold cache in its own process; `build s` = request to VariantReady "
        "(what the Variant line says is `built in`); load = 1-minute load average before / "
        f"after the build (2 cores, shared). Goals: dynamic {GOALS['int8-dynamic']:g} s, "
        f"static {GOALS['int8-static']:g} s.",
        "",
        "| code | precision | build s | said 'built in' s | load | attempts | cosine | met "
        "| kept in FP32 | pre-processings | calibrations |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, precision, r in rows:
        if "error" in r:
            lines.append(f"| {label} | {precision} | error: {r['error']} |||||||||")
            continue
        search = r.get("search") or {}
        lines.append(
            f"| {label} | {precision} | {r['ready_s']:.1f} | {r['build_s']:.1f} | "
            f"{r['load'][0]:.1f} / {r['load'][1]:.1f} | {r['attempts']} | "
            f"{r['cosine']:.5f} | {'yes' if r['met'] else 'NO'} | "
            f"{len(r['excluded'] or [])} | {search.get('preprocessed', '-')} | "
            f"{search.get('calibrations', '-')} |"
        )
    names = [p for p, _ in PHASES] + ["other"]
    lines += ["", "Where the time goes (s, from the Progress timeline):", "",
              "| code | precision | " + " | ".join(names) + " |",
              "|---|---|" + "---|" * len(names)]  # fmt: skip
    for label, precision, r in rows:
        if "error" not in r:
            cells = " | ".join(f"{r['phases'].get(n, 0.0):.1f}" for n in names)
            lines.append(f"| {label} | {precision} | {cells} |")
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
