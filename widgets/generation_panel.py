"""A generating model's live figures: TTFT and TPOT (rolling p50/p99 with counts), tokens
per second in each phase, and a bar splitting a generation's time between prefill and
decode. Fed `GenerationFigures` (widgets.models.generation_stats)."""

from __future__ import annotations

import math

from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QFormLayout, QLabel, QSpinBox, QWidget

from widgets.models.generation_stats import GenerationFigures

PREFILL_COLOR = "#e07b39"
DECODE_COLOR = "#3b7dd8"


class SplitBar(QWidget):
    """Prefill's share of a generation (left) against decode's (right)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.share = math.nan
        self.setMinimumHeight(18)
        self.setToolTip("A generation's time: prefill (the prompt, to the first token) | decode")

    def set_share(self, share: float) -> None:
        self.share = share
        self.update()

    def paintEvent(self, _event: object) -> None:
        p = QPainter(self)
        r = QRectF(self.rect()).adjusted(0, 2, -1, -2)
        if not math.isfinite(self.share):
            p.fillRect(r, QColor("#888888").lighter(150))
            return
        left = r.width() * min(max(self.share, 0.0), 1.0)
        p.fillRect(QRectF(r.left(), r.top(), left, r.height()), QColor(PREFILL_COLOR))
        p.fillRect(QRectF(r.left() + left, r.top(), r.width() - left, r.height()),
                   QColor(DECODE_COLOR))  # fmt: skip
        p.setPen(QColor("white"))
        inner = r.adjusted(4, 0, -4, 0)
        middle = Qt.AlignmentFlag.AlignVCenter
        p.drawText(inner, middle | Qt.AlignmentFlag.AlignLeft, f"prefill {self.share:.0%}")
        p.drawText(inner, middle | Qt.AlignmentFlag.AlignRight, f"decode {1 - self.share:.0%}")


class GenerationPanel(QWidget):
    lengths_changed = Signal(int, int)  # prompt tokens, new tokens (the user's edit)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.prompt_len = QSpinBox()
        self.prompt_len.setRange(1, 1 << 20)
        self.prompt_len.setToolTip("Prompt tokens (seeded); prefill grows with them")
        self.new_tokens = QSpinBox()
        self.new_tokens.setRange(1, 1 << 20)
        self.new_tokens.setToolTip("Tokens generated per sequence: one decode step each")
        for box in (self.prompt_len, self.new_tokens):
            box.setKeyboardTracking(False)  # typed: applied on Enter or leaving the box
            box.valueChanged.connect(self._lengths)
        self._quiet = False
        self.shape = QLabel("–")
        self.ttft = QLabel("–")
        self.tpot = QLabel("–")
        self.rates = QLabel("–")
        self.split = SplitBar()
        for label in (self.shape, self.ttft, self.tpot, self.rates):
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            label.setWordWrap(True)  # whole at the dock's width (cut on the right at 1600)
        form = QFormLayout(self)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("Prompt tokens", self.prompt_len)
        form.addRow("New tokens", self.new_tokens)
        form.addRow("Generation", self.shape)
        form.addRow("TTFT", self.ttft)
        form.addRow("TPOT", self.tpot)
        form.addRow("Tokens/s", self.rates)
        form.addRow("Split", self.split)
        self.ttft.setToolTip("Time to first token: the prompt's prefill and the first choice")
        self.tpot.setToolTip("Time per output token: each decode step")

    def _lengths(self, *_: object) -> None:
        if not self._quiet:
            self.lengths_changed.emit(self.prompt_len.value(), self.new_tokens.value())

    def set_shape(
        self, prompt_len: int, new_tokens: int, batch: int, kv_bytes: int, context: int = 0
    ) -> None:
        """What runs now (the spin boxes follow it without asking for a change)."""
        self._quiet = True
        try:
            if context:
                self.prompt_len.setMaximum(max(1, context - 1))
                self.new_tokens.setMaximum(max(1, context - 1))
            self.prompt_len.setValue(prompt_len)
            self.new_tokens.setValue(new_tokens)
        finally:
            self._quiet = False
        # one short line (the lengths are in the boxes above; a wrapped second line is
        # clipped in a short dock); the whole sentence in the tooltip
        seqs = f"{batch} sequences" if batch > 1 else "1 sequence"
        self.shape.setText(f"{seqs} · KV cache {kv_bytes / 1024:.1f} KiB/token")
        self.shape.setToolTip(
            f"prompt {prompt_len} tokens, {new_tokens} new, {seqs}; the KV cache holds "
            f"{kv_bytes:,} bytes per token of context"
        )

    def set_figures(self, f: GenerationFigures | None) -> None:
        if f is None:
            for label in (self.ttft, self.tpot, self.rates):
                label.setText("waiting for generations…")
            self.split.set_share(math.nan)
            return
        self.ttft.setText(
            f"p50 {f.ttft_p50_ms:.2f} ms · p99 {f.ttft_p99_ms:.2f} ms (last {f.generations})"
        )
        self.tpot.setText(
            f"p50 {f.tpot_p50_ms:.3f} ms · p99 {f.tpot_p99_ms:.3f} ms ({f.tpot_count:,} steps)"
        )
        self.rates.setText(
            f"prefill {f.prefill_tokens_per_s:,.0f} · decode {f.decode_tokens_per_s:,.0f}"
        )
        self.split.set_share(f.prefill_share)
