"""One colour per op type, the same in every launch, every pass and every window.

Common types have fixed colours (a quantized or fused type shares its float original's
hue family but not its colour); any other type gets a palette colour from a hash of its
name (crc32: Python's str hash changes between processes).
"""

from __future__ import annotations

import zlib

FIXED = {
    "Conv": "#4c8bf5",
    "FusedConv": "#2f6fd8",
    "QLinearConv": "#86b0f9",
    "ConvInteger": "#86b0f9",
    "NchwcConv": "#2f6fd8",
    "MatMul": "#e0a325",
    "FusedMatMul": "#c4861a",
    "Gemm": "#f28e2b",
    "FusedGemm": "#d4731a",
    "QGemm": "#f7b46f",
    "MatMulInteger": "#edc948",
    "MatMulIntegerToFloat": "#edc948",
    "DynamicQuantizeMatMul": "#edc948",
    "QLinearMatMul": "#edc948",
    "MatMulNBits": "#b8860b",
    "Attention": "#d1495b",
    "MultiHeadAttention": "#d1495b",
    "GroupQueryAttention": "#a8324a",
    "QAttention": "#e87a89",
    "Softmax": "#ff9da7",
    "LayerNormalization": "#2ca58d",
    "SkipLayerNormalization": "#1f7f6b",
    "SimplifiedLayerNormalization": "#59a14f",
    "SkipSimplifiedLayerNormalization": "#3f7f38",
    "BatchNormalization": "#76b7b2",
    "Add": "#9b6bd3",
    "QLinearAdd": "#bb99e3",
    "Mul": "#7a4fb0",
    "Relu": "#9c755f",
    "Gelu": "#b07aa1",
    "BiasGelu": "#8c5a80",
    "FastGelu": "#8c5a80",
    "MaxPool": "#17becf",
    "NhwcMaxPool": "#5fd6e2",
    "AveragePool": "#0e8c99",
    "GlobalAveragePool": "#0e8c99",
    "ReduceMean": "#6b8e23",
    "QuantizeLinear": "#7f7f7f",
    "DequantizeLinear": "#a5a5a5",
    "DynamicQuantizeLinear": "#8f8f8f",
}
PALETTE = (  # for every other type
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#1f77b4",
    "#2ca02c",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
    "#17becf",
)


def op_type_color(op_type: str) -> str:
    """'#rrggbb' for an op type, stable across runs and processes."""
    fixed = FIXED.get(op_type)
    if fixed is not None:
        return fixed
    return PALETTE[zlib.crc32(op_type.encode("utf-8")) % len(PALETTE)]
