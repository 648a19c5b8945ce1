"""The live timing loop keeps nothing per load window (issue 54): an open-ended plan (the
live engine's) yields a `ContentionSample` a second and never sums them up itself, so an
hour of live timing must not hold 3,600 of them (about 0.8 MB an hour in the host)."""

from __future__ import annotations

import gc

from engine.measure.contention import Contention
from engine.run.timing import TimingPlan, time_inferences


def _alive() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is Contention)  # isinstance would ask
    # every object its __class__, which some (torch.distributed.reduce_op) answer with a warning


def test_an_open_ended_timing_holds_no_load_windows() -> None:
    plan = TimingPlan(
        warmup_runs=1, warmup_s=0.0, min_runs=1, duration_s=float("inf"),
        batch_interval_s=0.0005, contention_interval_s=0.0005,
    )  # fmt: skip
    timing = time_inferences(lambda: sum(range(50)), plan, 1)
    windows = 0
    before = None
    for ev in timing:
        if type(ev).__name__ == "ContentionSample":
            windows += 1
            if windows == 20:
                before = _alive()
            if windows == 420:
                break
    after = _alive()
    timing.close()
    assert before is not None
    assert after - before < 20, f"{after - before} load windows held after 400 more"
