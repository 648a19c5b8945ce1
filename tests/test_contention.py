"""How busy the machine was: the verdict's rule, combining windows, the file's form, and a
real busy process read as busy."""

from __future__ import annotations

import subprocess
import sys
import time

from engine.measure.contention import Contention, ContentionProbe, Window, combine


def _c(others: float, **kw: object) -> Contention:
    base: dict[str, object] = {"window_s": 2.0, "cpus": 2, "others_cpu": others, "steal": 0.0}
    base.update(kw)
    return Contention(own_cpu=1.0, **base)  # type: ignore[arg-type]


def test_verdict_follows_what_others_took() -> None:
    assert _c(0.02).verdict == "quiet"
    busy = _c(1.9)
    assert busy.verdict == "busy"
    assert "other processes used 1.90 of 2 CPUs" in busy.line()
    assert _c(0.0, steal=0.3).verdict == "busy"
    assert "stole" in _c(0.0, steal=0.3).line()
    assert _c(0.0, clock_ratio=0.5).verdict == "busy"
    assert _c(0.0, clock_ratio=None).verdict == "quiet"  # unknown clock is not slow


def test_a_big_machine_needs_a_tenth_of_its_cpus() -> None:
    assert _c(1.0, cpus=64).verdict == "quiet"
    assert _c(7.0, cpus=64).verdict == "busy"


def test_deprioritised_while_others_wanted_the_cpu_says_so() -> None:
    c = _c(0.1, nice=10)
    assert c.verdict == "busy"
    assert "deprioritised (nice 10)" in c.line()
    assert _c(0.0, nice=10).verdict == "quiet"
    assert "nice 10" in _c(0.0, nice=10).line()


def test_combine_weights_by_time_and_round_trips() -> None:
    a = Contention(1.0, 2, 0.0, 0.0, 1.0)
    b = Contention(3.0, 2, 2.0, 0.0, 1.0, app_cpu=0.5)
    both = combine([a, b])
    assert both is not None
    assert abs(both.others_cpu - 1.5) < 1e-9
    assert both.window_s == 4.0
    assert both.app_cpu == 0.5
    assert combine([]) is None
    back = Contention.from_json(both.to_json())
    assert back is not None and back.verdict == both.verdict
    assert abs(back.others_cpu - both.others_cpu) < 1e-3
    assert Contention.from_json({"others_cpu": "x"}) is None
    assert Contention.from_json("busy") is None


def test_a_process_spinning_beside_us_reads_busy() -> None:
    probe = ContentionProbe()
    quiet = Window(probe)
    time.sleep(0.5)
    q = quiet.done()
    assert q is not None and q.window_s >= 0.5
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(probe.cpus)
    ]
    try:
        time.sleep(0.3)  # let them start
        w = Window(probe)
        time.sleep(1.0)
        c = w.done()
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    assert c is not None
    assert c.others_cpu > 0.5, c.line()
    assert c.verdict == "busy"
    assert c.own_cpu < 0.2  # we slept


def test_a_profiling_pass_says_how_busy_the_machine_was(tmp_path: object) -> None:
    """Each OpProfile carries the load during its pass, kept in the session's profiles row
    and said by the op table's note when busy."""
    from pathlib import Path

    from engine.session.store import open_session_file
    from tests.session_material import record_demo_profile
    from widgets.models.op_rows import overhead_note

    path = Path(str(tmp_path)) / "p.opscope"
    result = record_demo_profile(path)
    assert result.profile is not None and result.profile.contention is not None
    with open_session_file(path) as reader:
        (run,) = reader.runs()
        (prof,) = reader.profiles(run.id)
    assert prof.contention is not None
    assert prof.contention["verdict"] == result.profile.contention.verdict
    assert run.contention is not None  # and the timing pass's, on the run
    busy = Contention(1.0, 2, 1.9, 0.0, 1.0)
    note = overhead_note(result.profile.ops, 0.9, 0.1, busy)
    assert note.startswith("profiled BUSY (others 1.9 of 2 CPUs)")
    assert "faster than timed" in overhead_note(result.profile.ops, 0.9, -0.5)
