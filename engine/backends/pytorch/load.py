"""Open PyTorch files without running code from them, and make inputs for them.

Which loader runs is decided from the file's layout alone (nothing is unpickled to decide):

- `torch.export` archives (`.pt2`, `torch.export.save`): a zip with `*/archive_format` and
  `*/models/*.json`; loaded with `torch.export.load` (a graph of aten ops, no user code).
- TorchScript archives (`torch.jit.save`): a zip with `*/code/` and `*/constants.pkl`;
  loaded with `torch.jit.load`, whose unpickler only rebuilds TorchScript types, tensors and
  primitives (classes are resolved in the TorchScript type system, never imported from
  Python), so a TorchScript file cannot make Python run arbitrary code.
- Anything else pickle-based (`torch.save` zips with `*/data.pkl`, legacy pickles starting
  with 0x80): `torch.load(weights_only=True)`, which refuses every global outside an
  allow-list of tensor types; a state dict loads but has no architecture, so it is refused
  with the formats that work.

torch is an optional extra: it is imported inside the functions that need it.
"""

from __future__ import annotations

import warnings
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import InputError, ModelError, one_line
from engine.events import Notice

TORCH_SUFFIXES = (".pt2", ".pt", ".pth")
NEED_TORCH = "PyTorch files need torch: pip install 'opscope[torch]'"
FORMATS_THAT_WORK = (
    "save the model with torch.export.save (a .pt2 program) or torch.jit.save (TorchScript)"
)


def is_torch_file(path: str | Path) -> bool:
    """Whether `path` names a PyTorch file by its suffix."""
    return Path(path).suffix.lower() in TORCH_SUFFIXES


def import_torch() -> Any:
    """torch, or a one-line ModelError when the optional extra is not installed."""
    try:
        import torch
    except ImportError:
        raise ModelError(NEED_TORCH) from None
    return torch


def detect_kind(path: str | Path) -> str:
    """'export', 'torchscript', 'pickle' or 'unknown', from the bytes only (no unpickling)."""
    p = Path(path)
    if zipfile.is_zipfile(p):
        try:
            names = zipfile.ZipFile(p).namelist()
        except (OSError, zipfile.BadZipFile):
            return "unknown"
        if any(n.endswith("/archive_format") or n == "archive_format" for n in names) or any(
            "/models/" in n and n.endswith(".json") for n in names
        ):
            return "export"
        if any("/code/" in n for n in names) and any(n.endswith("constants.pkl") for n in names):
            return "torchscript"
        if any(n.endswith("data.pkl") for n in names):
            return "pickle"
        return "unknown"
    with p.open("rb") as fh:
        head = fh.read(2)
    return "pickle" if head[:1] == b"\x80" else "unknown"


@dataclass
class TorchInput:
    """One user input: name, dtype (numpy name), example shape, and which dims are dynamic."""

    name: str
    dtype: str
    shape: tuple[int, ...] | None  # None when the file carries no example (TorchScript)
    dynamic: frozenset[int] = frozenset()
    example: Any = None  # the example tensor, when the file has one


@dataclass
class TorchModel:
    """A loaded PyTorch model: `module` is callable with tensors in input order."""

    path: str
    kind: str  # "export" | "torchscript"
    module: Any
    program: Any  # the ExportedProgram, or None
    inputs: list[TorchInput] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)


def load_torch(path: str | Path) -> TorchModel:
    """Load a .pt2 program or a TorchScript archive; refuse everything else clearly."""
    from engine.files import check_model_file

    p = Path(path)
    check_model_file(p)  # a FIFO, a device, a socket or a file past memory: never read
    if not p.exists():
        raise ModelError("file not found", p)
    if p.is_dir():
        raise ModelError("is a folder, not a PyTorch file", p)
    torch = import_torch()
    kind = detect_kind(p)
    if kind == "export":
        try:
            with warnings.catch_warnings():  # its weights are read into a read-only buffer,
                warnings.simplefilter("ignore", UserWarning)  # which it says, to the user
                program = torch.export.load(str(p))
        except Exception as exc:
            raise ModelError(f"cannot load the torch.export program ({one_line(exc)})", p) from exc
        return TorchModel(
            str(p),
            "export",
            program.module(),
            program,
            _export_inputs(program),
            _export_outputs(program),
        )
    if kind == "torchscript":
        try:
            module = torch.jit.load(str(p), map_location="cpu")
        except Exception as exc:
            raise ModelError(f"cannot load the TorchScript archive ({one_line(exc)})", p) from exc
        module.eval()
        return TorchModel(str(p), "torchscript", module, None, _script_inputs(module))
    if kind == "pickle":
        _refuse_pickle(torch, p)
    raise ModelError(f"not a PyTorch model file I can read; {FORMATS_THAT_WORK}", p)


