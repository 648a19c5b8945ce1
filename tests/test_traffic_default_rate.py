"""The Traffic dock's starting rate (issue 53: Poisson 200/s for a model that serves 10/s):
a share of the capacity measured, live or by the calibration, saying where it came from,
and never over the user's own rate."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

import numpy as np
import pytest

pytest.importorskip("PySide6")

from app.desk import Desk
from app.traffic.controller import TrafficController
from app.traffic.default_rate import SHARE, from_calibration, from_live
from app.traffic.port import TrafficViewPort
from engine.api import RunConfig, RunStarted
from engine.serve.sim.service import ServiceModel

LIVE = {"count": 40, "segment": 40, "p50": 100.0, "p99": 140.0}  # a model serving 10/s
SERVICE = ServiceModel({1: np.full(9, 0.1), 4: np.full(9, 0.2), 8: np.full(9, 0.8)}, {})


def test_the_rate_starts_at_a_share_of_the_live_throughput_at_the_current_batch() -> None:
    assert SHARE == 0.7
    assert from_live(LIVE, 1) == (
        7,
        "70% of 10/s, the throughput live timing measured (p50 100 ms at batch 1)",
    )
    assert from_live(LIVE, 4)[0] == 28  # type: ignore[index]  # 4 per 100 ms
    assert from_live({**LIVE, "segment": 5}, 1) is None  # too few samples of this config
    assert from_live({**LIVE, "p50": float("nan")}, 1) is None


def test_a_calibration_gives_its_best_batch_up_to_the_max_times_the_instances() -> None:
    # 1/0.1 = 10/s, 4/0.2 = 20/s, 8/0.8 = 10/s: batch 4 serves most; two instances
    assert from_calibration(SERVICE, 8, 2) == (
        28,
        "70% of 40/s, the capacity the calibration measured (batch 4 x 2 instances)",
    )
    assert from_calibration(SERVICE, 2, 1)[0] == 7  # type: ignore[index]  # batch 1 only


def _controller(edited: bool = False) -> tuple[TrafficController, Any, Any]:
    view, desk = MagicMock(spec=TrafficViewPort), MagicMock(spec=Desk)
    view.rate_edited.return_value = edited
    view.calibrate_sizes.return_value = (8, 2)
    desk.plot_stats.return_value = LIVE
    return TrafficController(desk, view), view, desk


def _run_started(c: TrafficController, config: RunConfig) -> None:
    c.on_events([MagicMock(spec=RunStarted, config=config)])


def test_the_dock_takes_the_measured_rate_once_per_live_run(qapp: Any) -> None:
    c, view, desk = _controller()
    c.suggest_rate()  # no run yet
    _run_started(c, RunConfig())
    desk.plot_stats.return_value = {**LIVE, "segment": 3}
    c.suggest_rate()  # timing has just started: nothing yet
    view.suggest_rate.assert_not_called()
    desk.plot_stats.return_value = LIVE
    c.suggest_rate()
    view.suggest_rate.assert_called_once_with(*from_live(LIVE, 1))  # type: ignore[misc]
    c.suggest_rate()  # the same run: once
    assert view.suggest_rate.call_count == 1
    _run_started(c, RunConfig(batch=4))  # another config: nothing until its own samples
    desk.plot_stats.return_value = {**LIVE, "segment": 3}
    c.suggest_rate()
    assert view.suggest_rate.call_count == 1
    desk.plot_stats.return_value = LIVE
    c.suggest_rate()  # its own throughput, at its batch
    view.suggest_rate.assert_called_with(*from_live(LIVE, 4))  # type: ignore[misc]
    c.service = SERVICE  # calibrated: the calibration's capacity
    c.suggest_rate()
    view.suggest_rate.assert_called_with(*from_calibration(SERVICE, 8, 2))  # type: ignore[misc]


def test_the_users_own_rate_is_left_alone(qapp: Any) -> None:
    c, view, _desk = _controller(edited=True)
    _run_started(c, RunConfig())
    c.suggest_rate()
    view.suggest_rate.assert_not_called()


def test_the_view_says_where_the_rate_came_from_until_the_user_sets_one(qtbot: Any) -> None:
    from app.traffic.view import TrafficDock

    panel = TrafficDock()
    qtbot.addWidget(panel)
    assert panel.rate_note.text().startswith("Rate: a placeholder until live timing")
    panel.suggest_rate(7, "70% of 10/s, the throughput live timing measured")
    assert panel.rate.value() == 7 and panel.rate_slider.value() == 7
    assert panel.traffic_spec() == "poisson:7" and not panel.rate_edited()
    assert panel.rate_note.text() == "Rate: 70% of 10/s, the throughput live timing measured"
    panel.rate.setValue(12)  # the user's own
    assert panel.rate_edited() and panel.rate_note.isHidden()
