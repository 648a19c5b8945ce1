"""How long a What-if calibration takes, where the time goes, and what it says about the
machine: the serving warm-up (every batch size up to the max, as before, or only the
largest, as the calibration now does), the timing of the sizes shuffled together, and the
short real-loop runs; each calibration's contention verdict. Quiet, then beside busy
processes (`--busy N`: N spinning Python processes), interleaved before/after in one
script so that the machine's drift meets both alike.

    .venv/bin/python bench/serve_calibration_time.py [--model PATH] [--max-batch 32]
        [--busy 2] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from results_file import publish  # noqa: E402

from engine import backends  # noqa: E402
from engine.backends.base import PrepareRequest  # noqa: E402
from engine.config import RunConfig  # noqa: E402
from engine.events import Progress  # noqa: E402
from engine.model.workload import Workload  # noqa: E402
from engine.serve.batching import BatchPolicy  # noqa: E402
from engine.serve.setup import prepare_serving  # noqa: E402
from engine.serve.sim.calibration import calibration_context, load_or_calibrate  # noqa: E402
from engine.serve.sim.service import ServiceModel  # noqa: E402
from engine.session.env import cpu_name  # noqa: E402

SPIN = "while True: pass"


def one(prepared: Any, path: str, top: int, warm_all: bool) -> dict[str, Any]:
    """One calibration as the window's job runs it: seconds of warm-up and of calibration,
    the largest size's median, the contention verdict, the first estimate of time left."""
    t0 = time.perf_counter()
    serving = prepare_serving(prepared, BatchPolicy(max_batch=top), path, warm_all=warm_all)
    warm_s = time.perf_counter() - t0
    context = calibration_context(path, prepared.config.to_json(), "cpu", top, 1)
    t1 = time.perf_counter()
    model, first_left = None, None
    for item in load_or_calibrate(serving, context, remeasure=True):
        if isinstance(item, ServiceModel):
            model = item
        elif isinstance(item, Progress) and item.total and first_left is None:
            first_left = (time.perf_counter() - t1, item.total - item.done)  # said then
    assert model is not None
    c = model.contention
    return {
        "warm_s": warm_s,
        "cal_s": time.perf_counter() - t1,
        "top_ms": model.median(top) * 1e3,
        "verdict": c.line() if c else "-",
        "first_estimate": first_left,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=str(ROOT / "resources/models/demo_transformer.onnx"))
    ap.add_argument("--max-batch", type=int, default=32)
    ap.add_argument("--busy", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench/results/serve_calibration_time.md"))
    args = ap.parse_args()
    os.environ.setdefault("OPSCOPE_CACHE_DIR", tempfile.mkdtemp(prefix="opscope-caltime-"))
    prepared = backends.prepare(PrepareRequest(Workload(args.model, RunConfig(provider="cpu"))))
    started = time.perf_counter()
    rows = []
    for busy in (0, args.busy):
        spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(busy)]
        try:
            for r in range(args.repeats):
                for warm_all in (True, False) if r % 2 == 0 else (False, True):
                    got = one(prepared, args.model, args.max_batch, warm_all)
                    rows.append((busy, "every size (before)" if warm_all else "largest (now)", got))
        finally:
            for p in spinners:
                p.kill()
                p.wait()
    prepared.close()
    lines = [
        f"# What-if calibration time ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        f"{Path(args.model).name}, max batch {args.max_batch}, 1 instance, as the window's "
        f"calibration job runs it; CPU: {cpu_name()}, {os.cpu_count()} CPUs; quiet, then "
        f"beside {args.busy} spinning processes; before and after interleaved. Took "
        f"{time.perf_counter() - started:.0f} s.",
        "",
        "| spinning | serving warm-up | warm-up s | calibration s | total s | first estimate "
        "of time left (at s: said, was) | largest size median ms | the calibration's "
        "contention |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for busy, how, g in rows:
        est = g["first_estimate"]
        est_text = f"{est[0]:.1f}: {est[1]:.0f}, {g['cal_s'] - est[0]:.0f}" if est else "-"
        lines.append(
            f"| {busy} | {how} | {g['warm_s']:.1f} | {g['cal_s']:.1f} | "
            f"{g['warm_s'] + g['cal_s']:.1f} | {est_text} | {g['top_ms']:.1f} | {g['verdict']} |"
        )
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
