"""Op families: what kind of work an op does, so ONNX Runtime and PyTorch runs of one model
can be compared op type by op type, and so can a float run and its quantized variant (Conv
and QLinearConv are both "conv", MatMul and DynamicQuantizeMatMul both "matmul").

ONNX Runtime reports ONNX and contrib op types (`Gemm`, `FusedMatMul`, `SkipLayerNormalization`),
PyTorch reports aten ops (`aten::linear`, `aten::layer_norm`). Neither names the other's, so a
comparison across engines groups both into families (matmul, conv, attention, normalization,
...). An op in no family keeps its own name, so nothing is hidden.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

FAMILIES: dict[str, tuple[str, ...]] = {
    "matmul": (
        "Gemm",
        "MatMul",
        "FusedMatMul",
        "FusedGemm",
        "MatMulInteger",
        "MatMulIntegerToFloat",
        "DynamicQuantizeMatMul",
        "QLinearMatMul",
        "QGemm",
        "MatMulNBits",
        "MatMulFpQ4",
        "aten::linear",
        "aten::addmm",
        "aten::mm",
        "aten::matmul",
        "aten::bmm",
        "aten::baddbmm",
        "aten::_int_mm",
        "quantized::linear_dynamic",
        "quantized::linear",
        "aten::einsum",
    ),
    "conv": (
        "Conv",
        "FusedConv",
        "QLinearConv",
        "ConvInteger",
        "ConvTranspose",
        "NhwcConv",
        "NhwcFusedConv",
        "NchwcConv",
        "aten::conv1d",
        "aten::conv2d",
        "aten::conv3d",
        "aten::convolution",
        "aten::_convolution",
        "aten::mkldnn_convolution",
        "aten::conv_transpose2d",
    ),
    "attention": (
        "Attention",
        "MultiHeadAttention",
        "GroupQueryAttention",
        "QAttention",
        "PackedMultiHeadAttention",
        "DecoderMaskedMultiHeadAttention",
        "SparseAttention",
        "aten::scaled_dot_product_attention",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_flash_attention",
    ),
    "softmax": (
        "Softmax",
        "LogSoftmax",
        "QLinearSoftmax",
        "BiasSoftmax",
        "aten::softmax",
        "aten::_softmax",
        "aten::log_softmax",
    ),
    "normalization": (
        "LayerNormalization",
        "SkipLayerNormalization",
        "SimplifiedLayerNormalization",
        "SkipSimplifiedLayerNormalization",
        "BatchNormalization",
        "InstanceNormalization",
        "GroupNorm",
        "EmbedLayerNormalization",
        "QEmbedLayerNormalization",
        "SkipGroupNorm",
        "GroupNormalization",
        "aten::layer_norm",
        "aten::native_layer_norm",
        "aten::batch_norm",
        "aten::group_norm",
        "aten::rms_norm",
    ),
    "activation": (
        "Relu",
        "Gelu",
        "FastGelu",
        "BiasGelu",
        "QuickGelu",
        "Sigmoid",
        "Tanh",
        "Erf",
        "Clip",
        "LeakyRelu",
        "HardSigmoid",
        "Mish",
        "QLinearSigmoid",
        "QLinearLeakyRelu",
        "QGelu",
        "aten::relu",
        "aten::relu_",
        "aten::gelu",
        "aten::sigmoid",
        "aten::tanh",
        "aten::silu",
        "aten::hardtanh",
        "aten::clamp",
        "aten::leaky_relu",
        "aten::mish",
    ),
    "elementwise": (
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Pow",
        "Sqrt",
        "Reciprocal",
        "Neg",
        "Exp",
        "BiasAdd",
        "Where",
        "Equal",
        "QLinearAdd",
        "QLinearMul",
        "aten::add",
        "aten::add_",
        "aten::sub",
        "aten::mul",
        "aten::div",
        "aten::pow",
        "aten::sqrt",
        "aten::rsqrt",
        "aten::neg",
        "aten::exp",
        "aten::where",
        "aten::eq",
    ),
    "gather": (
        "Gather",
        "GatherElements",
        "GatherND",
        "aten::embedding",
        "aten::index_select",
        "aten::index",
        "aten::gather",
    ),
    "pooling": (
        "MaxPool",
        "AveragePool",
        "GlobalAveragePool",
        "GlobalMaxPool",
        "ReduceMean",
        "NhwcMaxPool",
        "QLinearAveragePool",
        "QLinearGlobalAveragePool",
        "QLinearReduceMean",
        "aten::max_pool2d",
        "aten::avg_pool2d",
        "aten::adaptive_avg_pool2d",
        "aten::adaptive_max_pool2d",
        "aten::mean",
    ),
    "layout": (
        "Transpose",
        "Reshape",
        "Flatten",
        "Squeeze",
        "Unsqueeze",
        "Concat",
        "Split",
        "Slice",
        "Expand",
        "Cast",
        "Identity",
        "ReorderInput",
        "ReorderOutput",
        "Shape",
        "QLinearConcat",
        "aten::transpose",
        "aten::permute",
        "aten::view",
        "aten::reshape",
        "aten::flatten",
        "aten::contiguous",
        "aten::clone",
        "aten::copy_",
        "aten::cat",
        "aten::split",
        "aten::slice",
        "aten::to",
        "aten::_to_copy",
        "aten::expand",
        "aten::t",
        "aten::unsqueeze",
        "aten::squeeze",
        "aten::select",
    ),
    "quantize": (
        "QuantizeLinear",
        "DequantizeLinear",
        "DynamicQuantizeLinear",
        "aten::quantize_per_tensor",
        "aten::quantize_per_tensor_dynamic",
        "aten::dequantize",
    ),
}
_FAMILY_OF = {op: family for family, ops in FAMILIES.items() for op in ops}

# Ops that change only a tensor's shape, or read it: their output is a view of (or shares
# the buffer of) their input, so their bytes over their time is no bandwidth. Transpose,
# Slice, Expand and Concat copy data in ONNX Runtime and are not here; aten's views are.
SHAPE_ONLY = frozenset({
    "Reshape", "Shape", "Size", "Squeeze", "Unsqueeze", "Flatten", "Identity",
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::_reshape_alias",
    "aten::flatten", "aten::unflatten", "aten::squeeze", "aten::unsqueeze", "aten::t",
    "aten::transpose", "aten::permute", "aten::expand", "aten::select", "aten::slice",
    "aten::detach", "aten::alias", "aten::as_strided", "aten::view_as", "aten::size",
})  # fmt: skip


def is_shape_only(op_type: str) -> bool:
    """An op that moves no data (a reshape, a view, a shape read): no GB/s, no roof."""
    return op_type in SHAPE_ONLY


def op_family(op_type: str) -> str:
    """The family of an op type; an op in none keeps its own name."""
    return _FAMILY_OF.get(op_type, op_type)


def group_by_family(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Op-type rows (time_ms, share, bytes, ...) summed per family. A family row's
    `op_type` lists the op types it holds, largest first."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(op_family(str(row["op_type"])), []).append(row)
    out: list[dict[str, Any]] = []
    for family, members in groups.items():
        members = sorted(members, key=lambda r: -float(r.get("time_ms") or 0.0))
        out.append(
            {
                "name": family,
                "op_type": ", ".join(str(r["op_type"]) for r in members),
                "time_ms": sum(float(r.get("time_ms") or 0.0) for r in members),
                "share": sum(float(r.get("share") or 0.0) for r in members),
                "bytes": sum(int(r.get("bytes") or 0) for r in members),
            }
        )
    return sorted(out, key=lambda r: -float(r["time_ms"]))


_QUANTIZED = re.compile(r"^(QLinear|Q[A-Z]|DynamicQuantize)|Integer|NBits|FpQ4|^quantized::")


def is_quantized(op_type: str) -> bool:
    """An integer or low-bit kernel: QLinearConv, QGemm, QAttention, MatMulInteger,
    DynamicQuantizeMatMul, MatMulNBits, quantized::linear (not Quantize/DequantizeLinear)."""
    return bool(_QUANTIZED.search(op_type)) and op_type not in FAMILIES["quantize"]
