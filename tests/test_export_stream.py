"""`export --trace` streams a session: memory grows with its largest run, not with the
file (the whole trace built as one object, then copied twice into one string, took 5 GB
for a 260 MB session)."""

from __future__ import annotations

import json
import shutil
import tracemalloc
from pathlib import Path

import pytest

from engine.analysis.export import write_trace
from engine.session.merge import copy_runs
from engine.session.store import SessionStore
from tests.conftest import DEMO_CNN
from tests.recorded_sessions import QUICK, record


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real profiled run of the demo CNN (200 profiled inferences), recorded by the CLI."""
    path = tmp_path_factory.mktemp("stream") / "one.opscope"
    record(path, ["profile", DEMO_CNN, *QUICK, "--runs", "200"])
    return path


def copies(source: Path, dest: Path, times: int) -> Path:
    """`source` with its runs copied in again until it holds `times` copies of them."""
    shutil.copyfile(source, dest)
    with SessionStore.create_or_open(dest) as store:
        for _ in range(times - 1):
            copy_runs(store, source)
    return dest


def peak_bytes(session: Path, out: Path) -> int:
    tracemalloc.start()
    try:
        write_trace(str(session), str(out))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_trace_is_written_one_run_at_a_time(profiled: Path, tmp_path: Path) -> None:
    small = copies(profiled, tmp_path / "small.opscope", 2)
    large = copies(profiled, tmp_path / "large.opscope", 10)
    peaks = [peak_bytes(s, tmp_path / f"{s.stem}.json") for s in (small, large)]
    # five times the runs: the same peak, give or take the reader's list of runs
    assert peaks[1] < 1.5 * peaks[0], peaks
    trace = json.loads((tmp_path / "large.json").read_text())
    tracks = {e["pid"] for e in trace["traceEvents"]}
    assert tracks == set(range(1, 11))  # every run, as before
    assert trace["displayTimeUnit"] == "ms" and trace["otherData"]["generator"] == "OpScope"
    per_run = len(trace["traceEvents"]) // 10
    assert per_run > 3 and len(trace["traceEvents"]) == 10 * per_run
