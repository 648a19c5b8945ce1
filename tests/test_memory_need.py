"""One inference's need estimated before inputs are made: `sweep --vary sequence=16,10000000`
grew to 5.3 GB before its error (after timing the first point), `bench --shape
input_ids=1x10000000` to 5.4 GB; both are now one line before anything runs, from the one
estimate (engine/model/memory_need) that bench, sweep, the window and --inputs share."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from engine.errors import InputError
from engine.model.info import load_model
from engine.model.memory_need import check_need, estimate
from tests.conftest import DEMO_TRANSFORMER
from tests.test_cli import opscope


def _one_line(proc: object, said: str) -> str:
    rc, err = proc.returncode, proc.stderr  # type: ignore[attr-defined]
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert said in err, err
    return str(err)


def test_attention_need_grows_with_the_square_of_the_sequence() -> None:
    model, info = load_model(DEMO_TRANSFORMER)
    small = estimate(model, info, {"input_ids": (1, 4096)})
    large = estimate(model, info, {"input_ids": (1, 8192)})
    assert small.inputs == 4096 * 8 and small.conflict is None
    assert large.activations == pytest.approx(4 * small.activations, rel=0.01)
    said = r"x: input_ids 1x10000000 and one inference \(its largest step .*\) would take .* TB"
    with pytest.raises(InputError, match=said):
        check_need(model, info, {"input_ids": (1, 10_000_000)}, "x")


def test_a_size_the_models_shapes_refuse_is_named_before_any_point_runs(tmp_path: Path) -> None:
    """A position table of 512 added to the sequence: shape inference refuses 600 where
    512 passes (ONNX Runtime would find out only when it runs)."""
    pos = h.make_tensor("pos", T.FLOAT, [1, 512], np.zeros(512, np.float32))
    graph = h.make_graph([h.make_node("Add", ["x", "pos"], ["y"])], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [1, "seq"])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, "seq"])], [pos])  # fmt: skip
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "pos.onnx"
    onnx.save(model, path)
    model, info = load_model(path)
    assert estimate(model, info, {"x": (1, 512)}).conflict is None
    with pytest.raises(InputError, match="the model cannot take these sizes"):
        check_need(model, info, {"x": (1, 600)}, "--vary seq=600", {"x": (1, 512)})
    proc = opscope("sweep", path, "--vary", "seq=512,600", "--duration", "0.1")
    _one_line(proc, "--vary seq=600: the model cannot take these sizes")
    assert "point " not in proc.stdout  # refused before the first point ran


def test_absurd_sizes_are_one_line_in_sweep_bench_and_inputs(tmp_path: Path) -> None:
    proc = opscope("sweep", DEMO_TRANSFORMER, "--vary", "sequence=16,10000000",
                   "--duration", "0.1")  # fmt: skip
    _one_line(proc, "--vary sequence=10000000: input_ids 1x10000000 and one inference")
    assert "point " not in proc.stdout  # the 16 point never ran
    proc = opscope("bench", DEMO_TRANSFORMER, "--shape", "input_ids=1x10000000",
                   "--duration", "0.1")  # fmt: skip
    _one_line(proc, "generated inputs: input_ids 1x10000000 and one inference")
    feed = tmp_path / "long.npz"  # 8 MB of tokens whose attention would take terabytes
    np.savez(feed, input_ids=np.ones((1, 1_000_000), np.int64))
    proc = opscope("bench", DEMO_TRANSFORMER, "--inputs", feed, "--duration", "0.1")
    _one_line(proc, "inputs from long.npz: input_ids 1x1000000 and one inference")


def _sliced_by_length() -> onnx.ModelProto:
    """The chain exported BERTs use for token-type ids: a constant table [1, 512] sliced to
    the input's length, Shape -> Gather -> Unsqueeze -> Slice. ONNX's inference (data
    propagation on) cannot tell the slice's shape; ONNX Runtime's symbolic one can."""
    c = h.make_tensor
    nodes = [
        h.make_node("Constant", [], ["table"], value=c("t", T.INT64, [1, 512], [0] * 512)),
        h.make_node("Shape", ["x"], ["shape"]),
        h.make_node("Constant", [], ["one"], value=c("o", T.INT64, [], [1])),
        h.make_node("Gather", ["shape", "one"], ["length"], axis=0),
        h.make_node("Constant", [], ["zero_axis"], value=c("z", T.INT64, [1], [0])),
        h.make_node("Unsqueeze", ["length", "zero_axis"], ["end"]),
        h.make_node("Constant", [], ["start"], value=c("s", T.INT64, [1], [0])),
        h.make_node("Constant", [], ["axis"], value=c("a", T.INT64, [1], [1])),
        h.make_node("Slice", ["table", "start", "end", "axis"], ["types"]),
        h.make_node("Add", ["x", "types"], ["y"]),
    ]
    graph = h.make_graph(
        nodes,
        "g",
        [h.make_tensor_value_info("x", T.INT64, [1, "seq"])],
        [h.make_tensor_value_info("y", T.INT64, [1, "seq"])],
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def test_a_backends_symbolic_inference_tells_the_sizes_onnxs_cannot() -> None:
    from engine import backends
    from engine.model.graph_view import inferred
    from engine.model.memory_need import sizes_at

    model = _sliced_by_length()
    refine = backends.shape_inference()
    assert refine is not None
    plain = sizes_at(model, {"x": (1, 128)})
    assert "types" not in plain  # ONNX's own inference leaves it unknown (never 0)
    told = sizes_at(model, {"x": (1, 128)}, refine)
    assert told["types"] == told["y"] == 128 * 8
    assert inferred(model, {"x": (1, 128)}, refine)["types"].shape == (1, 128)
    assert refine(onnx.ModelProto()) is None  # no opset: nothing, and no file written


def test_the_symbolic_inference_writes_nothing_where_it_cannot_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its own entry point saves `sym_shape_infer_temp.onnx` into the working folder when
    a shape stays unknown; ours keeps what it told and writes nothing."""
    from engine import backends

    model = _sliced_by_length()
    custom = h.make_node("Mystery", ["y"], ["z"], domain="com.example")
    model.graph.node.append(custom)
    model.graph.output[0].CopyFrom(h.make_tensor_value_info("z", T.INT64, None))
    model.opset_import.append(h.make_opsetid("com.example", 1))
    monkeypatch.chdir(tmp_path)
    refine = backends.shape_inference()
    assert refine is not None
    from engine.model.memory_need import sizes_at

    told = sizes_at(model, {"x": (1, 128)}, refine)
    assert told.get("types") == 128 * 8 and "z" not in told
    assert list(tmp_path.iterdir()) == []


