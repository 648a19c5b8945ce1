"""The engine host process, driven through its pipe with no Qt: load, live timing,
config changes, profiling, bad models, stop and shutdown."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from engine.config import RunConfig
from engine.events import (
    AccuracyResult,
    CommandFailed,
    LatencyBatch,
    Marker,
    Notice,
    OpProfile,
    Progress,
    RunEnded,
    RunStarted,
    Telemetry,
    TimingDone,
)
from engine.run import host_commands as cmds
from engine.run.host import host_main
from engine.run.live_job import CONTINUED
from engine.run.sample_log import MAX_SAMPLES
from engine.run.wire import PipeConnection
from tests.conftest import DEMO_CNN


class Host:
    def __init__(self, nice: int = 0, max_samples: int = MAX_SAMPLES) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.conn = PipeConnection(parent)  # wire messages, as the window sends them
        self.proc = ctx.Process(
            target=host_main, args=(child, 0.1, nice, None, max_samples), daemon=True
        )
        self.proc.start()
        child.close()
        self.events: list[Any] = []

    def send(self, cmd: cmds.Command) -> None:
        self.conn.send(cmd)

    def wait_for(self, pred: Callable[[Any], bool], timeout: float = 60, start: int = 0) -> Any:
        """The first event from index `start` on that matches, receiving as needed."""
        end = time.monotonic() + timeout
        seen = start
        while time.monotonic() < end:
            for ev in self.events[seen:]:
                if pred(ev):
                    return ev
            seen = len(self.events)
            if self.conn.poll(0.1):
                self.events.extend(self.conn.recv())
        last = [type(e).__name__ for e in self.events[-10:]]
        raise AssertionError(f"timed out; last events: {last}")

    def close(self) -> None:
        if self.proc.is_alive():
            self.send(cmds.Shutdown())
            self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()


@pytest.fixture
def host() -> Any:
    h = Host()
    yield h
    h.close()


@pytest.mark.skipif(not hasattr(os, "nice"), reason="POSIX niceness")
def test_a_yielding_host_runs_below_our_priority_and_says_so() -> None:
    host = Host(nice=5)
    try:
        note = host.wait_for(lambda e: isinstance(e, Notice))
        assert (
            note.level == "note"
            and f"nice {os.getpriority(os.PRIO_PROCESS, 0) + 5}" in note.message
        )
        host.send(cmds.Load(str(DEMO_CNN)))
        host.wait_for(lambda e: isinstance(e, LatencyBatch) and e.latencies_ns.size > 0)
        proc = psutil.Process(host.proc.pid)
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert proc.nice() == ours + 5
        for thread in proc.threads():  # ONNX Runtime's pool threads inherit it
            assert os.getpriority(os.PRIO_PROCESS, thread.id) == ours + 5
    finally:
        host.close()


def test_live_session_end_to_end(host: Host) -> None:
    host.send(cmds.Apply(RunConfig(batch=2)))
    host.send(cmds.Load(str(DEMO_CNN)))
    started = host.wait_for(lambda e: isinstance(e, RunStarted))
    assert started.config.batch == 2 and started.provider_used == "CPUExecutionProvider"
    host.wait_for(lambda e: isinstance(e, LatencyBatch) and e.latencies_ns.size > 0)
    host.wait_for(lambda e: isinstance(e, Telemetry) and "cpu_percent" in e.values)
    profile = host.wait_for(lambda e: isinstance(e, OpProfile))
    assert profile.ops and profile.runs == 20

    host.send(cmds.Apply(RunConfig(batch=2, precision="int8-dynamic")))
    marker = host.wait_for(
        lambda e: isinstance(e, Marker) and e.kind == "config" and "INT8" in e.label
    )
    assert marker.label == "INT8 dynamic"
    ends = [e for e in host.events if isinstance(e, RunEnded)]
    assert ends and ends[-1].status == "ok"  # the FP32 run ended before the INT8 one began
    done = [e for e in host.events if isinstance(e, TimingDone)]
    assert done and done[-1].latency.count > 0
    host.wait_for(lambda e: isinstance(e, AccuracyResult))
    host.wait_for(lambda e: isinstance(e, RunStarted) and e.config.precision == "int8-dynamic")

    host.send(cmds.Stop())
    host.wait_for(lambda e: isinstance(e, RunEnded), start=len(host.events))
    host.send(cmds.Shutdown())
    host.proc.join(20)
    assert host.proc.exitcode == 0


def test_timing_waits_while_the_next_config_builds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An INT8 build (with its accuracy search) beside a live run took the run's CPU: its
    samples read 2-5x slower. Timing pauses from the build's start to the new run; a build
    that is cancelled resumes the old config as a new run."""
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))  # nothing cached: real builds
    host = Host()
    try:
        host.send(cmds.Load(str(DEMO_CNN)))
        host.wait_for(lambda e: isinstance(e, LatencyBatch) and e.latencies_ns.size > 0)

        host.send(cmds.Apply(RunConfig(precision="int8-static", batch=2)))
        pause = host.wait_for(lambda e: isinstance(e, Marker) and e.kind == "pause")
        assert "INT8 static" in pause.label
        at = host.events.index(pause)
        host.send(cmds.Cancel())
        resumed = host.wait_for(
            lambda e: isinstance(e, Marker) and e.label == "timing resumed", start=at
        )
        assert not any(isinstance(e, RunStarted) and e.config.precision != "fp32"
                       for e in host.events)  # fmt: skip
        host.wait_for(lambda e: isinstance(e, LatencyBatch) and e.latencies_ns.size > 0,
                      start=host.events.index(resumed))  # fmt: skip

        mark = len(host.events)
        host.send(cmds.Apply(RunConfig(precision="int8-static")))
        pause = host.wait_for(lambda e: isinstance(e, Marker) and e.kind == "pause", start=mark)
        new = host.wait_for(
            lambda e: isinstance(e, Marker) and e.kind == "config" and "INT8" in e.label,
            start=mark, timeout=120,
        )  # fmt: skip
        between = host.events[host.events.index(pause) : host.events.index(new)]
        starts = [b.origin_ns + b.starts_ns for b in between if isinstance(b, LatencyBatch)]
        assert all((s < pause.t_ns).all() for s in starts)  # nothing timed while it built
        assert new.t_ns > pause.t_ns
    finally:
        host.close()


