"""Convolution weight shapes from a model file, by node name.

ONNX Runtime pre-packs a QLinearConv's weight (and a Conv's, once it moves the graph to
NHWC) and then leaves it out of the profile, so the profile alone cannot tell a 3x3 from a
1x1 convolution. The model file can: each convolution's weight is an initializer, directly
or behind a DequantizeLinear (QDQ models). Profile names carry suffixes ORT adds when it
rewrites nodes ("node_Conv_97_token_7", "conv_nchwc"); `profile_key` strips them.
"""

from __future__ import annotations

import re
from pathlib import Path

Shape = tuple[int, ...]
WEIGHT_INPUT = {
    "Conv": 1,
    "ConvInteger": 1,
    "FusedConv": 1,
    "NhwcConv": 1,
    "QLinearConv": 3,
    "ConvTranspose": 1,
}
_PASS_THROUGH = ("DequantizeLinear", "Identity", "Cast")
_SUFFIX = re.compile(r"(_token_\d+|_nchwc|_nhwc)+$")


def profile_key(name: str) -> str:
    """The graph node name a profile's node name came from."""
    return _SUFFIX.sub("", name)


def conv_weight_shapes(path: str | Path) -> dict[str, Shape]:
    """{node name: weight shape} of every convolution whose weight is a constant; {} when
    the file cannot be read (the FLOP model then does without)."""
    try:
        import onnx

        graph = onnx.load(str(path), load_external_data=False).graph
    except Exception:  # a model ORT opened: a reader failure only loses some FLOPs
        return {}
    inits: dict[str, Shape] = {i.name: tuple(int(d) for d in i.dims) for i in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    shapes: dict[str, Shape] = {}
    for node in graph.node:
        index = WEIGHT_INPUT.get(node.op_type)
        if index is None or len(node.input) <= index or not node.name:
            continue
        name = node.input[index]
        for _ in range(4):  # W -> DequantizeLinear -> W_quantized, at most a few hops
            if name in inits:
                shapes[node.name] = inits[name]
                break
            source = producer.get(name)
            if source is None or source.op_type not in _PASS_THROUGH or not source.input:
                break
            name = source.input[0]
    return shapes
