"""The MatMuls that multiply two activations (attention's Q x K^T and its weights x V in a
transformer): static INT8 must fix a scale for both sides ahead of time, and these carry
the outliers that wreck accuracy (MiniLM: cosine 0.37 with them, 0.80 without, at nearly
the same speed), so the settings for transformers keep them in FP32."""

from __future__ import annotations

from pathlib import Path


def activation_matmuls(path: str | Path) -> list[str]:
    """Names of the MatMul nodes neither of whose inputs is a constant (an initializer, a
    Constant node, or computed from constants alone)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    constant = {t.name for t in graph.initializer}
    found: list[str] = []
    for node in graph.node:  # topological order
        if node.op_type == "Constant" or (node.input and all(i in constant for i in node.input)):
            constant.update(node.output)
        elif node.op_type == "MatMul" and not any(i in constant for i in node.input):
            found.append(node.name)
    return found
