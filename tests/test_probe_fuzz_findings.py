"""What the probe fuzz (bench/probe_fuzz.py, issues 53 and 54's hostile classes) found at
stop 61, each fixed at its root: a step that is one long native call said nothing until
killed (a model's first inference, a Loop of 10^12 iterations: `bench`, `profile` and
`memory` showed one line, then silence); a path the system refuses to look up (a name of
5,000 characters) ended in an OSError traceback; a size past what a float holds (inputs of
rank 64, each dim 2^31) ended in an OverflowError traceback instead of the refusal."""

from __future__ import annotations

import io
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.in_process import Cli
from tests.test_signals_native import endless_loop_model

ROOT = Path(__file__).resolve().parents[1]


def test_a_quiet_step_says_it_is_still_running(monkeypatch: pytest.MonkeyPatch) -> None:
    """The printer repeats a step that went quiet, with its time, and stops once anything
    else comes (a step that ended is not said to be running)."""
    import engine.cli.printer as printer_mod
    from engine.events import Notice, Progress

    monkeypatch.setattr(printer_mod, "STILL_S", 0.2)
    out = io.StringIO()
    printer = printer_mod.LivePrinter(out, live=False)
    try:
        printer.feed(Progress("session", 0, None, "running the model once on its inputs"))
        deadline = time.monotonic() + 60  # a guard against a hang, not a speed limit
        while "still running" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
        printer.feed(Notice("warning", "something else"))
        said = out.getvalue()
        time.sleep(0.5)  # past STILL_S twice: the ended step is not said again
        after = out.getvalue()
    finally:
        printer.close()
    assert "[session] running the model once on its inputs: still running" in said, said
    assert after.count("still running") == said.count("still running"), after
    assert after.endswith("warning: something else\n"), after


def test_a_first_inference_that_never_ends_shows_progress_and_stops_on_ctrl_c(
    tmp_path: Path,
) -> None:
    """`opscope bench` on a Loop of 10^12 iterations printed the provider line, then
    nothing until killed (the probe fuzz: 45 s silent, every time): its first inference
    (the input check) is a step of its own, said again while it runs; Ctrl-C ends it, 130."""
    model = endless_loop_model(tmp_path / "loop.onnx")  # 10^12 iterations: no end
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPSCOPE_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.entry", "bench", str(model), "--no-live"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stderr, selectors.EVENT_READ)
            deadline = time.monotonic() + 240  # a guard against a hang, not a speed limit
            while time.monotonic() < deadline and not any("still running" in x for x in lines):
                if sel.select(timeout=1.0):
                    line = proc.stderr.readline()
                    if not line:
                        break
                    lines.append(line)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = "".join(lines) + err
    assert "[session] running the model once on its inputs: still running" in text, text
    assert proc.returncode == 130, text
    assert "Traceback" not in text, text


def test_a_path_the_system_refuses_is_one_line(cli: Cli, tmp_path: Path) -> None:
    """`session compact FILE NAME` with a name of 5,000 characters: Path.exists() raises
    ENAMETOOLONG (it answers False only for a missing file), which was a traceback."""
    long_name = str(tmp_path / ("x" * 5000))
    done = cli("session", "compact", tmp_path / "absent.opscope", long_name)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "File name too long" in lines[0]
    assert "(5,0" in lines[0] and len(lines[0]) < 400, lines[0]  # cut, its length said


def test_inputs_past_what_a_float_holds_are_refused_in_one_line(cli: Cli, tmp_path: Path) -> None:
    """A model whose input has rank 64, each dim 2^31: the refusal's size text divided a
    600-digit int by 1000 and raised OverflowError (the probe fuzz, `profile`)."""
    from engine.model.sizes import size_text

    assert size_text(2147483648**64) == "about 10^597 bytes"
    assert size_text(float("inf")) == "unbounded"
    assert size_text(1500) == "1.5 KB"
    path = tmp_path / "huge.onnx"
    dims = [2147483648] * 64
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "huge",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    # bench, and graph (its shapes' bytes, stop 62's fuzz: an OverflowError traceback in
    # memory_need and graph_view, after the graph as loaded was drawn)
    for argv in (("bench", path, "--duration", "0.3", "--no-live"), ("graph", path)):
        done = cli(*argv)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        errors = [x for x in done.stderr.splitlines() if x.startswith("opscope: error")]
        assert len(errors) == 1 and "about 10^597 bytes" in errors[0], done.stderr


def test_a_failed_run_of_the_quantizers_own_session_prints_no_raw_runtime_log(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """An INT8 static build whose calibration run failed (out of memory, in the probe fuzz)
    printed ONNX Runtime's colour-coded `[E:onnxruntime:...]` line raw on stderr beside our
    one line ("settings ... do not apply"): the calibrator makes its session with default
    options, which log through ONNX Runtime's default logger. Here a session made that way
    inside the build's quiet block fails a run (a Reshape to a size that does not fit)."""
    import onnxruntime as ort

    from engine.backends.ort.variants import _quiet_logs

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        "reshape",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
            helper.make_tensor_value_info("s", TensorProto.INT64, [1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    capfd.readouterr()
    with _quiet_logs():
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        with pytest.raises(Exception, match="Reshape"):
            session.run(None, {"x": np.zeros((1, 4), np.float32), "s": np.array([3], np.int64)})
    assert "onnxruntime" not in capfd.readouterr().err


def test_a_weight_whose_bytes_do_not_fit_its_shape_is_one_line(cli: Cli, tmp_path: Path) -> None:
    """The demo CNN with one weight's shape changed (its bytes no longer fit it; the probe
    fuzz's byte flip did the same): the session that checks the realistic inputs was made
    unguarded, and ONNX Runtime's refusal ended `bench` and `profile` in a traceback."""
    model = onnx.load(ROOT / "resources" / "models" / "demo_cnn.onnx")
    weight = next(t for t in model.graph.initializer if t.raw_data and len(t.dims) == 4)
    weight.dims[0] *= 2
    path = tmp_path / "damaged.onnx"
    onnx.save(model, path)
    done = cli("bench", path, "--duration", "0.3", "--no-live")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "[E:onnxruntime" not in done.stderr, done.stderr
    errors = [x for x in done.stderr.splitlines() if x.startswith("opscope: error")]
    assert len(errors) == 1 and "damaged.onnx" in errors[0] and weight.name in errors[0], errors
