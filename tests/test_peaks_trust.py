"""Roofs that stay true (issue 49, item 5): peaks measured on a busy machine, or beyond what
the CPU can physically do, are never cached as the machine's roofs; the last trusted ones
stay, or the new ones are used but marked provisional and measured again when quiet."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engine.machine import peaks, peaks_trust
from engine.machine.peaks_trust import judge
from engine.machine.theoretical import Ceiling
from engine.measure.contention import Contention

QUIET = Contention(window_s=6.0, cpus=2, others_cpu=0.03, steal=0.0, own_cpu=1.9)
BUSY = Contention(window_s=6.0, cpus=2, others_cpu=1.9, steal=0.0, own_cpu=0.1)
CEILING = Ceiling(268.8, "2 cores x 2.10 GHz x 16 float32 lanes x 2 (FMA) x 2", False, "vnni")


def cpu(
    contention: Contention | None, gflops: float = 100.0, int_gops: float | None = 300.0
) -> dict[str, Any]:
    return {"memory_gbps": 10.0, "gflops": gflops, "int_gops": int_gops,
            "contention": None if contention is None else contention.to_json()}  # fmt: skip


def data(c: dict[str, Any], at: str = "2026-12-06T06:00:00Z") -> dict[str, Any]:
    return {"cpu": c, "gpu": None, "key": {}, "measured_at": at}


def test_quiet_and_plausible_peaks_are_trusted() -> None:
    t = judge(data(cpu(QUIET)), CEILING, "vnni")
    assert t.status == "quiet" and t.trusted
    assert t.why == "measured quiet: others used 0.03 of 2 CPUs over 6.0 s"


def test_busy_peaks_are_not_and_say_why_in_words() -> None:
    t = judge(data(cpu(BUSY)), CEILING, "vnni")
    assert t.status == "busy" and not t.trusted
    assert t.why == "measured busy (other processes used 1.90 of 2 CPUs over 6.0 s)"


def test_physics_the_fp32_roof_at_most_the_cpu_ceiling() -> None:
    """fp32 above cores x lanes x 2 FMA x pipes x clock is a timing error, not the CPU."""
    t = judge(data(cpu(QUIET, gflops=400.0, int_gops=None)), CEILING, "vnni")
    assert t.status == "implausible" and "above what this CPU can do" in t.why
    within = judge(data(cpu(QUIET, gflops=280.0, int_gops=None)), CEILING, "vnni")
    assert within.trusted  # within the slack of a ceiling that is itself an upper bound
    # a base clock (a VM's /proc/cpuinfo): a turbo may run up to TURBO_ALLOWANCE above it
    base = Ceiling(CEILING.gflops, CEILING.text, True, "vnni")
    assert judge(data(cpu(QUIET, gflops=400.0, int_gops=None)), base, "vnni").trusted


def test_physics_int8_within_what_the_isa_allows_over_fp32() -> None:
    """An int8 roof 45x the fp32 one (seen on a busy AVX-512 EPYC): VNNI allows 4x."""
    t = judge(data(cpu(QUIET, gflops=17.8, int_gops=803.0)), CEILING, "vnni")
    assert t.status == "implausible" and "45x the fp32 one" in t.why and "VNNI" in t.why
    assert judge(data(cpu(QUIET, gflops=95.0, int_gops=1206.0)), CEILING, "amx").trusted
    assert not judge(data(cpu(QUIET, gflops=95.0, int_gops=1206.0)), CEILING, "avx2").trusted
    busy = judge(data(cpu(BUSY, gflops=17.8, int_gops=803.0)), CEILING, "vnni")
    assert busy.status == "busy" and "45x" in busy.why  # both reasons said


def test_no_clock_no_ceiling_check_and_it_says_so() -> None:
    t = judge(data(cpu(QUIET, gflops=1e6, int_gops=None)), None, "vnni")
    assert t.trusted and any("not checked" in n for n in t.notes)
    assert not judge(data(cpu(QUIET, gflops=10.0, int_gops=1e4)), None, "vnni").trusted


def test_peaks_are_checked_against_the_machine_that_measured_them() -> None:
    """A window shows its engine host's peaks (maybe a 64-core server over SSH): they are
    checked against the ceiling stored with them, not the window's own CPU."""
    big = {"ceiling": {"gflops": 9000.0, "text": "64 cores x ...", "base_clock": False},
           "isa": "amx", "cpus": 128}  # fmt: skip
    server = data({**cpu(QUIET, gflops=5000.0, int_gops=60000.0), "machine": big})
    server["key"] = {"host": "gpu-box"}
    assert judge(server).status == "quiet"
    small = {**big, "ceiling": {"gflops": 100.0, "text": "1 core", "base_clock": False}}
    assert judge(data({**cpu(QUIET, gflops=500.0), "machine": small})).status == "implausible"
    # an older host's cache from elsewhere: nothing stored to check against, and it says so
    old = {"cpu": {"memory_gbps": 10.0, "gflops": 1e6, "load": 99.0}, "key": {"host": "x"}}
    t = judge(old)
    assert t.status == "legacy" and any("another machine" in n for n in t.notes)


