"""Model inputs: resolve symbolic dims, generate seeded data, or load real data from .npz.

Generated data must be plausible for the model to run at all: token ids below the
vocabulary size (read from the embedding Gather), attention masks of ones, floats from a
seeded normal distribution.
"""

from __future__ import annotations

import ast
import operator
import re
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.errors import InputError
from engine.model.info import Dim, ModelInfo, ValueInfo
from engine.model.sizes import check_fits, dtype_of

if TYPE_CHECKING:
    import onnx

Feeds = dict[str, np.ndarray]

SEQ_DEFAULT = 128
SPATIAL_DEFAULT = 224
OTHER_DEFAULT = 16
SEQ_WORDS = ("seq", "len", "token", "step", "time", "past", "sentence", "word")
SPATIAL_WORDS = ("height", "width")
MAX_RANK = 64  # the most axes a numpy array (and so an input we make or read) can have


@dataclass(frozen=True)
class InputPlan:
    """Concrete shapes per input and how each symbolic dim got its value (for the user)."""

    shapes: dict[str, tuple[int, ...]]
    dims: dict[str, int]  # symbolic name -> value
    notes: tuple[str, ...]
    # dims the plan chose (not the user, not the batch): label -> value; a label is a
    # symbolic name, or "input[axis]" for an unnamed dim
    defaulted: dict[str, int] = field(default_factory=dict)


def parse_shape_override(text: str) -> tuple[str, tuple[int, ...]]:
    """Parse `NAME=AxBxC` (as given to --shape)."""
    name, sep, dims = text.partition("=")
    if not sep or not name or not dims:
        raise InputError(f"--shape {text!r}: expected NAME=AxBxC, e.g. input_ids=1x128")
    try:
        shape = tuple(int(d) for d in re.split(r"[x,]", dims.strip().lower()))
    except ValueError:
        raise InputError(f"--shape {text!r}: dims must be integers like 1x3x224x224") from None
    if any(d < 0 for d in shape):
        raise InputError(f"--shape {text!r}: dims must not be negative")
    return name.strip(), shape


def parse_dim_override(text: str) -> tuple[str, int]:
    """Parse `NAME=N` (as given to --dim): a symbolic input dim by name, e.g. sequence=256."""
    name, sep, value = text.partition("=")
    try:
        size = int(value.strip()) if sep and name.strip() else None
    except ValueError:
        size = None
    if size is None:
        raise InputError(f"--dim {text!r}: expected NAME=N, e.g. sequence=256")
    if size < 1:
        raise InputError(f"--dim {text!r}: the size must be a positive integer")
    return name.strip(), size


def plan_inputs(
    info: ModelInfo,
    batch: int,
    overrides: Mapping[str, tuple[int, ...]] | None = None,
    dims_set: Mapping[str, int] | None = None,
    sizes: Mapping[str, int] | None = None,
) -> InputPlan:
    """Choose a concrete shape for every tensor input. `dims_set` gives symbolic dims by
    name (the window's 'height', 'sequence' boxes); `overrides` whole shapes by input;
    `sizes` replaces the default of dims the user did not set, by label (see
    `InputPlan.defaulted`: the search for sizes a model accepts)."""
    overrides = dict(overrides or {})
    chosen: dict[str, int] = {}
    names = {v.name for v in info.inputs}
    for name in overrides:
        if name not in names:
            known = ", ".join(sorted(names)) or "none"
            raise InputError(f"--shape names unknown input {name!r} (inputs: {known})", info.path)
    dims: dict[str, int] = _checked_dims(info, dims_set or {})
    notes: list[str] = []
    # Overrides pin the symbolic names they cover, so other inputs sharing a name agree.
    for v in info.inputs:
        if v.name in overrides:
            shape = overrides[v.name]
            _check_override(info, v, shape)
            for d, size in zip(v.shape or (), shape, strict=False):
                if isinstance(d, str) and _is_name(d):
                    dims.setdefault(d, size)
    shapes: dict[str, tuple[int, ...]] = {}
    for v in info.inputs:
        if v.kind != "tensor":
            raise InputError(
                f"input {v.name!r} is a {v.kind}; generated inputs need tensors — "
                "pass real data with --inputs FILE.npz",
                info.path,
            )
        rank = len(overrides[v.name]) if v.name in overrides else len(v.shape or ())
        if rank > MAX_RANK:
            raise InputError(
                f"input {v.name!r} has rank {rank}: at most {MAX_RANK} axes can be made",
                info.path,
            )
        if v.name in overrides:
            shapes[v.name] = overrides[v.name]
            continue
        if v.shape is None:
            raise InputError(
                f"input {v.name!r} has unknown rank; give it with --shape {v.name}=AxB", info.path
            )
        concrete = []
        for axis, d in enumerate(v.shape):
            concrete.append(_resolve_dim(d, axis, v, batch, dims, notes, sizes or {}, chosen))
        shapes[v.name] = tuple(concrete)
    return InputPlan(shapes, dims, tuple(dict.fromkeys(notes)), chosen)


