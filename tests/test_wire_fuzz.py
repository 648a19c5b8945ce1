"""The remote host's input (what arrives over SSH, engine/run/wire.py) is data checked
against the schema: hostile messages (issue 53: a base64 field holding bytes that are not
what the field means, deeply nested JSON, an array shape past int64 or of booleans, a
config given as a string) are one-line protocol errors, never a traceback, and the host
answers the sender and serves on."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import pytest

from engine.events import CommandFailed, JobUpdate
from engine.run import host_commands as cmds
from engine.run.wire import WIRE_VERSION, WireError, decode, encode
from tests.test_host import Host


def _msg(m: Any) -> bytes:
    return json.dumps({"v": WIRE_VERSION, "m": m}).encode()


B64_TEXT = base64.b64encode(b"not a path").decode()
HOSTILE = {
    "bytes where a path belongs": {"$dc": "engine.run.host_commands:Load",
                                   "f": {"path": {"$b": B64_TEXT}}},
    "base64 that is not base64": {"$b": "@@@not base64@@@"},
    "base64 given as a number": {"$b": 12},
    "array bytes not base64": {"$nd": ["<f4", [1], "!!!"]},
    "a shape past int64": {"$nd": ["<f4", [2**70, 2**70], ""]},
    "a shape of booleans": {"$nd": ["<f4", [True, True], "AAAAAA=="]},
    "a shape too deep": {"$nd": ["<f4", [1] * 100, "AAAAAA=="]},
    "a config given as a string": {"$dc": "engine.run.host_commands:Apply",
                                   "f": {"config": "fp32"}},
    "a job id given as a list": {"$dc": "engine.run.host_commands:CancelJob",
                                 "f": {"job_id": [1, 2]}},
    "nested lists": json.loads("[" * 500 + "]" * 500),
    "nested tuples in a field": {"$dc": "engine.run.host_commands:RunJob",
                                 "f": {"job_id": 1, "request": json.loads('{"$t":[' * 300 + "1"
                                                                         + "]}" * 300)}},
}  # fmt: skip


@pytest.mark.parametrize("message", list(HOSTILE.values()), ids=list(HOSTILE))
def test_each_hostile_message_is_one_protocol_error(message: Any) -> None:
    with pytest.raises(WireError) as err:
        decode(_msg(message))
    assert "\n" not in str(err.value) and len(str(err.value)) < 400


def _hostile(rng: random.Random, depth: int = 0) -> Any:
    """A value built from the schema's tags with wrong, missing and extreme contents."""
    pick = rng.randrange(14 if depth < 6 else 6)
    if pick == 0:
        return rng.choice([None, True, False, 0, -1, 2**63, 2**80, -(2**70), 1e308, -0.0])
    if pick == 1:
        return rng.choice(["", "x" * 300, "\x00", "engine.events:Notice", "$dc", "nan"])
    if pick == 2:
        return {"$b": rng.choice(["AA==", "A", "@@", 5, None, [], "=" * 8, B64_TEXT])}
    if pick == 3:
        dims = [rng.choice([0, 1, 3, -1, True, 2**40, 2**64, 1.5, "2", None]) for _ in
                range(rng.randrange(0, 5))]  # fmt: skip
        dtype = rng.choice(["<f4", "<i8", "|b1", "|O", "<U3", "V8", 7, None, "<f16"])
        return {"$nd": rng.choice([[dtype, dims, rng.choice(["", "AAAA", "@"])], [dtype], 3])}
    if pick == 4:
        return {"$f": rng.choice(["nan", "inf", "1", 1, None])}
    if pick == 5:
        return {rng.choice(["$t", "$set", "$map", "$enum", "$zz"]): rng.choice([[], 1, "x", None])}
    if pick in (6, 7, 8):
        name = rng.choice([
            "engine.run.host_commands:Load", "engine.run.host_commands:Apply",
            "engine.run.host_commands:RunJob", "engine.run.host_commands:CancelJob",
            "engine.run.host_commands:SetInputs", "engine.events:Notice",
            "engine.events:LatencyBatch", "engine.config:RunConfig", "os:system",
            "engine.errors:OpScopeError", "engine..x:Y", 12,
        ])  # fmt: skip
        keys = ["path", "config", "job_id", "request", "level", "message", "precision",
                "batch", "starts_ns", "latencies_ns", "origin_ns", "__class__"]  # fmt: skip
        fields = {rng.choice(keys): _hostile(rng, depth + 1) for _ in range(rng.randrange(4))}
        return {"$dc": name, "f": rng.choice([fields, fields, [], "f"])}
    if pick == 9:
        return [_hostile(rng, depth + 1) for _ in range(rng.randrange(4))]
    if pick == 10:
        return {"$t": [_hostile(rng, depth + 1) for _ in range(rng.randrange(4))]}
    if pick == 11:
        return {"$map": [[_hostile(rng, depth + 1), _hostile(rng, depth + 1)]
                         for _ in range(rng.randrange(3))]}  # fmt: skip
    if pick == 12:
        return {"$set": [_hostile(rng, depth + 1) for _ in range(rng.randrange(3))]}
    return {"$enum": rng.choice(["engine.run.host_phases:Signal", "engine.events:Notice", 3]),
            "v": _hostile(rng, depth + 1)}  # fmt: skip


def test_a_seeded_fuzz_over_the_decoder_yields_only_protocol_errors() -> None:
    """3,000 hostile messages: each decodes to a value that encodes again, or is a
    WireError in one line; nothing else comes out."""
    rng = random.Random(53)
    refused = 0
    for _ in range(3000):
        raw = _msg(_hostile(rng))
        try:
            value = decode(raw)
        except WireError as exc:
            assert "\n" not in str(exc)
            refused += 1
            continue
        encode(value)  # what was accepted can be answered with
    assert refused > 1000


def test_the_host_answers_hostile_messages_and_serves_on() -> None:
    """Over the host's own pipe: each bad message is answered with a CommandFailed naming
    it, a cancel of a job that is not there is no error, and the host then shuts down on
    request (it used to die on the first with a traceback)."""
    host = Host()
    try:
        for message in HOSTILE.values():
            host.conn._conn.send_bytes(_msg(message))

        def failed() -> list[CommandFailed]:
            return [e for e in host.events if isinstance(e, CommandFailed)]

        host.wait_for(lambda e: len(failed()) >= len(HOSTILE))
        fails = failed()
        assert all(f.command == "message" and "\n" not in f.message for f in fails)
        assert any("not what the field holds" in f.message for f in fails)
        host.send(cmds.CancelJob(424242))
        host.send(cmds.Shutdown())
        host.proc.join(30)
        assert host.proc.exitcode == 0
        assert not any(isinstance(e, JobUpdate) and e.job_id == 424242 for e in host.events)
    finally:
        host.close()
