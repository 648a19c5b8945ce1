"""Spin boxes whose lowest value means "none" (or "all", "off"): Qt's special value text,
set after construction (PySide6's type stubs do not list it among the keyword properties
a constructor takes, though Qt accepts it there)."""

from __future__ import annotations

from typing import TypeVar

from PySide6.QtWidgets import QAbstractSpinBox

Box = TypeVar("Box", bound=QAbstractSpinBox)


def special(box: Box, text: str) -> Box:
    """`box`, showing `text` at its minimum."""
    box.setSpecialValueText(text)
    return box
