"""A model's editable input dims and its inputs' concrete shapes, as the window shows them.

A detector's `images float32[batch, 3, height, width]` runs at some concrete size; the
window says which ("images 1x3x224x224, default size") and offers a box for each named
symbolic dim other than the batch (height, width, sequence). Plain Python, no Qt.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from engine.errors import InputError
from engine.model.info import ModelInfo
from engine.model.inputs import plan_inputs

MAX_DIM = 65_536  # a box's upper bound (larger inputs fail the memory check anyway)


@dataclass(frozen=True, slots=True)
class SymbolicDim:
    """One named symbolic dim the user may set: its default and what picked it."""

    name: str  # as the model names it: "height", "sequence"
    default: int  # what runs when it is not set
    why: str  # "default image size", "default sequence length", "default"
    inputs: tuple[str, ...]  # the inputs that carry it


def is_batch_dim(name: str, axis: int) -> bool:
    """Whether a symbolic dim is the batch (the Batch knob fills it)."""
    return axis == 0 or "batch" in name.lower()


def editable_dims(info: ModelInfo) -> list[SymbolicDim]:
    """The named symbolic dims other than the batch, in the order the inputs carry them
    (none when the inputs cannot be generated at all, e.g. a sequence input)."""
    try:
        plan = plan_inputs(info, 1)
    except InputError:
        return []
    why = _reasons(plan.notes)
    found: dict[str, list[str]] = {}
    for v in info.inputs:
        for axis, d in enumerate(v.shape or ()):
            if isinstance(d, str) and d.isidentifier() and not is_batch_dim(d, axis):
                users = found.setdefault(d, [])
                if v.name not in users:
                    users.append(v.name)
    batch_names = {
        d
        for v in info.inputs
        for axis, d in enumerate(v.shape or ())
        if isinstance(d, str) and is_batch_dim(d, axis)
    }
    return [
        SymbolicDim(name, plan.dims.get(name, 1), why.get(name, "default"), tuple(users))
        for name, users in found.items()
        if name in plan.dims and name not in batch_names
    ]


def _reasons(notes: tuple[str, ...]) -> dict[str, str]:
    """'height=224 (default image size; override ...)' -> {'height': 'default image size'}."""
    out: dict[str, str] = {}
    for note in notes:
        m = re.match(r"([^=]+)=\d+ \(([^;)]+)", note)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def describe_inputs(
    info: ModelInfo,
    shapes: Mapping[str, tuple[int, ...]],
    dims_set: Mapping[str, int],
) -> list[str]:
    """Each input's concrete shape and where its sizes came from:
    'images 1x3x224x224, default size' or 'input_ids 1x256, sequence set'."""
    editable = {d.name: d for d in editable_dims(info)}
    out: list[str] = []
    for v in info.inputs:
        shape = shapes.get(v.name)
        if shape is None:
            out.append(f"{v.name} {v.type_text()}")
            continue
        text = f"{v.name} {'x'.join(map(str, shape))}"
        names = [d for d in (v.shape or ()) if isinstance(d, str) and d in editable]
        if names:
            if all(n in dims_set for n in names):
                text += ", size set"
            elif any(n in dims_set for n in names):
                text += ", size partly set"
            else:
                text += ", default size"
        out.append(text)
    return out
