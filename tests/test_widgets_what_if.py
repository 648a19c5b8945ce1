"""The What-if view draws what it is given: the max rate's point on the proposed curve,
and the flags a prediction carries as a line of their own (hidden when there are none)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("PySide6")

from widgets.what_if import WhatIfPlot


def test_the_max_rate_point_and_the_flags_are_drawn(qtbot: Any) -> None:
    view = WhatIfPlot()
    qtbot.addWidget(view)
    curve = [
        {"offered_per_s": 1.0, "p99_ms": 40.0},
        {"offered_per_s": 1.1, "p99_ms": 49.0, "max_rate": True},
        {"offered_per_s": 1.2, "p99_ms": 80.0},
    ]
    view.set_curves(None, curve)
    x, y = view.max_point.getData()  # y as drawn: log10 (a log axis)
    assert list(x) == [1.1] and 10 ** y[0] == pytest.approx(49.0)
    view.set_flags(["past capacity: the queue grows with the run's length"])
    assert view.flags.isVisibleTo(view) and "past capacity" in view.flags.text()
    view.set_flags([])
    assert not view.flags.isVisibleTo(view)
