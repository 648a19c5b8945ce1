"""Whether measured peaks may stand as this machine's roofs (issue #49, item 5).

Peaks are the best the machine does, so a measurement is only worth keeping when it was
taken on a quiet machine (the `Contention` measured over it: engine/measure/contention.py)
and is physically possible: the float32 roof at most the CPU's ceiling (cores x SIMD lanes
x 2 FMA x pipes x clock: engine/machine/theoretical.py) and the integer roof at most what
the instruction set allows over the float one (VNNI 4x, AMX 32x, neither 2x). Roofs measured
on a busy machine came out 2-3x low and an int8 roof 45x the fp32 one; cached, they stayed.

`judge` gives a `Trust` for any peaks dict, new or cached (a cache written before contention
was recorded is judged by its load average). engine/machine/peaks.py keeps the last trusted
measurement, or marks an untrusted one provisional and measures again when `quiet_now`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from engine.machine.theoretical import INT8_FACTOR, ISA_NAME, Ceiling, cpu_ceiling
from engine.measure.contention import Contention, Window

PHYSICS_SLACK = 1.10  # above its ceiling by more than this: a timing error, not the CPU
INT8_SLACK = 1.5  # float kernels reach a smaller share of their peak than integer ones
QUIET_PROBE_S = 0.5  # how long `quiet_now` watches the machine before a re-measurement
RETRY_S = 60.0  # provisional peaks found busy: the machine is looked at again after this
TRUSTED = ("quiet", "unknown", "legacy")


@dataclass(frozen=True)
class Trust:
    """A verdict on one set of peaks: `status` is "quiet" (measured quiet, plausible),
    "busy", "implausible", "unknown" (no CPU counters to tell) or "legacy" (cached by an
    older OpScope, which recorded only the load average); `why` says it with the numbers."""

    status: str
    why: str
    notes: tuple[str, ...] = ()

    @property
    def trusted(self) -> bool:
        return self.status in TRUSTED

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "trusted": self.trusted, "why": self.why,
                "notes": list(self.notes)}  # fmt: skip


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and x > 0 else None


def physics_problems(
    cpu: dict[str, Any], ceiling: Ceiling | None, isa: str
) -> tuple[list[str], list[str]]:
    """(problems, notes): why the CPU's compute roofs cannot be true, and what could not be
    checked (no clock known)."""
    problems: list[str] = []
    notes: list[str] = []
    fp32, int8 = _num(cpu.get("gflops")), _num(cpu.get("int_gops"))
    factor = INT8_FACTOR.get(isa, INT8_FACTOR["other"])
    if ceiling is None:
        notes.append("no CPU clock known: the compute roofs were not checked against the "
                     "CPU's ceiling")  # fmt: skip
    elif fp32 is not None and fp32 > ceiling.fp32_limit * PHYSICS_SLACK:
        problems.append(
            f"fp32 {fp32:.4g} GFLOP/s is above what this CPU can do "
            f"({ceiling.fp32_limit:.4g}: {ceiling.text})"
        )
    if ceiling is not None and int8 is not None:
        limit = ceiling.fp32_limit * factor
        if int8 > limit * PHYSICS_SLACK:
            problems.append(
                f"int8 {int8:.4g} GOP/s is above what this CPU can do ({limit:.4g}: "
                f"{factor:g}x the fp32 ceiling with {ISA_NAME.get(isa, isa)})"
            )
    if fp32 is not None and int8 is not None and int8 > fp32 * factor * INT8_SLACK:
        problems.append(
            f"the int8 roof is {int8 / fp32:.0f}x the fp32 one where "
            f"{ISA_NAME.get(isa, isa)} allows about {factor:g}x: the fp32 roof was measured low"
        )
    return problems, notes


def machine_facts() -> dict[str, Any]:
    """What the physics check needs of the machine measured, stored with its peaks: a
    window judging a remote host's peaks checks them against that host, not itself."""
    from engine.hostinfo import cpu_isa

    c = cpu_ceiling()
    ceiling = None if c is None else {"gflops": round(c.gflops, 1), "text": c.text,
                                      "base_clock": c.base_clock}  # fmt: skip
    return {"ceiling": ceiling, "isa": cpu_isa(), "cpus": os.cpu_count() or 1}


