"""Colours shared by the views: plot background and text follow the Qt palette (so a dark
or light application theme just works); series colours are chosen to read on both."""

from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QFontMetrics, QPalette
from PySide6.QtWidgets import QLabel, QWidget

# Series colours (colour-blind friendly, legible on dark and light backgrounds).
P50 = "#2ca58d"  # teal
P90 = "#e0a325"  # amber
P99 = "#d1495b"  # red
THROUGHPUT = "#4c8bf5"  # blue
MARKER = "#9b6bd3"  # violet
SPARK = "#4c8bf5"

GOOD = "#2e7d32"
WARN = "#b26a00"
BAD = "#c62828"
NEUTRAL = "#546e7a"


def plot_background(widget: QWidget) -> QColor:
    return widget.palette().color(QPalette.ColorRole.Base)


def plot_foreground(widget: QWidget) -> QColor:
    return widget.palette().color(QPalette.ColorRole.Text)


def is_dark(widget: QWidget) -> bool:
    return plot_background(widget).lightness() < 128


def raw_latency_color(widget: QWidget) -> QColor:
    """Per-inference samples: a muted grey-blue so the percentile lines stand out."""
    return QColor("#6f7f99" if is_dark(widget) else "#a9b4c6")


def grid_alpha(widget: QWidget) -> float:
    return 0.16 if is_dark(widget) else 0.14


def blend(top: QColor, bottom: QColor, alpha: float) -> QColor:
    """`top` over `bottom` at `alpha`, as one opaque colour (semi-transparent lines are
    several times slower to rasterise than opaque ones)."""

    def mix(a: float, b: float) -> float:
        return a * alpha + b * (1 - alpha)

    return QColor.fromRgbF(
        mix(top.redF(), bottom.redF()),
        mix(top.greenF(), bottom.greenF()),
        mix(top.blueF(), bottom.blueF()),
    )


def make_steady(label: QLabel, template: str) -> QLabel:
    """A label whose text changes often (live numbers) without relayouting the window.

    Qt relayouts every ancestor up to the window whenever a label's text changes, unless
    the label's size is fixed in both directions; so the size is fixed, wide enough for
    `template` (the longest text expected; longer text is clipped, and a tooltip can carry
    it). It also paints its own background, so only the label repaints, not the transparent
    parents beneath it."""
    metrics = QFontMetrics(label.font())
    bold = QFont(label.font())
    bold.setBold(True)
    lines = template.split("\n")  # several lines: the widest sets the width
    width = max(
        max(metrics.horizontalAdvance(t), QFontMetrics(bold).horizontalAdvance(t)) for t in lines
    )
    extra = (len(lines) - 1) * metrics.lineSpacing()
    label.setFixedSize(width + 8, label.sizeHint().height() + extra)
    label.setAutoFillBackground(True)
    return label


def set_text_if_changed(label: QLabel, text: str) -> None:
    if label.text() != text:
        label.setText(text)
