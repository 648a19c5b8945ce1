"""Give back the float tensors that ONNX Runtime's QDQ quantizer takes from nodes it was
not asked to quantize.

When `quantize_static` quantizes an activation for a node it quantizes (a MatMul), it
inserts QuantizeLinear -> DequantizeLinear after the tensor and points *every* consumer
at the DequantizeLinear's output (qdq_quantizer.py, `_add_qdq_pair_for_activation`:
`replace_input_of_all_nodes`), including the ones left in float on purpose. In a
transformer the LayerNorm output feeding Q, K and V is also the residual stream, so the
residual Add read an 8-bit copy of it: on all-MiniLM-L6-v2 (MatMuls only, layer 0's FFN
output kept in FP32) cosine to FP32 was 0.946 with the quantized residual and 0.992
with it given back, and 14% faster (the float Add no longer waits for a DequantizeLinear;
bench/results/int8_target.md).

`keep_float_path` points every consumer that is not itself quantized back at the float
tensor and removes the Q/DQ pairs nobody reads any more.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

_QDQ = ("QuantizeLinear", "DequantizeLinear")


def keep_float_path(path: Path, quantized_types: Iterable[str], excluded: Iterable[str]) -> int:
    """Rewrite the QDQ model at `path` in place so that only nodes of `quantized_types`
    not named in `excluded` read dequantized activations; return how many inputs were
    given back their float tensor. Weights (DequantizeLinear of an initializer) and graph
    outputs are left as they are."""
    import onnx

    model = onnx.load(str(path))
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    types, skip = set(quantized_types), set(excluded)
    float_of: dict[str, str] = {}  # a DequantizeLinear output -> the float tensor it copies
    for node in graph.node:
        if node.op_type == "DequantizeLinear":
            q = producer.get(node.input[0])
            if q is not None and q.op_type == "QuantizeLinear":
                float_of[node.output[0]] = q.input[0]
    changed = 0
    for node in graph.node:
        if node.op_type in _QDQ or (node.op_type in types and node.name not in skip):
            continue
        for i, name in enumerate(node.input):
            if name in float_of:
                node.input[i] = float_of[name]
                changed += 1
    if not changed:
        return 0
    outputs = {o.name for o in graph.output}
    while True:  # a Q/DQ pair that only the given-back nodes read: gone
        read = {name for node in graph.node for name in node.input} | outputs
        dead = [n for n in graph.node if n.op_type in _QDQ and not any(o in read for o in n.output)]
        if not dead:
            break
        for node in dead:
            graph.node.remove(node)
    onnx.save(model, str(path))
    return changed