def test_a_run_at_its_cap_of_samples_goes_on_as_a_new_run() -> None:
    """The host keeps a live run's samples for its summary, so a run is capped: past the
    cap it ends (summed up from every sample) and the config goes on in a new run."""
    host = Host(max_samples=300)
    try:
        host.send(cmds.Load(str(DEMO_CNN)))
        host.wait_for(lambda e: isinstance(e, Marker) and e.label == CONTINUED, timeout=120)
        started = [e for e in host.events if isinstance(e, RunStarted)]
        done = [e for e in host.events if isinstance(e, TimingDone)]
        ended = [e for e in host.events if isinstance(e, RunEnded)]
        assert len(started) == 2 and started[0].config == started[1].config
        assert len(done) == 1 and ended[0].status == "ok"
        end = host.events.index(ended[0])
        sent = sum(e.latencies_ns.size for e in host.events[:end] if isinstance(e, LatencyBatch))
        assert done[0].latency.count == sent >= 300  # every sample of the first run
        host.wait_for(
            lambda e: isinstance(e, LatencyBatch) and e.latencies_ns.size > 0,
            start=end,
        )
    finally:
        host.close()


def test_bad_model_keeps_the_old_one_running(host: Host, zoo: dict[str, Path]) -> None:
    host.send(cmds.Load(str(DEMO_CNN)))
    host.wait_for(lambda e: isinstance(e, LatencyBatch))
    host.send(cmds.Load(str(zoo["corrupt"])))
    failed = host.wait_for(lambda e: isinstance(e, CommandFailed))
    assert failed.command == "load" and "not a valid ONNX file" in failed.message
    host.wait_for(lambda e: isinstance(e, LatencyBatch), start=len(host.events))


