"""`opscope --self-test`: a one-minute check that an installed OpScope works on this machine.

Loads the bundled demo model, runs 20 timed inferences through the same engine generator the
CLI and the app use, records them into a temporary session file, reads the file back and
checks it holds the 20 samples. Prints the provider obtained and the latency; exits 0.
Any failure prints one line starting with `opscope self-test: FAILED` and exits 1.
No Qt: it runs on machines without a display.
"""

from __future__ import annotations

import importlib.resources
import sys
import tempfile
import time
from pathlib import Path

RUNS = 20


def demo_model_path() -> str:
    """The bundled demo transformer (package data, also inside the installer bundle)."""
    return str(importlib.resources.files("resources") / "models" / "demo_transformer.onnx")


def run_self_test() -> str:
    """Run the check; returns the summary line. Raises on any failure."""
    from engine.config import RunConfig
    from engine.events import RunEnded, RunStarted, TimingDone
    from engine.model.workload import Workload
    from engine.run.bench import BenchRequest, run_bench
    from engine.run.timing import TimingPlan
    from engine.session.recording import recording
    from engine.session.store import open_session_file

    model = demo_model_path()
    if not Path(model).is_file():
        raise RuntimeError(f"bundled demo model missing: {model}")
    # max_runs is checked at batch boundaries: a zero batch interval makes it exact.
    plan = TimingPlan(
        warmup_runs=3,
        warmup_s=0.0,
        min_runs=RUNS,
        duration_s=0.01,
        batch_interval_s=0.0,
        max_runs=RUNS,
    )
    config = RunConfig()
    req = BenchRequest(Workload(model, config), timing=plan, check_accuracy=False)
    started: RunStarted | None = None
    done: TimingDone | None = None
    ended: RunEnded | None = None
    with tempfile.TemporaryDirectory(prefix="opscope-selftest-") as tmp:
        session = Path(tmp) / "self-test.opscope"
        t0 = time.perf_counter()
        with recording(session, model_path=model, kind="bench", config=config) as feed:
            for ev in run_bench(req):
                feed(ev)
                if isinstance(ev, RunStarted):
                    started = ev
                elif isinstance(ev, TimingDone):
                    done = ev
                elif isinstance(ev, RunEnded):
                    ended = ev
        wall = time.perf_counter() - t0
        if started is None or done is None or ended is None:
            raise RuntimeError("the engine ended without a complete run")
        if ended.status != "ok":
            raise RuntimeError(f"run ended {ended.status}: {ended.error}")
        if done.latency.count != RUNS:
            raise RuntimeError(f"expected {RUNS} timed inferences, got {done.latency.count}")
        reader = open_session_file(session)
        try:
            run_id = reader.last_run_id()
            if run_id is None:
                raise RuntimeError("the session file has no run")
            _starts, lat = reader.latency(run_id)
            row = reader.run(run_id)
        finally:
            reader.close()
        if len(lat) != RUNS:
            raise RuntimeError(f"session file holds {len(lat)} samples, expected {RUNS}")
        if row.status != "ok":
            raise RuntimeError(f"session file records the run as {row.status}")
    lat_ms = done.latency
    return (
        f"opscope self-test: OK provider={started.provider_used} "
        f"runs={lat_ms.count} p50={lat_ms.p50:.3f} ms p99={lat_ms.p99:.3f} ms "
        f"mean={lat_ms.mean:.3f} ms (session recorded and read back; {wall:.1f} s)"
    )


def main() -> int:
    try:
        line = run_self_test()
    except Exception as exc:  # any failure: one clear line, exit 1
        text = " ".join((str(exc) or type(exc).__name__).split())
        print(f"opscope self-test: FAILED: {type(exc).__name__}: {text}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("opscope self-test: FAILED: interrupted", file=sys.stderr)
        return 130
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
