"""The latency plot's frame rate, paced to a CPU budget.

Frames cost CPU that, with the engine on every core, comes out of the engine's throughput,
sometimes more than the frame's own CPU time (an intra-op thread pool waits for its slowest
thread): the frame rate adapts so painting stays within `cpu_budget` of one core (a frame
of 5 ms at 2.5%: 5 Hz; of 2 ms: the full 10 Hz), never below MIN_PAINT_HZ."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer

if TYPE_CHECKING:
    from widgets.latency_view import TimedView
    from widgets.pause_bands import PauseBands

MIN_PAINT_HZ = 2.0  # the frame rate never drops below this, whatever a frame costs


class PacedPainting:
    """Mixed into the plot widget: a timer that calls its `paint_now` when it is shown, at
    `paint_hz`, measuring what each frame cost (its data, then its paint)."""

    if TYPE_CHECKING:  # what the widget it is mixed into has
        _glw: TimedView
        pauses: PauseBands
        _dirty: bool

        def isVisible(self) -> bool: ...
        def paint_now(self) -> None: ...

    def _start_pacing(self, owner: QObject, paint_hz: float, cpu_budget: float) -> None:
        self.max_paint_hz = float(paint_hz)
        self.cpu_budget = float(cpu_budget)
        self._frame_s = 0.0  # smoothed GUI CPU time of one frame (data + paint)
        self._data_s = 0.0  # CPU time of the last paint_now
        self._frames = 0  # frames made
        self._timer = QTimer(owner)
        self._timer.setInterval(max(1, round(1000 / paint_hz)))
        self._timer.timeout.connect(self._on_timer)
        self._timer.start()

    def _on_timer(self) -> None:
        if not self.isVisible():  # a hidden plot (another tab) catches up when shown
            return
        if self.pauses.log.open is not None:  # its band grows with the clock
            self._dirty = True
        if self._data_s:  # the previous frame is complete: its data and its paint
            frame = self._data_s + self._glw.last_paint_s
            self._frame_s = frame if not self._frame_s else 0.8 * self._frame_s + 0.2 * frame
            self._data_s = 0.0
            self._timer.setInterval(round(1000 / self.paint_hz))
        frames, start = self._frames, time.thread_time()
        self.paint_now()
        if self._frames != frames:  # a frame was made (not just an idle tick)
            self._data_s = max(time.thread_time() - start, 1e-6)

    @property
    def paint_hz(self) -> float:
        """Frames per second now: as many as `cpu_budget` affords, within the limits."""
        if not self._frame_s:
            return self.max_paint_hz
        affordable = self.cpu_budget / self._frame_s
        return max(min(self.max_paint_hz, affordable), min(MIN_PAINT_HZ, self.max_paint_hz))
