"""Each node alone in FP32, without rebuilding: the INT8 model with one node's quantized
form swapped for the float node (its float weights put back), scored against FP32.

On all-MiniLM-L6-v2 the node that matters (layer 0's FFN output, fed by the [CLS] token's
outlier) is first by this leave-one-out measure and invisible to the activation
comparison (bench/results/quant_minilm.md). Rebuilding with ORT's quantizer per node took
3-6 s a node (pre-processing, shape inference, every weight quantized again: 36 nodes,
2-3 minutes); the swap takes one session per node. It ranks; the attempts the search then
builds are real builds, scored on the whole evaluation set.

The swap: static QDQ keeps the node (by name) and points it at dequantized tensors: it is
pointed back at the float ones. Dynamic INT8 keeps a node's output name, so the node of
the INT8 model that writes it is replaced by the float node. Either reads the float
tensors (still in the INT8 model: the quantizers read them) and its float initializers.
What only the quantized form read is left in the graph, unread."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any

from engine.events import Event, Progress
from engine.model.inputs import Feeds

Compare = Callable[[list[list[Any]]], float]  # outputs per feed -> cosine to FP32


def leave_one_out(
    float_path: str,
    quant_path: str,
    names: Sequence[str],
    feeds: Sequence[Feeds],
    compare: Compare,
    folder: Path,
) -> Generator[Event, None, list[tuple[list[str], float]]]:
    """([node], cosine gained with that node alone in FP32) for each of `names` that can
    be swapped, the most gained first; one Progress per node (a cancellation point).
    `folder` takes the INT8 model's weights once (external data), so that each node's
    model file is its graph alone."""
    import onnx
    import onnxruntime as ort

    fmodel = onnx.load(float_path)
    qmodel = onnx.load(quant_path)
    folder.mkdir(parents=True, exist_ok=True)
    model_file = folder / "loo.onnx"
    # weights written once; the proto keeps references to them (no bytes to copy per node)
    onnx.save_model(
        qmodel, str(model_file), save_as_external_data=True, all_tensors_to_one_file=True,
        location="loo.weights", size_threshold=1024,
    )  # fmt: skip
    fgraph, qgraph = fmodel.graph, qmodel.graph
    finits = {t.name: t for t in fgraph.initializer}
    fnodes = {n.name: n for n in fgraph.node if n.name}
    qinits = {t.name for t in qgraph.initializer}
    known = qinits | {i.name for i in qgraph.input} | {o for n in qgraph.node for o in n.output}
    where = {o: i for i, n in enumerate(qgraph.node) for o in n.output}
    qnames = {n.name: i for i, n in enumerate(qgraph.node) if n.name}
    options = ort.SessionOptions()
    options.log_severity_level = 3
    # a session per node, run twice: no graph optimization, no weight pre-packing (a
    # MiniLM's session opened in 0.07 s so, 0.24 s with basic optimization)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.add_session_config_entry("session.disable_prepacking", "1")
    inputs = {i.name for i in qgraph.input}

    def cosine() -> float:
        model_file.write_bytes(qmodel.SerializeToString())
        session = ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
        return compare([session.run(None, {k: v for k, v in f.items() if k in inputs})
                        for f in feeds])  # fmt: skip

    base = cosine()
    gains: list[tuple[list[str], float]] = []
    for i, name in enumerate(names):
        yield Progress("variant", i, len(names), f"sensitivity of {name}")
        node = fnodes.get(name)
        if node is None or not node.output:
            continue
        if name in qnames:  # QDQ: the node itself, reading dequantized tensors
            at = qnames[name]
            swapped = onnx.NodeProto()
            swapped.CopyFrom(node)
            del swapped.output[:]
            swapped.output.extend(qgraph.node[at].output)  # what its Q/DQ read
            node = swapped
        elif node.output[0] in where:  # dynamic: the chain's last node writes its output
            at = where[node.output[0]]
            if any(o in where and where[o] != at for o in node.output):
                continue  # its outputs come from several nodes of the INT8 model
        else:
            continue
        missing = [x for x in node.input if x and x not in known and x not in finits]
        if missing:
            continue  # reads a tensor the INT8 model no longer has
        # float initializers the INT8 model lacks (one it computes, a dequantized bias,
        # is read as it is)
        added = [finits[x] for x in dict.fromkeys(node.input) if x in finits and x not in known]
        saved = onnx.NodeProto()
        saved.CopyFrom(qgraph.node[at])
        qgraph.node[at].CopyFrom(node)
        qgraph.initializer.extend(added)
        try:
            gains.append(([name], cosine() - base))
        finally:
            qgraph.node[at].CopyFrom(saved)
            if added:
                del qgraph.initializer[len(qgraph.initializer) - len(added) :]
    gains.sort(key=lambda u: -u[1])
    return gains
