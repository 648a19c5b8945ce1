"""A load run stopped at its drain deadline counts what it did not serve (issue 53: a
50,000-row trace dropped 2,236 queued requests with only a warning): the queued ones as
unserved, those never sent as dropped, in the figures the session keeps."""

from __future__ import annotations

import time

import numpy as np

from engine import interrupt
from engine.events import ServedRequests, ServingSummary, drive
from engine.serve.batching import BatchPolicy
from engine.serve.loop import ServingLoop
from engine.serve.records import OK
from engine.serve.summary import describe_setup, served
from engine.serve.traffic.schedule import make_schedule, parse_traffic

FEEDS = {"x": np.zeros((1, 4), np.float32)}


def test_requests_past_the_drain_deadline_are_counted_not_gone() -> None:
    spec = parse_traffic("constant:100")
    schedule = make_schedule(spec, 1.0)
    policy = BatchPolicy(max_batch=1)
    loop = ServingLoop(lambda f: time.sleep(0.05), lambda k: FEEDS, schedule, policy,
                       deadline_s=0.4, report_s=0.05)  # fmt: skip
    setup = describe_setup(spec, policy, seed=0, duration_s=1.0, cache=0, repeat=0.0)
    kept: list[object] = []
    result = drive(served(loop, setup, 0.0), kept.append)
    req = result["requests"]
    assert loop.timed_out and req["unserved"] > 0 and req["dropped"] > 0
    assert req["sent"] + req["dropped"] == len(schedule)
    assert req["completed"] + req["unserved"] + req["rejected"] + req["timed_out"] == req["sent"]
    summary = next(ev for ev in kept if isinstance(ev, ServingSummary))
    assert summary.summary["requests"]["dropped"] == req["dropped"]  # what the session keeps


def test_a_signal_while_the_samples_are_handed_out_is_not_swallowed() -> None:
    """A signal that lands while the consumer writes the last samples (a million requests
    due at once took 30 s to commit) and the run then finds everything served: it ended
    as if never interrupted, and the command exited 0."""
    schedule = make_schedule(parse_traffic("constant:1000"), 0.05)
    loop = ServingLoop(lambda f: None, lambda k: FEEDS, schedule, BatchPolicy(max_batch=8),
                       report_s=0.05)  # fmt: skip
    served_ok = 0
    try:
        for ev in loop.run():
            if isinstance(ev, ServedRequests):
                served_ok += int((ev.outcome == OK).sum())
                if served_ok == len(schedule):  # everything served: the run's last report
                    interrupt.mark("SIGINT")
        assert loop.interrupted
    finally:
        interrupt.received.clear()
        interrupt.signal_name = ""