def test_a_newer_request_supersedes_an_older_one(host: Host) -> None:
    host.send(cmds.Load(str(DEMO_CNN)))
    host.wait_for(lambda e: isinstance(e, LatencyBatch))
    host.send(cmds.Apply(RunConfig(batch=2)))
    host.send(cmds.Apply(RunConfig(batch=3)))
    started = host.wait_for(lambda e: isinstance(e, RunStarted) and e.config.batch != 1)
    assert started.config.batch == 3
    time.sleep(1.0)
    if host.conn.poll(0.5):
        host.events.extend(host.conn.recv())
    assert not any(isinstance(e, RunStarted) and e.config.batch == 2 for e in host.events)


def test_input_dims_and_data_files_rebuild_as_a_new_marked_run(host: Host, tmp_path: Path) -> None:
    import numpy as np

    from tests.conftest import DEMO_TRANSFORMER

    host.send(cmds.Load(str(DEMO_TRANSFORMER), dims={"sequence": 16}))
    started = host.wait_for(lambda e: isinstance(e, RunStarted))
    assert started.inputs["input_ids"][0] == (1, 16)
    host.wait_for(lambda e: isinstance(e, LatencyBatch) and e.latencies_ns.size > 0)
    n = len(host.events)
    host.send(cmds.SetInputs({"sequence": 40}, None, None, "sequence 40"))
    marker = host.wait_for(lambda e: isinstance(e, Marker) and e.kind == "config", start=n)
    assert marker.label == "sequence 40"
    started = host.wait_for(lambda e: isinstance(e, RunStarted), start=n)
    assert started.inputs["input_ids"][0] == (1, 40)  # recorded with the run
    # calibration data matters to INT8 static only: no rebuild on FP32
    cal = tmp_path / "cal.npz"
    np.savez(cal, input_ids=np.ones((2, 40), np.int64))
    n = len(host.events)
    host.send(cmds.SetInputs({"sequence": 40}, None, str(cal), "calibration data"))
    host.send(cmds.SetInputs({"sequence": 0}, None, str(cal), "bad"))  # fails in one line
    failed = host.wait_for(lambda e: isinstance(e, CommandFailed), start=n)
    assert "sequence must be a positive integer" in failed.message
    assert not any(isinstance(e, Marker) and e.label == "calibration data"
                   for e in host.events[n:])  # fmt: skip


def _throttling_gpu() -> dict[str, float]:
    """Telemetry as NVML reports a GPU held back by a thermal slowdown (0x20), next to the
    benign 'GPU idle' bit (0x1), which must not count."""
    return {"gpu0_util_percent": 97.0, "gpu0_throttle_reasons": float(0x20 | 0x1)}


def test_gpu_throttling_is_flagged_on_the_live_run_once() -> None:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    conn = PipeConnection(parent)
    proc = ctx.Process(target=host_main, args=(child, 0.05, 0, [_throttling_gpu]), daemon=True)
    proc.start()
    child.close()
    host = Host.__new__(Host)
    host.conn, host.proc, host.events = conn, proc, []
    try:
        host.send(cmds.Load(str(DEMO_CNN)))
        started = host.wait_for(lambda e: isinstance(e, RunStarted))
        first = host.events.index(started)
        flag = host.wait_for(
            lambda e: isinstance(e, Notice) and "throttl" in e.message, start=first
        )
        assert flag.level == "warning" and "software thermal slowdown" in flag.message
        assert "idle" not in flag.message.lower()
        host.wait_for(
            lambda e: isinstance(e, LatencyBatch) and e.latencies_ns.size > 0,
            start=host.events.index(flag),
        )
        time.sleep(0.5)
        host.conn.send(cmds.Stop())
        host.wait_for(lambda e: isinstance(e, RunEnded), start=first)
        flags = [e for e in host.events[first:] if isinstance(e, Notice) and "throttl" in e.message]
        assert len(flags) == 1  # flagged when it appeared, not again every sample
        host.send(cmds.Start())  # a new run of the same config is flagged again
        second = host.wait_for(lambda e: isinstance(e, RunStarted), start=first + 1)
        host.wait_for(
            lambda e: isinstance(e, Notice) and "throttl" in e.message,
            start=host.events.index(second),
        )
    finally:
        host.close()


