"""Estimate floating-point operations per node from the shapes in an ORT profile.

The profile holds no attributes (transA, group, kernel_shape, num_heads) and leaves out
inputs whose buffers are gone (pre-packed weights, omitted optional inputs), so every
formula below works from what is reliably there: the first input and the outputs, plus
the weight where ORT lists it. A multiply-add counts as 2 FLOPs. Unknown ops give None,
never 0: "not modelled" and "moves data only" are different answers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

Shape = tuple[int, ...]
TypedShapes = Sequence[tuple[str, Shape]]
Rule = Callable[[list[Shape], list[Shape]], int | None]
CONV_OPS = frozenset(
    ("Conv", "ConvInteger", "FusedConv", "NchwcConv", "QLinearConv", "NhwcConv", "NhwcFusedConv")
)


def _elems(shape: Shape) -> int:
    return math.prod(shape)


def _matmul(ins: list[Shape], outs: list[Shape]) -> int | None:
    """2 * out_elems * K; K from A alone (B is often pre-packed and missing), so a batched,
    broadcast or transposed A (FusedMatMul transA) all work: K = A's matrix size / M."""
    if not ins or not outs:
        return None
    a, out = ins[0], outs[0]
    if len(a) <= 1:  # vector @ matrix
        k = a[0] if a else 1
    elif len(out) < len(a) or len(out) < 2:  # matrix @ vector drops the last dim
        k = a[-1]
    else:
        m = out[-2]
        k = a[-1] * a[-2] // m if m and (a[-1] * a[-2]) % m == 0 else a[-1]
    return 2 * _elems(out) * k


def _gemm(ins: list[Shape], outs: list[Shape]) -> int | None:
    """2*M*N*K + M*N with a bias; K = size(A) / M since transA is unknown. B and C cannot be
    told apart by position (B may be pre-packed), so a 2-D input with dims {K, N} is B and
    anything else after A is the bias C."""
    if not ins or not outs or len(outs[0]) != 2:
        return None
    m, n = outs[0]
    if m == 0 or _elems(ins[0]) % m:
        return None
    k = _elems(ins[0]) // m
    rest = ins[1:]
    has_bias = len(rest) >= 2 or (
        len(rest) == 1 and not (len(rest[0]) == 2 and sorted(rest[0]) == sorted((k, n)))
    )
    return 2 * m * n * k + (m * n if has_bias else 0)


def _conv_weight(ins: list[Shape], out: Shape, channels: int) -> int | None:
    """Index of the first input after X of X's rank whose first dim is `channels` and which is
    not shaped like the output (NCHWc Conv carries a fused Sum input shaped like the output)."""
    for i, shape in enumerate(ins[1:], start=1):
        if len(shape) == len(ins[0]) and shape and shape[0] == channels and shape != out:
            return i
    return None


def _extras(ins: list[Shape], out: Shape, weight: int) -> int:
    """+1 per output element for a 1-D bias of C_out, +1 for a fused Sum shaped like out
    (QLinearConv's per-channel scale and zero point look like biases: a negligible excess)."""
    c_out = out[1] if len(out) > 1 else 0
    extra = 0
    for i, shape in enumerate(ins[1:], start=1):
        if i == weight:
            continue
        if shape == out or (len(shape) == 1 and c_out and shape[0] == c_out):
            extra += _elems(out)
    return extra


def _conv(ins: list[Shape], outs: list[Shape]) -> int | None:
    """2 * out_elems * (C_in/group) * prod(kernel), with W = [C_out, C_in/group, kH, kW];
    plus out_elems for a bias and for NCHWc's fused Sum; fused activations are not counted."""
    if not ins or not outs or len(outs[0]) < 3:
        return None
    out = outs[0]
    weight = _conv_weight(ins, out, out[1])
    if weight is None:
        return None
    return 2 * _elems(out) * _elems(ins[weight][1:]) + _extras(ins, out, weight)


def _conv_transpose(ins: list[Shape], outs: list[Shape]) -> int | None:
    """2 * in_elems * (C_out/group) * prod(kernel), with W = [C_in, C_out/group, kH, kW];
    plus out_elems for a bias."""
    if not ins or not outs or len(ins[0]) < 3:
        return None
    x, out = ins[0], outs[0]
    weight = _conv_weight(ins, out, x[1])
    if weight is None:
        return None
    return 2 * _elems(x) * _elems(ins[weight][1:]) + _extras(ins, out, weight)


def _kv_length(ins: list[Shape], outs: list[Shape], s: int) -> int:
    """Total key length: from present_key ([B, H, T, D], ORT's second output) when there is
    one, else a separate key input ([B, L, hidden] or BNSH [B, H, L, D]), else L = S."""
    if len(outs) > 1 and len(outs[1]) == 4:
        return outs[1][2]
    if len(outs) > 1 and len(outs[1]) == 5:  # Attention's present: [2, B, H, T, D]
        return outs[1][3]
    if len(ins) > 1 and len(ins[1]) in (3, 4) and ins[1][0] == ins[0][0]:
        return ins[1][1] if len(ins[1]) == 3 else ins[1][2]
    return s


