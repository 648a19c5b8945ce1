"""The loop's lateness by the server's state: states from batch intervals, samples taken
from a real run's records, drawn back by state, and read back from untrusted JSON."""

from __future__ import annotations

import numpy as np
import pytest

from engine.errors import OpScopeError
from engine.serve.records import ServeRecords
from engine.serve.sim.lateness import (
    ANY,
    FULL,
    LOOK_S,
    PARKED,
    RUNNING,
    Draw,
    bucketed,
    from_json,
    one_pool,
    send_samples,
    send_states,
    states_at,
    taken_at_once,
    to_json,
    turnaround_samples,
    wake_samples,
)
from engine.serve.sim.service import ServiceModel
from engine.serve.sim.service_draws import ServiceDraws


def test_states_from_batch_intervals() -> None:
    """Two instances: batches [1, 2) and [1.5, 3). Before any batch: idle since ever; a
    batch starting at t has not started at t; an end at t has ended."""
    start, end = np.array([1.0, 1.5]), np.array([2.0, 3.0])
    times = np.array([0.5, 1.0, 1.2, 1.5, 1.7, 2.0, 3.0, 3.25])
    got = states_at(times, start, end, instances=2)
    assert got[0] == np.inf
    assert got[1] > 0 and got[1] == np.inf  # the first batch starts at 1.0: none ran before
    assert got[2] == RUNNING and got[3] == RUNNING  # one of two instances busy
    assert got[4] == FULL
    assert got[5] == RUNNING and got[6] == 1e-9  # both ended by 3.0: idle since just now
    assert got[7] == pytest.approx(0.25)
    assert np.all(states_at(times, start, end, instances=1)[[2, 4]] == FULL)


def records(sent_late: float) -> ServeRecords:
    """One instance, a 2-ms delay: requests alone, 10 ms apart, each sent `sent_late`
    after its time and taken 2.07 ms after it was sent; one batch of 2 taken on an
    arrival (before its delay expired) and one while the other ran."""
    n = 40
    rec = ServeRecords.empty(n)
    rec.scheduled = 0.5 + np.arange(n) * 0.01
    rec.sent = rec.scheduled + sent_late
    start = rec.sent + 0.00207
    rec.batch = np.arange(n)
    rec.batch_start, rec.batch_end = start, start + 0.001
    rec.batch_size = np.ones(n, np.int64)
    rec.batch_instance = np.zeros(n, np.int64)
    return rec


def test_a_runs_lateness_by_state() -> None:
    rec = records(50e-6)
    late, states = send_samples(rec, 1, max_batch=8, preferred=(), delay_s=0.002)
    assert np.allclose(late, 50e-6)
    assert np.all(states > 0.005)  # each came ~7 ms after the last batch ended
    woke, at = wake_samples(rec, 0.002, instances=1)
    assert woke.size == 40 and np.allclose(woke, 70e-6) and np.all(at > 0)
    # a batch whose start came before its oldest request's delay expired is no expiry
    rec.batch_start[3] = rec.sent[3] + 0.0005
    rec.batch_end[3] = rec.batch_start[3] + 0.001
    assert wake_samples(rec, 0.002, instances=1)[0].size == 39
    # no delay: nothing timed
    assert wake_samples(rec, 0.0, instances=1)[0].size == 0


def test_a_send_is_parked_when_every_instance_ran_since_the_generator_last_looked() -> None:
    """One instance, a 2-ms delay. Request 1 is due while batch 0 runs, but the generator
    last looked before that batch started: awake, it sends late (FULL). It then looks and
    parks: 2 and 3, due while batches ran back to back (a turnaround between them), are
    admitted at their times (PARKED). 4 comes after an idle 8 ms; 5 is due while its batch
    runs, the generator having looked before it started (FULL again)."""
    rec = ServeRecords.empty(6)
    rec.scheduled = np.array([0.990, 0.995, 0.998, 1.005, 1.030, 1.035])
    rec.sent = rec.scheduled + np.array([40e-6, 45e-6, 0.0, 0.0, 50e-6, 30e-6])
    rec.batch = np.array([0, 1, 1, 2, 3, 4])
    rec.batch_start = np.array([0.992, 1.00203, 1.01205, 1.03205, 1.042])
    rec.batch_end = np.array([1.002, 1.012, 1.022, 1.042, 1.052])
    rec.batch_size = np.array([1, 2, 1, 1, 1])
    rec.batch_instance = np.zeros(5, np.int64)
    at_once = taken_at_once(rec, 8, (), 0.002)
    assert at_once[0].tolist() == [0, 1, 3] and at_once[1].tolist() == [1, 2, 4]
    late, states = send_samples(rec, 1, max_batch=8, preferred=(), delay_s=0.002)
    assert np.allclose(late, [40e-6, 45e-6, 0, 0, 50e-6, 30e-6])
    assert states[0] == np.inf and states[4] == pytest.approx(0.008)
    assert states[[1, 2, 3, 5]].tolist() == [FULL, PARKED, PARKED, FULL]
    # due in the turnaround between batches 0 and 1: still parked (the instance never
    # waited for work); due after the stretch the generator parked in: not
    due = np.r_[rec.scheduled, 1.00201, 1.0221]
    look = np.r_[np.where(rec.sent > rec.scheduled, rec.sent, rec.scheduled + LOOK_S), due[6:]]
    got = send_states(due, look, rec, 1, at_once)
    assert np.array_equal(got[:6], states)
    assert got[6] == PARKED and got[7] == pytest.approx(1e-4)
    # taken by the state at the due time alone, 1 and 5 would be parked too
    assert np.all(states_at(rec.scheduled[[1, 5]], rec.batch_start, rec.batch_end, 1) == FULL)