def _checked_dims(info: ModelInfo, dims_set: Mapping[str, int]) -> dict[str, int]:
    """The named dims given, each one the model has, each a positive integer."""
    known = {d for v in info.inputs for d in (v.shape or ()) if isinstance(d, str)}
    for name, value in dims_set.items():
        if name not in known:
            raise InputError(
                f"input dim {name!r} is not a symbolic dim of this model "
                f"(it has {', '.join(sorted(known)) or 'none'})",
                info.path,
            )
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"input dim {name} must be a positive integer, got {value!r}")
    return dict(dims_set)


def _resolve_dim(
    d: Dim,
    axis: int,
    v: ValueInfo,
    batch: int,
    dims: dict[str, int],
    notes: list[str],
    sizes: Mapping[str, int],
    chosen: dict[str, int],
) -> int:
    if isinstance(d, int):
        return d
    if isinstance(d, str) and d in dims:
        return dims[d]
    if isinstance(d, str) and not _is_name(d):
        value = _eval_formula(d, dims)
        if value is not None:
            return value
    label = d if isinstance(d, str) else f"{v.name}[{axis}]"
    lower = label.lower()
    if axis == 0 or "batch" in lower:
        value, why = batch, "batch"
    elif any(w in lower for w in SEQ_WORDS):
        value, why = SEQ_DEFAULT, "default sequence length"
    elif any(w in lower for w in SPATIAL_WORDS) or (
        v.shape is not None and len(v.shape) == 4 and axis >= 2 and v.dtype.startswith("float")
    ):
        value, why = SPATIAL_DEFAULT, "default image size"
    elif v.shape is not None and len(v.shape) == 4 and axis == 1:
        value, why = 3, "default channels"
    elif (
        v.shape is not None and len(v.shape) == 2 and axis == 1 and not v.dtype.startswith("float")
    ):
        value, why = SEQ_DEFAULT, "default sequence length"
    else:
        value, why = OTHER_DEFAULT, "default"
    if why != "batch" and label in sizes:
        value, why = sizes[label], f"the default {value} was too small for the model"
    if isinstance(d, str) and _is_name(d):
        dims[d] = value
    if why != "batch":
        chosen[label] = value
        notes.append(f"{label}={value} ({why}; override with --shape {v.name}=...)")
    return value


def _check_override(info: ModelInfo, v: ValueInfo, shape: tuple[int, ...]) -> None:
    if v.shape is None:
        return
    if len(shape) != len(v.shape):
        raise InputError(
            f"--shape {v.name}: model expects rank {len(v.shape)} {v.shape_text()}, "
            f"got {len(shape)} dims",
            info.path,
        )
    for axis, (want, got) in enumerate(zip(v.shape, shape, strict=True)):
        if isinstance(want, int) and want != got:
            raise InputError(
                f"--shape {v.name}: axis {axis} is fixed at {want} in the model, got {got}",
                info.path,
            )


def _is_name(d: str) -> bool:
    return d.isidentifier()


_OPS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.floordiv,
    ast.Mod: operator.mod,
}