def _attention_core(ins: list[Shape], outs: list[Shape]) -> int | None:
    """Scores QK^T and context PV: 2*B*H*S*T*D each = 4*B*S*T*hidden (H*D = hidden, so the
    head count is not needed); softmax (needs H) and masking are not counted; no causal
    halving. Used as-is for MultiHeadAttention and GroupQueryAttention (inputs projected)."""
    if not ins or not outs or len(outs[0]) != 3 or len(ins[0]) < 3:
        return None
    b, s, hidden = outs[0]
    return 4 * b * s * _kv_length(ins, outs, s) * hidden


def _attention(ins: list[Shape], outs: list[Shape]) -> int | None:
    """com.microsoft Attention: the core above plus its fused QKV projection,
    2*B*S*hidden_in*3*hidden (+3*B*S*hidden for the bias); assumes equal Q, K, V sizes."""
    core = _attention_core(ins, outs)
    if core is None:
        return None
    b, s, hidden = outs[0]
    hidden_in = ins[0][-1]
    return core + 2 * b * s * hidden_in * 3 * hidden + 3 * b * s * hidden


def _per_output(factor: int) -> Rule:
    """`factor` FLOPs per element of the first output."""
    return lambda ins, outs: factor * _elems(outs[0]) if outs else None


def _per_input(factor: int) -> Rule:
    """`factor` FLOPs per element of the first input (reductions, pooling)."""
    return lambda ins, outs: factor * _elems(ins[0]) if ins else None


def _zero(ins: list[Shape], outs: list[Shape]) -> int | None:
    """Data movement, layout, copies and control flow (whose bodies are counted on their own)."""
    return 0


_ELEMENTWISE = (  # 1 FLOP per output element
    "Add Sub Mul Div Pow Sqrt Exp Log Abs Neg Reciprocal Relu LeakyRelu PRelu Elu Selu Celu "
    "Sigmoid HardSigmoid HardSwish Tanh Erf Sin Cos Tan Asin Acos Atan Sinh Cosh Floor Ceil "
    "Round Sign Clip Min Max Mean Sum Where Equal Less Greater LessOrEqual GreaterOrEqual And "
    "Or Xor Not Mod BitShift IsNaN IsInf Softplus Softsign ThresholdedRelu Shrink BiasAdd "
    "CumSum Mish"
)
_DATA_MOVEMENT = (  # 0 FLOPs
    "Reshape Transpose Gather GatherElements GatherND Concat Slice Split Cast CastLike Squeeze "
    "Unsqueeze Flatten Identity Expand Tile Pad Shape Size ConstantOfShape Range Dropout "
    "DepthToSpace SpaceToDepth ScatterND ScatterElements NonZero Trilu OneHot Compress "
    "EyeLike ReorderInput ReorderOutput MemcpyToHost MemcpyFromHost If Loop Scan "
    "SequenceAt SequenceConstruct SequenceInsert SplitToSequence ConcatFromSequence"
)
_REDUCTIONS = (  # ~1 FLOP per input element
    "ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd ReduceSumSquare ReduceL1 ReduceL2 "
    "ReduceLogSum ReduceLogSumExp ArgMax ArgMin MaxPool AveragePool GlobalAveragePool "
    "GlobalMaxPool LpPool GlobalLpPool"
)

