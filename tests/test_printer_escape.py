"""Model-controlled names never reach the terminal raw (issue 54): a model whose graph,
node, tensor, input and output names and producer hold ESC sequences (a window title, a
screen clear), a carriage return and a fake newline, through every command that prints
them. Each printer escapes with the one function, `engine.errors.escape_controls`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

ROOT = Path(__file__).resolve().parents[1]
EVIL = "\x1b]0;title\x07x\x1b[2J\rfake\nline"


@pytest.fixture(scope="module")
def evil_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    g = h.make_graph(
        [h.make_node("Relu", ["in" + EVIL], ["mid" + EVIL], name="node" + EVIL),
         h.make_node("Sigmoid", ["mid" + EVIL], ["out" + EVIL], name="n2" + EVIL)],
        "g" + EVIL,
        [h.make_tensor_value_info("in" + EVIL, T.FLOAT, [1, 64])],
        [h.make_tensor_value_info("out" + EVIL, T.FLOAT, [1, 64])],
    )  # fmt: skip
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], producer_name="p" + EVIL)
    model.ir_version = 8
    path = tmp_path_factory.mktemp("evil") / "evil.onnx"
    onnx.save(model, str(path))
    return path


def _opscope(*argv: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "app.entry", *argv], cwd=ROOT, capture_output=True, timeout=300
    )


def _no_raw_controls(proc: subprocess.CompletedProcess[bytes]) -> None:
    for stream in (proc.stdout, proc.stderr):
        raw = sorted({b for b in stream if b < 0x20 and b != 0x0A} | ({0x7F} & set(stream)))
        assert not raw, f"raw control bytes {raw} in {stream[-2000:]!r}"
        lines = stream.decode(errors="replace").splitlines()
        assert not any(ln.startswith("line") for ln in lines), "a name's newline made a line"
    assert proc.returncode == 0, proc.stderr[-2000:]


QUICK = ("--duration", "0.2", "--min-runs", "5", "--warmup", "1", "--no-live")


@pytest.mark.parametrize(
    "argv",
    [
        ("info",),
        ("bench", *QUICK),
        ("profile", *QUICK, "--runs", "2"),
        ("memory",),
        ("graph",),
    ],
    ids=lambda a: a[0],
)
def test_no_command_prints_a_models_names_raw(evil_model: Path, argv: tuple[str, ...]) -> None:
    proc = _opscope(argv[0], str(evil_model), *argv[1:])
    _no_raw_controls(proc)
    if argv[0] != "graph":  # (graph's summary names no node)
        assert b"\\x1b]0;title\\x07" in proc.stdout + proc.stderr  # shown, escaped


def test_session_show_prints_a_recorded_models_names_escaped(
    evil_model: Path, tmp_path: Path
) -> None:
    session = tmp_path / "s.opscope"
    _no_raw_controls(_opscope("profile", str(evil_model), *QUICK, "--runs", "2",
                              "--session", str(session)))  # fmt: skip
    _no_raw_controls(_opscope("session", "show", str(session)))
