"""Pauses in the sample stream (a profiling pass stops timing for seconds) and where the
latency lines must break so a pause does not read as a straight line of samples.

Qt-free: the latency plot draws what these say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from widgets.models.ring_buffer import FloatArray

GAP_S = 1.0  # a line joins samples this far apart (or a column's width x3) at least
MAX_PAUSES = 64


@dataclass
class Pause:
    start_s: float
    end_s: float | None  # None while it lasts
    label: str


class PauseLog:
    """Pauses on the plot's time axis: `begin` at the engine's marker, closed by the first
    sample that follows (`samples_from`), dropped once older than the retained data."""

    def __init__(self) -> None:
        self.pauses: list[Pause] = []

    def begin(self, t_s: float, label: str, relabel: bool = False) -> None:
        """A pause from `t_s`. One pause at a time: while one lasts, another is ignored,
        or, with `relabel`, names it (timing was paused during a profiling pass: the gap
        is the pause's, not the pass's)."""
        if self.pauses and self.pauses[-1].end_s is None:
            if relabel:
                self.pauses[-1].label = label
            return
        self.pauses.append(Pause(float(t_s), None, label))
        del self.pauses[:-MAX_PAUSES]

    def samples_from(self, t_s: float) -> None:
        """The first sample of a batch: it ends an open pause that began before it."""
        last = self.pauses[-1] if self.pauses else None
        if last is not None and last.end_s is None and t_s >= last.start_s:
            last.end_s = float(t_s)

    def forget_before(self, t_s: float) -> list[Pause]:
        """Drop (and return) the closed pauses that ended before `t_s`."""
        gone = [p for p in self.pauses if p.end_s is not None and p.end_s < t_s]
        self.pauses = [p for p in self.pauses if p not in gone]
        return gone

    @property
    def open(self) -> Pause | None:
        return self.pauses[-1] if self.pauses and self.pauses[-1].end_s is None else None

    def clear(self) -> None:
        self.pauses.clear()


def gap_threshold(x0: float, x1: float, columns: int) -> float:
    """Samples further apart than this may not be joined: GAP_S, or three pixel columns
    when zoomed out so far that a column is wider (a break there would be invisible). The
    plot joins wider gaps too when the samples around them are as far apart
    (widgets/models/visible_samples.py: at 0.8 inferences/s every gap is above 1 s)."""
    return max(GAP_S, 3.0 * (x1 - x0) / max(1, columns))


def connect_mask(x: FloatArray, gap_s: float, breaks: Sequence[float] = ()) -> np.ndarray:
    """pyqtgraph's `connect` array: 1 where point i joins point i + 1, 0 across a gap wider
    than `gap_s` or across a pause that began at one of `breaks` (seconds)."""
    mask = np.ones(x.size, dtype=np.int32)
    if x.size > 1:
        mask[:-1] = np.diff(x) <= gap_s
    return break_at_pauses(x, mask, breaks)


def break_at_pauses(x: FloatArray, mask: np.ndarray, breaks: Sequence[float]) -> np.ndarray:
    """`mask` (a `connect` array over `x`) with 0 where a pause that began at one of
    `breaks` lies between two points: a pause is never drawn across."""
    if len(breaks) and x.size > 1:
        after = np.searchsorted(x, np.asarray(breaks, dtype=np.float64))
        after = after[(after > 0) & (after < x.size)]
        mask[after - 1] = 0
    return mask
