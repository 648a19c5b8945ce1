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
from engine.run import wire_format  # noqa: E402
from tests.test_window_memory_trace import NODES, RUNS, profiling_pass  # noqa: E402


def test_a_batch_mid_decode_is_not_counted_as_what_the_window_holds() -> None:
    raw = wire_format.encode([profiling_pass()])  # 20 inferences x 106 nodes
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
    assert tree_dicts > 5 * RUNS * NODES  # the tree (~8 dicts a node event) is in that census
    held = soak.steady(takes)
    assert held["dict"] - before["dict"] < 200, (held["dict"], before["dict"])
    assert held["list"] - before["list"] < 200, (held["list"], before["list"])
    grew = "\n".join(soak.census_growth(before, held))
    assert f"+{tree_dicts:8d}  dict" not in grew


def test_a_count_one_census_lacks_is_zero_there() -> None:
    assert soak.steady([{"dict": 5, "OpStat": 3}, {"dict": 4}]) == {"dict": 4, "OpStat": 0}
    assert soak.steady([]) == {}
