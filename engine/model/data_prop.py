"""ONNX shape inference with data propagation, bounded to tensors that can be shapes.

Data propagation (`infer_shapes(data_prop=True)`) carries the values of shape tensors
through Shape, Gather, Concat, Add... so that a Reshape's target is known. ONNX 1.23 does
it for any rank-1 tensor a propagating op reads, whatever its length, at about 1 µs and a
protobuf dim per element, in C++ with the GIL held: an Add fed by `Range(0, 2^31)` took
minutes and gigabytes, silent, deaf to Ctrl-C and SIGTERM (stop 63's probe fuzz, `opscope
memory`). A shape has at most a few dozen elements. So the values of rank-1 tensors longer
than `SHAPE_LIMIT` are hidden from data propagation (their consumers read a stand-in of
unknown length), and their sizes, and all that follows from them, come from a first pass
without data propagation, which costs nothing per element."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx

SHAPE_LIMIT = 4096  # a rank-1 tensor longer than this is data, not a shape
_CUT = "\x00opscope-unpropagated"  # a stand-in's name suffix (no model's name has a NUL)


def infer_shapes_bounded(model: onnx.ModelProto, strict: bool = False) -> onnx.ModelProto:
    """`onnx.shape_inference.infer_shapes(model, strict, data_prop=True)` without
    propagating the values of long rank-1 tensors. Raises what ONNX raises."""
    from onnx import shape_inference

    plain = shape_inference.infer_shapes(model, strict_mode=strict, data_prop=False)
    long = _long_vectors(plain)
    if not long:
        return shape_inference.infer_shapes(model, strict_mode=strict, data_prop=True)
    cut = _cut(model, plain, long)
    told = shape_inference.infer_shapes(cut, strict_mode=strict, data_prop=True)
    return _merged(model, told, plain)


def _static(v: onnx.ValueInfoProto) -> list[int] | None:
    t = v.type.tensor_type
    if not v.type.HasField("tensor_type") or not t.HasField("shape"):
        return None
    dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    return None if any(d is None for d in dims) else [d for d in dims if d is not None]


def _long_vectors(model: onnx.ModelProto) -> set[str]:
    g = model.graph
    long = set()
    for v in (*g.input, *g.value_info, *g.output):
        dims = _static(v)
        if dims is not None and len(dims) == 1 and dims[0] > SHAPE_LIMIT:
            long.add(v.name)
    for t in g.initializer:
        if len(t.dims) == 1 and t.dims[0] > SHAPE_LIMIT:
            long.add(t.name)
    return long


def _cut(model: onnx.ModelProto, plain: onnx.ModelProto, long: set[str]) -> onnx.ModelProto:
    """`model` with each read of a tensor in `long` (in the main graph) replaced by a
    graph input of its type (as `plain`, the first pass, tells it) and an unknown length."""
    import onnx
    from onnx import helper

    types: dict[str, int] = {}
    for v in (*plain.graph.input, *plain.graph.value_info, *plain.graph.output):
        types[v.name] = v.type.tensor_type.elem_type
    for t in plain.graph.initializer:
        types[t.name] = t.data_type
    cut = onnx.ModelProto()
    cut.CopyFrom(model)
    stand_ins: dict[str, str] = {}
    for node in cut.graph.node:
        for i, name in enumerate(node.input):
            if name in long:
                node.input[i] = stand_ins.setdefault(name, name + _CUT)
    for name, stand_in in stand_ins.items():
        elem = types.get(name, onnx.TensorProto.FLOAT)
        cut.graph.input.append(helper.make_tensor_value_info(stand_in, elem, ["unpropagated"]))
    return cut


def _merged(
    model: onnx.ModelProto, told: onnx.ModelProto, plain: onnx.ModelProto
) -> onnx.ModelProto:
    """`model` with the shapes data propagation told where they are static, else the
    first pass's (a long vector's consumers and what follows them)."""
    import onnx

    first = {v.name: v for v in (*plain.graph.value_info, *plain.graph.output)}
    best: dict[str, onnx.ValueInfoProto] = {}
    for v in (*told.graph.value_info, *told.graph.output):
        if v.name.endswith(_CUT):
            continue
        earlier = first.get(v.name)
        best[v.name] = earlier if _static(v) is None and earlier is not None else v
    for name, v in first.items():
        best.setdefault(name, v)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    outputs = {o.name for o in model.graph.output}
    del out.graph.value_info[:]
    out.graph.value_info.extend(v for name, v in best.items() if name not in outputs)
    for o in out.graph.output:
        if o.name in best:
            o.CopyFrom(best[o.name])
    return out
