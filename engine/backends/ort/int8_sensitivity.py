"""Which nodes make an INT8 model inaccurate: both models made to output every float
tensor (ONNX Runtime's quantization debugging tool), run on the same inputs, and each
node scored by the error it adds: 1 - cosine at its output, less the worst 1 - cosine at
its activation inputs. Quantizers keep a node's output name, so tensors match by name."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.model.inputs import Feeds

SAVED = "_ReshapedSavedOutput"  # the suffix ORT's debugging tool gives the saved tensors
TRIVIAL = 1e-6  # local error below this: nothing worth keeping in FP32


def _augmented(model_path: str, folder: Path) -> tuple[Any, list[str], set[str]]:
    """A session of the model made to output every float tensor: (session, saved output
    names, input names)."""
    import onnxruntime as ort
    from onnxruntime.quantization.qdq_loss_debug import (
        modify_model_output_intermediate_tensors,
    )

    augmented = folder / (Path(model_path).stem + f".{len(list(folder.iterdir()))}.onnx")
    modify_model_output_intermediate_tensors(model_path, str(augmented))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(augmented), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs() if o.name.endswith(SAVED)]
    return session, names, {i.name for i in session.get_inputs()}


def tensor_errors(
    float_path: str, quant_path: str, feeds: Sequence[Feeds], folder: Path
) -> dict[str, float]:
    """1 - cosine of every float tensor both models have by name, over all `feeds`. Sums
    are kept per tensor, not the tensors: a MiniLM's 400 tensors over 64 sentences would
    take gigabytes."""
    ref_s, ref_names, ref_in = _augmented(float_path, folder)
    got_s, got_names, got_in = _augmented(quant_path, folder)
    shared = sorted(set(ref_names) & set(got_names))
    sums = {n: [0.0, 0.0, 0.0] for n in shared}  # dot, |a|^2, |b|^2
    bad: set[str] = set()
    for feed in feeds:
        ref = ref_s.run(shared, {k: v for k, v in feed.items() if k in ref_in})
        got = got_s.run(shared, {k: v for k, v in feed.items() if k in got_in})
        for name, a, b in zip(shared, ref, got, strict=True):
            a64, b64 = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
            if a64.size != b64.size:
                bad.add(name)
                continue
            ok = np.isfinite(a64) & np.isfinite(b64)
            a64, b64 = a64[ok], b64[ok]
            acc = sums[name]
            acc[0] += float(a64 @ b64)
            acc[1] += float(a64 @ a64)
            acc[2] += float(b64 @ b64)
    out: dict[str, float] = {}
    for name, (dot, na, nb) in sums.items():
        if name in bad:
            continue
        if na == 0.0 and nb == 0.0:
            cos = 1.0
        elif na == 0.0 or nb == 0.0:
            cos = 0.0
        else:
            cos = dot / (na**0.5 * nb**0.5)
        out[name[: -len(SAVED)]] = 1.0 - cos
    return out


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
        err = tensor_errors(float_path, quant_path, feeds, Path(tmp))
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