RULES: dict[str, Rule] = {
    **{op: _per_output(1) for op in _ELEMENTWISE.split()},
    **{op: _zero for op in _DATA_MOVEMENT.split()},
    **{op: _per_input(1) for op in _REDUCTIONS.split()},
    **dict.fromkeys(("MatMul", "MatMulInteger", "FusedMatMul", "QLinearMatMul"), _matmul),
    **dict.fromkeys(("MatMulNBits", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"), _matmul),
    **dict.fromkeys(("Gemm", "FusedGemm"), _gemm),
    **dict.fromkeys(("Conv", "ConvInteger", "FusedConv", "NchwcConv"), _conv),
    "QLinearConv": _conv,  # untyped fallback; node_flops tells scales from the bias by type
    "QGemm": _gemm,
    **dict.fromkeys(("NhwcConv", "NhwcFusedConv"), _conv),
    "GemmFastGelu": _gemm,
    "ConvTranspose": _conv_transpose,
    **dict.fromkeys(("Attention", "QAttention"), _attention),
    **dict.fromkeys(
        (
            "MultiHeadAttention",
            "GroupQueryAttention",
            "PackedMultiHeadAttention",
            "DecoderMaskedMultiHeadAttention",
            "SparseAttention",
        ),
        _attention_core,
    ),
    # quantized elementwise and pooling: the float op's count (the scaling is not counted,
    # as for QLinearConv: an INT8 op and its float original do the same work)
    **dict.fromkeys(
        (
            "QLinearAdd",
            "QLinearMul",
            "QLinearSigmoid",
            "QLinearLeakyRelu",
            "QLinearWhere",
            "BiasDropout",
            "BitmaskBiasDropout",
        ),
        _per_output(1),
    ),
    **dict.fromkeys(
        (
            "NhwcMaxPool",
            "QLinearAveragePool",
            "QLinearGlobalAveragePool",
            "QLinearReduceMean",
        ),
        _per_input(1),
    ),
    **dict.fromkeys(("QLinearConcat", "QLinearTranspose", "QLinearReshape"), _zero),
    # tanh-approximated GELU: ~8 FLOPs per element (cube, scale, add, tanh, mul, add, mul)
    **dict.fromkeys(
        ("Gelu", "FastGelu", "BiasGelu", "QuickGelu", "BiasSplitGelu", "QGelu"), _per_output(8)
    ),
    # max, subtract, exp, sum, divide: ~5 per element
    **dict.fromkeys(("Softmax", "LogSoftmax", "QLinearSoftmax", "BiasSoftmax"), _per_output(5)),
    # rotate-half and scale: ~3 per element (two multiplies, one add)
    "RotaryEmbedding": _per_output(3),
    # mean, centre, square, variance, rsqrt, scale, shift: ~8 per element
    **dict.fromkeys(
        (
            "LayerNormalization",
            "SkipLayerNormalization",
            "InstanceNormalization",
            "GroupNormalization",
            "GroupNorm",
            "SkipGroupNorm",
            "EmbedLayerNormalization",
            "QEmbedLayerNormalization",
        ),
        _per_output(8),
    ),
    # RMS norms skip the mean: square, sum, rsqrt, scale, (skip add): ~5 per element
    **dict.fromkeys(
        ("SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization", "RMSNormalization"),
        _per_output(5),
    ),
    # inference BatchNorm with stored statistics: subtract, divide, scale, shift (+eps): ~5
    "BatchNormalization": _per_output(5),
    # scale, round, add zero point, clip: ~2-4 per element
    **dict.fromkeys(("QuantizeLinear", "DequantizeLinear"), _per_output(2)),
    "DynamicQuantizeLinear": _per_output(4),
}


def conv_with_weight(input_shapes: TypedShapes, out: Shape, weight: Shape) -> int | None:
    """A convolution whose weight ORT pre-packed and left out of the profile (QLinearConv,
    and layouts ORT changed to NHWC): 2 * out_elems * prod(W[1:]) from the weight's shape in
    the model file, + out_elems for a bias. The bias is a listed 1-D input of C_out = W[0]
    that is not a scale or zero point (QLinearConv's bias is int32; a float Conv's bias is
    its third input), so an INT8 convolution counts exactly what its float original does."""
    if len(weight) < 3 or not out:
        return None
    c_out = weight[0]
    quantized = any(dtype in ("uint8", "int8") for dtype, _ in input_shapes[:1])
    bias = any(
        len(shape) == 1
        and shape[0] == c_out
        and (dtype == "int32" if quantized else dtype not in ("uint8", "int8"))
        for dtype, shape in input_shapes[1:]
    )
    return 2 * _elems(out) * _elems(weight[1:]) + (_elems(out) if bias else 0)


def _qlinear_conv(
    ins: list[tuple[str, Shape]], outs: list[Shape], weight: Shape | None
) -> int | None:
    """QLinearConv: the weight is the first input of X's rank after X (when listed),
    else the model file's; counted as its float Conv."""
    if not ins or not outs:
        return None
    listed = next((shape for _, shape in ins[1:] if len(shape) == len(ins[0][1])), None)
    w = listed or weight
    return None if w is None else conv_with_weight(ins, outs[0], tuple(w))


def _qgemm(ins: list[tuple[str, Shape]], outs: list[Shape]) -> int | None:
    """QGemm: 2*M*N*K (+M*N for its int32 bias, told apart from scales by its type)."""
    if not ins or not outs or len(outs[0]) != 2:
        return None
    m, n = outs[0]
    a = _elems(ins[0][1])
    if m == 0 or a % m:
        return None
    bias = any(dtype == "int32" for dtype, _ in ins[1:])
    return 2 * m * n * (a // m) + (m * n if bias else 0)


def node_flops(
    op_type: str,
    input_shapes: TypedShapes,
    output_shapes: TypedShapes,
    weight: Shape | None = None,
) -> int | None:
    """FLOPs of one execution of `op_type` given ORT's (dtype, shape) lists; None if unknown.
    `weight` is a convolution's weight shape from the model file (`engine.model.weights`),
    used when the profile does not list it."""
    rule = RULES.get(op_type)
    if rule is None:
        return None
    ins = [tuple(shape) for _, shape in input_shapes]
    outs = [tuple(shape) for _, shape in output_shapes]
    typed = [(dtype, tuple(shape)) for dtype, shape in input_shapes]
    try:
        if op_type == "QLinearConv":  # scales and zero points would pass for biases
            return _qlinear_conv(typed, outs, weight)
        if op_type == "QGemm":
            return _qgemm(typed, outs)
        flops = rule(ins, outs)
        if flops is None and weight is not None and op_type in CONV_OPS and outs:
            flops = conv_with_weight(typed, outs[0], tuple(weight))
        return flops
    except (IndexError, ZeroDivisionError):  # shapes missing the dims a formula needs
        return None