def test_missing_peaks_are_measured_by_the_host_with_timing_paused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.events import PeaksMeasured
    from engine.machine.peaks import cached_peaks

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))  # no peaks cached: the host measures
    host = Host()
    try:
        host.send(cmds.Load(str(DEMO_CNN)))
        measured = host.wait_for(lambda e: isinstance(e, PeaksMeasured), timeout=120)
        cpu = measured.peaks["cpu"]
        assert cpu["memory_gbps"] > 0 and cpu["gflops"] > 0
        note = next(e for e in host.events if isinstance(e, Notice) and "peak" in e.message)
        assert "timing pauses" in note.message
        said = [(e.done, e.total) for e in host.events if isinstance(e, Progress)
                and e.stage == "peaks"]  # fmt: skip
        assert said == [(0, 1), (1, 1)]  # the window says so over its plot meanwhile
        host.wait_for(
            lambda e: isinstance(e, LatencyBatch) and e.latencies_ns.size > 0,
            start=host.events.index(measured),
        )  # and timing goes on
        first = next(i for i, e in enumerate(host.events) if _samples(e))
        peaks = next(i for i, e in enumerate(host.events)
                     if isinstance(e, Progress) and e.stage == "peaks")  # fmt: skip
        assert first < peaks  # a first start shows its first points before measuring them
    finally:
        host.close()
    assert cached_peaks() == measured.peaks  # cached for every later window and CLI run


def _samples(ev: Any) -> bool:
    return isinstance(ev, LatencyBatch) and ev.latencies_ns.size > 0


def test_the_first_latency_points_come_before_the_first_profiling_pass(host: Host) -> None:
    """The first point took 18-28 s in the window: a new config was profiled (and the
    peaks looked after) before it was timed at all. Its first points come first, after
    its warm-up; its pass still comes, after its first second of timing; and the pass's
    pause is no timing's: the run's throughput is that of its samples, not diluted."""
    host.send(cmds.Load(str(DEMO_CNN)))
    profile = host.wait_for(lambda e: isinstance(e, OpProfile))
    at = host.events.index(profile)
    marker = next(i for i, e in enumerate(host.events)
                  if isinstance(e, Marker) and e.kind == "profile")  # fmt: skip
    first = next((i for i, e in enumerate(host.events) if _samples(e)), len(host.events))
    warm = [i for i, e in enumerate(host.events) if isinstance(e, Progress)
            and e.stage == "warmup" and e.message.startswith("warm-up done")]  # fmt: skip
    assert warm[0] < first < marker < at  # warm-up discarded, timed, then profiled
    before = sum(e.latencies_ns.size for e in host.events[:marker] if _samples(e))
    assert before > 0 and profile.ops and profile.profile_overhead is not None
    host.wait_for(_samples, start=at)  # timing goes on after the pass
    host.send(cmds.Stop())
    done = host.wait_for(lambda e: isinstance(e, TimingDone), start=at)
    per_s = 1000.0 / done.latency.mean  # back to back: what the samples alone give
    assert done.throughput.inferences_per_s > 0.7 * per_s, (done.throughput, per_s)


