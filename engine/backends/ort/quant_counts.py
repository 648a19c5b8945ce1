"""How many nodes an INT8 variant quantized, by op type and mode, and what that reads as:
the summary a run shows, a build that quantized nothing refused in one line (no-ops were
called INT8), the op types left in float named."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.backends.ort.activation_matmuls import activation_matmuls
from engine.model.info import ModelInfo

QUANTIZED_OPS = {  # what ONNX Runtime's quantizers leave in a graph they changed
    "DynamicQuantizeLinear", "DynamicQuantizeMatMul", "MatMulInteger", "MatMulIntegerToFloat",
    "ConvInteger", "QAttention", "DynamicQuantizeLSTM", "QuantizeLinear", "QLinearConv",
    "QLinearMatMul", "QGemm",
}  # fmt: skip
DYNAMIC_OPS = ("MatMul", "Gemm", "Attention", "LSTM")  # what dynamic INT8 quantizes
# the order op types are said in (the weighted ones first, then the rest alphabetically)
_FIRST = ("MatMul", "Gemm", "Conv", "ConvTranspose", "Attention", "LSTM")
_FLOATS = {1, 10, 11, 16}  # TensorProto FLOAT, FLOAT16, DOUBLE, BFLOAT16
# cache key -> the line of a build that quantized nothing, for the next ask in this process
REFUSED: dict[str, str] = {}


def quantized_nodes(path: Path) -> int:
    """Nodes of the quantizers' op types in a built variant (0: nothing was quantized)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return sum(1 for n in graph.node if n.op_type in QUANTIZED_OPS)


def counted_types(precision: str, params: dict[str, Any], src: Path) -> list[str]:
    """The op types an INT8 build was asked to quantize: its `op_types`, else ORT's own
    default (dynamic: the integer-op registry; static: what its quantizer of that format
    handles and this model has)."""
    from onnxruntime.quantization.registry import (
        IntegerOpsRegistry,
        QDQRegistry,
        QLinearOpsRegistry,
    )

    if params.get("op_types"):
        return list(dict.fromkeys(params["op_types"]))
    if precision == "int8-dynamic":
        return sorted(IntegerOpsRegistry)
    registry = QDQRegistry if params.get("format", "QDQ") == "QDQ" else QLinearOpsRegistry
    present = {n.op_type for n in _graph(src).node}
    return sorted(t for t in registry if t in present)


def _graph(path: Path) -> Any:
    import onnx

    return onnx.load(str(path), load_external_data=False).graph


