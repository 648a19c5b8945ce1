"""bench/probe_fuzz.py's hostile data files: inputs (npz and npy: NaN, wrong dtypes and
shapes, headers that lie, pickles, junk) and traces (OpScope CSV, Azure, BurstGPT, Mooncake
with overflow, booleans, units, giant lines), one endless seeded generator each."""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from bench.probe_fuzz_cases import CNN, LLM, TRANSFORMER, Case, Material, _n

_savez: Any = np.savez  # arrays by name (numpy's stub takes a ** dict for its flags)

# -- inputs -------------------------------------------------------------------------------


def _array(rng: random.Random, shape: tuple[int, ...], dtype: str) -> tuple[np.ndarray, str]:
    how = rng.choice(
        [
            "nan",
            "inf",
            "dtype",
            "shape",
            "rank0",
            "empty",
            "huge-values",
            "bool",
            "fortran",
            "big-batch",
            "neg-zero",
            "denormal",
        ]
    )
    a = np.random.default_rng(rng.randrange(1 << 30)).standard_normal(shape).astype(dtype)
    if how == "nan":
        a.flat[rng.randrange(a.size)] = np.nan if a.dtype.kind == "f" else 0
        if rng.random() < 0.5 and a.dtype.kind == "f":
            a[...] = np.nan
    elif how == "inf" and a.dtype.kind == "f":
        a.flat[:: max(1, a.size // 7)] = rng.choice([np.inf, -np.inf, 3e38])
    elif how == "dtype":
        a = a.astype(rng.choice(["float16", "float64", "int8", "uint64", "complex64", "int64"]))
    elif how == "shape":
        a = (
            a.reshape(-1)[: rng.randint(0, a.size)]
            if rng.random() < 0.5
            else np.zeros((2, 5, 7), dtype)
        )
    elif how == "rank0":
        a = np.array(1.0, dtype)
    elif how == "empty":
        a = np.zeros((0, *shape[1:]), dtype)
    elif how == "huge-values":
        a = (a * 1e30).astype(dtype) if a.dtype.kind == "f" else np.full(shape, 2**62, np.int64)
    elif how == "bool":
        a = a > 0
    elif how == "fortran":
        a = np.asfortranarray(a)
    elif how == "big-batch":
        a = np.zeros((rng.choice([64, 512]), *shape[1:]), dtype)
    elif how == "denormal" and a.dtype.kind == "f":
        a[...] = 1e-45
    return a, how


def _npy_header_lie(path: Path, name: str, dims: tuple[int, ...]) -> None:
    """A .npy member whose header claims a huge shape over a few bytes of data."""
    import zipfile

    head = {"descr": "<f4", "fortran_order": False, "shape": dims}
    text = repr(head).encode() + b" "
    text += b" " * ((64 - (10 + len(text) + 1) % 64) % 64) + b"\n"
    raw = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + bytes(64)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(name + ".npy", raw)


def inputs(rng: random.Random, m: Material) -> Iterator[Case]:
    specs = [
        (CNN, "image", (1, 3, 64, 64), "float32"),
        (TRANSFORMER, "input_ids", (1, 16), "int64"),
    ]
    while True:
        model, name, shape, dtype = rng.choice(specs)
        f = m.work / f"in{_n(rng)}.npz"
        files = [f]
        kind = rng.choice(
            [
                "array",
                "array",
                "array",
                "names",
                "lie",
                "junk",
                "pickle",
                "dir",
                "labels",
                "array",
                "names",
                "lie",
                "calibration",
            ]
        )
        label = kind
        if kind == "array":
            a, label = _array(rng, shape, dtype)
            _savez(f, **{name: a})
        elif kind == "names":
            a = np.zeros(shape, dtype)
            key = rng.choice(["", "other", name + "\x1b[2J", "x" * 300, "../" + name])
            _savez(f, **{key or "arr_0": a, **({name: a} if rng.random() < 0.3 else {})})
            label = f"names {key[:12]!r}"
        elif kind == "lie":
            dims = rng.choice([(2**40,), (1, 3, 2**20, 2**20), (-1, 3), (2**62, 2**62)])
            _npy_header_lie(f, name, dims)
            label = f"header shape {dims}"
        elif kind == "junk":
            f.write_bytes(
                rng.choice([b"", b"PK\x03\x04" + rng.randbytes(200), rng.randbytes(3000)])
            )
        elif kind == "pickle":
            _savez(f, **{name: np.array([{"a": 1}, None], dtype=object)})
        elif kind == "dir":
            f = m.work / f"indir{_n(rng)}"
            f.mkdir()
            files = [f]
            a, label = _array(rng, shape, dtype)
            np.save(f / f"{name}.npy", a)
            if rng.random() < 0.5:
                (f / "z.npy").write_bytes(rng.randbytes(100))
            label = "dir " + label
        extra: list[str] = []
        if kind == "labels":
            _savez(f, **{name: np.zeros((4, *shape[1:]), dtype)})
            lab = m.work / f"lab{_n(rng)}.npy"
            np.save(
                lab,
                rng.choice(
                    [
                        np.array([0.5, 1, 2, 3]),
                        np.array([-1, 0, 1, 2]),
                        np.zeros((4, 2), np.int64),
                        np.array([1, 2]),
                        np.array([2**40] * 4),
                        np.array(["a"] * 4),
                    ]
                ),
            )
            files.append(lab)
            extra = ["--labels", str(lab)]
        if kind == "calibration":
            a, label = _array(rng, (8, *shape[1:]), dtype)
            _savez(f, **{name: a})
            cmd = ["bench", str(model), "--precision", "int8", "--calibration", str(f)]
            label = "calibration " + label
        else:
            cmd = [
                rng.choice(["bench", "bench", "profile", "memory"]),
                str(model),
                "--inputs",
                str(f),
                *extra,
            ]
        if cmd[0] != "memory":
            cmd += ["--duration", "0.3", "--min-runs", "3", "--warmup", "1", "--no-live"]
        yield Case("inputs", f"{model.stem} {label} / {cmd[0]}", cmd, files=files)


# -- traces ------------------------------------------------------------------------------

TRACE_BAD = [
    "nan",
    "inf",
    "-1",
    "0",
    "1e400",
    "1" + "0" * 400,
    "true",
    "false",
    "null",
    "",
    "1e-400",
    "٣",
    "0x10",
    '"12"',
    "[]",
    "{}",
    "-0",
    "2147483648",
    "1e11",
    "1e17",
    "9007199254740993",
    "\x00",
    "1,5",
    "3.5",
]


def _trace_text(rng: random.Random, fmt: str, rows: int) -> str:
    t0 = rng.choice([0, 1_700_000_000, 1_700_000_000_000, 1.7e18, 1e10])
    step = rng.choice([0.0, 1e-6, 0.01, 1.0, 3600.0, 3.15e9])
    if fmt == "mooncake":
        lines = [
            json.dumps(
                {
                    "timestamp": t0 + k * step,
                    "input_length": 100 + k,
                    "output_length": 10,
                    "hash_ids": list(range(k % 5)),
                }
            )
            for k in range(rows)
        ]
        return "\n".join(lines) + "\n"
    if fmt == "azure":
        head = "TIMESTAMP,ContextTokens,GeneratedTokens"
        dates = rng.random() < 0.5

        def stamp(k: int) -> str:
            return f"2023-11-16 18:15:{46 + k * step % 10:.7f}" if dates else f"{t0 + k * step:.0f}"

        return head + "\n" + "".join(f"{stamp(k)},{100 + k},{10}\n" for k in range(rows))
    if fmt == "burstgpt":
        head = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"
        return (
            head
            + "\n"
            + "".join(
                f"{k * step},ChatGPT,{100 + k},10,{110 + k},Conversation log\n" for k in range(rows)
            )
        )
    head = rng.choice(["time", "time,size", "time,key,size", "t", "time,size,extra"])
    cols = head.count(",") + 1
    return (
        head
        + "\n"
        + "".join(",".join([f"{k * step:.6f}"] + ["3"] * (cols - 1)) + "\n" for k in range(rows))
    )


def _trace_damage(rng: random.Random, text: str, fmt: str) -> tuple[str, str]:
    lines = text.split("\n")
    how = rng.choice(
        [
            "cell",
            "cell",
            "cell",
            "bom",
            "crlf",
            "long-line",
            "nul",
            "hashes",
            "nest",
            "latin1",
            "header",
            "shuffle",
            "none",
        ]
    )
    k = rng.randrange(1, max(2, len(lines) - 1))
    bad = rng.choice(TRACE_BAD)
    if how == "cell" and fmt == "mooncake":
        row = json.loads(lines[k - 1]) if lines[k - 1] else {}
        field_ = rng.choice(["timestamp", "input_length", "output_length", "hash_ids"])
        row[field_] = json.loads(bad) if bad in ("true", "false", "null", "[]", "{}") else bad
        if rng.random() < 0.5 and bad.lstrip("-").isdigit():
            lines[k - 1] = json.dumps(row).replace(f'"{bad}"', bad)
        else:
            lines[k - 1] = json.dumps(row)
    elif how == "cell":
        cells = lines[k].split(",")
        cells[rng.randrange(len(cells))] = bad
        lines[k] = ",".join(cells)
    elif how == "bom":
        lines[0] = "\ufeff" + lines[0]
    elif how == "crlf":
        return "\r\n".join(lines), how
    elif how == "long-line":
        lines[k] = lines[k] + "1" * rng.choice([70_000, 2_000_000])
    elif how == "nul":
        lines[k] = lines[k][:2] + "\x00" + lines[k][2:]
    elif how == "hashes" and fmt == "mooncake":
        lines[k - 1] = json.dumps(
            {
                "timestamp": 1,
                "input_length": 5,
                "output_length": 5,
                "hash_ids": list(range(rng.choice([100_001, 5]))),
            }
        )
    elif how == "nest":
        lines[k] = "[" * 100_000 + "]" * 100_000
    elif how == "latin1":
        lines[k] = lines[k] + "\udcff"
    elif how == "header":
        lines[0] = rng.choice(["", "time,time", "TIMESTAMP", "\x1b[2J", "time;size", "a,b,c"])
    elif how == "shuffle":
        body = lines[1:]
        rng.shuffle(body)
        lines[1:] = body
    return "\n".join(lines), how


def traces(rng: random.Random, m: Material) -> Iterator[Case]:
    while True:
        fmt = rng.choice(["opscope", "mooncake", "azure", "burstgpt"])
        rows = rng.choice([1, 2, 50, 2000, 2000, 200_000])
        text, how = _trace_damage(rng, _trace_text(rng, fmt, rows), fmt)
        f = m.work / f"tr{_n(rng)}.{'jsonl' if fmt == 'mooncake' else 'csv'}"
        f.write_bytes(text.encode("utf-8", "surrogateescape"))
        spec = f"trace:{f}"
        cmd = rng.choice(
            [
                ["load", str(CNN), "--traffic", spec, "--duration", "2", "--threads", "1"],
                ["simulate", str(CNN), "--traffic", spec, "--duration", "2"],
                ["simulate", str(LLM), "--llm", "--traffic", spec],
                ["load", str(LLM), "--llm", "--traffic", spec, "--duration", "2"],
                [
                    "load",
                    str(CNN),
                    "--traffic",
                    spec,
                    "--requests",
                    str(rng.choice([1, 10, 10**6])),
                ],
            ]
        )
        sig = (rng.choice([2, 15]), rng.uniform(0.5, 6)) if rng.random() < 0.15 else None
        name = f"{fmt} {rows} rows {how} / {' '.join(cmd[:1] + cmd[3:4])}"
        yield Case("traces", name, cmd, signal=sig, files=[f])