def _refuse_pickle(torch: Any, p: Path) -> None:
    """Load a plain torch.save pickle with weights_only=True, then explain why it cannot run."""
    import pickle

    try:
        obj = torch.load(str(p), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if "GLOBAL" in ln]
        reason = lines[0].rstrip(".") if lines else one_line(exc)
        raise ModelError(
            "refused: unpickling this file would need arbitrary code "
            f"({reason[:160]}); it was not executed; {FORMATS_THAT_WORK}",
            p,
        ) from None
    except Exception as exc:
        raise ModelError(
            f"cannot read the pickle ({one_line(exc)}); {FORMATS_THAT_WORK}", p
        ) from None
    if isinstance(obj, Mapping):
        raise ModelError(
            f"holds a state dict (weights without an architecture); {FORMATS_THAT_WORK}", p
        )
    raise ModelError(f"holds a {type(obj).__name__}, not a runnable model; {FORMATS_THAT_WORK}", p)


def _export_inputs(program: Any) -> list[TorchInput]:
    """User inputs of an ExportedProgram: names, dtypes, example shapes, dynamic dims."""
    import torch

    user = [
        s.arg.name
        for s in program.graph_signature.input_specs
        if s.kind == torch.export.graph_signature.InputKind.USER_INPUT
    ]
    vals = {n.name: n.meta.get("val") for n in program.graph.nodes if n.op == "placeholder"}
    examples: list[Any] = []
    if program.example_inputs is not None:
        args, kwargs = program.example_inputs
        examples = list(args) + list(kwargs.values())
    out: list[TorchInput] = []
    for i, name in enumerate(user):
        val = vals.get(name)
        ex = examples[i] if i < len(examples) and isinstance(examples[i], torch.Tensor) else None
        if val is None or not hasattr(val, "shape"):
            raise ModelError(f"input {name!r} is not a tensor; only tensor inputs are supported")
        dynamic = frozenset(d for d, s in enumerate(val.shape) if not isinstance(s, int))
        shape = (
            tuple(int(s) for s in ex.shape)
            if ex is not None
            else tuple(int(s) if isinstance(s, int) else 1 for s in val.shape)
        )
        out.append(TorchInput(name, _np_dtype(val.dtype), shape, dynamic, ex))
    return out


def _export_outputs(program: Any) -> list[str]:
    return [
        getattr(s.arg, "name", f"output_{i}")
        for i, s in enumerate(program.graph_signature.output_specs)
    ]


def _script_inputs(module: Any) -> list[TorchInput]:
    """TorchScript forward arguments (no example shapes: --shape is required)."""
    args = module.forward.schema.arguments[1:]  # skip self
    return [TorchInput(a.name, "float32", None) for a in args]


def input_shapes(
    model: TorchModel, batch: int, overrides: Mapping[str, tuple[int, ...]]
) -> dict[str, tuple[int, ...]]:
    """Concrete shapes: --shape overrides, else the example with a dynamic batch dim set."""
    names = {i.name for i in model.inputs}
    unknown = set(overrides) - names
    if unknown:
        raise InputError(
            f"--shape names {', '.join(sorted(unknown))} but the model's inputs "
            f"are {', '.join(sorted(names))}",
            model.path,
        )
    shapes: dict[str, tuple[int, ...]] = {}
    for inp in model.inputs:
        if inp.name in overrides:
            shapes[inp.name] = tuple(overrides[inp.name])
        elif inp.shape is None:
            raise InputError(
                f"TorchScript files carry no example inputs: give input "
                f"{inp.name!r} a shape with --shape {inp.name}=AxB",
                model.path,
            )
        else:
            shape = list(inp.shape)
            if shape and 0 in inp.dynamic:
                shape[0] = batch
            shapes[inp.name] = tuple(shape)
    return shapes


def fixed_batch_note(
    model: TorchModel, batch: int, shapes: Mapping[str, tuple[int, ...]]
) -> Notice | None:
    """A notice when the file fixes a batch other than the one asked for: a .pt2 exported
    without a dynamic batch dim runs only at its example's batch."""
    fixed: set[int] = set()
    for inp in model.inputs:
        shape = shapes.get(inp.name)
        if (
            shape
            and inp.shape is not None
            and 0 not in inp.dynamic
            and tuple(shape) == tuple(inp.shape)
        ):
            fixed.add(int(shape[0]))
    if len(fixed) != 1 or batch in fixed:
        return None
    got = fixed.pop()
    return Notice(
        "warning" if batch != 1 else "info",
        f"{Path(model.path).name} was exported with a fixed batch of {got} (no dynamic "
        f"batch dim): running batch {got}, not {batch}; export with "
        "torch.export.Dim on dim 0 to vary it",
    )


def make_inputs(
    model: TorchModel, shapes: Mapping[str, tuple[int, ...]], seed: int = 0
) -> dict[str, np.ndarray]:
    """Seeded inputs: floats from N(0, 1); integers below the example's max (token ids)."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for inp in model.inputs:
        shape = shapes[inp.name]
        dtype = np.dtype(inp.dtype)
        if dtype.kind == "f":
            feeds[inp.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[inp.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            high = 2
            if inp.example is not None and inp.example.numel():
                high = max(2, int(inp.example.max()) + 1)
            feeds[inp.name] = rng.integers(0, high, shape).astype(dtype)
    return feeds


def _np_dtype(dtype: Any) -> str:
    text = str(dtype).removeprefix("torch.")
    return {"bfloat16": "float32", "bool": "bool"}.get(text, text)
