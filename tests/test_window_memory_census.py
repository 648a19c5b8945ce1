"""bench/soak.py's census of what the window holds: each count is the least of censuses a
sample apart, so a batch the wire reader's thread was decoding at that moment is not
counted as growth. A profiling pass's message (20 inferences of the 106-node demo
transformer) decodes through one JSON tree of ~20,800 dicts and ~16,300 lists; one census
that caught it made stop 61's '230 dicts and 180 lists more per profiling pass'."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench import rss, soak  # noqa: E402
from engine.events import OpProfile  # noqa: E402
from engine.measure.op_trace import NodeEvent, ProfileTrace, RunSpan  # noqa: E402
from engine.run import wire_format  # noqa: E402

RUNS, NODES = 20, 106


def _pass_message() -> bytes:
    """A profiling pass as the host sends it: every node's execution in every inference."""
    shapes = (("float", (1, 128, 256)), ("float", (256, 256)))
    nodes = tuple(
        NodeEvent(
            r,
            f"/layer{i // 8}/node{i}",
            "MatMul",
            "CPUExecutionProvider",
            10.0 * i,
            9.0,
            shapes,
            shapes[:1],
            1024,
            2048,
            512,
            node_index=i,
        )
        for r in range(RUNS)
        for i in range(NODES)
    )
    runs = tuple(RunSpan(r, 1000.0 * r, 900.0) for r in range(RUNS))
    trace = ProfileTrace(runs=runs, nodes=nodes)
    return wire_format.encode([OpProfile([], [], 0.97, RUNS, {}, trace)])


def test_a_batch_mid_decode_is_not_counted_as_what_the_window_holds() -> None:
    raw = _pass_message()
    decoding, done = threading.Event(), threading.Event()

    def reader() -> None:  # as the window's wire reader: the message's JSON tree, held
        tree = json.loads(raw)
        decoding.set()
        done.wait(30)
        del tree

    before = rss.object_counts()
    thread = threading.Thread(target=reader)
    thread.start()
    assert decoding.wait(30)
    caught = rss.object_counts()  # a census that fell on the decode
    done.set()
    thread.join(30)
    takes = [caught, rss.object_counts(), rss.object_counts()]

    tree_dicts = caught["dict"] - before["dict"]
    assert tree_dicts > 20 * RUNS * NODES // 2  # the tree is there in that one census
    held = soak.steady(takes)
    assert held["dict"] - before["dict"] < 200, (held["dict"], before["dict"])
    assert held["list"] - before["list"] < 200, (held["list"], before["list"])
    grew = "\n".join(soak.census_growth(before, held))
    assert f"+{tree_dicts:8d}  dict" not in grew


def test_a_count_one_census_lacks_is_zero_there() -> None:
    assert soak.steady([{"dict": 5, "OpStat": 3}, {"dict": 4}]) == {"dict": 4, "OpStat": 0}
    assert soak.steady([]) == {}
