"""`opscope memory`: weights by dtype, the activation peak as loaded and as run, resident
memory measured in a process of its own, and the load broken down (engine/run/memory_job.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from onnx import TensorProto, helper

from engine.measure.liveness import liveness
from engine.model.graph_io import graph_nodes, weights
from tests.conftest import DEMO_CNN
from tests.in_process import Cli
from tests.test_cli import opscope


def test_memory_of_the_demo_cnn_and_its_int8_drop(tmp_path: Path, cli: Cli) -> None:
    out = tmp_path / "m.json"
    session = tmp_path / "m.opscope"
    proc = opscope("memory", DEMO_CNN, "--threads", "1", "--runs", "3", "--json", out,
                   "--session", session)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    m = json.loads(out.read_text())["memory"]
    w = m["weights_bytes"]
    assert w["total"] == sum(w["by_dtype"].values()) and next(iter(w["by_dtype"])) == "float32"
    loaded, run = m["activations"]["as_loaded"], m["activations"]["as_run"]
    assert loaded["peak_bytes"] > 0 and loaded["at_node"] and loaded["alive_at_peak"]
    assert run is not None and run["peak_bytes"] > 0 and m["activations"]["as_run_nodes"] > 0
    assert max(p["bytes"] for p in run["timeline"]) == run["peak_bytes"]
    rss = m["measured"]["rss_bytes"]
    assert list(rss) == ["before_session", "after_session", "after_first_run", "steady"]
    assert rss["steady"] >= rss["after_first_run"] > 0
    assert m["measured"]["held_bytes"] == rss["steady"] - rss["before_session"]
    load = m["load"]
    assert load["session_s"] > 0 and load["session_initialization_s"] is not None
    assert load["weights_to_device"] is None  # a CPU run copies no weights to a GPU
    assert "resident memory" in proc.stdout and "activations as run: peak" in proc.stdout
    out8 = tmp_path / "m8.json"
    proc = opscope("memory", DEMO_CNN, "--threads", "1", "--runs", "1",
                   "--precision", "int8-static", "--json", out8)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    w8 = json.loads(out8.read_text())["memory"]["weights_bytes"]
    assert w8["by_dtype"].get("int8", 0) + w8["by_dtype"].get("uint8", 0) > 0
    assert w8["total"] < w["total"] / 2  # FP32 -> INT8: the weights drop
    assert w8["as_loaded"] == w["by_dtype"]  # the file's own, for comparison
    _recorded_and_reported(session, m, tmp_path, cli)


def _recorded_and_reported(session: Path, m: dict[str, object], tmp_path: Path, cli: Cli) -> None:
    """The report in the session (its fields checked on reading), in the HTML report; a
    hostile edit of it is one line naming the report, never a traceback (the session tools
    run in this process)."""
    import shutil
    import sqlite3

    from engine.session.store import open_session_file

    with open_session_file(session) as reader:
        (row,) = reader.memory()
    assert row.id == 1 and row.config is not None and row.config.threads == 1
    assert row.report["weights_bytes"] == m["weights_bytes"]
    assert row.report["activations"]["as_run"] == m["activations"]["as_run"]  # type: ignore[index]
    shown = cli("session", "show", session)
    assert "1 memory report:" in shown.stdout and "weights 1.3 MB" in shown.stdout, shown.stdout
    html = tmp_path / "r.html"
    assert cli("report", session, "-o", html).returncode == 0
    page = html.read_text()
    assert 'id="memory"' in page and "activations alive per node" in page
    bad = tmp_path / "bad.opscope"
    shutil.copy(session, bad)
    with sqlite3.connect(bad) as conn:
        conn.execute("""UPDATE memory SET report = '{"weights_bytes": {"total": -5}}'""")
    proc = cli("report", bad, "-o", tmp_path / "bad.html")
    assert proc.returncode == 2 and "memory report 1" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    _a_gpus_weight_copy_reads_back(session, m, tmp_path, cli)


def _a_gpus_weight_copy_reads_back(
    session: Path, m: dict[str, Any], tmp_path: Path, cli: Cli
) -> None:
    """A report as a GPU run writes it (the weights' copy to the device, here measured to
    host memory: the same steps and bytes) is recorded, read back field by field and shown
    by the CLI's text, the Memory dock's lines and the HTML report; a hostile edit of the
    copy's figures is one line naming the field."""
    import io
    import sqlite3

    from engine.backends.ort.weight_copy import copy_to_device
    from engine.cli.memory_cmd import print_memory
    from engine.session.store import SessionStore, open_session_file
    from widgets.models.memory_summary import summary_lines

    copy = copy_to_device(str(DEMO_CNN), "cpu")
    assert copy["bytes"] == m["weights_bytes"]["total"] and copy["tensors"] > 0
    assert copy["seconds"] > 0 and copy["gb_s"] == copy["bytes"] / copy["seconds"] / 1e9
    gpu = json.loads(json.dumps(m))
    gpu["load"]["weights_to_device"] = copy | {"device": "cuda"}
    with SessionStore.create_or_open(session) as store:
        store.add_memory(model_path=str(DEMO_CNN), config={}, report=gpu)
    with open_session_file(session) as reader:
        back = reader.memory()[-1].report
    assert back["load"]["weights_to_device"] == gpu["load"]["weights_to_device"]
    text = io.StringIO()
    print_memory(back, text)
    said = f"weights to the GPU {copy['bytes'] / 1e6:,.1f} MB in"
    assert said in text.getvalue(), text.getvalue()
    assert any(line.startswith("Weights to the GPU") for line in summary_lines(back))
    floor = json.loads(json.dumps(back))  # tensors shape inference could not size
    floor["activations"]["as_loaded"]["unknown_tensors"] = 197
    text = io.StringIO()
    print_memory(floor, text)  # a floor, as the dock says it: not a wrong total
    assert " or more at " in text.getvalue(), text.getvalue()
    assert "(197 tensor(s) not sized at these shapes, not counted)" in text.getvalue()
    html = tmp_path / "gpu.html"
    assert cli("report", session, "-o", html).returncode == 0
    assert said in html.read_text()
    with sqlite3.connect(session) as conn:
        conn.execute("UPDATE memory SET report = json_set(report, "
                     "'$.load.weights_to_device.gb_s', 'fast') WHERE id = 2")  # fmt: skip
    proc = cli("session", "show", session)
    assert proc.returncode == 2 and "load.weights_to_device.gb_s" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_memory_of_a_missing_model_is_one_line(tmp_path: Path, cli: Cli) -> None:
    proc = cli("memory", tmp_path / "nope.onnx")
    assert proc.returncode == 2 and "nope.onnx" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_subgraphs_outer_reads_keep_a_tensor_alive() -> None:
    """An If whose branch reads `big` from the enclosing graph: `big` stays alive until
    the If has run, though no input of the If names it."""
    out_t = helper.make_tensor_value_info("t", TensorProto.FLOAT, [4])
    out_e = helper.make_tensor_value_info("e", TensorProto.FLOAT, [4])
    then = helper.make_graph([helper.make_node("Relu", ["big"], ["t"])], "then", [], [out_t])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [out_e])
    nodes = [
        helper.make_node("Exp", ["x"], ["big"], name="make_big"),
        helper.make_node("ReduceSum", ["x"], ["s"], name="sum"),
        helper.make_node("Cast", ["s"], ["cond"], to=TensorProto.BOOL, name="cast"),
        helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other, name="if"),
    ]
    w = helper.make_tensor("unused_w", TensorProto.INT8, [10], list(range(10)))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [w],
    )  # fmt: skip
    model = helper.make_model(graph)
    io = graph_nodes(model.graph)
    assert io[3].inputs[0] == "cond" and set(io[3].inputs) == {"cond", "big", "x"}
    sizes = {"x": 16, "big": 1000, "s": 4, "cond": 1, "y": 16}
    live = liveness(io, sizes, ["x"], ["y"])
    assert live.at_node == "if" and live.peak_bytes == 16 + 1000 + 1 + 16
    assert weights(model) == [("unused_w", "int8", 10.0)]


