"""The engine host's messages as data (engine/run/wire.py): what the window and a host send
each other round-trips exactly; anything else is refused in one line, never run."""

from __future__ import annotations

import json
import os
import struct
import threading

import numpy as np
import pytest

from engine.config import RunConfig
from engine.events import CommandFailed, JobUpdate, LatencyBatch, Notice, Progress, Telemetry
from engine.model.workload import JobInputs, Workload
from engine.run import host_commands as cmds
from engine.run.wire import (
    MAX_FRAME,
    WIRE_VERSION,
    StreamConnection,
    WireError,
    decode,
    encode,
)


def _roundtrip(obj: object) -> object:
    return decode(encode(obj))


def test_commands_and_events_come_back_equal() -> None:
    load = cmds.Load("/m.onnx", {"x": (1, 3)}, None, RunConfig(batch=4), {"seq": 128}, None)
    assert _roundtrip(load) == load
    assert _roundtrip(cmds.Apply(RunConfig(precision="int8-dynamic"))) == cmds.Apply(
        RunConfig(precision="int8-dynamic")
    )
    batch = [Notice("warning", "x"), Progress("load", 1, None), CommandFailed("load", "bad")]
    assert _roundtrip(batch) == batch
    back = _roundtrip(Telemetry(5, {"cpu_percent": float("nan"), "t": float("inf")}))
    assert isinstance(back, Telemetry) and np.isnan(back.values["cpu_percent"])
    assert back.values["t"] == float("inf")
    lat = LatencyBatch(np.arange(3, dtype=np.int64), np.array([7, 8, 9], dtype=np.int64), 11)
    got = _roundtrip(lat)
    assert isinstance(got, LatencyBatch) and got.origin_ns == 11
    assert got.latencies_ns.dtype == np.int64 and got.latencies_ns.tolist() == [7, 8, 9]
    job = cmds.RunJob(3, JobInputs({"x": (1, 3)}, {}, "/d.npz"))
    assert _roundtrip(job) == job
    work = Workload("/m.onnx", RunConfig(batch=2), JobInputs({"x": (1, 3)}, {"seq": 8}))
    assert _roundtrip(cmds.RunJob(4, work)) == cmds.RunJob(4, work)
    update = JobUpdate(3, "done", {1: (2, 3), "a": {4, 5}, "$x": b"\x00"})
    assert _roundtrip(update) == update


@pytest.mark.parametrize(
    ("message", "says"),
    [
        ({"v": WIRE_VERSION, "m": {"$dc": "os:system", "f": {"command": "id"}}}, "wire schema"),
        ({"v": WIRE_VERSION, "m": {"$dc": "engine.nothing:X", "f": {}}}, "wire schema"),
        ({"v": WIRE_VERSION, "m": {"$dc": "engine.events:drive", "f": {}}}, "not a dataclass"),
        ({"v": WIRE_VERSION, "m": {"$dc": "engine.events:Notice", "f": {"x": 1}}}, "unknown"),
        ({"v": WIRE_VERSION, "m": {"$dc": "engine.events:Notice", "f": {}}}, "Notice"),
        ({"v": WIRE_VERSION, "m": {"$nd": ["|O", [1], "AA=="]}}, "not in the wire schema"),
        ({"v": WIRE_VERSION, "m": {"$nd": ["<i8", [4], "AA=="]}}, "do not match"),
        ({"v": WIRE_VERSION, "m": {"$eval": "1"}}, "unknown tag"),
        ({"v": WIRE_VERSION + 1, "m": 1}, "wire version"),
        ({"m": 1}, "wire version"),
        ([1, 2], "not OpScope's"),
    ],
)
def test_what_is_not_the_schema_is_refused_in_one_line(message: object, says: str) -> None:
    with pytest.raises(WireError) as err:
        decode(json.dumps(message).encode())
    assert says in str(err.value) and "\n" not in str(err.value)


def test_garbage_and_pickles_are_refused() -> None:
    import pickle

    for raw in (b"\x80\x04K\x01.", pickle.dumps(Notice("info", "x")), b"{", b"\xff\xfe"):
        with pytest.raises(WireError, match="not JSON"):
            decode(raw)
    deep = b'{"v":%d,"m":' % WIRE_VERSION + b'{"$t":[' * 3000 + b"1" + b"]}" * 3000 + b"}"
    with pytest.raises(WireError, match="nested too deeply"):
        decode(deep)


def test_a_type_outside_the_schema_is_not_sent() -> None:
    class Secret:
        pass

    with pytest.raises(WireError, match="not in the wire schema"):
        encode([Secret()])
    with pytest.raises(WireError, match="numpy array of object"):
        encode(np.array([object()]))


def test_frames_over_a_stream_and_an_oversized_one_refused() -> None:
    r1, w1 = os.pipe()
    conn = StreamConnection(r1, w1)
    sent = [Notice("info", "é ✓"), LatencyBatch(np.zeros(2, np.int64), np.ones(2, np.int64))]
    conn.send(sent)
    assert conn.poll(1)
    got = conn.recv()
    assert got[0] == sent[0] and got[1].latencies_ns.tolist() == [1, 1]
    os.write(w1, struct.pack(">I", MAX_FRAME + 1))
    with pytest.raises(WireError, match="MiB"):
        conn.recv()
    conn.close()
    r2, w2 = os.pipe()
    closing = StreamConnection(r2, w2)
    threading.Timer(0.1, lambda: os.close(w2)).start()
    with pytest.raises(EOFError):
        closing.recv()
    os.close(r2)
