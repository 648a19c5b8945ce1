"""bench/probe_fuzz.py's hostile models, the remote host's input and the self-test's
surroundings: one endless seeded generator of `Case`s per class."""

from __future__ import annotations

import json
import os
import random
import signal
import struct
from collections.abc import Iterator
from pathlib import Path

import onnx
from onnx import TensorProto, helper, numpy_helper

from bench.probe_fuzz_cases import CNN, TRANSFORMER, Case, Material, _n
from tests.test_wire_fuzz import _hostile

NAMES = [
    "a",
    "\x1b]0;pwned\x07",
    "\x1b[2J\x1b[H",
    "line\nfake: OK",
    "x" * 5000,
    "\u202e",
    "",
    "é/../../x",
    "%s%n",
    "\x00nul",
]


def _float(name: str, shape: list[int | str] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _save(
    path: Path,
    nodes: list[onnx.NodeProto],
    ins: list[onnx.ValueInfoProto],
    outs: list[onnx.ValueInfoProto],
    inits: list[TensorProto] | None = None,
    opset: int = 17,
) -> Path:
    g = helper.make_graph(nodes, "fuzz", ins, outs, inits or [])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path.write_bytes(m.SerializeToString())
    return path


def _chain(rng: random.Random, path: Path) -> str:
    n = rng.choice([2, 500, 20_000, 100_000])
    names = [f"t{k}" for k in range(n + 1)]
    if rng.random() < 0.3:  # a fan-out: every node reads the input
        nodes = [helper.make_node("Relu", ["t0"], [f"t{k + 1}"], name=f"n{k}") for k in range(n)]
        outs = [_float(f"t{k + 1}", [1, 4]) for k in range(0, n, max(1, n // 50))]
        _save(path, nodes, [_float("t0", [1, 4])], outs)
        return f"fan-out {n}"
    nodes = [helper.make_node("Relu", [names[k]], [names[k + 1]], name=f"n{k}") for k in range(n)]
    _save(path, nodes, [_float("t0", [1, 4])], [_float(names[-1], [1, 4])])
    return f"chain {n}"


def _huge(rng: random.Random, path: Path) -> str:
    op = rng.choice(["ConstantOfShape", "Expand", "Tile", "Range", "Resize"])
    big = rng.choice([2**20, 2**31, 2**40, 2**62])
    shape = numpy_helper.from_array(__import__("numpy").array([big, big // 2**10 or 1]), "s")
    if op == "ConstantOfShape":
        nodes = [helper.make_node("ConstantOfShape", ["s"], ["y"])]
        ins: list[onnx.ValueInfoProto] = [_float("x", [1])]
        nodes.append(helper.make_node("Add", ["y", "x"], ["z"]))
    elif op == "Expand":
        nodes = [helper.make_node("Expand", ["x", "s"], ["z"])]
        ins = [_float("x", [1, 1])]
    elif op == "Tile":
        nodes = [helper.make_node("Tile", ["x", "s"], ["z"])]
        ins = [_float("x", [1, 1])]
    elif op == "Range":
        import numpy as np

        lim = numpy_helper.from_array(np.array(float(big), np.float32), "lim")
        zero = numpy_helper.from_array(np.array(0.0, np.float32), "zero")
        one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
        nodes = [
            helper.make_node("Range", ["zero", "lim", "one"], ["r"]),
            helper.make_node("Add", ["r", "x"], ["z"]),
        ]
        _save(path, nodes, [_float("x", [1])], [_float("z", None)], [lim, zero, one])
        return f"Range to {big}"
    else:
        import numpy as np

        scales = numpy_helper.from_array(np.array([1, 1, big, big], np.float32), "sc")
        nodes = [helper.make_node("Resize", ["x", "", "sc"], ["z"])]
        _save(path, nodes, [_float("x", [1, 1, 2, 2])], [_float("z", None)], [scales])
        return f"Resize x{big}"
    _save(path, nodes, ins, [_float("z", None)], [shape])
    return f"{op} of {big}"


def loop_model(trips: int, path: Path) -> Path:
    """A Loop of `trips` iterations of a Relu on a [1, 4] tensor (tests/test_graph_hostile.py
    draws it too)."""
    import numpy as np

    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Relu", ["v_in"], ["v_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            _float("v_in", [1, 4]),
        ],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), _float("v_out", [1, 4])],
    )
    m = numpy_helper.from_array(np.array(trips, np.int64), "M")
    c = numpy_helper.from_array(np.array(True), "C")
    node = helper.make_node("Loop", ["M", "C", "x"], ["y"], body=body, name="loop")
    return _save(path, [node], [_float("x", [1, 4])], [_float("y", [1, 4])], [m, c])


def _loop(rng: random.Random, path: Path) -> str:
    trips = rng.choice([10**6, 10**12, 2**63 - 1, -1])
    loop_model(trips, path)
    return f"Loop of {trips}"


def _names(rng: random.Random, path: Path) -> str:
    a, b = rng.choice(NAMES), rng.choice(NAMES)
    how = rng.choice(["node", "tensor", "dup-node", "dup-output", "dim-param", "doc"])
    x = b if how == "tensor" else "x"
    nodes = [
        helper.make_node("Relu", [x], ["h"], name=a),
        helper.make_node("Neg", ["h"], ["y"], name=a if how == "dup-node" else "n2"),
    ]
    if how == "dup-output":
        nodes.append(helper.make_node("Abs", [x], ["h"], name="n3"))
    dims: list[int | str] = [a if how == "dim-param" else 1, 4]
    path_ = _save(path, nodes, [_float(x, dims)], [_float("y", dims)])
    if how == "doc":
        m = onnx.load(path_)
        m.doc_string = a
        m.producer_name = b
        m.metadata_props.add(key=a, value=b)
        path_.write_bytes(m.SerializeToString())
    return f"{how} {a[:10]!r}"


def _dims(rng: random.Random, path: Path) -> str:
    rank = rng.choice([0, 1, 9, 64, 1000])
    dim = rng.choice([0, -1, 2**31, 2**62, 3])
    shape: list[int | str] = [dim] * rank
    _save(
        path, [helper.make_node("Relu", ["x"], ["y"])], [_float("x", shape)], [_float("y", shape)]
    )
    return f"rank {rank} of {dim}"


def _external(rng: random.Random, path: Path, m: Material) -> str:
    import numpy as np

    loc = rng.choice(
        [
            "/dev/zero",
            "../../../../etc/passwd",
            "nul\x00name",
            "missing.bin",
            str(m.work),
            "fifo",
            "w.bin",
        ]
    )
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    w.data_location = TensorProto.EXTERNAL
    w.ClearField("raw_data")
    length = rng.choice(["64", str(2**40), "-5", "x"])
    for k, v in {
        "location": loc,
        "offset": rng.choice(["0", str(2**62), "-1"]),
        "length": length,
    }.items():
        w.external_data.add(key=k, value=v)
    if loc == "fifo":
        os.mkfifo(path.with_name("fifo"))
    if loc == "w.bin":
        path.with_name("w.bin").write_bytes(bytes(64))
    _save(
        path,
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        [_float("x", [1, 4])],
        [_float("y", [1, 4])],
        [w],
    )
    return f"external {loc[:20]!r} length {length}"


def _bytes(rng: random.Random, path: Path) -> str:
    data = bytearray(rng.choice([CNN, TRANSFORMER]).read_bytes())
    how = rng.choice(["flip", "truncate", "empty", "text", "zip"])
    if how == "flip":
        for _ in range(rng.randint(1, 40)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif how == "truncate":
        del data[rng.randrange(len(data)) :]
    elif how == "empty":
        data = bytearray()
    elif how == "text":
        data = bytearray(b"not a model \x1b[2J\n" * 10)
    else:
        data = bytearray(b"PK\x03\x04" + rng.randbytes(500))
    path.write_bytes(bytes(data))
    return f"bytes {how}"


def models(rng: random.Random, m: Material) -> Iterator[Case]:
    while True:
        folder = m.work / f"m{_n(rng)}"
        folder.mkdir()
        path = folder / "model.onnx"
        kind = rng.choice(
            [
                "chain",
                "huge",
                "loop",
                "names",
                "names",
                "dims",
                "external",
                "bytes",
                "bytes",
                "special",
                "opset",
            ]
        )
        if kind == "chain":
            label = _chain(rng, path)
        elif kind == "huge":
            label = _huge(rng, path)
        elif kind == "loop":
            label = _loop(rng, path)
        elif kind == "names":
            label = _names(rng, path)
        elif kind == "dims":
            label = _dims(rng, path)
        elif kind == "external":
            label = _external(rng, path, m)
        elif kind == "bytes":
            label = _bytes(rng, path)
        elif kind == "opset":
            v = rng.choice([1, 6, 99, 10**6])
            _save(
                path,
                [helper.make_node("Relu", ["x"], ["y"])],
                [_float("x", [1, 4])],
                [_float("y", [1, 4])],
                opset=v,
            )
            label = f"opset {v}"
        else:
            label = rng.choice(["fifo", "dev-zero", "dir", "symlink-loop", "dev-null"])
            if label == "fifo":
                os.mkfifo(path)
            elif label == "dir":
                path.mkdir()
            elif label == "symlink-loop":
                path.symlink_to(path)
            else:
                path = Path("/dev/zero" if label == "dev-zero" else "/dev/null")
        cmd = [rng.choice(["info", "bench", "graph", "memory", "profile", "graph"]), str(path)]
        if cmd[0] in ("bench", "profile"):
            cmd += ["--duration", "0.3", "--min-runs", "3", "--warmup", "1", "--no-live"]
        sig = (rng.choice([2, 15]), rng.uniform(1, 8)) if rng.random() < 0.2 else None
        yield Case("models", f"{label} / {cmd[0]}", cmd, signal=sig, files=[folder])


# -- the remote host's input ---------------------------------------------------------------


def _frames(rng: random.Random) -> tuple[bytes, str]:
    from engine.run import host_commands as cmds
    from engine.run.wire import WIRE_VERSION, encode

    out = b""
    how = rng.choice(["hostile", "hostile", "raw", "length-lie", "version", "truncated"])
    for _ in range(rng.randint(1, 6)):
        if how == "raw":
            body = rng.randbytes(rng.randint(0, 300))
        elif how == "version":
            body = json.dumps({"v": rng.choice([0, 99, "1", None]), "m": None}).encode()
        else:
            body = json.dumps({"v": WIRE_VERSION, "m": _hostile(rng)}).encode()
        out += struct.pack(">I", len(body)) + body
    if how == "length-lie":
        out += struct.pack(">I", rng.choice([2**32 - 1, 2**31, 10**9])) + b"{}"
    elif how == "truncated":
        out += struct.pack(">I", 100) + b'{"v": 1'
    else:
        stop = encode(cmds.Shutdown())
        out += struct.pack(">I", len(stop)) + stop
    return out, how


def remote(rng: random.Random, m: Material) -> Iterator[Case]:
    env = {"OPSCOPE_CACHE_DIR": str(m.work / "remote-cache")}
    while True:
        kind = rng.choice(["host", "host", "host", "put", "folder", "take", "bad"])
        if kind == "host":
            data, how = _frames(rng)
            yield Case(
                "remote", f"host {how}", ["remote", "host"], stdin=data, env=env, binary_stdout=True
            )
        elif kind == "put":
            sha = rng.choice(["0" * 64, "g" * 64, "../" * 21 + "a", "A" * 64, ""])
            size = rng.choice(["0", "10", "-1", "1e3", str(2**70), "x"])
            name = rng.choice(["m.onnx", "../x", "a/b", "\x1b[2J", "x" * 300, ".", ""])
            yield Case(
                "remote",
                f"put {sha[:6]} {size} {name[:8]!r}",
                ["remote", "put", sha, size, name],
                stdin=rng.randbytes(rng.choice([0, 5, 10, 2000])),
                env=env,
            )
        elif kind == "folder":
            doc = rng.choice(
                [
                    _hostile(rng),
                    {"files": [{"name": "../x", "sha": "0" * 64}]},
                    {"files": {"a": 1}},
                    "[" * 10_000,
                    None,
                    {"files": [[1] * 5]},
                ]
            )
            text = doc if isinstance(doc, str) else json.dumps(doc)
            name = rng.choice(["llm", "../up", "\x00", "a" * 300])
            yield Case(
                "remote",
                f"folder {name[:8]!r}",
                ["remote", "folder", name],
                stdin=text.encode(),
                env=env,
            )
        elif kind == "take":
            path = rng.choice(
                [
                    "/etc/passwd",
                    str(m.work / "remote-cache/remote/results/../../x"),
                    str(m.session),
                    "",
                    "\x1b[2J",
                ]
            )
            yield Case("remote", f"take {path[-12:]!r}", ["remote", "take", path], env=env)
        else:
            argv = [
                "remote",
                *[
                    rng.choice(["version", "x", "put", "host", "", "-1"])
                    for _ in range(rng.randint(1, 4))
                ],
            ]
            # `remote host ...` answers in binary frames on stdout whatever follows it
            binary = argv[1] == "host"
            yield Case(
                "remote", " ".join(argv)[:60], argv, env=env, stdin=b"", binary_stdout=binary
            )


# -- the self-test -------------------------------------------------------------------------


def selftest(rng: random.Random, m: Material) -> Iterator[Case]:
    while True:
        kind = rng.choice(
            ["full", "closed", "both-closed", "fsize", "signal", "signal", "shadow", "env", "stdin"]
        )
        env: dict[str, str] = {}
        out = "file"
        sig = None
        files: list[Path] = []
        label = kind
        if kind in ("full", "closed", "both-closed", "fsize"):
            out = kind
        elif kind == "signal":
            sig = (rng.choice([signal.SIGINT, signal.SIGTERM, signal.SIGHUP]), rng.uniform(0.05, 4))
            label = f"signal {sig[0]} at {sig[1]:.2f} s"
        elif kind == "shadow":
            folder = m.work / f"shadow{_n(rng)}"
            mod = rng.choice(["numpy", "onnx", "onnxruntime", "sqlite3", "json", "engine"])
            folder.mkdir()
            body = rng.choice(
                [
                    "raise ImportError('shadowed')",
                    "1/0",
                    "import sys; sys.exit(7)",
                    "def (",
                    "import os; os._exit(0)",
                    "raise SystemExit('bye')",
                ]
            )
            (folder / f"{mod}.py").write_text(body + "\n")
            env["PYTHONPATH"] = str(folder)
            files = [folder]
            label = f"shadowed {mod}: {body[:20]}"
        elif kind == "env":
            key, value = rng.choice(
                [
                    ("OPSCOPE_CACHE_DIR", "/dev/null"),
                    ("OPSCOPE_CACHE_DIR", str(m.session)),
                    ("HOME", "/nonexistent"),
                    ("TMPDIR", "/nonexistent"),
                    ("LANG", "xx_XX.bogus"),
                    ("LC_ALL", "C"),
                    ("OMP_NUM_THREADS", "-4"),
                    ("PYTHONIOENCODING", "ascii"),
                    ("OPSCOPE_CACHE_DIR", "/proc/1"),
                ]
            )
            env[key] = value
            label = f"{key}={value[-20:]}"
        yield Case(
            "self-test",
            label,
            ["--self-test"],
            env=env,
            signal=sig,
            stdout=out,
            stdin=b"" if kind == "stdin" else None,
            files=files,
        )
