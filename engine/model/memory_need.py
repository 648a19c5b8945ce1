"""What one inference at given input shapes needs, estimated before anything is allocated:
the inputs' bytes and the largest working set of one node (its inputs and outputs at once,
from ONNX shape inference at those shapes, weights left out), and whether shape inference
finds the sizes cannot agree (a position table of 512 rows added to 10,000,000 tokens).

`sweep --vary sequence=16,10000000` grew to 5.3 GB before ONNX Runtime rejected the size;
every path that makes inputs from a user's sizes (bench --shape/--dim, sweep points, the
window's dims, --inputs files) calls `check_need` first, which refuses in one line."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.errors import InputError, one_line
from engine.model.constant_sizes import check_constant_outputs
from engine.model.data_prop import infer_shapes_bounded
from engine.model.info import ModelInfo
from engine.model.sizes import as_bytes, check_memory, dtype_of, size_text

if TYPE_CHECKING:
    import onnx

Shapes = Mapping[str, tuple[int, ...]]
# a shape inference that tells more than ONNX's (ONNX Runtime's symbolic one, lent through
# engine/backends' shape_inference): a model in, the model with the shapes it told, or None
Refine = Callable[["onnx.ModelProto"], "onnx.ModelProto | None"]
KEEP_VALUES = 4096  # initializers up to this many elements keep their values (shape inputs)
_Key = tuple[int, str, str, tuple[tuple[str, tuple[int, ...]], ...]]
_CACHE: dict[_Key, Need] = {}  # by the model object and file, and the shapes


@dataclass(frozen=True)
class Need:
    inputs: float  # bytes of the inputs
    activations: float  # bytes of the largest node's inputs and outputs (weights left out)
    node: str  # that node, for the message
    conflict: str | None  # shape inference's reason the sizes cannot agree, or None

    @property
    def total(self) -> float:
        return self.inputs + self.activations


def estimate(model: onnx.ModelProto, info: ModelInfo, shapes: Shapes) -> Need:
    """The need of one inference at `shapes` (cached per model and shapes)."""
    key = (
        id(model),
        info.path,
        info.sha256,
        tuple(sorted((k, tuple(v)) for k, v in shapes.items())),
    )
    if key not in _CACHE:
        if len(_CACHE) > 32:
            _CACHE.clear()
        _CACHE[key] = _estimate(model, info, shapes)
    return _CACHE[key]


def _estimate(model: onnx.ModelProto, info: ModelInfo, shapes: Shapes) -> Need:
    inputs = sum(
        float(math.prod(shapes[v.name])) * dtype_of(v).itemsize
        for v in info.inputs
        if v.name in shapes
    )
    check_constant_outputs(model, info.path)  # before shape inference materializes them
    light = at_shapes(model, shapes)
    conflict = None
    try:
        inferred = infer_shapes_bounded(light, strict=True)
    except Exception as exc:  # onnx raises its own kinds: the sizes do not agree
        conflict = one_line(exc)
        try:
            inferred = infer_shapes_bounded(light)
        except Exception:
            return Need(inputs, 0.0, "", conflict)
    activations, node = _largest_node(inferred, {t.name for t in model.graph.initializer})
    return Need(inputs, activations, node, conflict)


def at_shapes(model: onnx.ModelProto, shapes: Shapes) -> onnx.ModelProto:
    """The model's graph at concrete input shapes, with large weights as typed inputs (their
    bytes never copied) and no declared intermediate or output shapes to disagree with."""
    import onnx
    from onnx import helper

    g = model.graph
    ins = []
    for v in g.input:
        t = v.type.tensor_type
        if v.name in shapes and v.type.HasField("tensor_type"):
            ins.append(helper.make_tensor_value_info(v.name, t.elem_type, list(shapes[v.name])))
        else:
            ins.append(v)
    small = []
    for w in g.initializer:
        if math.prod(w.dims) <= KEEP_VALUES and not w.data_location:
            small.append(w)
        else:
            ins.append(helper.make_tensor_value_info(w.name, w.data_type, list(w.dims)))
    outs = [
        helper.make_tensor_value_info(o.name, o.type.tensor_type.elem_type, None)
        if o.type.HasField("tensor_type")
        else o
        for o in g.output
    ]
    graph = helper.make_graph(list(g.node), g.name or "g", ins, outs, small)
    light = helper.make_model(graph, opset_imports=list(model.opset_import))
    light.ir_version = max(model.ir_version, 4)  # initializers need not be inputs
    light.functions.extend(model.functions)
    assert isinstance(light, onnx.ModelProto)
    return light


def inferred_sizes(model: onnx.ModelProto) -> dict[str, float]:
    """Bytes of every tensor whose shape and type `model` declares in full (after shape
    inference: its inputs, value_info and outputs)."""
    from onnx import helper

    sizes: dict[str, float] = {}
    g = model.graph
    for v in (*g.input, *g.value_info, *g.output):
        t = v.type.tensor_type
        if not v.type.HasField("tensor_type") or not t.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        if any(d is None for d in dims):
            continue
        try:
            item = helper.tensor_dtype_to_np_dtype(t.elem_type).itemsize
        except (KeyError, TypeError, ValueError):
            item = 8
        sizes[v.name] = as_bytes(math.prod(d for d in dims if d is not None) * max(item, 1))
    return sizes


def inferred_at(
    model: onnx.ModelProto, shapes: Shapes, refine: Refine | None = None
) -> tuple[onnx.ModelProto | None, onnx.ModelProto | None]:
    """The model at input `shapes` after ONNX's shape inference (None where it fails
    outright), and after `refine` where ONNX's left a node output without a full shape
    (None where it failed, or was not needed: on a 5,200-node model whose shapes ONNX's told
    in full it took 1.6 s to tell nothing more)."""
    check_constant_outputs(model, "")  # before shape inference materializes them
    light = at_shapes(model, shapes)
    plain = None
    with contextlib.suppress(Exception):  # onnx raises its own kinds
        plain = infer_shapes_bounded(light)
    known = inferred_sizes(plain) if plain is not None else {}
    unknown = any(o and o not in known for n in light.graph.node for o in n.output)
    return plain, refine(light) if refine is not None and unknown else None


def sizes_at(
    model: onnx.ModelProto, shapes: Shapes, refine: Refine | None = None
) -> dict[str, float]:
    """Every tensor's bytes that ONNX shape inference, then `refine` where it tells more,
    find at input `shapes` (weights left out; {} when both fail outright)."""
    sizes: dict[str, float] = {}
    for done in inferred_at(model, shapes, refine):
        if done is not None:
            sizes.update(inferred_sizes(done))
    return sizes


def _largest_node(model: onnx.ModelProto, weights: set[str]) -> tuple[float, str]:
    sizes = inferred_sizes(model)
    best, where = 0.0, ""
    for i, n in enumerate(model.graph.node):
        need = sum(sizes.get(x, 0.0) for x in (*n.input, *n.output) if x and x not in weights)
        if need > best:
            best, where = need, f"{n.op_type} {n.name or f'#{i}'}"
    return best, where


def check_need(
    model: onnx.ModelProto,
    info: ModelInfo,
    shapes: Shapes,
    what: str,
    baseline: Shapes | None = None,
) -> Need:
    """Refuse, in one line, shapes whose inference would not fit in memory; with a
    `baseline` (shapes known to agree, e.g. the sweep's other points), also shapes whose
    shape inference fails where the baseline's does not (the model cannot take them)."""
    need = estimate(model, info, shapes)
    if need.conflict and baseline is not None and estimate(model, info, baseline).conflict is None:
        raise InputError(f"{what}: the model cannot take these sizes ({need.conflict})", info.path)
    shown = ", ".join(f"{k} {'x'.join(map(str, s))}" for k, s in shapes.items())
    largest = f" (its largest step {need.node}: {size_text(need.activations)})" if need.node else ""
    check_memory(
        need.total,
        f"{what}: {shown} and one inference{largest}",
        "use smaller shapes or a smaller batch",
        info.path,
    )
    return need


def run_shapes(feeds: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    return {k: tuple(int(d) for d in a.shape) for k, a in feeds.items()}