def test_drawn_by_state_falls_back_to_the_nearest_below() -> None:
    late = bucketed(
        np.r_[np.zeros(10), np.full(10, 1e-4), np.full(3, 9.0)],
        np.r_[np.full(10, FULL), np.full(10, 0.006), np.full(3, 0.03)],  # 3: too few
    )
    assert sorted(late) == [FULL, 0.005]
    draw = Draw(late)
    rng = np.random.default_rng(0)
    got = draw.many(rng, np.array([FULL, RUNNING, 0.001, 0.006, 0.03, np.inf]))
    assert list(got) == [0.0, 0.0, 0.0, 1e-4, 1e-4, 1e-4]
    assert draw.at(0.5, 0.01) == 1e-4 and draw.at(0.99, FULL) == 0.0
    assert not Draw({})


def test_the_batchers_lateness_is_one_pool_drawn_in_every_state() -> None:
    parts = [(np.full(5, 1e-4), np.full(5, 0.0001)), (np.full(4, 2e-4), np.full(4, 0.006))]
    late = one_pool(parts)
    assert list(late) == [ANY] and late[ANY].size == 9  # 5 and 4: each too few by state
    draw = Draw(late)
    assert {draw.at(0.0, s) for s in (FULL, RUNNING, 1e-9, 0.01, np.inf)} == {1e-4}
    assert not one_pool(parts[:1]) and not one_pool([])
    back = from_json(to_json(late), "wake lateness")
    assert list(back) == [ANY] and np.allclose(back[ANY], late[ANY])
    assert list(to_json(late)) == ["any"]


def test_lateness_read_back_and_checked() -> None:
    late = {FULL: np.zeros(3), RUNNING: np.array([1e-5]), 0.0005: np.array([2e-5, 3e-5])}
    back = from_json(to_json(late), "send lateness")
    assert sorted(back) == sorted(late)
    assert all(np.allclose(back[k], late[k]) for k in late)
    for bad in ({"busy": [1]}, {"-2": [1]}, {"nan": [1]}, {"full": [-1]}, {"full": []}, [1]):
        with pytest.raises(OpScopeError, match="calibration data is malformed"):
            from_json(bad, "send lateness")


def test_an_older_calibrations_one_pool_is_every_states() -> None:
    """Calibration version 14 kept one pool of send lateness: read as one state's, it is
    drawn for every request, as it was."""
    old = {"samples_ms": {"1": [1.0, 1.1]}, "send_lateness_us": [20.0, 30.0]}
    model = ServiceModel.from_json(old)
    assert list(model.send_late) == [RUNNING] and not model.wake_late
    assert np.allclose(model.send_late[RUNNING], [20e-6, 30e-6])
    again = ServiceModel.from_json(model.to_json())
    assert np.allclose(again.send_late[RUNNING], model.send_late[RUNNING])


def test_turnarounds_between_batches_an_instance_could_take_at_once() -> None:
    """Batches of 2 (max 2) back to back, each started 30 us after the last ended: every
    one a turnaround, after SKIP_S; one whose second request came after the end is not."""
    n = 40
    rec = ServeRecords.empty(2 * n)
    rec.scheduled = rec.sent = np.repeat(0.2 + np.arange(n) * 0.001, 2)  # due in pairs
    start = 0.25 + np.arange(n) * 0.00303
    rec.batch = np.repeat(np.arange(n), 2)
    rec.batch_start, rec.batch_end = start, start + 0.003
    rec.batch_size, rec.batch_instance = np.full(n, 2, np.int64), np.zeros(n, np.int64)
    sizes, turn = turnaround_samples(rec, max_batch=2, preferred=(), delay_s=0.002)
    later = start[1:] >= 0.3
    assert turn.size == later.sum() and np.allclose(turn, 30e-6) and set(sizes) == {2}
    rec.sent[-1] = rec.batch_end[-2] + 1e-6  # came after the batch before it ended
    assert turnaround_samples(rec, 2, (), 0.002)[1].size == later.sum() - 1
    # on another instance: not this one's turnaround
    rec.batch_instance[-1] = 1
    assert turnaround_samples(rec, 2, (), 0.002)[1].size == later.sum() - 1


def test_turnarounds_scale_with_the_size_and_read_back() -> None:
    model = ServiceModel({1: np.full(3, 1e-3)}, {}, turnaround={2: np.full(5, 20e-6)})
    draws = ServiceDraws(model, 8, [0.5] * 10)
    assert draws.turn is not None
    assert draws.turn[1][0] == pytest.approx(10e-6) and draws.turn[8][0] == pytest.approx(80e-6)
    back = ServiceModel.from_json(model.to_json())
    assert np.allclose(back.turnaround[2], 20e-6)
    with pytest.raises(OpScopeError, match="turnaround"):
        ServiceModel.from_json({**model.to_json(), "turnaround_us": {"0": [1.0]}})