def test_memory_and_graph_take_the_runs_int8_variant_built_from_its_calibration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    """The live run's INT8 static variant was built from the Inputs panel's calibration
    file: the memory and graph jobs, given the same file, take that variant from the cache
    rather than build another one from random samples (the gap the graph view had). The
    commands run in this process, as the window's engine host runs these jobs one after
    another: what they share is the cache on disk."""
    import numpy as np

    def ok(*args: object) -> str:
        done = cli(*args)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stderr

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    cal = tmp_path / "cal.npz"
    rng = np.random.default_rng(1)
    np.savez(cal, image=rng.standard_normal((8, 3, 64, 64)).astype(np.float32))
    int8 = ["--precision", "int8-static", "--calibration", cal]
    ok("bench", DEMO_CNN, *int8, "--duration", "0.1", "--min-runs", "5")
    out = tmp_path / "m.json"
    ok("memory", DEMO_CNN, *int8, "--runs", "1", "--json", out)
    assert json.loads(out.read_text())["memory"]["load"]["variant_cached"] is True
    said = ok("graph", DEMO_CNN, *int8)
    assert "chosen earlier on this machine" in said, said  # the cached one
    ok("memory", DEMO_CNN, "--precision", "int8-static", "--runs", "1", "--json", out)
    assert json.loads(out.read_text())["memory"]["load"]["variant_cached"] is False
