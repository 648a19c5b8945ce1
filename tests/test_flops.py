"""The op-type FLOP model against hand-computed values, with shapes as ORT's profile gives them."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.measure.flops import RULES, node_flops
from engine.measure.op_trace import parse_ort_profile

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def f(*shapes: tuple[int, ...]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """(dtype, shape) pairs as the parser yields them."""
    return tuple(("float", s) for s in shapes)


# --- matrix products -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "ins", "outs", "expected"),
    [
        # B pre-packed, so only A is listed: 2*M*N*K = 2*64*512*256
        ("MatMul", f((64, 256)), f((64, 512)), 16_777_216),
        # both listed, batched A broadcast against 2-D B: 2 * (2*3*8*4) * 16
        ("MatMul", f((2, 3, 8, 16), (16, 4)), f((2, 3, 8, 4)), 6_144),
        # 2-D A broadcast against batched B: 2 * (5*8*4) * 16
        ("MatMul", f((8, 16), (5, 16, 4)), f((5, 8, 4)), 5_120),
        # vector @ matrix and matrix @ vector
        ("MatMul", f((16,), (16, 4)), f((4,)), 2 * 4 * 16),
        ("MatMul", f((8, 16), (16,)), f((8,)), 2 * 8 * 16),
        # FusedMatMul with transA: A is [K, M] = [16, 8]; K still comes out as 16
        ("FusedMatMul", f((16, 8)), f((8, 4)), 2 * 8 * 4 * 16),
        ("MatMulInteger", f((4, 32), (32, 8)), f((4, 8)), 2 * 4 * 8 * 32),
        ("QLinearMatMul", f((4, 32), (), (), (32, 8), (), (), (), ()), f((4, 8)), 2 * 4 * 8 * 32),
    ],
)
def test_matmul_family(op: str, ins: object, outs: object, expected: int) -> None:
    assert node_flops(op, ins, outs) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ins", "outs", "expected"),
    [
        # the fixture's gemm2: B pre-packed, bias C listed: 2*64*128*512 + 64*128
        (f((64, 512), (128,)), f((64, 128)), 8_396_800),
        (f((4, 8), (8, 16)), f((4, 16)), 2 * 4 * 16 * 8),  # B listed, no bias
        (f((4, 8), (16, 8)), f((4, 16)), 2 * 4 * 16 * 8),  # transB
        (f((8, 4), (8, 16)), f((4, 16)), 2 * 4 * 16 * 8),  # transA: K = size(A) / M
        (f((4, 8), (8, 16), (16,)), f((4, 16)), 2 * 4 * 16 * 8 + 4 * 16),  # B and C
        (f((4, 8), (4, 16)), f((4, 16)), 2 * 4 * 16 * 8 + 4 * 16),  # B packed, full-size C
    ],
)
def test_gemm(ins: object, outs: object, expected: int) -> None:
    assert node_flops("Gemm", ins, outs) == expected  # type: ignore[arg-type]
    assert node_flops("FusedGemm", ins, outs) == expected  # type: ignore[arg-type]


# --- convolutions -------------------------------------------------------------------------


def test_conv_with_bias() -> None:
    # the fixture's r1_nchwc: out 1x32x32x32, W [32, 16, 3, 3], bias [32]
    flops = node_flops("Conv", f((1, 16, 32, 32), (32, 16, 3, 3), (32,)), f((1, 32, 32, 32)))
    assert flops == 2 * 32768 * (16 * 9) + 32768 == 9_469_952


def test_nchwc_conv_with_fused_sum() -> None:
    # the fixture's c2_nchwc: the residual Add became a third input shaped like the output
    ins = f((1, 32, 32, 32), (32, 32, 3, 3), (1, 32, 32, 32))
    assert node_flops("Conv", ins, f((1, 32, 32, 32))) == 2 * 32768 * 288 + 32768 == 18_907_136
    assert node_flops("NchwcConv", ins, f((1, 32, 32, 32))) == 18_907_136


def test_grouped_and_1x1_conv() -> None:
    # group=2: W [16, 8, 3, 3] -> C_in/group = 8
    grouped = node_flops("Conv", f((1, 16, 32, 32), (16, 8, 3, 3)), f((1, 16, 32, 32)))
    assert grouped == 2 * 16384 * 72 == 2_359_296
    pointwise = node_flops("FusedConv", f((2, 32, 8, 8), (64, 32, 1, 1)), f((2, 64, 8, 8)))
    assert pointwise == 2 * (2 * 64 * 64) * 32
    conv1d = node_flops("Conv", f((1, 4, 10), (6, 4, 3)), f((1, 6, 8)))
    assert conv1d == 2 * 48 * 12


def test_quantized_convs_find_their_weight() -> None:
    # QLinearConv: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp (scalars have shape ())
    q = f((1, 3, 8, 8), (), (), (4, 3, 3, 3), (), (), (), ())
    assert node_flops("QLinearConv", q, f((1, 4, 6, 6))) == 2 * 144 * 27 == 7_776
    ci = f((1, 3, 8, 8), (4, 3, 3, 3), ())
    assert node_flops("ConvInteger", ci, f((1, 4, 6, 6))) == 7_776


def test_conv_transpose() -> None:
    # x [1, 4, 5, 5], W [C_in=4, C_out/group=2, 3, 3], bias [2]: 2 * 100 * 18 + 98
    ins = f((1, 4, 5, 5), (4, 2, 3, 3), (2,))
    assert node_flops("ConvTranspose", ins, f((1, 2, 7, 7))) == 3_600 + 98


def test_conv_without_a_weight_is_unknown() -> None:
    assert node_flops("Conv", f((1, 3, 8, 8)), f((1, 4, 6, 6))) is None


# --- attention ----------------------------------------------------------------------------


def test_attention_with_qkv_projection() -> None:
    # B=2, S=16, hidden_in=hidden=64: core 4*B*S*S*hidden, projection 2*B*S*64*192, bias
    ins = f((2, 16, 64), (64, 192), (192,))
    core = 4 * 2 * 16 * 16 * 64
    assert node_flops("Attention", ins, f((2, 16, 64))) == core + 786_432 + 6_144
    # with past: present [2, B, H, T, D] gives the total key length T = 20
    with_past = node_flops("Attention", ins, f((2, 16, 64), (2, 2, 4, 20, 16)))
    assert with_past == 4 * 2 * 16 * 20 * 64 + 786_432 + 6_144


def test_multi_head_and_group_query_attention() -> None:
    q, out = (1, 10, 32), (1, 10, 32)
    expected = 4 * 1 * 10 * 20 * 32  # scores and context, L = 20 keys
    assert node_flops("MultiHeadAttention", f(q, (1, 20, 32), (1, 20, 32)), f(out)) == expected
    assert node_flops("MultiHeadAttention", f(q, (1, 4, 20, 8)), f(out)) == expected  # BNSH key
    assert node_flops("MultiHeadAttention", f(q), f(out)) == 4 * 10 * 10 * 32  # self, L = S
    # GQA decoding one token over 33 cached positions: present_key [B, kv_heads, T, D]
    gqa = node_flops("GroupQueryAttention", f((1, 1, 64)), f((1, 1, 64), (1, 2, 33, 32)))
    assert gqa == 4 * 1 * 1 * 33 * 64


# --- per-element rules, data movement, unknown ops ---------------------------------------------


@pytest.mark.parametrize(
    ("op", "per_element"),
    [
        ("Add", 1),
        ("Mul", 1),
        ("Relu", 1),
        ("Sigmoid", 1),
        ("Erf", 1),
        ("Where", 1),
        ("Pow", 1),
        ("Gelu", 8),
        ("FastGelu", 8),
        ("BiasGelu", 8),
        ("Softmax", 5),
        ("LayerNormalization", 8),
        ("SkipLayerNormalization", 8),
        ("SimplifiedLayerNormalization", 5),
        ("BatchNormalization", 5),
        ("InstanceNormalization", 8),
    ],
)
def test_per_output_element(op: str, per_element: int) -> None:
    assert node_flops(op, f((8, 128), (128,)), f((8, 128))) == per_element * 1024


@pytest.mark.parametrize(
    "op", ["ReduceMean", "ReduceSum", "MaxPool", "AveragePool", "GlobalAveragePool"]
)
def test_reductions_and_pooling_count_input_elements(op: str) -> None:
    assert node_flops(op, f((1, 32, 16, 16)), f((1, 32, 8, 8))) == 32 * 256


@pytest.mark.parametrize(
    "op",
    [
        "Reshape",
        "Transpose",
        "Gather",
        "Concat",
        "Slice",
        "Cast",
        "Squeeze",
        "Unsqueeze",
        "ReorderInput",
        "ReorderOutput",
        "MemcpyToHost",
        "MemcpyFromHost",
        "If",
        "Loop",
    ],
)
def test_data_movement_is_zero(op: str) -> None:
    assert node_flops(op, f((8, 128)), f((128, 8))) == 0


@pytest.mark.parametrize("op", ["Einsum", "NonMaxSuppression", "MyCustomOp", ""])
def test_unknown_ops_are_none_not_zero(op: str) -> None:
    assert node_flops(op, f((8, 128)), f((8, 128))) is None


def test_no_rule_crashes_on_missing_or_scalar_shapes() -> None:
    for op in RULES:
        for ins, outs in [((), ()), (f(()), f(())), (f((0, 4)), f((0, 4)))]:
            result = node_flops(op, ins, outs)
            assert result is None or (isinstance(result, int) and result >= 0), op


def test_every_node_of_the_fixtures_has_a_model() -> None:
    for name in ("mlp", "conv_nchwc", "if_loop"):
        trace = parse_ort_profile(FIXTURES / f"ort_profile_{name}.json")
        for node in trace.nodes:
            assert node_flops(node.op_type, node.input_shapes, node.output_shapes) is not None, (
                node.op_type
            )


# --- quantized and fused types, on shapes copied from ORT 1.31 profiles of the demo CNN ----
# (FP32 and its INT8 static variant, intra-op threads 1; the INT8 graph runs NHWC and its
# QLinearConv/QGemm weights are pre-packed, so the profile omits them)

CONV_FP32_IN = (("float", (1, 3, 64, 64)), ("float", (32, 3, 3, 3)), ("float", (32,)))
CONV_OUT = (("float", (1, 32, 64, 64)),)
QCONV_IN = (
    ("uint8", (1, 64, 64, 3)),
    ("float", ()),
    ("uint8", ()),
    ("float", (32,)),
    ("int8", (32,)),
    ("float", ()),
    ("uint8", ()),
    ("int32", (32,)),
)
QCONV_OUT = (("uint8", (1, 64, 64, 32)),)


def test_qlinearconv_counts_what_its_conv_counts() -> None:
    conv = node_flops("Conv", CONV_FP32_IN, CONV_OUT)
    assert conv == 2 * (32 * 64 * 64) * (3 * 3 * 3) + 32 * 64 * 64
    assert node_flops("QLinearConv", QCONV_IN, QCONV_OUT, weight=(32, 3, 3, 3)) == conv
    # without the model file's weight shape the kernel size is unknown: not 0, None
    assert node_flops("QLinearConv", QCONV_IN, QCONV_OUT) is None
    # no bias listed: no bias counted (the per-channel scale and zero point are not one)
    no_bias = QCONV_IN[:-1]
    assert node_flops("QLinearConv", no_bias, QCONV_OUT, weight=(32, 3, 3, 3)) == conv - 32 * 4096


def test_qlinearconv_with_its_weight_listed_nchw() -> None:
    ins = (
        ("uint8", (1, 3, 64, 64)),
        ("float", ()),
        ("uint8", ()),
        ("int8", (32, 3, 3, 3)),
        ("float", (32,)),
        ("int8", (32,)),
        ("float", ()),
        ("uint8", ()),
        ("int32", (32,)),
    )
    assert node_flops("QLinearConv", ins, (("uint8", (1, 32, 64, 64)),)) == node_flops(
        "Conv", CONV_FP32_IN, CONV_OUT
    )


def test_conv_whose_weight_the_profile_omits_uses_the_model_files() -> None:
    nhwc_in = (("float", (1, 64, 64, 3)), ("float", (32,)))
    out = (("float", (1, 64, 64, 32)),)
    assert node_flops("Conv", nhwc_in, out) is None
    assert node_flops("Conv", nhwc_in, out, weight=(32, 3, 3, 3)) == node_flops(
        "Conv", CONV_FP32_IN, CONV_OUT
    )


def test_qgemm_counts_what_its_gemm_counts() -> None:
    gemm = node_flops("Gemm", (("float", (1, 128)), ("float", (10,))), (("float", (1, 10)),))
    qgemm_in = (
        ("uint8", (1, 128)),
        ("float", ()),
        ("uint8", ()),
        ("float", (10,)),
        ("int8", (10,)),
        ("int32", (10,)),
        ("float", ()),
        ("uint8", ()),
    )
    assert gemm == 2 * 1 * 10 * 128 + 10
    assert node_flops("QGemm", qgemm_in, (("uint8", (1, 10)),)) == gemm
    no_bias = tuple(x for x in qgemm_in if x[0] != "int32")
    assert node_flops("QGemm", no_bias, (("uint8", (1, 10)),)) == gemm - 10


def test_quantized_elementwise_and_pooling_count_as_their_float_ops() -> None:
    add_in = (("uint8", (1, 32, 32, 64)), ("float", ()), ("uint8", ()), ("uint8", (1, 32, 32, 64)))
    out = (("uint8", (1, 32, 32, 64)),)
    assert node_flops("QLinearAdd", add_in, out) == node_flops(
        "Add", f((1, 64, 32, 32)), f((1, 64, 32, 32))
    )
    pool = node_flops("NhwcMaxPool", (("uint8", (1, 16, 16, 128)),), (("uint8", (1, 8, 8, 128)),))
    assert pool == node_flops("MaxPool", f((1, 128, 16, 16)), f((1, 128, 8, 8))) == 32768


def test_quantized_matmuls_and_attention() -> None:
    # the demo transformer under INT8 dynamic: A [1, 16, 64] @ W [64, 256] (pre-packed)
    ins, outs = (("float", (1, 16, 64)),), (("float", (1, 16, 256)),)
    for op in ("DynamicQuantizeMatMul", "MatMulIntegerToFloat", "MatMulNBits", "MatMul"):
        assert node_flops(op, ins, outs) == 2 * 16 * 256 * 64, op
    attn_in = (("uint8", (1, 16, 64)), ("int8", (64, 192)))
    attn_out = (("float", (1, 16, 64)),)
    assert node_flops("QAttention", attn_in, attn_out) == node_flops(
        "Attention", f((1, 16, 64), (64, 192)), f((1, 16, 64))
    )
    assert node_flops("SkipLayerNormalization", f((1, 16, 64)), f((1, 16, 64))) == 8 * 1024
    assert node_flops("BiasGelu", f((1, 16, 256)), f((1, 16, 256))) == 8 * 4096


def test_weight_shapes_come_from_the_model_file(tmp_path: Path) -> None:
    """A QDQ convolution's weight sits behind a DequantizeLinear; ORT's profile names the
    rewritten node with suffixes (node_Conv_97_token_7) that profile_key strips."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from engine.model.weights import conv_weight_shapes, profile_key

    w = numpy_helper.from_array(np.zeros((8, 3, 5, 5), np.int8), "w_q")
    scale = numpy_helper.from_array(np.ones(8, np.float32), "w_scale")
    zp = numpy_helper.from_array(np.zeros(8, np.int8), "w_zp")
    w2 = numpy_helper.from_array(np.zeros((4, 8, 1, 1), np.float32), "w2")
    graph = helper.make_graph(
        [
            helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["w"], axis=0),
            helper.make_node("Conv", ["x", "w"], ["y"], name="node_Conv_97"),
            helper.make_node("Conv", ["y", "w2"], ["z"], name="conv2"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [w, scale, zp, w2],
    )
    path = tmp_path / "qdq.onnx"
    onnx.save(helper.make_model(graph), str(path))
    assert conv_weight_shapes(path) == {"node_Conv_97": (8, 3, 5, 5), "conv2": (4, 8, 1, 1)}
    assert profile_key("node_Conv_97_token_7") == "node_Conv_97"
    assert profile_key("conv2_nchwc") == "conv2"
    assert conv_weight_shapes(tmp_path / "missing.onnx") == {}
