"""A stop (SIGTERM, as Ctrl+C) that lands while a job's child is importing a module is
not raised there (an exception inside a native module's import can abort the process from
C++, "terminate ... what(): Traceback", seen once in CI): it is raised at the job's next
step, and the job still ends cancelled."""

from __future__ import annotations

import multiprocessing as mp
import sys
from collections.abc import Generator
from typing import Any

import pytest

import engine.run.child_job as child_job
from engine import interrupt
from engine.events import Event, Notice


def test_an_import_is_seen_from_the_signal_frame() -> None:
    assert not interrupt.importing(sys._getframe())
    seen: list[bool] = []

    class Finder:
        def find_spec(self, name: str, path: Any, target: Any = None) -> None:
            if name == "opscope_probe_module":
                seen.append(interrupt.importing(sys._getframe()))

    sys.meta_path.insert(0, Finder())  # type: ignore[arg-type]
    try:
        with pytest.raises(ModuleNotFoundError):
            __import__("opscope_probe_module")
    finally:
        sys.meta_path.pop(0)
    assert seen == [True]


def job() -> Generator[Event, None, str]:
    child_job._postponed.set()  # as the stop handler does when the stop lands mid-import
    yield Notice("info", "first step")
    yield Notice("info", "never reached")
    return "done"


def test_a_postponed_stop_cancels_at_the_next_step() -> None:
    parent, child = mp.Pipe(duplex=False)
    with pytest.raises(KeyboardInterrupt):
        child_job.child_main(child, job, ())
    sent = []
    while parent.poll(0.1):
        try:
            sent.append(parent.recv())
        except EOFError:  # the child's end closed after its last word
            break
    kinds = [k for k, _ in sent]
    assert kinds[-1] == "cancelled" and not child_job._postponed.is_set()
    events = [e for k, batch in sent if k == "events" for e in batch]
    assert [e.message for e in events] == ["first step"]
