"""Which nodes make an INT8 model inaccurate: both models made to output every float
tensor (ONNX Runtime's quantization debugging tool), run on the same inputs, and each
node scored by the error it adds: 1 - cosine at its output, less the worst 1 - cosine at
its activation inputs. Quantizers keep a node's output name, so tensors match by name."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from engine.model.inputs import Feeds

SAVED = "_ReshapedSavedOutput"  # the suffix ORT's debugging tool gives the saved tensors
TRIVIAL = 1e-6  # local error below this: nothing worth keeping in FP32


def activations(model_path: str, feeds: Sequence[Feeds], folder: Path) -> dict[str, np.ndarray]:
    """Every float tensor of the model on `feeds` (flattened, concatenated over them)."""
    import onnxruntime as ort
    from onnxruntime.quantization.qdq_loss_debug import (
        modify_model_output_intermediate_tensors,
    )

    augmented = folder / (Path(model_path).stem + ".augmented.onnx")
    modify_model_output_intermediate_tensors(model_path, str(augmented))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(augmented), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs() if o.name.endswith(SAVED)]
    parts: dict[str, list[np.ndarray]] = {n[: -len(SAVED)]: [] for n in names}
    wanted = {i.name for i in session.get_inputs()}
    for feed in feeds:
        values = session.run(names, {k: v for k, v in feed.items() if k in wanted})
        for name, value in zip(names, values, strict=True):
            parts[name[: -len(SAVED)]].append(np.asarray(value, np.float64).ravel())
    return {k: np.concatenate(v) for k, v in parts.items() if v}


def node_errors(
    float_path: str,
    quant_path: str,
    feeds: Sequence[Feeds],
    op_types: set[str] | None,
    with_producers: bool = False,
) -> list[tuple[list[str], float]]:
    """Units of nodes to keep in FP32 together, with the error they add, worst first.

    A unit is a node of `op_types` (None: any) whose output the INT8 model has by name,
    with the nodes upstream that the quantizer folded away (a Relu into the MatMul before
    it): the error shows after them, so they go together. `with_producers` (static QDQ,
    where a quantized tensor is quantized at its producer) adds the producers of the
    unit's inputs, so excluding it also removes the quantization of what flows in."""
    import onnx

    with tempfile.TemporaryDirectory(prefix="opscope-sensitivity-") as tmp:
        folder = Path(tmp)
        ref = activations(float_path, feeds, folder)
        got = activations(quant_path, feeds, folder)
    err = {
        name: 1.0 - _cosine(ref[name], got[name])
        for name in ref.keys() & got.keys()
        if ref[name].size == got[name].size
    }
    graph = onnx.load(float_path, load_external_data=False).graph
    producer = {out: n for n in graph.node for out in n.output}

    def inflow(tensor: str, unit: list[str], seen: set[str]) -> float:
        """The error arriving on `tensor`: measured, or (its producer folded away) what
        arrives at that producer, which then joins the unit."""
        if tensor in err:
            if with_producers and tensor in producer and producer[tensor].name:
                unit.append(producer[tensor].name)
            return err[tensor]
        node = producer.get(tensor)
        if node is None or node.name in seen:
            return 0.0  # a graph input or an initializer
        seen.add(node.name)
        unit.append(node.name)
        return max((inflow(i, unit, seen) for i in node.input if i), default=0.0)

    scores: list[tuple[list[str], float]] = []
    for node in graph.node:
        if op_types is not None and node.op_type not in op_types:
            continue
        outs = [err[o] for o in node.output if o in err]
        if not outs or not node.name:
            continue
        unit = [node.name]
        seen = {node.name}
        arriving = max((inflow(i, unit, seen) for i in node.input if i), default=0.0)
        local = max(outs) - arriving
        if local > TRIVIAL:
            scores.append((list(dict.fromkeys(unit)), local))
    scores.sort(key=lambda s: -s[1])
    return scores


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    finite = np.isfinite(a) & np.isfinite(b)
    a, b = a[finite], b[finite]
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))