def quantized_counts(
    src: Path, out: Path, op_types: Sequence[str], params: dict[str, Any] | None = None
) -> dict[str, list[int]]:
    """For each of `op_types`, [quantized, present]: how many of the nodes of that type in
    `src` (the model the quantizer read) came out quantized in `out`. A node is quantized
    when it is gone from `out`, replaced by the quantizer's ops (dynamic: MatMulInteger,
    DynamicQuantizeMatMul, ConvInteger...; QOperator: QLinear* between Q and DQ), or when it
    is still there but reads its weights (or, without weights, its inputs) through
    DequantizeLinear (QDQ). Nodes kept in FP32 (`nodes_to_exclude`) never count."""
    before, after = _graph(src), _graph(out)
    excluded = set((params or {}).get("nodes_to_exclude") or ())
    constant = {t.name: t.data_type for t in before.initializer}
    for n in before.node:
        if n.op_type == "Constant" and n.output:
            attr = n.attribute[0] if len(n.attribute) == 1 else None
            constant[n.output[0]] = (
                attr.t.data_type if attr is not None and attr.name == "value" else 1
            )
    had = {o for n in before.node for o in n.output} | {i.name for i in before.input}
    had |= {t.name for t in before.initializer}
    by_name = {n.name: n for n in after.node if n.name}
    made_by = {o: n for n in after.node for o in n.output if o}
    was_dq = {o for n in before.node if n.op_type == "DequantizeLinear" for o in n.output}

    def quant_ops(graph: Any) -> int:
        return sum(
            n.op_type in QUANTIZED_OPS or n.op_type == "DequantizeLinear" for n in graph.node
        )

    changed = quant_ops(after) > quant_ops(before)  # the quantizer added some

    def dequantized(name: str) -> bool:
        node = made_by.get(name)
        return node is not None and node.op_type == "DequantizeLinear"

    def replaced(first: str) -> bool:
        """Whether the ops that now make this output, back to the tensors the source model
        had (the node's inputs: never into the nodes before it), are the quantizer's."""
        seen, todo = set(), [(first, 0)]
        while todo:
            name, depth = todo.pop()
            node = made_by.get(name)
            if node is None or id(node) in seen or depth > 8:
                continue
            seen.add(id(node))
            if node.op_type in QUANTIZED_OPS or node.op_type == "DequantizeLinear":
                return True
            todo += [(i, depth + 1) for i in node.input if i and i not in had]
        return False

    def quantized(node: Any) -> bool:
        if node.name and node.name in excluded:
            return False
        same = by_name.get(node.name) if node.name else None
        if same is None or same.op_type != node.op_type:
            first = node.output[0] if node.output else ""
            made = made_by.get(first)
            if made is not None and made.op_type == node.op_type:
                same = made
            elif made is None:  # its output is gone: removed by the quantizer (QDQ Relu)
                return changed
            else:
                return replaced(first)
        weights = [i for i, name in enumerate(node.input)
                   if name and constant.get(name) in _FLOATS]  # fmt: skip
        look = weights or [i for i, name in enumerate(node.input) if name]
        return any(
            i < len(same.input) and dequantized(same.input[i]) and node.input[i] not in was_dq
            for i in look
        )  # (a model quantized already reads DequantizeLinear outputs of its own)

    counts: dict[str, list[int]] = {t: [0, 0] for t in op_types}
    for node in before.node:
        if node.op_type in counts:
            counts[node.op_type][1] += 1
            counts[node.op_type][0] += quantized(node)
    return counts


def _ordered(counts: dict[str, Any]) -> list[str]:
    """The weighted op types first, the most numerous first; then the rest by name."""

    def key(t: str) -> tuple[int, int, str]:
        weighted = t in _FIRST
        return (0 if weighted else 1, -int(counts[t][1]) if weighted else 0, t)

    return sorted(counts, key=key)


def _said(counts: dict[str, Any]) -> str:
    """'12 of 13 MatMul, 0 of 2 Gemm': the op types present."""
    return ", ".join(f"{counts[t][0]} of {counts[t][1]} {t}" for t in _ordered(counts)
                     if counts[t][1])  # fmt: skip


def quantized_summary(meta: dict[str, Any]) -> str:
    """One short line of what an INT8 build quantized: '12 of 13 MatMul, 0 of 2 Gemm
    quantized' (the op types the model has; static INT8's other op types, Relu, MaxPool,
    Reshape..., as one count after them); '' for a variant that says nothing of it."""
    counts = meta.get("quantized")
    if isinstance(counts, dict):
        present = {t: v for t, v in counts.items()
                   if isinstance(v, list | tuple) and len(v) == 2 and v[1]}  # fmt: skip
        main = [t for t in present if t in _FIRST] or list(present)
        rest = [t for t in present if t not in main]
        if main:
            line = f"{_said({t: present[t] for t in main})} quantized"
            if rest:
                q, n = (sum(present[t][i] for t in rest) for i in (0, 1))
                line += f" (and {q} of {n} other nodes)"
            return line
    if isinstance(meta.get("quantized_nodes"), int):
        return f"{meta['quantized_nodes']} node(s) quantized"
    return ""


def _mode(precision: str) -> str:
    return precision.removeprefix("int8-")


def _listed(types: Sequence[str]) -> str:
    types = list(types)
    return ", ".join(types[:-1]) + f" and {types[-1]}" if len(types) > 1 else "".join(types)


