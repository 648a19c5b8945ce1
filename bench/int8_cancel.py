"""Cancel latency of a MiniLM INT8 build, driven as the app's engine host drives it
(engine/run/host.py Builder: the cancel flag checked between events, then close()).
Prints, per build, when the cancel was seen (the first event at or after the time asked:
a long step without events delays it), how long close() then took, and the step it was in.
Run: PYTHONPATH=. .venv/bin/python bench/int8_cancel.py"""

import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.backends.base import PrepareRequest
from engine.config import RunConfig
from engine.events import Progress
from engine.model.workload import JobInputs, Workload
from engine.run.live import stage

M = Path.home() / ".cache/opscope-bench/minilm"
for precision, at in [
    ("int8-static", 4.0),
    ("int8-static", 9.0),
    ("int8-static", 14.0),
    ("int8-dynamic", 6.0),
    ("int8-dynamic", 12.0),
]:
    os.environ["OPSCOPE_CACHE_DIR"] = tempfile.mkdtemp(prefix="opscope-cancel-")  # cold
    given = JobInputs(inputs_npz=str(M / "eval_inputs.npz"),
                      calibration_npz=str(M / "calib_inputs.npz"))  # fmt: skip
    config = RunConfig(precision=precision, min_cosine=0.99, batch=8)
    req = PrepareRequest(Workload(str(M / "model.onnx"), config, given))
    events = stage(req, "x")
    t0 = time.perf_counter()
    cancel_at = None
    last = ""
    after = []
    while True:
        now = time.perf_counter() - t0
        if now >= at and cancel_at is None:
            cancel_at = now
        if cancel_at is not None:
            events.close()
            stopped = time.perf_counter() - t0
            break
        try:
            ev = next(events)
        except StopIteration:
            stopped = None
            break
        if isinstance(ev, Progress):
            last = ev.message
    r = {
        "precision": precision,
        "cancel_at_s": round(cancel_at, 2),
        "stopped_after_s": round(stopped - cancel_at, 2) if stopped else None,
        "was": last,
        "load": os.getloadavg()[0],
    }
    print(json.dumps(r), flush=True)