MINILM = Path("/root/.cache/opscope-bench/minilm/model.onnx")


@pytest.mark.skipif(not MINILM.is_file(), reason="the exported MiniLM encoder is not here")
@pytest.mark.parametrize("sequence", [128, 512])
def test_an_exported_encoders_tensors_are_all_sized_at_the_shapes_run(sequence: int) -> None:
    """Issue 53 read 'As loaded: 2.4 MB (197 tensors of unknown size left out)' on this
    encoder: ONNX's inference with data propagation, then ONNX Runtime's symbolic one where
    it stops, size every tensor of the Shape -> Gather -> Concat -> Reshape chains, at the
    current shapes (the peak moves with them)."""
    from engine import backends
    from engine.measure.liveness import liveness
    from engine.model.graph_io import graph_nodes
    from engine.model.memory_need import sizes_at

    model, info = load_model(str(MINILM))
    shapes = {v.name: (1, sequence) for v in info.inputs}
    sizes = sizes_at(model, shapes, backends.shape_inference())
    outputs = [o for n in model.graph.node for o in n.output if o]
    assert [o for o in outputs if o not in sizes] == []
    live = liveness(graph_nodes(model.graph), sizes, list(shapes),
                    [o.name for o in model.graph.output],
                    weights=frozenset(t.name for t in model.graph.initializer))  # fmt: skip
    assert live.to_json()["unknown_tensors"] == 0
    # an attention score tensor (1 x 12 heads x L x L floats) alive at the peak
    assert live.peak_bytes > 12 * sequence * sequence * 4


def test_a_node_the_symbolic_inference_trips_on_keeps_what_it_told_before() -> None:
    """One node it cannot infer (a Concat whose other dims disagree at these shapes: its
    own assertion) threw away every shape it had told: the tensors of the chain before it
    came back unknown, and a peak left them out."""
    from engine import backends
    from engine.model.memory_need import sizes_at

    model = _sliced_by_length()
    odd = h.make_tensor("odd", T.INT64, [2, 5], [0] * 10)
    model.graph.node.extend([
        h.make_node("Constant", [], ["odd"], value=odd),
        h.make_node("Concat", ["y", "odd"], ["z"], axis=1),
    ])  # fmt: skip
    model.graph.output[0].CopyFrom(h.make_tensor_value_info("z", T.INT64, None))
    refine = backends.shape_inference()
    assert refine is not None
    told = sizes_at(model, {"x": (1, 128)}, refine)
    assert told.get("types") == told.get("y") == 128 * 8