def _stored_ceiling(facts: dict[str, Any]) -> Ceiling | None:
    c = facts.get("ceiling")
    if not isinstance(c, dict) or _num(c.get("gflops")) is None:
        return None
    return Ceiling(float(c["gflops"]), str(c.get("text", "")), bool(c.get("base_clock")),
                   str(facts.get("isa", "other")))  # fmt: skip


def _here(data: dict[str, Any]) -> bool:
    """Whether `data` was measured on this machine (an older cache, or one without a key,
    is taken as this machine's: the cache is per machine)."""
    from engine.hostinfo import host_name

    key = data.get("key")
    return not isinstance(key, dict) or key.get("host") in (None, host_name())


def judge(
    data: dict[str, Any], ceiling: Ceiling | str | None = "as measured", isa: str | None = None
) -> Trust:
    """Whether `data` (load_peaks's dict) may stand as the machine's roofs, and why.
    `ceiling` (None: no clock known) and `isa` default to the measured machine's: stored
    with the peaks (`machine_facts`), else this machine's when the peaks are from here."""
    from engine.hostinfo import cpu_isa

    raw = data.get("cpu")
    cpu: dict[str, Any] = raw if isinstance(raw, dict) else {}
    facts = cpu.get("machine")
    notes: list[str] = []
    if not isinstance(ceiling, str):
        known, chip = ceiling, isa or cpu_isa()
    elif isinstance(facts, dict):
        known, chip = _stored_ceiling(facts), str(facts.get("isa", "other"))
    elif _here(data):
        known, chip = cpu_ceiling(), cpu_isa()
    else:
        known, chip = None, ""
        notes.append("measured on another machine by an older OpScope: not checked against "
                     "its CPU's ceiling")  # fmt: skip
    problems, more = physics_problems(cpu, known, chip) if chip else ([], [])
    notes.extend(more)
    if "contention" not in cpu:  # an older cache: only the load average was recorded
        return _legacy(cpu, problems, notes, here=_here(data))
    c = Contention.from_json(cpu.get("contention"))
    if c is not None and c.busy:
        why = f"measured busy ({'; '.join(c.reasons())} over {c.window_s:.1f} s)"
        return Trust("busy", "; ".join([why, *problems]), tuple(notes))
    if problems:
        return Trust("implausible", "implausible: " + "; ".join(problems), tuple(notes))
    if c is None:
        return Trust("unknown", "how busy the machine was is not known (no CPU counters)",
                     tuple(notes))  # fmt: skip
    return Trust("quiet", f"measured {c.line()}", tuple(notes))


def _legacy(cpu: dict[str, Any], problems: list[str], notes: list[str], here: bool) -> Trust:
    load = _num(cpu.get("load"))
    cpus = os.cpu_count() or 1
    if load is not None and load >= cpus and here:
        why = (f"measured busy (load average {load:g} on {cpus} CPUs, by an older OpScope "
               "that did not tell others' work from its own)")  # fmt: skip
        return Trust("busy", "; ".join([why, *problems]), tuple(notes))
    if problems:
        return Trust("implausible", "implausible: " + "; ".join(problems), tuple(notes))
    said = f" at load average {load:g}" if load is not None else ""
    return Trust("legacy", f"measured{said} by an older OpScope: how busy other processes "
                 "were was not recorded", tuple(notes))  # fmt: skip


def quiet_now(seconds: float = QUIET_PROBE_S) -> Contention | None:
    """The machine's contention over the next `seconds` (None without CPU counters): a
    provisional set of peaks is measured again only when this says quiet."""
    window = Window()
    time.sleep(seconds)
    return window.done()


def status_lines(peaks: dict[str, Any]) -> list[str]:
    """What `opscope system` says about the peaks' trust, in words (one line each)."""
    t = judge(peaks)
    if t.trusted:
        out = [t.why]
    else:
        out = [
            f"PROVISIONAL: {t.why}; not taken as this machine's roofs: they will be "
            "measured again when the machine is quiet (or `opscope system --remeasure`)"
        ]
    rejected = peaks.get("rejected")
    if isinstance(rejected, dict):
        out.append(
            f"measured again at {rejected.get('measured_at')} but not kept: "
            f"{rejected.get('why')}; the peaks of {peaks.get('measured_at')} stand"
        )
    out.extend(t.notes)
    return out
