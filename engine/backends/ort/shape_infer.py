"""ONNX Runtime's symbolic shape inference, the one its transformer tools use: it follows
the Shape -> Gather -> Concat -> Reshape chains of exported transformers, where ONNX's own
inference (even with data propagation) gives up. On paraphrase-MiniLM-L3 at 1x128, ONNX's
left 118 of 354 node outputs unknown and this one none, in 20 ms."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx

_MODULE = "onnxruntime.tools.symbolic_shape_infer"
_LOGGER = _MODULE  # its logger is named for it


def symbolic_shapes(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """`model` with every shape the symbolic inference could tell, including where it could
    not tell them all (its public entry point then saves the model into the working folder
    and raises; this one never writes a file) and where it trips on a node (what it told
    before it: on an OCR recognizer 124 of 140 shapes ONNX's left unknown, not none). None
    where it cannot read the model."""
    try:
        SymbolicShapeInference = symbolic_module().SymbolicShapeInference
    except (ImportError, OSError, AttributeError):
        return None
    opsets = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not opsets or opsets[0] < 7:
        return None
    infer = SymbolicShapeInference(2**31 - 1, True, False, 0)  # auto-merge dims
    try:
        with _quiet():
            infer._preprocess(model)
    except Exception:  # a model it cannot read at all: ONNX's inference stands
        return None
    try:
        with _quiet():
            while infer.run_:
                infer._infer_impl()
            infer._update_output_from_vi()
    except Exception:  # a node it trips on (an op in a form it does not know, dims that
        pass  # disagree): the shapes it told before that node stand, not none of them
    out: onnx.ModelProto = infer.out_mp_
    return out


def symbolic_module() -> Any:
    """onnxruntime.tools.symbolic_shape_infer, read from its file without its package's
    __init__, which imports PyTorch wherever it is installed (for a helper this never uses:
    1.4 of its 1.7 CPU-seconds before the first shape, the graph job's largest step on a
    busy machine, issue 53). It stays in sys.modules under its own name, so ORT's own
    `from onnxruntime.tools.symbolic_shape_infer import ...` (quant_pre_process, before an
    INT8 build) finds it there and skips that __init__ too."""
    import importlib.util
    import sys
    from pathlib import Path

    if _MODULE in sys.modules:
        return sys.modules[_MODULE]
    ort = importlib.util.find_spec("onnxruntime")  # finds the package, imports nothing
    if ort is None or not ort.submodule_search_locations:
        raise ImportError("onnxruntime is not installed")
    path = Path(next(iter(ort.submodule_search_locations))) / "tools" / "symbolic_shape_infer.py"
    spec = importlib.util.spec_from_file_location(_MODULE, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be read")
    module = importlib.util.module_from_spec(spec)
    sys.modules[_MODULE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[_MODULE]
        raise
    return module


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Its warnings (an op it cannot infer, dims it merged) are not the user's business."""
    log = logging.getLogger(_LOGGER)
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)
