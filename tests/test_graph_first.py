"""The graph job draws first what is quick to make (issue 53: a 206-node model's graph took
about 60 s on a busy machine, most of it ONNX Runtime's symbolic shape inference, PyTorch's
import and the runtime's session): the graph as loaded with the shapes the file declares
and ONNX's inference tells, then the symbolic shapes, then the graph as run; and the job's
child process sends that first graph at once."""

from __future__ import annotations

import multiprocessing as mp
import threading
from collections.abc import Generator
from typing import Any

import pytest

from engine import backends
from engine.events import Event, Progress
from engine.model.workload import Workload
from engine.run.child_job import child_main
from engine.run.graph_job import GraphRequest, GraphSoFar, graph_job
from tests.conftest import DEMO_TRANSFORMER


def _sized(result: dict[str, Any]) -> int:
    """How many tensors of the view as loaded have a shape of numbers only."""
    shapes = [shape for _, shape in result["views"]["loaded"]["tensors"].values()]
    return sum(1 for s in shapes if s is not None and all(isinstance(d, int) for d in s))


def test_the_graph_as_loaded_comes_before_the_symbolic_shapes_and_the_graph_as_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refine = backends.shape_inference()
    assert refine is not None
    seen: list[Any] = []
    asked: list[int] = []  # how many events had come when the symbolic inference began

    def recorded(model: Any) -> Any:
        asked.append(len(seen))
        return refine(model)

    monkeypatch.setattr(backends, "shape_inference", lambda: recorded)
    gen = graph_job(GraphRequest(Workload(str(DEMO_TRANSFORMER)), low_priority=True))
    try:
        while len([e for e in seen if isinstance(e, GraphSoFar)]) < 2:
            seen.append(next(gen))
    finally:
        gen.close()  # the graph as run (a session) is not needed here
    first, second = (e for e in seen if isinstance(e, GraphSoFar))
    assert asked and seen.index(first) < asked[0]  # drawn before the symbolic inference
    loaded = first.result["views"]["loaded"]
    assert loaded["layout"] and loaded["nodes"] and loaded["memory"]
    assert "run" not in first.result["views"]
    assert [p.split(" ")[0:2] for p in first.pending] == [["the", "shapes"], ["the", "graph"]]
    assert first.result["pending"] == list(first.pending)
    # the symbolic shapes filled in on the same layout; the graph as run still to come
    assert second.result["views"]["loaded"]["layout"] == loaded["layout"]
    assert _sized(second.result) > _sized(first.result)
    assert second.pending == (first.pending[1],)
    assert not any(isinstance(e, Progress) and "as run" in e.message for e in seen)


def test_the_jobs_child_sends_a_graph_so_far_at_once_not_with_the_next_event() -> None:
    release = threading.Event()
    part = GraphSoFar({"views": {}}, ("the graph as run",))

    def job() -> Generator[Event | GraphSoFar, None, str]:
        yield Progress("graph", 0, 1, "reading the model")
        yield part
        release.wait(60)  # a long step: the graph so far must not wait for its end
        return "done"

    parent, child = mp.Pipe(duplex=False)
    runner = threading.Thread(target=child_main, args=(child, job, ()), daemon=True)
    runner.start()
    try:
        assert parent.poll(30), "the graph so far was held back until the job's next event"
        kind, batch = parent.recv()
        assert kind == "events" and batch[-1] == part
    finally:
        release.set()
        runner.join(30)
    assert parent.recv() == ("done", "done")
