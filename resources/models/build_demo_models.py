"""Build the two demo ONNX models shipped with OpScope and verify them against PyTorch.

Run from the repository root: ``.venv/bin/python resources/models/build_demo_models.py``.
Needs the ``torch`` extra (torch + onnxscript); the app itself never imports this file.
"""

from __future__ import annotations

import argparse
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir  # installed with onnxscript, which builds on it
import onnx_ir.passes.common as ir_passes
import onnxruntime as ort
import onnxscript.optimizer
import onnxscript.rewriter
import torch
from onnxscript.rewriter.rules import common as rules
from torch import nn
from torch.export import Dim

SEED = 0
OPSET = 18
VOCAB_SIZE = 1000
MAX_POSITIONS = 512
D_MODEL = 128
N_HEADS = 4
D_FFN = 512
N_LAYERS = 4
N_CLASSES = 10
IMAGE_SIZE = 64
TOLERANCE = 1e-4
TRANSFORMER_FILE = "demo_transformer.onnx"
CNN_FILE = "demo_cnn.onnx"
# Node metadata kept in the files: the module path of each node (a few bytes per node). The
# exporter also writes stack traces with absolute paths and FX node dumps; those are dropped.
KEPT_NODE_METADATA = frozenset({"pkg.torch.onnx.name_scopes"})


class ErfGelu(nn.Module):
    """Exact GELU spelled out as in BERT, a pattern ORT fuses (with the bias Add) into BiasGelu.

    The exporter's own nn.GELU decomposition orders the Muls differently and is not fused.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


class SelfAttention(nn.Module):
    """Multi-head self-attention written with plain MatMul/Softmax (no fused kernels)."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        """[B, S, D] -> [B, H, S, Dh]."""
        b, s, _ = x.shape
        return x.reshape(b, s, self.n_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self._split(self.q(x)), self._split(self.k(x)), self._split(self.v(x))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.out(ctx.transpose(1, 2).reshape(b, s, d))


class EncoderLayer(nn.Module):
    """Post-LayerNorm (BERT-style) encoder layer: attention and GELU FFN, each Add + LayerNorm."""

    def __init__(self, d_model: int, n_heads: int, d_ffn: int) -> None:
        super().__init__()
        self.attn = SelfAttention(d_model, n_heads)
        self.ln1 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ffn), ErfGelu(), nn.Linear(d_ffn, d_model))
        self.ln2 = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.ffn(x))


class TransformerClassifier(nn.Module):
    """Token + learned position embeddings, encoder stack, mean pooling, linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB_SIZE, D_MODEL)
        self.pos = nn.Embedding(MAX_POSITIONS, D_MODEL)
        self.layers = nn.ModuleList(EncoderLayer(D_MODEL, N_HEADS, D_FFN) for _ in range(N_LAYERS))
        self.head = nn.Linear(D_MODEL, N_CLASSES)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.tok(input_ids) + self.pos(positions).unsqueeze(0)
        for layer in self.layers:
            x = layer(x)
        return self.head(x.mean(dim=1))


def conv_bn_relu(c_in: int, c_out: int, stride: int = 1) -> nn.Sequential:
    """3x3 Conv (no bias) + BatchNorm + ReLU."""
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(),
    )


class ResidualBlock(nn.Module):
    """Two 3x3 Conv+BN with an identity shortcut, ReLU after the Add."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = conv_bn_relu(channels, channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(x + self.bn2(self.conv2(self.conv1(x))))


class ConvNet(nn.Module):
    """Small ResNet-like classifier for 3x64x64 images."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            conv_bn_relu(3, 32),  # 64x64
            conv_bn_relu(32, 64, stride=2),  # 32x32
            ResidualBlock(64),
            conv_bn_relu(64, 128, stride=2),  # 16x16
            nn.MaxPool2d(2),  # 8x8
            conv_bn_relu(128, 128),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(128, N_CLASSES)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.pool(self.features(image)), 1))


