"""What a load run keeps while it serves: bounded, whatever its length (issue 54: `load`
on the demo CNN grew 0.63-0.66 MB a minute at 50 requests/s, about 210 bytes a request
never released: two lists of every request's index and a tuple per batch)."""

from __future__ import annotations

import tracemalloc

import numpy as np

from engine.events import Progress
from engine.serve.batching import BatchPolicy
from engine.serve.loop import ServingLoop
from engine.serve.records import OK
from engine.serve.traffic.schedule import make_schedule, parse_traffic

FEEDS = {"x": np.zeros((1, 4), np.float32)}


def test_a_load_run_keeps_no_python_object_per_request() -> None:
    """Python allocations between a quarter and three quarters of a run, per request sent
    meanwhile: the run's arrays are sized when it is planned, so serving adds next to
    nothing (each request and batch is handed to the session as it ends)."""
    schedule = make_schedule(parse_traffic("constant:4000"), 3.0, seed=1)
    n = len(schedule)
    tracemalloc.start()
    try:
        loop = ServingLoop(lambda feeds: None, lambda key: FEEDS, schedule,
                           BatchPolicy(max_batch=1), report_s=0.05)  # fmt: skip
        marks: list[tuple[int, int]] = []
        for ev in loop.run():
            if isinstance(ev, Progress) and (
                (not marks and loop.sent >= n // 4) or (len(marks) == 1 and loop.sent >= 3 * n // 4)
            ):
                marks.append((loop.sent, tracemalloc.get_traced_memory()[0]))
    finally:
        tracemalloc.stop()
    rec = loop.records()
    assert (rec.outcome == OK).all() and len(rec) == n
    assert len(marks) == 2, marks
    (sent0, mem0), (sent1, mem1) = marks
    assert sent1 - sent0 > n // 4
    per_request = (mem1 - mem0) / (sent1 - sent0)
    assert per_request < 24, f"{per_request:.0f} bytes kept per request"
    # every batch is still in the run's figures
    assert int(rec.batch_size.sum()) == n and rec.batch_start.size == rec.batch_end.size
