"""Turn a PyTorch file into an ONNX file (cached) so every ONNX Runtime feature applies.

`.pt2` programs go through the dynamo exporter (`torch.onnx.export(program, dynamo=True)`,
weights inside the .onnx file); their dynamic dims stay dynamic. TorchScript modules cannot
be traced by dynamo, so they use the TorchScript exporter with a dynamic batch axis.
The result is cached by (file sha256, export parameters, torch version).
"""

from __future__ import annotations

import contextlib
import io
import logging
import time
import warnings
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import Any

from engine import cache
from engine.backends.pytorch.load import (
    TorchModel,
    fixed_batch_note,
    import_torch,
    input_shapes,
    load_torch,
)
from engine.errors import ModelError, one_line
from engine.events import Event, Notice, Progress
from engine.model.info import count_nodes, files_sha256

EXPORTER_VERSION = 1
OPSET = 18


def onnx_for_torch(
    path: str, batch: int, overrides: Mapping[str, tuple[int, ...]]
) -> Generator[Event, None, tuple[str, dict[str, Any]]]:
    """Yield progress; return the exported ONNX path and its facts (export_s, nodes, ...)."""
    torch = import_torch()
    p = Path(path)
    if not p.is_file():
        raise ModelError("file not found", p)
    sha = files_sha256([p])
    yield Progress("load", 0, None, f"loading {p.name} (PyTorch)")
    model = load_torch(p)
    shapes = input_shapes(model, batch, overrides)
    note = fixed_batch_note(model, batch, shapes)
    if note is not None:
        yield note
    params = {
        "exporter": "dynamo" if model.kind == "export" else "torchscript",
        "opset": OPSET,
        "shapes": {} if model.kind == "export" else {k: list(v[1:]) for k, v in shapes.items()},
        "version": EXPORTER_VERSION,
    }
    key = cache.cache_key({"model": sha, "params": params, "torch": torch.__version__})
    hit = cache.cached_entry("torch-onnx", key)
    if hit is not None:
        meta = cache.read_meta(hit)
        yield Notice(
            "info",
            f"ONNX export of {p.name} from the cache "
            f"({meta.get('nodes', '?')} nodes, exported in "
            f"{float(meta.get('export_s', 0.0)):.1f} s)",
        )
        # the same bytes may have been exported from another path: this file is the source
        return str(hit / "model.onnx"), {**meta, "source": str(p), "cached": True}
    yield Progress("export", 0, None, f"exporting {p.name} to ONNX ({params['exporter']})")
    staging = cache.Staging("torch-onnx", key)
    out = staging.path / "model.onnx"
    t0 = time.perf_counter()
    try:
        _export(torch, model, shapes, out)
        nodes = count_nodes(out)
    except ModelError:
        staging.discard()
        raise
    except Exception as exc:
        staging.discard()
        raise ModelError(f"cannot export to ONNX: {one_line(exc)}", p) from exc
    except BaseException:
        staging.discard()
        raise
    export_s = time.perf_counter() - t0
    meta = {
        "source": str(p),
        "source_sha256": sha,
        "exporter": params["exporter"],
        "export_s": export_s,
        "nodes": nodes,
        "torch": torch.__version__,
        "kind": model.kind,
    }
    final = staging.commit(meta)
    yield Notice("info", f"exported {p.name} to ONNX in {export_s:.1f} s ({nodes} nodes)")
    return str(final / "model.onnx"), {**meta, "cached": False}


def _export(
    torch: Any, model: TorchModel, shapes: Mapping[str, tuple[int, ...]], out: Path
) -> None:
    """Run the exporter quietly (it prints progress to stdout, which may carry --json -)."""
    names = [i.name for i in model.inputs]
    args = tuple(_example(torch, model, name, shapes[name]) for name in names)
    sink = io.StringIO()
    log = logging.getLogger("torch.onnx")
    level = log.level
    log.setLevel(logging.ERROR)  # "torchvision is not installed" warnings on every export
    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(sink),
            contextlib.redirect_stderr(sink),
        ):
            warnings.simplefilter("ignore")
            if model.kind == "export":
                torch.onnx.export(
                    model.program,
                    args,
                    str(out),
                    dynamo=True,
                    external_data=False,
                    input_names=names,
                    opset_version=OPSET,
                    verbose=False,
                )
            else:
                torch.onnx.export(
                    model.module,
                    args,
                    str(out),
                    dynamo=False,
                    input_names=names,
                    opset_version=OPSET,
                    dynamic_axes={n: {0: "batch"} for n in names},
                )
    finally:
        log.setLevel(level)


def _example(torch: Any, model: TorchModel, name: str, shape: tuple[int, ...]) -> Any:
    inp = next(i for i in model.inputs if i.name == name)
    if inp.example is not None and tuple(inp.example.shape) == tuple(shape):
        return inp.example
    dtype = getattr(torch, inp.dtype)
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=dtype)
    return torch.zeros(shape, dtype=dtype)
