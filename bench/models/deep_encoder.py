"""A generated encoder-like ONNX model of about 325 nodes (no torch, seconds to build), for
measurements that scale with the node count: a session's size grows with the profiled nodes
of every inference (issue #17 measured a 323-node model).

Each layer: LayerNormalization, two MatMul+Add projections with a Sigmoid-gated (SiLU)
activation between them, a residual Add and a Softmax-scored mixing MatMul: 13 nodes.
`python bench/models/deep_encoder.py OUT.onnx [--layers 25]` writes it (25 layers: 325
nodes, input `x` float32 [1, 64, 128]).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

D, SEQ, HIDDEN = 128, 64, 256


def build(out: Path, layers: int = 25, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def w(name: str, *shape: int, scale: float = 0.05) -> str:
        inits.append(
            numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)
        )
        return name

    x = "x"
    for i in range(layers):
        p = f"layer{i}/"

        def n(op: str, ins: list[str], name: str, p: str = p, **attrs: object) -> str:
            nodes.append(helper.make_node(op, ins, [p + name], name=p + name, **attrs))
            return p + name

        ln = n(
            "LayerNormalization", [x, w(p + "ln_g", D, scale=1.0), w(p + "ln_b", D)], "ln", axis=-1
        )
        h = n(
            "Add",
            [n("MatMul", [ln, w(p + "w1", D, HIDDEN)], "fc1"), w(p + "b1", HIDDEN)],
            "fc1_bias",
        )
        gate = n("Sigmoid", [h], "gate")
        act = n("Mul", [h, gate], "silu")
        o = n(
            "Add", [n("MatMul", [act, w(p + "w2", HIDDEN, D)], "fc2"), w(p + "b2", D)], "fc2_bias"
        )
        scores = n("MatMul", [ln, n("Transpose", [ln], "keys_t", perm=[0, 2, 1])], "scores")
        probs = n(
            "Softmax",
            [n("Mul", [scores, w(p + "scale", 1, scale=0.1)], "scaled")],
            "probs",
            axis=-1,
        )
        mixed = n("MatMul", [probs, o], "mix")
        x = n("Add", [x, mixed], "residual")
    graph = helper.make_graph(
        nodes,
        "deep_encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, D])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, SEQ, D])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int, default=25)
    args = parser.parse_args()
    path = build(args.out, args.layers)
    print(f"{path}: {len(onnx.load(str(path)).graph.node)} nodes")


if __name__ == "__main__":
    main()
