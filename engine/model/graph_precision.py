"""Each node's precision as it runs, for the graph view's precision overlay: INT8 (an
integer kernel), Q/DQ (a quantize or dequantize node the INT8 variant inserted), FP32 kept
(a node the accuracy target kept in FP32), or its output's float type ('other': integer
and boolean work such as shape arithmetic)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from engine.model.graph_view import GraphNode, Tensor

INT8_OPS = frozenset(
    {
        "QLinearConv",
        "QLinearMatMul",
        "QLinearAdd",
        "QLinearMul",
        "QLinearSigmoid",
        "QLinearLeakyRelu",
        "QLinearAveragePool",
        "QLinearGlobalAveragePool",
        "QLinearConcat",
        "QLinearSoftmax",
        "QLinearReduceMean",
        "QLinearWhere",
        "QGemm",
        "QAttention",
        "MatMulInteger",
        "ConvInteger",
        "MatMulIntegerToFloat",
        "DynamicQuantizeMatMul",
        "DynamicQuantizeLinear",
        "DynamicQuantizeLSTM",
        "QOrderedMatMul",
    }
)
QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
KEPT = "FP32 kept"
LABELS = ("INT8", "Q/DQ", KEPT, "FP32", "FP16", "BF16", "other", "unknown")


def precisions(
    nodes: Sequence[GraphNode],
    tensors: Mapping[str, Tensor],
    kept_fp32: Iterable[str] = (),
    origins: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, str]:
    """{node: one of LABELS}. `kept_fp32` names the loaded nodes the INT8 search left in
    FP32; a run node counts as kept when it is one of them or replaced one (`origins`)."""
    kept = set(kept_fp32)
    out: dict[str, str] = {}
    for n in nodes:
        if n.op_type in INT8_OPS:
            out[n.name] = "INT8"
        elif n.op_type in QDQ_OPS:
            out[n.name] = "Q/DQ"
        elif kept and (n.name in kept or kept & set((origins or {}).get(n.name, ()))):
            out[n.name] = KEPT
        else:
            out[n.name] = _float_kind(n, tensors)
    return out


def _float_kind(n: GraphNode, tensors: Mapping[str, Tensor]) -> str:
    kinds = {tensors[t].dtype for t in n.outputs if t in tensors}
    for dtype, label in (("float16", "FP16"), ("bfloat16", "BF16"), ("float32", "FP32")):
        if dtype in kinds:
            return label
    return "other" if kinds - {"?"} else "unknown"
