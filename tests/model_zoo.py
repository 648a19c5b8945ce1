"""Small real ONNX models that mimic the shapes of models found in the wild.

Each ``build_<name>(out_dir)`` writes ``<name>.onnx`` (plus any side files) into
``out_dir`` and returns the model path. :data:`ZOO` maps every name to its builder.
All pass ``onnx.checker`` and run in onnxruntime's CPU provider except the deliberately
broken ones at the end of the file (:data:`UNLOADABLE`, plus the two ``shape_mismatch``
models that load but reject a batch of 4).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import NodeProto, TensorProto, ValueInfoProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 9
PRODUCER = "opscope-model-zoo"
FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64


def rng(seed: int = 0) -> np.random.Generator:
    """Deterministic random generator, so every build writes identical bytes."""
    return np.random.default_rng(seed)


def weights(name: str, shape: Sequence[int], seed: int = 0) -> TensorProto:
    """A float32 initializer with small random values."""
    data = rng(seed).standard_normal(shape).astype(np.float32) * 0.1
    return numpy_helper.from_array(data, name)


def tensor(name: str, data: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(np.asarray(data), name)


def tinfo(name: str, elem_type: int, shape: Sequence[int | str | None]) -> ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, list(shape))


def node(op: str, inputs: list[str], outputs: list[str], name: str, **attrs: Any) -> NodeProto:
    """Make a node; every node is named because profilers report per node name."""
    return helper.make_node(op, inputs, outputs, name=name, **attrs)


def make(
    name: str,
    nodes: list[NodeProto],
    inputs: list[ValueInfoProto],
    outputs: list[ValueInfoProto],
    initializers: Sequence[TensorProto] = (),
    opsets: dict[str, int] | None = None,
) -> onnx.ModelProto:
    """Assemble a model at :data:`OPSET` (default domain) plus any extra domains."""
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    imports = [helper.make_opsetid("", OPSET)]
    imports += [helper.make_opsetid(domain, ver) for domain, ver in (opsets or {}).items()]
    return helper.make_model(
        graph, opset_imports=imports, ir_version=IR_VERSION, producer_name=PRODUCER
    )


def save(model: onnx.ModelProto, out_dir: Path, name: str, full_check: bool = True) -> Path:
    """Check the model, then write ``out_dir/<name>.onnx``."""
    onnx.checker.check_model(model, full_check=full_check)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.onnx"
    onnx.save_model(model, path)
    return path


def io_xy(
    n_in: int, n_out: int, batch: int | str | None = "batch"
) -> tuple[list[ValueInfoProto], list[ValueInfoProto]]:
    """The common float input ``x`` [batch, n_in] and output ``y`` [batch, n_out]."""
    return [tinfo("x", FLOAT, [batch, n_in])], [tinfo("y", FLOAT, [batch, n_out])]


def linear(
    prefix: str, x: str, y: str, n_in: int, n_out: int, seed: int = 0
) -> tuple[list[NodeProto], list[TensorProto]]:
    """MatMul + Add with initializer weights ``<prefix>.weight`` / ``<prefix>.bias``."""
    w, b = f"{prefix}.weight", f"{prefix}.bias"
    nodes = [
        node("MatMul", [x, w], [f"{prefix}/matmul_out"], f"{prefix}/MatMul"),
        node("Add", [f"{prefix}/matmul_out", b], [y], f"{prefix}/Add"),
    ]
    return nodes, [weights(w, [n_in, n_out], seed), weights(b, [n_out], seed + 1)]


def _dims_model(name: str, batch_dim: int | str | None) -> onnx.ModelProto:
    nodes, inits = linear("fc", "x", "y", 16, 8)
    return make(name, nodes, *io_xy(16, 8, batch_dim), inits)


def build_dims_named(out_dir: Path) -> Path:
    """Symbolic batch dim (dim_param "batch"), as most dynamic-axes exports write."""
    return save(_dims_model("dims_named", "batch"), out_dir, "dims_named")


def build_dims_unknown(out_dir: Path) -> Path:
    """First dim has neither dim_param nor dim_value (Netron shows "?")."""
    return save(_dims_model("dims_unknown", None), out_dir, "dims_unknown")


def build_dims_minus_one(out_dir: Path) -> Path:
    """First dim written as dim_value -1, as some exporters (old TF/keras2onnx) do.

    onnx.checker accepts it; onnxruntime reports the dim as None (dynamic).
    """
    return save(_dims_model("dims_minus_one", -1), out_dir, "dims_minus_one")


def build_dims_formula(out_dir: Path) -> Path:
    """dim_param strings that are formulas ("2*seq", "seq+1"), as torch.onnx.export writes.

    Feed ``x`` [b, s] and ``x_next`` [b, s+1]; outputs are [b, 2s] and [b, s].
    """
    nodes = [
        node("Concat", ["x", "x"], ["doubled"], "concat_self", axis=1),
        node("Slice", ["x_next", "starts", "ends", "axes"], ["shifted"], "slice_next"),
        node("Add", ["x", "shifted"], ["summed"], "add_shifted"),
    ]
    inits = [
        tensor("starts", np.array([1], np.int64)),
        tensor("ends", np.array([np.iinfo(np.int64).max], np.int64)),
        tensor("axes", np.array([1], np.int64)),
    ]
    model = make(
        "dims_formula",
        nodes,
        [tinfo("x", FLOAT, ["batch", "seq"]), tinfo("x_next", FLOAT, ["batch", "seq+1"])],
        [tinfo("doubled", FLOAT, ["batch", "2*seq"]), tinfo("summed", FLOAT, ["batch", "seq"])],
        inits,
    )
    return save(model, out_dir, "dims_formula")


def build_int_inputs(out_dir: Path) -> Path:
    """BERT-style integer inputs: input_ids / attention_mask (int64), token_type_ids (int32).

    Ids index a [500, 32] word embedding and token types a [2, 32] one, so valid ids are
    < 500 and token types < 2; anything larger makes Gather fail at run time.
    """
    nodes = [
        node("Gather", ["embeddings.word", "input_ids"], ["word_emb"], "embeddings/word_Gather"),
        node("Cast", ["attention_mask"], ["mask_f"], "mask/Cast", to=FLOAT),
        node("Unsqueeze", ["mask_f", "unsq_axes"], ["mask_3d"], "mask/Unsqueeze"),
        node("Mul", ["word_emb", "mask_3d"], ["masked_emb"], "mask/Mul"),
        node("Cast", ["token_type_ids"], ["type_ids64"], "token_type/Cast", to=INT64),
        node("Gather", ["embeddings.token_type", "type_ids64"], ["type_emb"], "token_type/Gather"),
        node("Add", ["masked_emb", "type_emb"], ["hidden"], "embeddings/Add"),
        node("ReduceMean", ["hidden"], ["pooled"], "pooler/ReduceMean", axes=[1], keepdims=0),
    ]
    inits = [
        weights("embeddings.word", [500, 32], 1),
        weights("embeddings.token_type", [2, 32], 2),
        tensor("unsq_axes", np.array([-1], np.int64)),
    ]
    inputs = [
        tinfo("input_ids", INT64, ["batch", "sequence"]),
        tinfo("attention_mask", INT64, ["batch", "sequence"]),
        tinfo("token_type_ids", TensorProto.INT32, ["batch", "sequence"]),
    ]
    model = make("int_inputs", nodes, inputs, [tinfo("pooled", FLOAT, ["batch", 32])], inits)
    return save(model, out_dir, "int_inputs")


def build_bool_input(out_dir: Path) -> Path:
    """A boolean mask input next to a float one (masking / gating models)."""
    nodes = [node("Where", ["keep", "x", "zero"], ["out"], "mask/Where")]
    model = make(
        "bool_input",
        nodes,
        [tinfo("x", FLOAT, ["batch", 8]), tinfo("keep", TensorProto.BOOL, ["batch", 8])],
        [tinfo("out", FLOAT, ["batch", 8])],
        [tensor("zero", np.array(0.0, np.float32))],
    )
    return save(model, out_dir, "bool_input")


def build_stateful_rnn(out_dir: Path) -> Path:
    """A GRU whose initial hidden state ``h0`` is a model input (streaming / stateful models).

    X [seq, batch, 4], h0 [1, batch, 8] -> Y [seq, 1, batch, 8], Y_h [1, batch, 8].
    """
    hidden = 8
    inits = [
        weights("gru.W", [1, 3 * hidden, 4], 1),
        weights("gru.R", [1, 3 * hidden, hidden], 2),
        weights("gru.B", [1, 6 * hidden], 3),
    ]
    nodes = [
        node(
            "GRU",
            ["X", "gru.W", "gru.R", "gru.B", "", "h0"],
            ["Y", "Y_h"],
            "gru/GRU",
            hidden_size=hidden,
        ),
    ]
    model = make(
        "stateful_rnn",
        nodes,
        [tinfo("X", FLOAT, ["seq", "batch", 4]), tinfo("h0", FLOAT, [1, "batch", hidden])],
        [tinfo("Y", FLOAT, ["seq", 1, "batch", hidden]), tinfo("Y_h", FLOAT, [1, "batch", hidden])],
        inits,
    )
    return save(model, out_dir, "stateful_rnn")


def build_constant_weights(out_dir: Path) -> Path:
    """2-layer MLP whose weights are Constant nodes, not initializers (some TF/old exports).

    Parameters: 32*64 + 64 + 64*10 + 10 = 2762, all inside Constant nodes.
    """
    nodes: list[NodeProto] = []
    for i, (n_in, n_out) in enumerate([(32, 64), (64, 10)], start=1):
        for part, shape in (("weight", [n_in, n_out]), ("bias", [n_out])):
            name = f"fc{i}.{part}"
            nodes.append(
                node(
                    "Constant", [], [name], f"fc{i}/{part}_Constant", value=weights(name, shape, i)
                )
            )
    nodes += [
        node("MatMul", ["x", "fc1.weight"], ["h1"], "fc1/MatMul"),
        node("Add", ["h1", "fc1.bias"], ["h1b"], "fc1/Add"),
        node("Relu", ["h1b"], ["h1r"], "fc1/Relu"),
        node("MatMul", ["h1r", "fc2.weight"], ["h2"], "fc2/MatMul"),
        node("Add", ["h2", "fc2.bias"], ["logits"], "fc2/Add"),
    ]
    model = make(
        "constant_weights",
        nodes,
        [tinfo("x", FLOAT, ["batch", 32])],
        [tinfo("logits", FLOAT, ["batch", 10])],
    )
    return save(model, out_dir, "constant_weights")


def build_qdq_quantized(out_dir: Path) -> Path:
    """Static QDQ quantization (onnxruntime.quantization / TensorRT style): Q/DQ around MatMul.

    The int8 weight is an initializer feeding a DequantizeLinear node.
    """
    w_int8 = rng(1).integers(-127, 128, size=(16, 8), dtype=np.int8)
    inits = [
        tensor("x_scale", np.array(0.02, np.float32)),
        tensor("x_zero_point", np.array(128, np.uint8)),
        tensor("fc.weight_quantized", w_int8),
        tensor("fc.weight_scale", np.array(0.005, np.float32)),
        tensor("fc.weight_zero_point", np.array(0, np.int8)),
        weights("fc.bias", [8], 2),
    ]
    nodes = [
        node("QuantizeLinear", ["x", "x_scale", "x_zero_point"], ["x_q"], "x/QuantizeLinear"),
        node(
            "DequantizeLinear", ["x_q", "x_scale", "x_zero_point"], ["x_dq"], "x/DequantizeLinear"
        ),
        node(
            "DequantizeLinear",
            ["fc.weight_quantized", "fc.weight_scale", "fc.weight_zero_point"],
            ["fc.weight_dq"],
            "fc.weight/DequantizeLinear",
        ),
        node("MatMul", ["x_dq", "fc.weight_dq"], ["mm"], "fc/MatMul"),
        node("Add", ["mm", "fc.bias"], ["y"], "fc/Add"),
    ]
    model = make("qdq_quantized", nodes, *io_xy(16, 8), inits)
    return save(model, out_dir, "qdq_quantized")


def build_dynamic_quantized(out_dir: Path) -> Path:
    """Dynamic quantization (onnxruntime.quantization.quantize_dynamic style).

    DynamicQuantizeLinear on the input, MatMulInteger(uint8, int8), Cast, Mul by scales.
    Weights are 7-bit (reduce_range=True): full-range int8 weights saturate in ORT's AVX2
    u8s8 kernel and give visibly wrong results.
    """
    inits = [
        tensor("fc.weight_quantized", rng(1).integers(-63, 64, size=(16, 8), dtype=np.int8)),
        tensor("fc.weight_scale", np.array(0.005, np.float32)),
        tensor("fc.weight_zero_point", np.array(0, np.int8)),
        weights("fc.bias", [8], 2),
    ]
    nodes = [
        node(
            "DynamicQuantizeLinear",
            ["x"],
            ["x_q", "x_scale", "x_zero_point"],
            "x/DynamicQuantizeLinear",
        ),
        node(
            "MatMulInteger",
            ["x_q", "fc.weight_quantized", "x_zero_point", "fc.weight_zero_point"],
            ["mm_int32"],
            "fc/MatMulInteger",
        ),
        node("Cast", ["mm_int32"], ["mm_float"], "fc/Cast", to=FLOAT),
        node("Mul", ["x_scale", "fc.weight_scale"], ["scale"], "fc/scale_Mul"),
        node("Mul", ["mm_float", "scale"], ["mm"], "fc/Mul"),
        node("Add", ["mm", "fc.bias"], ["y"], "fc/Add"),
    ]
    model = make("dynamic_quantized", nodes, *io_xy(16, 8), inits)
    return save(model, out_dir, "dynamic_quantized")


def build_contrib_ops(out_dir: Path) -> Path:
    """com.microsoft contrib ops (FusedMatMul, Gelu), as ORT transformer optimizers emit."""
    ms = "com.microsoft"
    nodes = [
        helper.make_node(
            "FusedMatMul",
            ["x", "fc.weight"],
            ["mm"],
            name="fc/FusedMatMul",
            domain=ms,
            alpha=1.0,
            transA=0,
            transB=1,
        ),
        node("Add", ["mm", "fc.bias"], ["pre_act"], "fc/Add"),
        helper.make_node("Gelu", ["pre_act"], ["y"], name="act/Gelu", domain=ms),
    ]
    # transB=1: the weight is stored [out, in], like torch.nn.Linear.
    inits = [weights("fc.weight", [8, 16], 1), weights("fc.bias", [8], 2)]
    model = make("contrib_ops", nodes, *io_xy(16, 8), inits, opsets={ms: 1})
    return save(model, out_dir, "contrib_ops")


def build_sequence_output(out_dir: Path) -> Path:
    """An output that is a sequence of tensors (ORT returns a Python list of arrays)."""
    nodes = [
        node("Relu", ["x"], ["pos"], "relu/Relu"),
        node("Neg", ["x"], ["neg"], "neg/Neg"),
        node("SequenceConstruct", ["pos", "neg"], ["parts"], "seq/SequenceConstruct"),
    ]
    out = helper.make_tensor_sequence_value_info("parts", FLOAT, ["batch", 8])
    model = make("sequence_output", nodes, [tinfo("x", FLOAT, ["batch", 8])], [out])
    return save(model, out_dir, "sequence_output")


def build_map_output(out_dir: Path) -> Path:
    """sklearn-onnx style classifier: LinearClassifier + ZipMap -> seq(map(int64, float)).

    ORT returns ``output_probability`` as a list of ``{class: prob}`` dicts, one per row.
    """
    ml = "ai.onnx.ml"
    classes = [0, 1, 2]
    coef = rng(1).standard_normal((len(classes), 4)).astype(np.float32)
    nodes = [
        helper.make_node(
            "LinearClassifier",
            ["x"],
            ["output_label", "probabilities"],
            name="LinearClassifier",
            domain=ml,
            coefficients=coef.ravel().tolist(),
            intercepts=[0.1, -0.2, 0.05],
            classlabels_ints=classes,
            multi_class=0,
            post_transform="SOFTMAX",
        ),
        helper.make_node(
            "ZipMap",
            ["probabilities"],
            ["output_probability"],
            name="ZipMap",
            domain=ml,
            classlabels_int64s=classes,
        ),
    ]
    map_type = helper.make_map_type_proto(INT64, helper.make_tensor_type_proto(FLOAT, []))
    outputs = [
        tinfo("output_label", INT64, ["batch"]),
        helper.make_value_info("output_probability", helper.make_sequence_type_proto(map_type)),
    ]
    model = make("map_output", nodes, [tinfo("x", FLOAT, ["batch", 4])], outputs, opsets={ml: 1})
    return save(model, out_dir, "map_output")


def build_external_data(out_dir: Path) -> Path:
    """A 256x256 weight stored in ``external_data.onnx.data`` beside the model (>2 GB style)."""
    return _save_with_external_data(out_dir, "external_data")


def build_subgraph_if(out_dir: Path) -> Path:
    """Control flow: an If node whose branches are subgraphs with their own named nodes.

    If sum(x) > 0 then Relu(x) * 2 else Neg(x).
    """
    then_branch = helper.make_graph(
        [
            node("Relu", ["x"], ["then_relu"], "then/Relu"),
            node("Mul", ["then_relu", "two"], ["then_out"], "then/Mul"),
        ],
        "then_branch",
        [],
        [tinfo("then_out", FLOAT, ["batch", 8])],
        initializer=[tensor("two", np.array(2.0, np.float32))],
    )
    else_branch = helper.make_graph(
        [node("Neg", ["x"], ["else_out"], "else/Neg")],
        "else_branch",
        [],
        [tinfo("else_out", FLOAT, ["batch", 8])],
    )
    nodes = [
        node("ReduceSum", ["x"], ["total"], "cond/ReduceSum", keepdims=0),
        node("Greater", ["total", "zero"], ["is_positive"], "cond/Greater"),
        node(
            "If",
            ["is_positive"],
            ["y"],
            "branch/If",
            then_branch=then_branch,
            else_branch=else_branch,
        ),
    ]
    model = make("subgraph_if", nodes, *io_xy(8, 8), [tensor("zero", np.array(0.0, np.float32))])
    return save(model, out_dir, "subgraph_if")


def build_multi_output(out_dir: Path) -> Path:
    """Two inputs and three outputs of different dtypes (float sum/product, int64 argmax)."""
    nodes = [
        node("Add", ["a", "b"], ["sum"], "sum/Add"),
        node("Mul", ["a", "b"], ["product"], "product/Mul"),
        node("ArgMax", ["sum"], ["argmax"], "argmax/ArgMax", axis=1, keepdims=0),
    ]
    model = make(
        "multi_output",
        nodes,
        [tinfo("a", FLOAT, ["batch", 8]), tinfo("b", FLOAT, ["batch", 8])],
        [
            tinfo("sum", FLOAT, ["batch", 8]),
            tinfo("product", FLOAT, ["batch", 8]),
            tinfo("argmax", INT64, ["batch"]),
        ],
    )
    return save(model, out_dir, "multi_output")


# --- broken or failing models -----------------------------------------------------------------


def _save_with_external_data(out_dir: Path, name: str) -> Path:
    """Save a [batch, 256] @ [256, 256] MatMul with its weight in ``<name>.onnx.data``."""
    nodes = [node("MatMul", ["x", "fc.weight"], ["y"], "fc/MatMul")]
    model = make(name, nodes, *io_xy(256, 256), [weights("fc.weight", [256, 256], 1)])
    onnx.checker.check_model(model, full_check=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.onnx"
    onnx.save_model(
        model,
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=f"{name}.onnx.data",
        size_threshold=0,
    )
    return path


def build_external_data_missing(out_dir: Path) -> Path:
    """Like ``external_data`` but the .data file is gone (model copied without its weights).

    ORT fails at session creation: "External data path does not exist: ...".
    """
    path = _save_with_external_data(out_dir, "external_data_missing")
    (out_dir / "external_data_missing.onnx.data").unlink()
    return path


def build_unsupported_op(out_dir: Path) -> Path:
    """A custom-domain op (com.example FancyOp) that onnx.checker accepts but ORT has no kernel
    for, like a model exported with a custom op whose library is not registered."""
    nodes = [
        node("Relu", ["x"], ["h"], "pre/Relu"),
        helper.make_node("FancyOp", ["h"], ["y"], name="custom/FancyOp", domain="com.example"),
    ]
    model = make("unsupported_op", nodes, *io_xy(8, 8), opsets={"com.example": 1})
    return save(model, out_dir, "unsupported_op", full_check=False)


def build_session_fails(out_dir: Path) -> Path:
    """Add of a float tensor and an int64 initializer: passes onnx.checker without full_check
    (no type inference), but ORT's type inference rejects it at session creation."""
    nodes = [
        node("Relu", ["x"], ["h"], "pre/Relu"),
        node("Add", ["h", "offset"], ["y"], "bad/Add"),
    ]
    model = make("session_fails", nodes, *io_xy(8, 8), [tensor("offset", np.ones(8, np.int64))])
    return save(model, out_dir, "session_fails", full_check=False)


