"""ONNX's data propagation over a long rank-1 tensor costs ~1 µs and a protobuf dim per
element in C++ with the GIL held: `opscope memory` on `Add(Range(0, 2^31), x)` sat silent
for minutes, deaf to Ctrl-C and SIGTERM (stop 63's probe fuzz). Shape inference now
propagates values only for tensors short enough to be shapes (engine/model/data_prop.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

from engine.model.data_prop import SHAPE_LIMIT, infer_shapes_bounded
from engine.model.memory_need import at_shapes, inferred_sizes

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "resources" / "models" / "demo_transformer.onnx"


def _i64(name: str, value: object) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(value, np.int64), name)


def _range_add(n: int) -> onnx.ModelProto:
    """Range(0, n) + x, then a Reshape whose target is a short shape computed from x's
    Shape (what data propagation is for)."""
    nodes = [
        helper.make_node("Range", ["zero", "lim", "one"], ["r"]),
        helper.make_node("Add", ["r", "x"], ["z"]),
        helper.make_node("Shape", ["y"], ["ys"]),
        helper.make_node("Concat", ["ys", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["y", "target"], ["y2"]),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("z", TensorProto.INT64, None),
         helper.make_tensor_value_info("y2", TensorProto.FLOAT, None)],
        [_i64("zero", 0), _i64("lim", n), _i64("one", 1), _i64("minus1", [-1])],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _shape(model: onnx.ModelProto, name: str) -> list[int | str]:
    for v in (*model.graph.value_info, *model.graph.output):
        if v.name == name:
            return [
                d.dim_value if d.HasField("dim_value") else d.dim_param
                for d in v.type.tensor_type.shape.dim
            ]
    raise KeyError(name)


def test_a_long_vector_keeps_its_size_and_short_shapes_still_propagate() -> None:
    n = SHAPE_LIMIT * 4
    told = infer_shapes_bounded(_range_add(n), strict=True)
    assert _shape(told, "r") == [n] and _shape(told, "z") == [n]
    assert _shape(told, "y2") == [2, 3, 1]  # the Reshape's target came from propagated values
    assert not any("\x00" in v.name for v in told.graph.value_info)  # no stand-in left
    assert [n.input[0] for n in told.graph.node][:2] == ["zero", "r"]  # the model's own nodes


def test_a_model_without_long_vectors_is_told_what_onnx_tells() -> None:
    model = at_shapes(onnx.load(str(DEMO)), {"input_ids": (1, 128)})
    ours = inferred_sizes(infer_shapes_bounded(model))
    onnx_own = inferred_sizes(shape_inference.infer_shapes(model, data_prop=True))
    assert ours == onnx_own and len(ours) > 50


SCRIPT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, resource.RLIM_INFINITY))
sys.path.insert(0, sys.argv[1])
from test_data_prop_bounded import _range_add
from engine.model.memory_need import at_shapes, inferred_sizes
from engine.model.data_prop import infer_shapes_bounded
told = infer_shapes_bounded(at_shapes(_range_add(2**27), {"x": (1,)}), strict=True)
print(inferred_sizes(told)["z"])
"""


def test_a_vector_of_2_27_elements_is_sized_without_materializing_it() -> None:
    """Under a 3 GB address-space limit, in seconds: ONNX's own propagation over it holds
    a dim per element (134 million) and does not end in minutes."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(Path(__file__).parent)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.split()[-1]) == 2**27 * 8
