"""Warnings follow the config they are about (no Qt)."""

from app.live.run_notices import RunNotices


def test_a_builds_warnings_replace_the_old_runs_when_it_starts() -> None:
    notes = RunNotices()
    notes.build_started()
    assert not notes.warning("0 of 6 Conv quantized")  # not yet: INT8 is still building
    assert notes.run_started() == ["0 of 6 Conv quantized"]
    assert notes.warning("GPU throttled")  # during the run: shown at once
    assert notes.current == ["0 of 6 Conv quantized", "GPU throttled"]
    assert notes.run_started() is None  # timing resumed: the same run's warnings stand
    notes.build_started()  # back to FP32
    assert notes.run_started() == []  # nothing applies any more


def test_a_failed_build_keeps_the_running_configs_warnings() -> None:
    notes = RunNotices()
    notes.build_started()
    notes.warning("INT8 static calibrated on generated data")
    notes.run_started()
    notes.build_started()
    notes.warning("oversubscribed")
    notes.build_failed()
    assert notes.current == ["INT8 static calibrated on generated data"]
    assert notes.run_started() is None
