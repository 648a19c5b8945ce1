"""The plot's header says how busy the machine is, beside the figures it colours: the
controller hands each window of contention to the badge, which says it in words."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
from pytestqt.qtbot import QtBot

from engine.measure.contention import Contention
from tests.test_hang_alarm import Clock, _timing
from widgets.machine_badge import MachineBadge, badge_text

QUIET = Contention(1.0, 2, 0.02, 0.0, 1.0)
BUSY = Contention(1.0, 2, 1.9, 0.0, 1.0)


def test_the_controller_shows_each_window_of_load() -> None:
    from engine.events import ContentionSample

    clock = Clock()
    c, view = _timing(clock)
    c.on_events([ContentionSample(clock(), BUSY)])
    view.latency.machine.set_contention.assert_called_with(BUSY)
    assert c.contention is BUSY


def test_the_badge_says_busy_in_words(qtbot: QtBot) -> None:
    badge = MachineBadge()
    qtbot.addWidget(badge)
    assert badge.text() == "machine -"
    badge.set_contention(BUSY)
    assert badge.text() == "BUSY 1.9/2 CPUs"
    assert badge.toolTip().startswith("busy: other processes used 1.90 of 2 CPUs")
    badge.set_contention(QUIET)
    assert badge.text() == "machine quiet" and "quiet: others used 0.02" in badge.toolTip()
    niced = Contention(1.0, 2, 0.1, 0.0, 1.0, nice=10)
    assert badge_text(niced) == "BUSY: niced (10)"
