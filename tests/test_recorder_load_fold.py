"""The recorder folds a run's machine-load windows as they come: it kept every
ContentionSample (one each 1.1 s, about 3,000 in an hour's run, unbounded) only to combine
them at the run's end (the stop-61 window soak). The run's figure is the same."""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

from engine.api import Contention, combine
from engine.events import ContentionSample, TimingDone
from engine.model.workload import Workload
from engine.run.bench import BenchRequest, run_bench
from engine.session import Recorder, SessionStore
from engine.session.store import open_session_file
from tests.conftest import DEMO_CNN
from tests.session_material import SHORT
from tests.test_runs_summary_load import _windows


def test_a_runs_load_windows_are_held_as_one_figure(tmp_path: Path) -> None:
    windows = _windows(3000)
    path = tmp_path / "s.opscope"
    req = BenchRequest(Workload(str(DEMO_CNN)), timing=SHORT)
    with SessionStore.create_or_open(path) as store:
        rec = Recorder(store, model_path=str(DEMO_CNN), kind="bench", config=req.workload.config)
        for ev in run_bench(req):
            if isinstance(ev, ContentionSample):
                continue  # the machine's own: the figure below is of these windows only
            if isinstance(ev, TimingDone):
                for w in windows:
                    rec.feed(ContentionSample(time.perf_counter_ns(), w))
                assert isinstance(rec._load, Contention)  # before: a list of 3,000
                ev = dataclasses.replace(ev, contention=None)  # the recorder's own figure
            rec.feed(ev)
        rec.close()
    whole = combine(windows)
    with open_session_file(path) as reader:
        (run,) = reader.runs()
    assert whole is not None and run.contention is not None
    for name in ("window_s", "others_cpu", "steal", "own_cpu"):  # the file keeps 3 places
        assert math.isclose(getattr(run.contention, name), getattr(whole, name), abs_tol=1e-3)