def test_measured_peaks_carry_their_machines_facts() -> None:
    facts = peaks_trust.machine_facts()
    assert facts["isa"] and facts["cpus"] >= 1
    assert facts["ceiling"] is None or facts["ceiling"]["gflops"] > 0


def test_no_counters_is_unknown_not_busy() -> None:
    t = judge(data(cpu(None)), CEILING, "vnni")
    assert t.status == "unknown" and t.trusted


def test_an_older_cache_is_read_and_judged_by_its_load_average(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Caches written before contention was recorded hold a bare load average."""
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr("engine.machine.peaks_trust.os.cpu_count", lambda: 2)
    old_cpu = {"memory_gbps": 6.88, "gflops": 20.2, "load": 1.2}
    old: dict[str, Any] = {"cpu": old_cpu, "gpu": None}
    peaks.peaks_path().parent.mkdir(parents=True)
    peaks.peaks_path().write_text(json.dumps(old))
    cached = peaks.cached_peaks()
    assert cached == old
    assert cached is not None
    t = judge(cached, CEILING, "vnni")
    assert t.status == "legacy" and t.trusted and "load average 1.2" in t.why
    busy = judge({"cpu": {**old_cpu, "load": 13.88}}, CEILING, "vnni")
    assert busy.status == "busy" and "load average 13.88 on 2 CPUs" in busy.why
    roofs = peaks.roofs_for({"cpu": {**old_cpu, "load": 13.88}}, "CPUExecutionProvider")
    assert roofs is not None and roofs.caveat is not None and "13.88" in roofs.caveat


class Fake:
    """measure_cpu_peaks replaced: each call returns the next (contention, gflops)."""

    def __init__(self, *runs: tuple[Contention, float]) -> None:
        self.runs = list(runs)
        self.calls = 0

    def __call__(self) -> dict[str, Any]:
        contention, gflops = self.runs[self.calls]
        self.calls += 1
        return cpu(contention, gflops=gflops, int_gops=None)


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(peaks_trust, "cpu_ceiling", lambda: CEILING)
    monkeypatch.setattr(peaks_trust, "quiet_now", lambda seconds=0.5: QUIET)
    return tmp_path


def on_disk() -> dict[str, Any]:
    return dict(json.loads(peaks.peaks_path().read_text()))


def test_busy_with_nothing_cached_is_used_but_provisional_and_remeasured_when_quiet(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = Fake((BUSY, 40.0), (QUIET, 100.0))
    monkeypatch.setattr(peaks, "measure_cpu_peaks", fake)
    first = peaks.load_peaks(gpu=False)
    assert first["cpu"]["gflops"] == 40.0 and "1.90 of 2 CPUs" in first["provisional"]
    assert on_disk()["provisional"] == first["provisional"]  # cached, marked as such
    roofs = peaks.roofs_for(first, "CPUExecutionProvider")
    assert roofs is not None and roofs.caveat and "PROVISIONAL" in roofs.describe()
    # within a minute, nobody even looks (many processes may ask: `opscope profile`, hosts)
    monkeypatch.setattr(peaks_trust, "quiet_now", lambda seconds=0.5: pytest.fail("probed"))
    assert peaks.load_peaks(gpu=False)["cpu"]["gflops"] == 40.0 and fake.calls == 1
    assert on_disk()["retry_at"] > time.time() + peaks_trust.RETRY_S - 30
    monkeypatch.setattr(peaks_trust, "RETRY_S", 0.0)
    on_disk_now = {**on_disk(), "retry_at": 0.0}
    peaks.peaks_path().write_text(json.dumps(on_disk_now))
    # still busy at the next chance: the provisional ones, nothing measured
    monkeypatch.setattr(peaks_trust, "quiet_now", lambda seconds=0.5: BUSY)
    assert peaks.load_peaks(gpu=False)["cpu"]["gflops"] == 40.0 and fake.calls == 1
    # quiet now: measured again, and these are the machine's
    monkeypatch.setattr(peaks_trust, "quiet_now", lambda seconds=0.5: QUIET)
    second = peaks.load_peaks(gpu=False)
    assert fake.calls == 2 and second["cpu"]["gflops"] == 100.0 and second["provisional"] is None
    assert judge(on_disk()).status == "quiet"
    # trusted now: no probe, no measurement
    monkeypatch.setattr(peaks_trust, "quiet_now", lambda seconds=0.5: pytest.fail("probed"))
    assert peaks.load_peaks(gpu=False)["cpu"]["gflops"] == 100.0 and fake.calls == 2


def test_a_busy_remeasurement_never_replaces_the_quiet_roofs(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = Fake((QUIET, 100.0), (BUSY, 40.0), (QUIET, 800.0))
    monkeypatch.setattr(peaks, "measure_cpu_peaks", fake)
    quiet = peaks.load_peaks(gpu=False)
    busy = peaks.load_peaks(remeasure=True, gpu=False)
    assert busy["cpu"]["gflops"] == 100.0 and busy["measured_at"] == quiet["measured_at"]
    assert busy["rejected"]["gflops"] == 40.0 and "1.90 of 2 CPUs" in busy["rejected"]["why"]
    assert on_disk()["cpu"]["gflops"] == 100.0 and "rejected" not in on_disk()
    lines = peaks_trust.status_lines(busy)
    assert lines[0].startswith("measured quiet") and "not kept" in lines[1]
    # an implausible one (800 GFLOP/s on a 269 GFLOP/s CPU) is not cached either
    wild = peaks.load_peaks(remeasure=True, gpu=False)
    assert wild["cpu"]["gflops"] == 100.0 and "implausible" in wild["rejected"]["why"]
    assert on_disk()["cpu"]["gflops"] == 100.0


def test_roofs_the_operators_beat_give_way_even_to_a_busy_measurement(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cached roofs operators ran above are known low: a busy re-measurement replaces them,
    marked provisional (to be measured again when quiet), rather than leaving them."""
    fake = Fake((QUIET, 1.0), (BUSY, 40.0))
    monkeypatch.setattr(peaks, "measure_cpu_peaks", fake)
    peaks.load_peaks(gpu=False)
    got = peaks.load_peaks(remeasure=True, gpu=False, beaten=True)
    assert got["cpu"]["gflops"] == 40.0 and "1.90 of 2 CPUs" in got["provisional"]
    assert on_disk()["cpu"]["gflops"] == 40.0 and "rejected" not in got


def test_the_peaks_job_says_what_it_does(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.events import Progress

    monkeypatch.setattr(peaks, "measure_cpu_peaks", Fake((BUSY, 40.0), (BUSY, 41.0)))

    def said(req: peaks.PeaksRequest) -> list[str]:
        gen = peaks.peaks_job(req)
        out: list[str] = []
        try:
            while True:
                ev = next(gen)
                assert isinstance(ev, Progress)
                out.append(ev.message or "")
        except StopIteration:
            return out

    assert said(peaks.PeaksRequest(gpu=False)) == ["measuring the machine's peaks"]
    assert "provisional" in said(peaks.PeaksRequest(gpu=False))[0]


def test_system_says_provisional_in_words(
    cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`opscope system --remeasure` on a busy machine, nothing cached: the peaks line and
    the JSON say provisional and why, with the numbers."""
    from engine.cli.main import main

    monkeypatch.setattr(peaks, "measure_cpu_peaks", Fake((BUSY, 40.0)))
    out = cache / "system.json"
    assert main(["system", "--remeasure", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.startswith("peaks "))
    assert "PROVISIONAL: measured busy (other processes used 1.90 of 2 CPUs" in line
    assert "measured again when the machine is quiet" in line
    assert "[PROVISIONAL" not in text  # said once, in words, not in the roofs' figures
    assert "while `opscope system` ran" in text  # and how busy the machine is now
    got = json.loads(out.read_text())
    assert got["peaks"]["trust"]["status"] == "busy" and not got["peaks"]["trust"]["trusted"]
    assert "1.90 of 2 CPUs" in got["peaks"]["provisional"]
    assert got["peaks"]["cpu"]["contention"]["verdict"] == "busy"
    assert got["contention"]["verdict"] in ("quiet", "busy")


def test_peaks_measured_beside_busy_processes_are_not_cached_as_the_machines(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The real thing: one spinning process per CPU while the peaks are measured. They come
    back busy, marked provisional, and a quiet cache that was there stays."""
    import os

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))
    quiet = data(cpu(QUIET), at="2026-01-01T00:00:00Z")
    peaks.peaks_path().parent.mkdir(parents=True)
    peaks.peaks_path().write_text(json.dumps(quiet))
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(os.cpu_count() or 1)]  # fmt: skip
    try:
        time.sleep(0.3)
        got = peaks.load_peaks(remeasure=True, gpu=False)
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    assert got["measured_at"] == "2026-01-01T00:00:00Z"  # the quiet ones stand
    assert got["rejected"]["why"].startswith("measured busy (other processes used")
    assert json.loads(peaks.peaks_path().read_text()) == quiet