def randomize_norms(model: nn.Module) -> None:
    """Give norm layers non-trivial affine parameters instead of the identity (ones/zeros).

    Identity norms would make the exporter merge their identical initializers, and would make
    BatchNorm folding a no-op on the Conv weights.
    """
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d | nn.LayerNorm):
                m.weight.uniform_(0.8, 1.2)
                m.bias.uniform_(-0.1, 0.1)


def calibrate_batchnorm(model: nn.Module, batches: int = 4) -> None:
    """Set BatchNorm running statistics from a few random batches, as a trained net would have.

    With the default statistics (mean 0, var 1) activations shrink layer by layer and the
    logits barely depend on the input; calibrated statistics keep every layer normalized.
    """
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the calibration batches
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(32, 3, IMAGE_SIZE, IMAGE_SIZE))
    model.eval()


def rename_dims(model: onnx.ModelProto, names: dict[int, str], input_name: str) -> None:
    """Rename the exporter's symbolic dims (e.g. ``s0``) of ``input_name`` everywhere in the graph.

    ``names`` maps an axis of ``input_name`` to its readable name.
    """
    graph = model.graph
    dims = next(i for i in graph.input if i.name == input_name).type.tensor_type.shape.dim
    mapping = {dims[axis].dim_param: new for axis, new in names.items() if dims[axis].dim_param}
    if not mapping:
        return
    token = re.compile("|".join(rf"\b{re.escape(old)}\b" for old in mapping))
    for value in [*graph.input, *graph.output, *graph.value_info]:
        if not value.type.HasField("tensor_type"):
            continue
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param:
                dim.dim_param = token.sub(lambda m: mapping[m.group(0)], dim.dim_param)


def optimize_keeping_batchnorm(model: ir.Model) -> None:
    """Clean up an unoptimized export like the exporter's optimizer, minus its BatchNorm folding.

    The demo CNN is meant to show ORT folding BatchNormalization into Conv, so the file must
    still contain BatchNormalization nodes; torch's default optimizer would fold them already.
    """
    onnxscript.optimizer.fold_constants(model)
    onnxscript.rewriter.rewrite(
        model,
        pattern_rewrite_rules=[
            rules.no_op_expand_rule,
            rules.no_op_cast_rule,
            rules.reshape_reshape_rule,
            rules.remove_optional_bias_from_conv_rule,
            rules.remove_optional_bias_from_gemm_rule,
        ],
    )
    ir.passes.PassManager(
        [
            ir_passes.RemoveUnusedNodesPass(),
            ir_passes.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
            ir_passes.DeduplicateInitializersPass(),
            ir_passes.CommonSubexpressionEliminationPass(),
            ir_passes.RemoveUnusedNodesPass(),
            ir_passes.RemoveUnusedOpsetsPass(),
        ]
    )(model)


def strip_node_metadata(model: onnx.ModelProto) -> None:
    """Drop bulky, machine-specific node metadata (stack traces, FX dumps) from the exporter."""
    for node in model.graph.node:
        kept = [(p.key, p.value) for p in node.metadata_props if p.key in KEPT_NODE_METADATA]
        del node.metadata_props[:]
        for key, value in kept:
            node.metadata_props.add(key=key, value=value)
        node.doc_string = ""


def export(
    model: nn.Module,
    example: torch.Tensor,
    input_name: str,
    dims: dict[int, Dim],
    path: Path,
    *,
    keep_batchnorm: bool = False,
) -> None:
    """Export ``model`` with the dynamo exporter and save it as one self-contained .onnx file."""
    program = torch.onnx.export(
        model,
        (example,),
        input_names=[input_name],
        output_names=["logits"],
        opset_version=OPSET,
        dynamo=True,
        external_data=False,
        dynamic_shapes={input_name: dims},
        optimize=not keep_batchnorm,
    )
    if program is None:
        raise RuntimeError("torch.onnx.export returned no ONNXProgram")
    if keep_batchnorm:
        optimize_keeping_batchnorm(program.model)
    proto = program.model_proto
    # torch 2.13 already names dims after the Dim objects; this guards against "s0"-style names.
    rename_dims(proto, {axis: d.__name__ for axis, d in dims.items()}, input_name)
    strip_node_metadata(proto)
    proto.producer_name = "opscope build_demo_models.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    # Saving the proto ourselves (rather than program.save / export(f=...)) keeps all weights
    # inside the .onnx file: no sibling .onnx.data file is ever written.
    onnx.save_model(proto, str(path), save_as_external_data=False)


