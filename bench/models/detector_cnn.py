"""A detector-sized CNN (about 300 nodes: a residual backbone of Conv/Relu/Add blocks, an
FPN-style neck with Resize and Concat, and box/class heads per level), random weights,
input `images` float32[batch, 3, height, width] with symbolic sizes (default 320 in the
name, as real exports do). Written with onnx.helper, no torch: the stand-in for the
"real third-party detector with 323 nodes" of issue #17 in screenshots and benchmarks.

    .venv/bin/python bench/models/detector_cnn.py [OUT.onnx]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DEFAULT = Path.home() / ".cache" / "opscope-bench" / "detector_cnn_320.onnx"


class Graph:
    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(0)
        self.n = 0

    def name(self, op: str) -> str:
        self.n += 1
        return f"{op.lower()}_{self.n}"

    def const(self, shape: tuple[int, ...], scale: float) -> str:
        name = f"w{len(self.inits)}"
        data = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(data, name))
        return name

    def op(self, op: str, inputs: list[str], **attrs: object) -> str:
        out = self.name(op)
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def conv(
        self, x: str, cin: int, cout: int, k: int = 3, stride: int = 1, relu: bool = True
    ) -> str:
        w = self.const((cout, cin, k, k), (2.0 / (cin * k * k)) ** 0.5)
        b = self.const((cout,), 0.01)
        y = self.op("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride, stride],
                    pads=[k // 2] * 4)  # fmt: skip
        return self.op("Relu", [y]) if relu else y

    def block(self, x: str, c: int) -> str:
        y = self.conv(x, c, c)
        y = self.conv(y, c, c, relu=False)
        return self.op("Relu", [self.op("Add", [x, y])])


def build(out: Path = DEFAULT) -> Path:
    g = Graph()
    x = g.conv("images", 3, 16, stride=2)
    levels = []
    c = 16
    for stage, (cout, blocks) in enumerate(((32, 8), (48, 14), (64, 18), (96, 10))):
        x = g.conv(x, c, cout, stride=2)
        c = cout
        for _ in range(blocks):
            x = g.block(x, c)
        if stage >= 1:
            levels.append((x, c))
    # neck: top-down, lateral 1x1 convs, upsample and concat
    outs = []
    top, ct = levels[-1]
    top = g.conv(top, ct, 64, k=1)
    for lvl, cl in reversed(levels[:-1]):
        up = g.op("Resize", [top, "", "scales"], mode="nearest")
        lat = g.conv(lvl, cl, 64, k=1)
        top = g.conv(g.op("Concat", [up, lat], axis=1), 128, 64)
        outs.append(top)
    # heads: box (4) and class (20) per level, flattened and joined
    boxes, scores = [], []
    for feat in outs:
        h = g.conv(g.conv(feat, 64, 64), 64, 64)
        box = g.conv(h, 64, 4, k=1, relu=False)
        cls = g.op("Sigmoid", [g.conv(h, 64, 20, k=1, relu=False)])
        boxes.append(g.op("Reshape", [box, "shape4"]))
        scores.append(g.op("Reshape", [cls, "shape20"]))
    g.inits += [
        numpy_helper.from_array(np.asarray([1, 1, 2, 2], np.float32), "scales"),
        numpy_helper.from_array(np.asarray([0, 4, -1], np.int64), "shape4"),
        numpy_helper.from_array(np.asarray([0, 20, -1], np.int64), "shape20"),
    ]
    g.nodes.append(helper.make_node("Concat", boxes, ["boxes"], name="boxes", axis=2))
    g.nodes.append(helper.make_node("Concat", scores, ["scores"], name="scores", axis=2))
    images = ["batch", 3, "height", "width"]
    graph = helper.make_graph(
        g.nodes, "detector_cnn",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, images)],
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["batch", 4, "anchors"]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 20, "anchors"])],
        initializer=g.inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.checker.check_model(model)
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, out)
    return out


if __name__ == "__main__":
    path = build(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)
    print(f"{path}: {len(onnx.load(path).graph.node)} nodes")
