"""A live run's machine load in the Runs dock is folded window by window into one figure:
the summary kept every ContentionSample (one each 1.1 s, 0.6 MB an hour's run, unbounded)
and re-combined them all on every refresh (issue 54's window soak)."""

from __future__ import annotations

import math
import random

from engine.api import Contention, combine
from widgets.models.runs_summary import RunsSummary


def _windows(n: int) -> list[Contention]:
    rng = random.Random(7)
    return [
        Contention(
            window_s=rng.uniform(0.5, 1.5),
            cpus=2,
            others_cpu=rng.uniform(0.0, 2.0),
            steal=rng.uniform(0.0, 0.1),
            own_cpu=rng.uniform(0.5, 1.0),
        )
        for _ in range(n)
    ]


def test_a_long_runs_load_is_one_figure_equal_to_all_its_windows_combined() -> None:
    s = RunsSummary()
    row = s.start("FP32 fusion=all batch=1 threads=2", "x 1x3", 1, "m.onnx")
    windows = _windows(3000)
    for w in windows:
        s.add_load(w)
    run = s._runs[row]
    assert isinstance(run.load, Contention)  # held as one figure, not 3,000 windows
    whole = combine(windows)
    assert whole is not None and run.contention is not None
    for name in ("window_s", "others_cpu", "steal", "own_cpu"):
        assert math.isclose(getattr(run.contention, name), getattr(whole, name), rel_tol=1e-9)
    assert s.rows()[row].busy == whole.busy


def test_an_empty_window_leaves_the_figure_as_it_was() -> None:
    s = RunsSummary()
    row = s.start("FP32", "x 1x3", 1, "m.onnx")
    (w,) = _windows(1)
    s.add_load(w)
    s.add_load(Contention(window_s=0.0, cpus=2, others_cpu=1.0, steal=0.0, own_cpu=1.0))
    assert s._runs[row].contention == w