def build_corrupt(out_dir: Path) -> Path:
    """``corrupt.onnx``: 4 KiB of random bytes, not a protobuf at all (wrong file, bad download)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "corrupt.onnx"
    path.write_bytes(rng(7).integers(0, 256, size=4096, dtype=np.uint8).tobytes())
    return path


def build_truncated(out_dir: Path) -> Path:
    """``truncated.onnx``: the first half of a valid model file (interrupted download/copy)."""
    nodes, inits = linear("fc", "x", "y", 64, 64)
    model = make("truncated", nodes, *io_xy(64, 64), inits)
    onnx.checker.check_model(model, full_check=True)
    data = model.SerializeToString()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "truncated.onnx"
    path.write_bytes(data[: len(data) // 2])
    return path


def _reshape_batch1_model(name: str, batch_dim: int | str) -> onnx.ModelProto:
    nodes = [
        node("Reshape", ["x", "flat_shape"], ["flat"], "flatten/Reshape"),
        node("MatMul", ["flat", "fc.weight"], ["y"], "fc/MatMul"),
    ]
    inits = [tensor("flat_shape", np.array([1, 192], np.int64)), weights("fc.weight", [192, 10])]
    return make(
        name,
        nodes,
        [tinfo("x", FLOAT, [batch_dim, 3, 8, 8])],
        [tinfo("y", FLOAT, [1, 10])],
        inits,
    )


def build_shape_mismatch(out_dir: Path) -> Path:
    """Fixed input [1, 3, 8, 8] reshaped to a hard-coded [1, 192] (exported with batch 1 baked in).

    Feeding batch 4 fails in ORT's input validation, before any kernel runs.
    """
    return save(_reshape_batch1_model("shape_mismatch", 1), out_dir, "shape_mismatch")


def build_shape_mismatch_dynamic(out_dir: Path) -> Path:
    """Like ``shape_mismatch`` but the input claims a symbolic batch, so batch 4 passes input
    validation and fails later inside the Reshape kernel."""
    model = _reshape_batch1_model("shape_mismatch_dynamic", "batch")
    return save(model, out_dir, "shape_mismatch_dynamic")


ZOO: dict[str, Callable[[Path], Path]] = {
    "dims_named": build_dims_named,
    "dims_unknown": build_dims_unknown,
    "dims_minus_one": build_dims_minus_one,
    "dims_formula": build_dims_formula,
    "int_inputs": build_int_inputs,
    "bool_input": build_bool_input,
    "stateful_rnn": build_stateful_rnn,
    "constant_weights": build_constant_weights,
    "qdq_quantized": build_qdq_quantized,
    "dynamic_quantized": build_dynamic_quantized,
    "contrib_ops": build_contrib_ops,
    "sequence_output": build_sequence_output,
    "map_output": build_map_output,
    "external_data": build_external_data,
    "subgraph_if": build_subgraph_if,
    "multi_output": build_multi_output,
    "external_data_missing": build_external_data_missing,
    "unsupported_op": build_unsupported_op,
    "session_fails": build_session_fails,
    "corrupt": build_corrupt,
    "truncated": build_truncated,
    "shape_mismatch": build_shape_mismatch,
    "shape_mismatch_dynamic": build_shape_mismatch_dynamic,
}

# Models that cannot be loaded into an ORT session at all.
UNLOADABLE: frozenset[str] = frozenset(
    {"external_data_missing", "unsupported_op", "session_fails", "corrupt", "truncated"}
)

# Models that load and run: the first 16, up to the broken ones (ZOO keeps that order).
RUNNABLE: list[str] = list(ZOO)[: list(ZOO).index("external_data_missing")]
