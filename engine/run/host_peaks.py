"""The engine host's machine peaks: measured with timing paused when the window's roofline
needs them (none cached, a GPU run, operators beating the cached roofs), and measured again
when cached ones are provisional and the machine is quiet (engine/machine/peaks_trust.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from engine.events import Notice, PeaksMeasured, Progress

if TYPE_CHECKING:
    from engine.run.live import LiveRun
    from engine.run.outbox import Outbox


class PeaksState(Protocol):
    """What the host remembers about its peaks (engine.run.host_profiler.PeaksMemo)."""

    peaks_tried: bool
    peaks_sent: bool
    peaks_retry_at: float


PEAKS_RETRY_S = 120.0  # provisional peaks: a quiet moment is looked for at most this often


def peaks_if_missing(
    live: LiveRun,
    state: PeaksState,
    out: Outbox,
    ops: list[Any] | None = None,
    stop: Callable[[], bool] | None = None,
) -> None:
    """The roofline needs this machine's peaks (and a GPU run the GPU's): measured here,
    once per host, with timing paused, so the engine's own load cannot drag them down
    (measured beside the running engine on 2 cores, the matmul peak came out at 78 instead
    of 181 GFLOP/s). Cached roofs that the profiled operators beat by more than 10% were
    measured on a busier machine: they are measured again, once, and the window is told.
    Provisional ones (measured busy or implausible: engine/machine/peaks_trust.py) are
    measured again when the machine is quiet, looked for at most every PEAKS_RETRY_S; a
    busy measurement never replaces trusted ones. `opscope system` does the same.
    `stop` (the host told to end) stops a measurement part-way, nothing of it kept: the
    host's run then ends with its summary at once, not a minute later."""
    from engine.machine.peaks import cached_peaks, on_gpu, roofs_for
    from engine.machine.peaks_trust import quiet_now
    from engine.measure.roofline import above_roof, place

    provider = live.segment.staged.provider_used if live.segment else None
    if state.peaks_tried or live.segment is None:
        return
    cached = cached_peaks()
    gpu = on_gpu(provider)
    roofs = roofs_for(cached, provider) if cached is not None else None
    beaten = above_roof(ops or [], roofs) if roofs is not None else []
    if cached is not None and roofs is not None and not beaten:  # known, unbeaten: the window
        if not state.peaks_sent:  # gets this host's (it may be on another machine)
            state.peaks_sent = True
            out.put(PeaksMeasured(cached))
        if roofs.caveat is None or time.monotonic() < state.peaks_retry_at:
            return
        state.peaks_retry_at = time.monotonic() + PEAKS_RETRY_S
        now = quiet_now()
        if now is not None and now.busy:
            return  # still busy: provisional they stay, and the window says so
        _measure_peaks(out, gpu, f"the cached roofs are provisional ({roofs.caveat}) and the "
                       "machine is quiet now: measuring them again", stop=stop)  # fmt: skip
        return
    state.peaks_tried = True
    if beaten and roofs is not None:
        top = beaten[0]
        why = (f"{len(beaten)} operator(s) ran above the cached roofs ({top.name}: "
               f"{place(top, roofs).label}), so they were measured on a busier machine: "
               "measuring them again")  # fmt: skip
    else:
        why = (f"measuring this machine's peak bandwidth and FLOP rate"
               f"{' (CPU and GPU)' if gpu else ''} for the roofline: once")  # fmt: skip
    _measure_peaks(out, gpu, why, beaten=bool(beaten), stop=stop)


def _measure_peaks(
    out: Outbox,
    gpu: bool,
    why: str,
    beaten: bool = False,
    stop: Callable[[], bool] | None = None,
) -> None:
    """Measure the peaks now (timing is paused), say why, and send what stands; `stop`
    asking stops it part-way (engine/machine/measure_stop.py), nothing sent or cached."""
    from engine.machine.measure_stop import STOP_HOOK, MeasurementStopped
    from engine.machine.peaks import load_peaks
    from engine.machine.peaks_trust import judge

    out.put(Notice("info", f"{why}, timing pauses a few seconds"))
    out.put(Progress("peaks", 0, 1, "measuring this machine's peaks, once"))
    out.flush(force=True)
    hooks = [stop] if stop is not None else []
    STOP_HOOK.extend(hooks)
    done = "peaks measured"
    try:
        peaks = load_peaks(remeasure=True, gpu=gpu, beaten=beaten)
    except MeasurementStopped:  # the host ends: its run's end goes out now
        done = "the peaks measurement stopped: the engine host is ending"
        return
    except Exception as exc:  # the roofline then shows no roofs; the run goes on
        out.put(Notice("warning", f"measuring the machine's peaks failed: {exc}"))
        return
    finally:
        for hook in hooks:
            STOP_HOOK.remove(hook)
        out.put(Progress("peaks", 1, 1, done))
    gpu_peaks = peaks.get("gpu") or {}
    if "error" in gpu_peaks:
        out.put(Notice("warning", f"measuring the GPU's peaks failed: {gpu_peaks['error']}"))
    rejected = peaks.get("rejected")
    verdict = judge(peaks)
    if isinstance(rejected, dict):
        out.put(Notice("warning", f"the peaks measured now were not kept: {rejected['why']}; "
                       f"the roofs of {peaks.get('measured_at')} stand"))  # fmt: skip
    elif not verdict.trusted:
        out.put(Notice("warning", f"the machine's roofs are provisional: {verdict.why}; they "
                       "will be measured again when the machine is quiet"))  # fmt: skip
    out.put(PeaksMeasured(peaks))
