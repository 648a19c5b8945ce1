"""Following the latest samples: the last `window_s` seconds in view, y from 0 to the
visible maximum (a generating model's: every series in view, on the log axis), and the
throughput plot's top.

Both ranges move in steps (`follow_range`, `calm_top`): an axis whose range is unchanged
keeps its drawn ticks and grid (redrawing them was half of a frame's cost), and labels that
slide at every frame are hard to read anyway."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from widgets.generation_layer import GenerationLayer
from widgets.models.latency_series import LAT, LatencySeries, T, calm_top, follow_range
from widgets.models.ring_buffer import FloatArray


class FollowedRange:
    """Sets the followed ranges of the latency plot and the x-linked throughput plot,
    keeping the tops it chose so that they hold still between steps."""

    def __init__(self, latency_plot: pg.PlotItem, throughput_plot: pg.PlotItem) -> None:
        self._latency = latency_plot.vb
        self._throughput = throughput_plot.vb
        self._y_tops = [0.0, 0.0]  # followed y range tops: latency, throughput

    def reset(self) -> None:
        """Tops chosen afresh (another model, a new session)."""
        self._y_tops = [0.0, 0.0]

    def apply(
        self, series: LatencySeries, generation: GenerationLayer, window_s: float, stepped: bool
    ) -> tuple[float, float]:
        """Show the last `window_s` seconds, y from 0 to the visible maximum; returns the
        x range (`stepped`: in steps, else scrolling with every frame)."""
        t, lat = series.buffer.view(T), series.buffer.view(LAT)
        if t.size == 0:
            return 0.0, 1.0
        (vx0, vx1), (_, vy1) = self._latency.viewRange()
        x0, x1 = follow_range(float(t[0]), float(t[-1]), window_s, (vx0, vx1), stepped)
        i0 = int(np.searchsorted(t, x0))
        if generation.on:
            return self._follow_generation(generation, x0, x1, lat[i0:])
        y1 = float(lat[i0:].max()) if i0 < t.size else 1.0
        self._y_tops[0] = calm_top(self._y_tops[0], max(y1, 1e-3))
        if (x0, x1, self._y_tops[0]) != (vx0, vx1, vy1):  # unchanged: no axis redraw
            self._latency.setRange(xRange=(x0, x1), yRange=(0.0, self._y_tops[0]), padding=0)
        bt, bv = series.throughput()
        j0 = int(np.searchsorted(bt, x0))
        top = float(bv[j0:].max()) if j0 < bt.size else 1.0
        self._set_throughput_top(max(top, 1.0))
        return x0, x1

    def _follow_generation(
        self, generation: GenerationLayer, x0: float, x1: float, e2e: FloatArray
    ) -> tuple[float, float]:
        """`apply` for a generating model: y over every series in view on the log axis,
        tokens/s per generation below."""
        vb = self._latency
        (vx0, vx1), (vy0, vy1) = vb.viewRange()
        y0, y1 = generation.y_range(*generation.in_view(x0, x1, e2e), (vy0, vy1))
        if (x0, x1, y0, y1) != (vx0, vx1, vy0, vy1):  # unchanged: no axis redraw
            vb.setRange(xRange=(x0, x1), yRange=(y0, y1), padding=0)
        self._set_throughput_top(generation.rate_top(x0))
        return x0, x1

    def _set_throughput_top(self, needed: float) -> None:
        self._y_tops[1] = calm_top(self._y_tops[1], needed)
        if self._throughput.viewRange()[1] != [0.0, self._y_tops[1]]:
            self._throughput.setYRange(0.0, self._y_tops[1], padding=0)