def describe(path: Path) -> None:
    """Print file size, node count, I/O signature and op-type histogram of an ONNX file."""
    model = onnx.load(str(path))
    ops = Counter(node.op_type for node in model.graph.node)

    def sig(values: list[onnx.ValueInfoProto]) -> str:
        out = []
        for v in values:
            shape = [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            dtype = onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type).lower()
            out.append(f"{v.name}: {dtype}{shape}")
        return ", ".join(out)

    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    print(
        f"{path.name}: {path.stat().st_size / 1e6:.2f} MB, opset {opset}, "
        f"{len(model.graph.node)} nodes, {len(model.graph.initializer)} initializers"
    )
    print(f"  inputs  {sig(list(model.graph.input))}")
    print(f"  outputs {sig(list(model.graph.output))}")
    print("  ops     " + ", ".join(f"{op}={n}" for op, n in ops.most_common()))


def verify(path: Path, model: nn.Module, input_name: str, inputs: list[torch.Tensor]) -> None:
    """Check the ONNX file and compare ONNX Runtime (CPU) against PyTorch on each input."""
    onnx.checker.check_model(str(path), full_check=True)
    siblings = [p.name for p in path.parent.glob(path.name + "*") if p != path]
    if siblings:
        raise RuntimeError(f"unexpected external data next to {path.name}: {siblings}")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for x in inputs:
        with torch.no_grad():
            expected = model(x).numpy()
        (got,) = session.run(["logits"], {input_name: x.numpy()})
        diff = float(np.max(np.abs(got - expected)))
        print(
            f"  ort vs torch {tuple(x.shape)} -> {got.shape}: max abs diff {diff:.2e}, "
            f"logit std {float(expected.std()):.3f}"
        )
        if got.shape != expected.shape or not diff < TOLERANCE:
            raise RuntimeError(f"{path.name}: ORT {got.shape} vs torch {expected.shape}, {diff=}")


def build_transformer(out_dir: Path) -> None:
    """Build, export and verify demo_transformer.onnx."""
    torch.manual_seed(SEED)
    model = TransformerClassifier()
    randomize_norms(model)
    model.eval()
    batch = Dim("batch", min=1, max=1024)
    sequence = Dim("sequence", min=1, max=MAX_POSITIONS)
    example = torch.randint(0, VOCAB_SIZE, (2, 32))
    path = out_dir / TRANSFORMER_FILE
    export(model, example, "input_ids", {0: batch, 1: sequence}, path)
    describe(path)
    inputs = [torch.randint(0, VOCAB_SIZE, (b, s)) for b in (1, 4) for s in (16, 128)]
    verify(path, model, "input_ids", inputs)


def build_cnn(out_dir: Path) -> None:
    """Build, export and verify demo_cnn.onnx."""
    torch.manual_seed(SEED)
    model = ConvNet()
    randomize_norms(model)
    calibrate_batchnorm(model)
    batch = Dim("batch", min=1, max=1024)
    example = torch.randn(2, 3, IMAGE_SIZE, IMAGE_SIZE)
    path = out_dir / CNN_FILE
    export(model, example, "image", {0: batch}, path, keep_batchnorm=True)
    describe(path)
    inputs = [torch.randn(b, 3, IMAGE_SIZE, IMAGE_SIZE) for b in (1, 4)]
    verify(path, model, "image", inputs)


def main(argv: list[str] | None = None) -> None:
    """Parse ``--out`` and build both models."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent,
        help="output folder (default: the folder of this script)",
    )
    args = parser.parse_args(argv)
    build_transformer(args.out)
    build_cnn(args.out)


if __name__ == "__main__":
    main()
