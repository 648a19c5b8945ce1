"""Load an ONNX model file, validate it, and describe it (inputs, ops, parameters).

Every failure a user can cause (missing file, corrupt protobuf, missing external data)
becomes a one-line `ModelError` naming the file.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import ModelError

if TYPE_CHECKING:
    import onnx

Dim = int | str | None  # fixed size, symbolic name (or formula), or unknown ("?")


@dataclass(frozen=True, slots=True)
class ValueInfo:
    """One model input or output. `kind` is tensor, sequence, map or optional."""

    name: str
    kind: str
    dtype: str  # numpy dtype name of the tensor elements ("float32", "int64", "bool", ...)
    shape: tuple[Dim, ...] | None  # None when the rank is unknown

    def shape_text(self) -> str:
        if self.shape is None:
            return "?"
        return "[" + ", ".join("?" if d is None else str(d) for d in self.shape) + "]"

    def type_text(self) -> str:
        if self.kind == "tensor":
            return f"{self.dtype}{self.shape_text()}"
        return f"{self.kind}({self.dtype})"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "dtype": self.dtype,
            "shape": list(self.shape) if self.shape is not None else None,
        }


@dataclass(frozen=True)
class ModelInfo:
    """What a model is, computed once at load and shown everywhere."""

    path: str
    sha256: str
    file_bytes: int  # the .onnx file plus its external data files
    ir_version: int
    producer: str
    opset: dict[str, int]
    inputs: tuple[ValueInfo, ...]
    outputs: tuple[ValueInfo, ...]
    nodes: int  # top-level graph nodes
    subgraph_nodes: int  # nodes inside If/Loop/Scan bodies
    op_types: dict[str, int]  # over every graph, subgraphs included
    params: int
    param_bytes: int
    external_data: tuple[str, ...] = ()
    checker_warning: str | None = None
    initializer_names: frozenset[str] = field(default_factory=frozenset, repr=False)
    # outputs the graph makes by pooling or normalizing: vectors, never class scores
    vector_outputs: frozenset[str] = field(default_factory=frozenset, repr=False)

    @property
    def name(self) -> str:
        return Path(self.path).name

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "sha256": self.sha256,
            "file_bytes": self.file_bytes,
            "ir_version": self.ir_version,
            "producer": self.producer,
            "opset": self.opset,
            "inputs": [v.to_json() for v in self.inputs],
            "outputs": [v.to_json() for v in self.outputs],
            "nodes": self.nodes,
            "subgraph_nodes": self.subgraph_nodes,
            "op_types": self.op_types,
            "params": self.params,
            "param_bytes": self.param_bytes,
            "external_data": list(self.external_data),
            "checker_warning": self.checker_warning,
        }


def load_model(
    path: str | Path, *, check: bool = True, digest: bool = True
) -> tuple[onnx.ModelProto, ModelInfo]:
    """Read, validate and describe `path`. Weights stay external (not loaded into memory).

    `check=False` skips onnx.checker (`checker_warning` is then None) and `digest=False` the
    files' SHA-256 (`sha256` is then ""): each reads the whole file again, which a caller
    that uses neither (the graph job, before its first graph) need not pay for."""
    import onnx

    from engine.files import check_model_file
    from engine.model.llm_sources import import_hint

    p = Path(path)
    check_model_file(p)  # a FIFO, a device, a socket or a file past memory: never read
    if not p.exists():
        raise ModelError("file not found", p)
    if p.is_dir() or p.suffix.lower() == ".gguf":  # said before a GGUF's gigabytes are read
        raise ModelError(import_hint(p) or "is a folder, not an .onnx file", p)
    try:
        model = onnx.load(str(p), load_external_data=False)
    except Exception as exc:  # protobuf DecodeError and friends; a GGUF file says how to import it
        why = import_hint(p) or f"not a valid ONNX file (cannot parse: {_first_line(exc)})"
        raise ModelError(why, p) from exc
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise ModelError("not a valid ONNX file (no graph)", p)
    external = _check_external_data(model, p)
    if external:  # the weights a session would read, beside the graph
        extra = sum((p.parent / e).stat().st_size for e in external)
        check_model_file(p, extra_bytes=extra)

    def check_model() -> str | None:
        try:
            onnx.checker.check_model(str(p))
        except Exception as exc:  # onnx.checker.ValidationError, or data it cannot read
            return _first_line(exc)
        return None

    checker_warning = (
        _checks.get([p, *(p.parent / e for e in external)], check_model) if check else None
    )
    info = describe(model, p, external, checker_warning, digest=digest)
    return model, info


def describe(
    model: onnx.ModelProto,
    path: Path,
    external: tuple[str, ...] = (),
    checker_warning: str | None = None,
    *,
    digest: bool = True,
) -> ModelInfo:
    """Describe an already-parsed model (pure apart from hashing the files; `digest=False`
    leaves `sha256` empty and reads no file)."""
    graph = model.graph
    op_types: Counter[str] = Counter()
    subgraph_nodes = 0
    params = 0
    param_bytes = 0
    init_names: set[str] = set()
    for depth, g in _graphs(graph):
        for init in g.initializer:
            init_names.add(init.name)
            n, b = _tensor_size(init)
            params += n
            param_bytes += b
        for node in g.node:
            op_types[_qualified_op(node)] += 1
            if depth:
                subgraph_nodes += 1
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                for attr in node.attribute:
                    if attr.name == "value" and attr.HasField("t"):
                        n, b = _tensor_size(attr.t)
                        params += n
                        param_bytes += b
    graph_inputs = [v for v in graph.input if v.name not in init_names]
    files = [path, *(path.parent / e for e in external)]
    return ModelInfo(
        path=str(path),
        sha256=files_sha256(files) if digest else "",
        file_bytes=sum(f.stat().st_size for f in files),
        ir_version=model.ir_version,
        producer=f"{model.producer_name} {model.producer_version}".strip(),
        opset={(o.domain or "ai.onnx"): o.version for o in model.opset_import},
        inputs=tuple(_value_info(v) for v in graph_inputs),
        outputs=tuple(_value_info(v) for v in graph.output),
        nodes=len(graph.node),
        subgraph_nodes=subgraph_nodes,
        op_types=dict(op_types.most_common()),
        params=params,
        param_bytes=param_bytes,
        external_data=external,
        checker_warning=checker_warning,
        initializer_names=frozenset(init_names),
        vector_outputs=vector_outputs(graph),
    )


# ops that pool or normalize: an output made by one is an embedding or a feature vector,
# even shaped [batch, n] like class scores (a third party's export names outputs "461")
_VECTOR_OPS = frozenset({
    "ReduceMean", "ReduceSum", "ReduceL2", "ReduceMax", "LpNormalization", "Tanh", "Mean",
    "LayerNormalization", "SimplifiedLayerNormalization", "GlobalAveragePool", "GlobalMaxPool",
})  # fmt: skip
_PASS_THROUGH = frozenset({"Identity", "Concat", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
                           "Cast"})  # fmt: skip


def vector_outputs(graph: onnx.GraphProto) -> frozenset[str]:
    """Outputs whose value comes from a pooling or normalizing op (through reshapes): mean
    pooling and L2 normalization end in a Div, which counts unless it divides an Exp (a
    softmax written out: class probabilities)."""
    producer = {o: n for n in graph.node for o in n.output}
    found = set()
    for out in graph.output:
        node = producer.get(out.name)
        while node is not None and node.op_type in _PASS_THROUGH and len(node.input) == 1:
            node = producer.get(node.input[0])
        if node is None:
            continue
        if node.op_type in _VECTOR_OPS:
            found.add(out.name)
        elif node.op_type == "Div" and node.input:
            top = producer.get(node.input[0])
            if top is None or top.op_type != "Exp":
                found.add(out.name)
    return frozenset(found)


def count_nodes(path: str | Path) -> int:
    """Top-level node count of a model file (used for fused graphs ORT wrote out)."""
    import onnx

    return len(onnx.load(str(path), load_external_data=False).graph.node)


def _graphs(graph: onnx.GraphProto, depth: int = 0) -> Iterator[tuple[int, onnx.GraphProto]]:
    """The graph and every subgraph (If/Loop/Scan bodies), with nesting depth."""
    yield depth, graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from _graphs(attr.g, depth + 1)
            for sub in attr.graphs:
                yield from _graphs(sub, depth + 1)


def _qualified_op(node: onnx.NodeProto) -> str:
    if node.domain in ("", "ai.onnx"):
        return node.op_type
    return f"{node.domain}.{node.op_type}"


def _tensor_size(t: onnx.TensorProto) -> tuple[int, int]:
    """Elements and bytes of a tensor from its dims and type (works for external data)."""
    import onnx

    n = 1
    for d in t.dims:
        n *= d
    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
    except (KeyError, ValueError, TypeError):
        itemsize = 1  # exotic types (4-bit, strings): count one byte per element
    if t.data_type == onnx.TensorProto.STRING:
        return n, sum(len(s) for s in t.string_data)
    return n, n * itemsize


def _value_info(v: onnx.ValueInfoProto) -> ValueInfo:
    t = v.type
    which = t.WhichOneof("value")
    if which == "tensor_type":
        return ValueInfo(v.name, "tensor", _np_name(t.tensor_type.elem_type), _shape(t.tensor_type))
    if which == "sequence_type":
        inner = t.sequence_type.elem_type
        inner_which = inner.WhichOneof("value")
        if inner_which == "tensor_type":
            return ValueInfo(v.name, "sequence", _np_name(inner.tensor_type.elem_type), None)
        if inner_which == "map_type":
            m = inner.map_type
            vt = m.value_type.tensor_type.elem_type if m.value_type.HasField("tensor_type") else 0
            return ValueInfo(
                v.name, "sequence", f"map({_np_name(m.key_type)},{_np_name(vt)})", None
            )
        return ValueInfo(v.name, "sequence", "?", None)
    if which == "map_type":
        m = t.map_type
        vt = m.value_type.tensor_type.elem_type if m.value_type.HasField("tensor_type") else 0
        return ValueInfo(v.name, "map", f"{_np_name(m.key_type)},{_np_name(vt)}", None)
    if which == "optional_type":
        inner = t.optional_type.elem_type
        if inner.HasField("tensor_type"):
            return ValueInfo(
                v.name, "optional", _np_name(inner.tensor_type.elem_type), _shape(inner.tensor_type)
            )
        return ValueInfo(v.name, "optional", "?", None)
    if which == "sparse_tensor_type":
        return ValueInfo(v.name, "sparse", _np_name(t.sparse_tensor_type.elem_type), None)
    return ValueInfo(v.name, which or "?", "?", None)


def _shape(tt: Any) -> tuple[Dim, ...] | None:
    if not tt.HasField("shape"):
        return None
    dims: list[Dim] = []
    for d in tt.shape.dim:
        which = d.WhichOneof("value")
        if which == "dim_value" and d.dim_value >= 0:
            dims.append(int(d.dim_value))
        elif which == "dim_param" and d.dim_param.strip():
            dims.append(d.dim_param.strip())
        else:
            dims.append(None)  # "?" or a negative size some exporters write
    return tuple(dims)


def _np_name(elem_type: int) -> str:
    import onnx

    if not elem_type:
        return "?"
    try:
        return str(onnx.helper.tensor_dtype_to_np_dtype(elem_type).name)
    except (KeyError, ValueError, TypeError):
        return str(onnx.TensorProto.DataType.Name(elem_type)).lower()


def _check_external_data(model: onnx.ModelProto, path: Path) -> tuple[str, ...]:
    """The external data files a model references; each must exist beside it."""
    import onnx

    from engine.files import check_model_file

    locations: dict[str, str] = {}
    for _, g in _graphs(model.graph):
        tensors = list(g.initializer)
        for node in g.node:
            tensors.extend(a.t for a in node.attribute if a.HasField("t"))
        for t in tensors:
            if t.data_location != onnx.TensorProto.EXTERNAL:
                continue
            loc = next((e.value for e in t.external_data if e.key == "location"), "")
            if not loc:
                raise ModelError(f"tensor {t.name!r} is external but names no file", path)
            if "\x00" in loc:  # no file system holds such a name
                raise ModelError(f"external data {loc!r} has a NUL byte in its name", path)
            locations.setdefault(loc, t.name)
    base = path.parent.resolve()
    for loc, tensor in locations.items():
        target = (path.parent / loc).resolve()
        if base not in target.parents and target != base:
            raise ModelError(f"external data {loc!r} points outside the model's folder", path)
        check_model_file(target)  # a FIFO or a device named as the weights
        if not target.is_file():
            raise ModelError(
                f"missing external data file {loc!r} (needed by tensor {tensor!r}); "
                "keep it beside the model",
                path,
            )
    return tuple(sorted(locations))


# Results that read whole files (hash, checker), by the files' identity: the live engine
# loads the same model again at every config change, and a model of a few GB would cost
# seconds each time. A file rewritten in place changes its mtime or size, so is read again.
_FileKey = tuple[str, int, int, int, int]  # resolved path, device, inode, size, mtime (ns)
_KEPT = 8  # models remembered


class _ByFiles:
    """A small memo keyed by the identity of a list of files (most recent last)."""

    def __init__(self) -> None:
        self._items: dict[tuple[_FileKey, ...], Any] = {}

    @staticmethod
    def key(files: list[Path]) -> tuple[_FileKey, ...]:
        out = []
        for f in files:
            st = f.stat()
            out.append((str(f.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(out)

    def get(self, files: list[Path], compute: Callable[[], Any]) -> Any:
        key = self.key(files)
        if key in self._items:
            self._items[key] = self._items.pop(key)  # most recent last
        else:
            self._items[key] = compute()
            while len(self._items) > _KEPT:
                self._items.pop(next(iter(self._items)))
        return self._items[key]


_hashes = _ByFiles()
_checks = _ByFiles()


def files_sha256(files: list[Path]) -> str:
    """One SHA-256 over the files' bytes in order (remembered while the files are unchanged)."""

    def compute() -> str:
        h = hashlib.sha256()
        for f in files:
            with f.open("rb") as fh:
                while chunk := fh.read(1 << 20):
                    h.update(chunk)
        return h.hexdigest()

    return str(_hashes.get(files, compute))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), text)
    return line[:300]