def test_cached_peaks_go_to_the_window_once_measured_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window's roofline uses the host's peaks, which may be another machine's: cached
    roofs that no operator beats are sent as they are, once, and nothing is measured."""
    import json

    from engine.events import OpProfile, PeaksMeasured
    from engine.machine.peaks import peaks_path

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))
    peaks_path().parent.mkdir(parents=True)
    from engine.machine.theoretical import cpu_ceiling

    ceiling = cpu_ceiling()  # roofs no operator beats, yet physically possible (trusted)
    high = {"cpu": {"memory_gbps": 1e6, "gflops": ceiling.gflops if ceiling else 1e7},
            "gpu": None}  # fmt: skip
    peaks_path().write_text(json.dumps(high))
    host = Host()
    try:
        host.send(cmds.Load(str(DEMO_CNN)))
        sent = host.wait_for(lambda e: isinstance(e, PeaksMeasured), timeout=120)
        assert sent.peaks == high
        host.send(cmds.Profile())  # a second pass: nothing sent again
        first = host.events.index(sent)
        host.wait_for(lambda e: isinstance(e, OpProfile), start=first + 1)
        assert sum(isinstance(e, PeaksMeasured) for e in host.events) == 1
        assert not any(isinstance(e, Progress) and e.stage == "peaks" for e in host.events)
    finally:
        host.close()


def test_roofs_the_operators_beat_are_measured_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Roofs cached while the machine was busy sat below what the operators reached (12 of
    the 15 slowest MatMuls 'compute >roof'): the host measures them again, once, says why,
    and sends the new roofs, which the operators no longer beat."""
    import json

    from engine.events import OpProfile, PeaksMeasured
    from engine.machine.peaks import peaks_path, roofs_for
    from engine.measure.roofline import above_roof

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))
    peaks_path().parent.mkdir(parents=True)
    low = {"cpu": {"memory_gbps": 0.01, "gflops": 0.01}, "gpu": None}
    peaks_path().write_text(json.dumps(low))
    host = Host()
    try:
        host.send(cmds.Load(str(DEMO_CNN)))
        measured = host.wait_for(lambda e: isinstance(e, PeaksMeasured), timeout=120)
        note = next(e for e in host.events if isinstance(e, Notice) and "roofs" in e.message)
        assert "ran above the cached roofs" in note.message and "again" in note.message
        profile = next(e for e in host.events if isinstance(e, OpProfile))
        roofs = roofs_for(measured.peaks, "CPUExecutionProvider")
        assert roofs is not None and roofs.compute > 1.0 and len(roofs.memory) >= 1
        assert len(above_roof(profile.ops, roofs)) < len(profile.ops)
    finally:
        host.close()