def zero_quantized(
    precision: str,
    params: dict[str, Any],
    src: Path,
    counts: dict[str, list[int]],
) -> str:
    """Why an INT8 build quantized nothing, in one line (the error that refuses it)."""
    mode = _mode(precision)
    asked = list(counts)  # in the order they were asked for
    graph = _graph(src)
    if not any(n for _, n in counts.values()):
        convs = sum(1 for n in graph.node if n.op_type == "Conv")
        if precision == "int8-dynamic" and convs:
            return (
                f"INT8 dynamic quantized 0 of {convs} Conv: dynamic INT8 quantizes "
                f"{_listed(asked)} only; try INT8 static"
            )
        if not asked or len(asked) > 6:  # static's every op type: the main ones
            said = ", ".join([*(asked[:3] or ["MatMul", "Gemm", "Conv"]), "..."])
        else:
            said = _listed(asked)
        return (
            f"INT8 {mode} quantized nothing: this model has no node INT8 {mode} can "
            f"quantize ({said})"
        )
    head = f"INT8 {mode} quantized {_said(counts)}"
    nodes = [n for n in graph.node if counts.get(n.op_type, [0, 0])[1]]
    excluded = set(params.get("nodes_to_exclude") or ())
    if nodes and all(n.name in excluded for n in nodes):
        return f"{head}: every one of them is kept in FP32 (nodes to exclude)"
    inits = {t.name for t in graph.initializer}
    made_by = {o: n for n in graph.node for o in n.output if o}
    if any(n.op_type in QUANTIZED_OPS or n.op_type == "DequantizeLinear" for n in graph.node):
        return (
            f"{head}: this model is quantized already (it has QuantizeLinear/DequantizeLinear "
            "or integer ops); run it at its own precision (FP32)"
        )
    if not any(i in inits for n in nodes for i in n.input):
        fed = [made_by.get(i) for n in nodes for i in n.input[1:2]]
        if fed and all(m is not None and m.op_type == "Constant" for m in fed):
            return f"{head}: their weights are Constant nodes"
        if precision == "int8-dynamic":
            return (
                f"{head}: their weights are computed in the graph, not stored as "
                "initializers (dynamic INT8 quantizes stored weights only)"
            )
    return f"{head}: ONNX Runtime's quantizer left them in FP32"


def all_excluded(params: dict[str, Any], src: Path, counts: dict[str, list[int]]) -> bool:
    """Whether every node INT8 could quantize here was kept in FP32 on purpose (a search's
    attempt with all of them excluded: its own choice, not a build that failed)."""
    excluded = set(params.get("nodes_to_exclude") or ())
    if not excluded:
        return False
    if not params.get("activation_matmuls", True):
        excluded |= set(activation_matmuls(src))
    nodes = [n for n in _graph(src).node if counts.get(n.op_type, [0, 0])[1]]
    return bool(nodes) and all(n.name in excluded for n in nodes)


def refusal_line(meta: dict[str, Any]) -> str:
    """The line for a cached build that quantized nothing (an older builder kept them)."""
    mode = _mode(str(meta.get("precision", "int8")))
    counts = meta.get("quantized")
    said = _said(counts) if isinstance(counts, dict) and _said(counts) else "0 nodes"
    return f"INT8 {mode} quantized {said}: this run would be the FP32 model"


def nothing_quantized(meta: dict[str, Any], info: ModelInfo) -> str | None:
    """A warning when INT8 dynamic leaves the model's convolutions in FP32: it quantizes
    MatMul, Gemm, Attention and LSTM only, so a convolutional network runs its Conv in FP32
    under the INT8 name (a real but partial INT8: a build that quantized nothing at all is
    refused instead)."""
    if meta.get("precision") != "int8-dynamic" or not meta.get("quantized_nodes"):
        return None
    counts = meta.get("quantized") or {}
    if "Conv" in counts:  # asked to quantize Conv too (settings): the counts say it
        return None
    convs = sum(n for op, n in info.op_types.items() if op.split(".")[-1] == "Conv")
    if not convs:
        return None
    return (
        f"0 of {convs} Conv quantized: INT8 dynamic quantizes MatMul, Gemm, Attention and "
        f"LSTM only ({quantized_summary(meta) or 'the rest'}), so the Conv run in FP32; "
        "try INT8 static"
    )
