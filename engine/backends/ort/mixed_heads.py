"""The nodes that assemble an output whose channels mix scales (a YOLO head: box
coordinates 0-640 concatenated with class scores 0-1), kept in FP32 under static INT8.

Static QDQ gives each tensor one scale: at the head's Concat the boxes set it (640/255 =
2.5 per step), and every score below half a step rounds to 0, so an INT8 detector finds
nothing (issue #50: OpScope's, ORT's and Olive's static files alike). The head is cheap
element-wise work after the last convolutions; in FP32 it costs little and keeps scores."""

from __future__ import annotations

from collections.abc import Iterable

HEAVY = {"Conv", "ConvTranspose", "MatMul", "Gemm", "Attention", "LSTM", "GRU", "RNN"}
MAX_NODES = 64  # a head is a handful of nodes; past this it is the network


def head_nodes(path: str, outputs: Iterable[str]) -> list[str]:
    """Named nodes that produce `outputs` from the last heavy nodes (convolutions,
    matrix products) on: walking back from each output through light nodes only."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    producer = {t: n for n in graph.node for t in n.output if t}
    found: list[str] = []
    seen: set[str] = set()
    frontier = [t for t in outputs]
    while frontier and len(found) < MAX_NODES:
        node = producer.get(frontier.pop())
        if node is None or node.name in seen or node.op_type in HEAVY:
            continue
        seen.add(node.name)
        if node.name:
            found.append(node.name)
        frontier.extend(t for t in node.input if t)
    return found
