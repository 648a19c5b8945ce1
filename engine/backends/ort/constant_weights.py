"""Constant nodes turned into initializers, so ONNX Runtime's quantizers see them as weights.

Exporters (PaddlePaddle's among them) may write a MatMul's weights as a `Constant` node
instead of an initializer. ORT's quantizers quantize a weight only when it is an initializer:
a text recognizer whose 13 MatMuls read Constant weights came out of INT8 dynamic with none
of them quantized. ORT's pre-processing folds them when it runs; when it gives up (symbolic
shape inference fails), this does it.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def fold_constants(model: Any) -> int:
    """Move the main graph's Constant nodes whose value is a tensor (`value`, `value_float(s)`,
    `value_int(s)`) into its initializers, under the same name, and remove the nodes; the
    number moved. Subgraphs are left alone (they read the main graph's initializers anyway);
    a Constant that is a graph output, or whose name is an initializer already, stays; the
    folded tensors' value_info entries go."""
    from onnx import numpy_helper

    if model.ir_version < 4:  # initializers had to be graph inputs too then
        return 0
    graph = model.graph
    taken = {t.name for t in graph.initializer} | {o.name for o in graph.output}
    kept, folded = [], []
    for node in graph.node:
        tensor = None
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.output) == 1:
            name = node.output[0]
            if name and name not in taken:
                tensor = _tensor(node, name, numpy_helper)
        if tensor is None:
            kept.append(node)
        else:
            folded.append(tensor)
            taken.add(tensor.name)
    if folded:
        del graph.node[:]
        graph.node.extend(kept)
        graph.initializer.extend(folded)
        # no value_info for initializers: the quantizer's edits (Gemm -> transposed MatMul
        # weights) would leave it stale, which fails shape inference
        names = {t.name for t in folded}
        infos = [v for v in graph.value_info if v.name not in names]
        del graph.value_info[:]
        graph.value_info.extend(infos)
    return len(folded)


def _tensor(node: Any, name: str, numpy_helper: Any) -> Any:
    """The Constant's value as a named TensorProto, or None (sparse, strings, attribute refs)."""
    if len(node.attribute) != 1 or node.attribute[0].ref_attr_name:
        return None
    attr = node.attribute[0]
    if attr.name == "value":
        tensor = type(attr.t)()
        tensor.CopyFrom(attr.t)
        tensor.name = name
        return tensor
    if attr.name == "value_float":
        array = np.array(attr.f, np.float32)
    elif attr.name == "value_floats":
        array = np.array(list(attr.floats), np.float32)
    elif attr.name == "value_int":
        array = np.array(attr.i, np.int64)
    elif attr.name == "value_ints":
        array = np.array(list(attr.ints), np.int64)
    else:
        return None
    return numpy_helper.from_array(array, name)