def test_a_load_run_in_the_host_is_recorded_as_its_own_run(host: Host, tmp_path: Path) -> None:
    """Run load from the window: timing pauses, the run's facts, ServingStarted, every
    request and batch, ServingSummary, then live timing resumes; a session files it as a
    run of kind load between two live runs. Both are jobs on the loaded model through the
    one runner (RunJob, CancelJob, JobUpdate): Stop load is its Cancel and ends it early
    (cancelled, kept); a second job meanwhile is refused in one line; Calibrate answers
    with the batch times the What-if view simulates from."""
    import numpy as np

    from engine.events import JobUpdate, ServedRequests, ServingStarted, ServingSummary
    from engine.run.serving_jobs import CalibrateRequest, LoadRunRequest
    from engine.serve.records import UNSERVED
    from engine.session import Recorder, SessionStore, open_session_file

    host.send(cmds.Apply(RunConfig(batch=2, threads=1)))  # serving prepares batch 1 itself
    host.send(cmds.Load(str(DEMO_CNN)))
    host.wait_for(lambda e: isinstance(e, LatencyBatch) and e.latencies_ns.size > 0)
    mark = len(host.events)
    batching = {"max_batch": 4, "delay_ms": 1.0, "instances": 1}
    host.send(cmds.RunJob(1, LoadRunRequest("poisson:150", batching, 2.0, warmup_s=0.5)))

    def end_of(job_id: int, start: int = 0, timeout: float = 60) -> JobUpdate:
        ended: JobUpdate = host.wait_for(
            lambda e: isinstance(e, JobUpdate) and e.job_id == job_id and e.kind != "events",
            start=start, timeout=timeout,
        )  # fmt: skip
        return ended

    def at(ev: Any) -> int:  # events compare by value: the run facts repeat
        return next(i for i, e in enumerate(host.events) if e is ev)

    summary = host.wait_for(lambda e: isinstance(e, ServingSummary), start=mark)
    host.wait_for(lambda e: isinstance(e, RunEnded), start=at(summary))
    resumed = host.wait_for(  # live timing again, at the config it had
        lambda e: isinstance(e, RunStarted), start=at(summary)
    )
    assert resumed.config.batch == 2
    done = end_of(1, mark)
    assert done.kind == "done" and done.payload["requests"] == summary.summary["requests"]
    load_events = host.events[mark : at(resumed)]
    served = [e for e in load_events if isinstance(e, ServedRequests)]
    # a request still waiting at a report comes then as unserved, and again at its end
    ended = [e.index[e.outcome != UNSERVED] for e in served]
    assert sum(i.size for i in ended) == summary.summary["requests"]["sent"] > 200
    assert any(isinstance(e, ServingStarted) for e in load_events)
    assert max(int(e.batch_size.max()) for e in served if e.batch_size.size) <= 4

    path = tmp_path / "app.opscope"
    store = SessionStore.create_or_open(path)
    rec = Recorder(store, kind="live")
    for ev in host.events:
        rec.feed(ev)
    rec.close()
    store.close()
    with open_session_file(path) as reader:
        kinds = [r.kind for r in reader.runs()]
        load_run = next(r for r in reader.runs() if r.kind == "load")
        serving = reader.serving(load_run.id)
    assert kinds[:3] == ["live", "load", "live"]
    assert serving is not None and len(serving.records) == summary.summary["requests"]["sent"]
    assert load_run.config is not None and load_run.latency is not None

    mark = len(host.events)
    host.send(cmds.RunJob(2, LoadRunRequest("poisson:100", {"max_batch": 1}, 60.0)))
    first = host.wait_for(lambda e: isinstance(e, ServedRequests), start=mark)
    host.send(cmds.RunJob(3, CalibrateRequest(max_batch=2)))
    refused = end_of(3, mark)
    assert refused.kind == "failed" and "still going" in refused.payload
    host.send(cmds.CancelJob(2))
    ended = host.wait_for(lambda e: isinstance(e, RunEnded), start=at(first), timeout=20)
    assert ended.status == "cancelled"
    assert end_of(2, mark, timeout=20).kind == "cancelled"

    host.send(cmds.RunJob(4, CalibrateRequest(max_batch=2)))
    cal = end_of(4, mark, timeout=120)
    assert cal.kind == "done", cal.payload
    assert {int(s) for s in cal.payload["sizes"]} >= {1, 2}
    assert np.isfinite(cal.payload["median_ms"]["1"])
    for job_id, remeasure, cached in ((5, False, True), (6, True, False)):  # Recalibrate
        mark = len(host.events)
        host.send(cmds.RunJob(job_id, CalibrateRequest(max_batch=2, remeasure=remeasure)))
        assert end_of(job_id, mark, timeout=120).kind == "done"
        said = [e.message for e in host.events[mark:] if isinstance(e, Notice)]
        assert any("from the cache" in m for m in said) is cached, said
    assert cal.payload["contention"]["verdict"] in ("quiet", "busy")  # how busy, kept
    # Cancel while it times: it stops between two batches and ends cancelled
    mark = len(host.events)
    host.send(cmds.RunJob(7, CalibrateRequest(max_batch=8, remeasure=True)))
    host.wait_for(lambda e: isinstance(e, Progress) and e.stage == "calibrate", start=mark)
    host.send(cmds.CancelJob(7))
    assert end_of(7, mark, timeout=60).kind == "cancelled"


def test_background_profiling_backs_off_for_an_unchanged_config() -> None:
    from engine.run.host_profiler import (
        PROFILE_EVERY_S,
        PROFILE_MAX_EVERY_S,
        next_profile_interval,
    )

    every, seen = PROFILE_EVERY_S, []
    for _ in range(6):
        seen.append(every)
        every = next_profile_interval(every)
    assert seen == [30.0, 60.0, 120.0, 240.0, 240.0, 240.0]
    assert PROFILE_MAX_EVERY_S == 240.0


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/PID/maps")
def test_the_host_imports_onnx_before_a_model_is_chosen() -> None:
    """The window starts its host before the user picks a model: the library every ONNX
    build reads the model with (about 1 s of imports, 4 s on a busy machine) is imported
    meanwhile, not after the Load, so the first latency point does not wait for it."""
    host = Host()
    try:
        host.wait_for(lambda e: isinstance(e, Telemetry))  # up; no command sent

        def onnx_mapped() -> bool:
            maps = Path(f"/proc/{host.proc.pid}/maps").read_text()
            return "onnx_cpp2py_export" in maps

        end = time.monotonic() + 60
        while not onnx_mapped() and time.monotonic() < end:
            time.sleep(0.2)
        assert onnx_mapped()
    finally:
        host.close()