def _eval_formula(text: str, dims: Mapping[str, int]) -> int | None:
    """Evaluate a dim formula like `2*seq+1` over known dims; never `eval`."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return None

    def walk(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in dims:
            return dims[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        raise ValueError(text)

    try:
        value = walk(tree)
    except (ValueError, ZeroDivisionError):
        return None
    return value if value >= 0 else None


def generate_inputs(
    model: onnx.ModelProto, info: ModelInfo, plan: InputPlan, seed: int = 0
) -> Feeds:
    """Seeded random inputs of the planned shapes, with values the model can accept."""
    check_fits(
        {v.name: (plan.shapes[v.name], dtype_of(v)) for v in info.inputs}, info.path, "generated"
    )
    from engine.model.memory_need import check_need

    check_need(model, info, plan.shapes, "generated inputs")  # and one inference on them
    rng = np.random.default_rng(seed)
    limits = index_limits(model, {v.name for v in info.inputs})
    feeds: Feeds = {}
    for v in info.inputs:
        shape = plan.shapes[v.name]
        feeds[v.name] = _values_for(v, shape, limits.get(v.name), rng)
    return feeds


def _values_for(
    v: ValueInfo, shape: tuple[int, ...], limit: int | None, rng: np.random.Generator
) -> np.ndarray:
    dtype = dtype_of(v)
    name = v.name.lower()
    if dtype == np.bool_:
        if "mask" in name:
            return np.ones(shape, dtype=np.bool_)
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        if "mask" in name:
            return np.ones(shape, dtype=dtype)
        if "position" in name and shape:
            return np.broadcast_to(np.arange(shape[-1], dtype=dtype), shape).copy()
        high = limit if limit else (1 if "type" in name else 2)
        return rng.integers(0, max(high, 1), size=shape, dtype=dtype)
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind in "SUO":
        return np.full(shape, "opscope", dtype=object)
    return np.zeros(shape, dtype=dtype)


def index_limits(model: onnx.ModelProto, input_names: set[str]) -> dict[str, int]:
    """Exclusive upper bounds for integer inputs used as Gather indices into a table."""
    graph = model.graph
    init_rows = {t.name: t.dims[0] for t in graph.initializer if len(t.dims) >= 1}
    for node in graph.node:  # weights stored in Constant nodes count too
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value" and a.HasField("t") and a.t.dims:
                    init_rows[node.output[0]] = a.t.dims[0]
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for i, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, i))
    limits: dict[str, int] = {}
    for name in input_names:
        frontier, seen = [name], set()
        while frontier:
            value = frontier.pop()
            if value in seen:
                continue
            seen.add(value)
            for node, idx in consumers.get(value, []):
                if node.op_type in ("Gather", "GatherElements") and idx == 1:
                    rows = init_rows.get(node.input[0])
                    if rows:
                        limits[name] = min(limits.get(name, rows), int(rows))
                elif node.op_type in (
                    "Cast",
                    "Unsqueeze",
                    "Squeeze",
                    "Reshape",
                    "Flatten",
                    "Identity",
                ):
                    frontier.extend(node.output)
    return limits


def npz_headers(path: Path) -> dict[str, tuple[tuple[int, ...], np.dtype[Any]]]:
    """Each array's shape and dtype as its .npy header declares them, read without loading
    the data (a header can claim terabytes)."""
    out: dict[str, tuple[tuple[int, ...], np.dtype[Any]]] = {}
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            if not name.endswith(".npy"):
                continue
            with z.open(name) as fh:
                version = np.lib.format.read_magic(fh)
                reader = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                          else np.lib.format.read_array_header_2_0)  # fmt: skip
                shape, _, dtype = reader(fh)
            out[name.removesuffix(".npy")] = (tuple(int(d) for d in shape), np.dtype(dtype))
    return out


def load_npz(path: str | Path, info: ModelInfo) -> Feeds:
    """Read real inputs from an .npz (keys = input names). Never unpickles."""
    p = Path(path)
    if not p.is_file():
        raise InputError("inputs file not found", p)
    try:
        check_fits(npz_headers(p), str(p), "the file's")  # before numpy allocates them
        with np.load(p, allow_pickle=False) as data:
            arrays = {k: np.asarray(data[k]) for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise InputError(f"not a readable .npz file ({exc})", p) from exc
    wanted = {v.name: v for v in info.inputs}
    missing = sorted(set(wanted) - set(arrays))
    if missing:
        raise InputError(
            f"missing arrays for inputs {', '.join(missing)} "
            f"(file has {', '.join(sorted(arrays)) or 'none'})",
            p,
        )
    feeds: Feeds = {}
    for name, v in wanted.items():
        arr = arrays[name]
        if v.dtype not in ("?", "") and arr.dtype != np.dtype(v.dtype):
            try:
                arr = arr.astype(v.dtype, casting="same_kind")
            except TypeError:
                raise InputError(
                    f"array {name!r} is {arr.dtype}, model wants {v.dtype}", p
                ) from None
        if v.shape is not None and arr.ndim != len(v.shape):
            raise InputError(
                f"array {name!r} has shape {list(arr.shape)}, model wants {v.shape_text()}", p
            )
        feeds[name] = arr
    return feeds


def empty_inputs(feeds: Mapping[str, np.ndarray]) -> str | None:
    """A warning when an input holds no elements (a 1x0 shape): the model runs on nothing,
    so its timings say little; None otherwise."""
    empty = [f"{k} {'x'.join(map(str, a.shape))}" for k, a in feeds.items() if a.size == 0]
    if not empty:
        return None
    return (
        f"input {', '.join(empty)} holds no elements: the model runs on nothing and these "
        "timings say little about real inputs"
    )


def describe_feeds(feeds: Mapping[str, np.ndarray]) -> str:
    return ", ".join(f"{k} {a.dtype}[{'x'.join(map(str, a.shape))}]" for k, a in feeds.items())