class Out:
    """The host's outbox, recording what it would send."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def put(self, ev: Any) -> None:
        self.events.append(ev)

    def flush(self, force: bool = False) -> None:
        pass


def test_the_host_measures_provisional_peaks_again_only_when_quiet(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine host sends provisional peaks to the window as they are; when the machine
    is quiet (looked for at most every PEAKS_RETRY_S) it measures them again."""
    from types import SimpleNamespace

    from engine.events import Notice, PeaksMeasured
    from engine.run import host_peaks

    fake = Fake((BUSY, 40.0), (QUIET, 100.0))
    monkeypatch.setattr(peaks, "measure_cpu_peaks", fake)
    peaks.load_peaks(gpu=False)  # provisional: busy, nothing better cached
    live = SimpleNamespace(segment=SimpleNamespace(staged=SimpleNamespace(
        provider_used="CPUExecutionProvider")))  # fmt: skip
    state = SimpleNamespace(peaks_tried=False, peaks_sent=False, peaks_retry_at=0.0)
    out = Out()
    monkeypatch.setattr(peaks_trust, "quiet_now", lambda seconds=0.5: BUSY)
    host_peaks.peaks_if_missing(live, state, out)  # type: ignore[arg-type]
    (sent,) = [e for e in out.events if isinstance(e, PeaksMeasured)]
    assert sent.peaks["provisional"] and fake.calls == 1  # busy: sent as they are
    monkeypatch.setattr(peaks_trust, "quiet_now", lambda seconds=0.5: QUIET)
    host_peaks.peaks_if_missing(live, state, out)  # type: ignore[arg-type]
    assert fake.calls == 1  # too soon to look again
    state.peaks_retry_at = 0.0
    host_peaks.peaks_if_missing(live, state, out)  # type: ignore[arg-type]
    assert fake.calls == 2
    last = [e for e in out.events if isinstance(e, PeaksMeasured)][-1]
    assert last.peaks["provisional"] is None and last.peaks["cpu"]["gflops"] == 100.0
    said = [e.message for e in out.events if isinstance(e, Notice)]
    assert any("provisional" in m and "quiet now" in m for m in said)
    # trusted now: nothing more is measured, however often the host asks
    state.peaks_retry_at = 0.0
    host_peaks.peaks_if_missing(live, state, out)  # type: ignore[arg-type]
    assert fake.calls == 2
