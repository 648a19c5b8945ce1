"""Tensors whose size the model file fixes by itself: a ConstantOfShape (or an Expand)
whose shape is a constant of the file. `ConstantOfShape([2**40])` needs 4.4 TB whatever
the inputs are, and ONNX's own shape inference with data propagation materializes it
before ONNX Runtime is ever asked: refused, in one line, before either runs."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from engine.errors import InputError, ModelError
from engine.model.sizes import check_memory

if TYPE_CHECKING:
    import onnx

# ops whose output shape is their input #1 (Expand) or #0 (ConstantOfShape), read as values
_SHAPE_INPUT = {"ConstantOfShape": 0, "Expand": 1}


def constant_shapes(graph: onnx.GraphProto) -> dict[str, tuple[int, ...]]:
    """The values of the graph's small 1-D int64 constants (initializers and Constant
    nodes): what a ConstantOfShape or Expand reads as its shape."""
    from onnx import numpy_helper

    found: dict[str, tuple[int, ...]] = {}
    tensors = [(t.name, t) for t in graph.initializer]
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.output:
            for attr in node.attribute:
                if attr.name == "value" and attr.HasField("t"):
                    tensors.append((node.output[0], attr.t))
    for name, t in tensors:
        if len(t.dims) != 1 or t.dims[0] > 64 or t.data_location:
            continue
        try:
            values = numpy_helper.to_array(t)
        except Exception:  # a malformed constant: shape inference says so later
            continue
        if values.dtype.kind in "iu":
            found[name] = tuple(int(v) for v in values)
    return found


def largest_constant_output(graph: onnx.GraphProto) -> tuple[float, str]:
    """Bytes of the largest output whose shape is a constant of the file (at least, for
    an Expand: the broadcast only grows it), and the node that makes it ("" when none)."""
    shapes = constant_shapes(graph)
    best, where = 0.0, ""
    for i, node in enumerate(graph.node):
        index = _SHAPE_INPUT.get(node.op_type)
        if index is None or node.domain not in ("", "ai.onnx") or len(node.input) <= index:
            continue
        shape = shapes.get(node.input[index])
        if shape is None:
            continue
        need = float(math.prod(max(d, 0) for d in shape)) * _itemsize(node)
        if need > best:
            best, where = need, f"{node.op_type} {node.name or f'#{i}'}"
    return best, where


def check_constant_outputs(model: onnx.ModelProto, path: str) -> None:
    """Refuse, in one line, a model whose constant-shaped outputs would not fit in memory."""
    need, node = largest_constant_output(model.graph)
    if not node:
        return
    try:
        check_memory(
            need,
            f"its {node} (a shape the file fixes, whatever the inputs)",
            "the model cannot run on this machine",
        )
    except InputError as exc:  # the model's own fault, not its inputs'
        raise ModelError(exc.message, path or None) from None


def _itemsize(node: onnx.NodeProto) -> int:
    """The element size a ConstantOfShape's value attribute gives (float32 by default; an
    Expand's input is unknown here: counted as one byte, a lower bound)."""
    import onnx

    if node.op_type != "ConstantOfShape":
        return 1
    for attr in node.attribute:
        if attr.name == "value" and attr.HasField("t"):
            try:
                return int(onnx.helper.tensor_dtype_to_np_dtype(attr.t.data_type).itemsize)
            except (KeyError, TypeError, ValueError):
                return 1
    return 4
