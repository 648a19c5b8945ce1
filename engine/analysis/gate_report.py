"""What `opscope gate` decided, and its renderers: a JUnit XML file (one test case per
metric gated, a <failure> when it regressed) and a Markdown summary for CI systems, the
JSON object, and the terminal's lines. Pure functions of a `GateReport`."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from engine.analysis.gate_stats import METHOD, GateResult, spread_pct
from engine.analysis.likeness import verdict as verdict_of

# characters XML 1.0 cannot hold even escaped (a model name from a hostile file)
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True, slots=True)
class GateReport:
    """The gate's inputs in words and one result per metric."""

    model: str  # the model's file name
    config: str  # 'FP32 fusion=all batch=1 threads=2'
    baseline_ref: str  # 'main.opscope:1,2,3'
    candidate_ref: str  # 'candidate.opscope:4,5,6,7,8'
    results: tuple[GateResult, ...]
    wall_s: float = 0.0  # seconds the candidate runs took
    notes: tuple[str, ...] = field(default_factory=tuple)
    busy: tuple[str, ...] = ()  # each side measured on a busy machine, in words
    baseline_busy: bool = False

    @property
    def status(self) -> str:
        """ "regression", "ok" or "inconclusive" (a busy machine: `likeness.verdict`)."""
        slower = any(r.regression for r in self.results)
        return verdict_of(slower, [], list(self.busy), self.baseline_busy)

    @property
    def regression(self) -> bool:
        return self.status == "regression"

    def failed(self, r: GateResult) -> bool:
        """This metric fails the gate: it regressed, and the gate as a whole has a verdict."""
        return r.regression and self.status == "regression"

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "config": self.config,
            "baseline": self.baseline_ref,
            "candidate": self.candidate_ref,
            "regression": self.regression,
            "verdict": self.status,
            "busy": list(self.busy),
            "metrics": [r.to_json() for r in self.results],
            "wall_s": self.wall_s,
            "notes": list(self.notes),
        }


def number_text(x: float, unit: str) -> str:
    """1.234 (ms), 987.6 (samples/s): the number alone, as `value_text` writes it."""
    if not math.isfinite(x):
        return "-"
    return f"{x:.3f}" if unit == "ms" and abs(x) < 1000 else f"{x:.1f}"


def value_text(x: float, unit: str) -> str:
    return f"{number_text(x, unit)} {unit}"


def pct_text(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{x:+.1f}%"


def verdict(r: GateResult) -> str:
    """'REGRESSION: p50 12.3% slower; 95% sure it is more than 7.9% slower, beyond the 5%
    threshold' or 'OK: p50 2.1% slower; not shown beyond the 5% threshold at 95% (slowdown
    lower bound -3.2%)'."""
    worse = "lower" if r.higher_is_better else "slower"
    better = "higher" if r.higher_is_better else "faster"
    size = (
        f"{abs(r.slowdown_pct):.1f}% {worse}"
        if r.slowdown_pct >= 0
        else f"{abs(r.slowdown_pct):.1f}% {better}"
    )
    if r.regression:
        return (
            f"REGRESSION: {r.metric} {size}; {r.confidence:.0%} sure it is more than "
            f"{r.slowdown_bound_pct:.1f}% {worse}, beyond the {r.threshold_pct:g}% threshold"
        )
    return (
        f"OK: {r.metric} {size}; not shown beyond the {r.threshold_pct:g}% threshold at "
        f"{r.confidence:.0%} (slowdown lower bound {pct_text(r.slowdown_bound_pct)})"
    )


def inconclusive_line(report: GateReport) -> str:
    """Why a busy machine leaves the gate without a verdict, in one line."""
    return (
        "INCONCLUSIVE: measured on a busy machine, so contention explains a difference as "
        "well as a change would (" + "; ".join(report.busy) + "): run the gate again when "
        "the machine is quiet"
    )


def _md_verdict(report: GateReport, r: GateResult) -> str:
    if report.status == "inconclusive":
        return "inconclusive"
    return "**regression**" if report.failed(r) else "ok"


def runs_text(r: GateResult) -> str:
    """'baseline 5 runs 4.98-5.31 ms (spread 6.5%); candidate 5 runs 5.02-5.44 ms (8.1%)'."""
    parts = []
    for side, values in (("baseline", r.baseline_runs), ("candidate", r.candidate_runs)):
        if len(values) == 1:
            parts.append(f"{side} 1 run {value_text(values[0], r.unit)}")
            continue
        lo, hi = min(values), max(values)
        parts.append(
            f"{side} {len(values)} runs {number_text(lo, r.unit)}-{value_text(hi, r.unit)} "
            f"(spread {spread_pct(values):.1f}%)"
        )
    return "; ".join(parts)


# -- JUnit XML -------------------------------------------------------------------------


def _xml_text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def junit_xml(report: GateReport) -> str:
    """<testsuites><testsuite name="opscope gate"> with one <testcase> per metric; a
    regression is a <failure>. Text from files is made XML-safe, then escaped by etree."""
    failures = sum(report.failed(r) for r in report.results)
    suites = ET.Element(
        "testsuites",
        name="opscope gate",
        tests=str(len(report.results)),
        failures=str(failures),
        errors="0",
        time=f"{report.wall_s:.3f}",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=_xml_text(f"opscope gate {report.model}"),
        tests=str(len(report.results)),
        failures=str(failures),
        errors="0",
        skipped=str(len(report.results) if report.status == "inconclusive" else 0),
        time=f"{report.wall_s:.3f}",
    )
    props = ET.SubElement(suite, "properties")
    for key, value in (
        ("model", report.model),
        ("config", report.config),
        ("baseline", report.baseline_ref),
        ("candidate", report.candidate_ref),
        ("method", METHOD),
    ):
        ET.SubElement(props, "property", name=key, value=_xml_text(value))
    for r in report.results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=_xml_text(f"opscope.gate.{report.model}"),
            name=f"{r.metric} within {r.threshold_pct:g}%",
            time=f"{report.wall_s / max(1, len(report.results)):.3f}",
        )
        details = "\n".join([verdict(r), runs_text(r), *r.notes, *report.notes, *report.busy])
        if report.status == "inconclusive":
            skipped = ET.SubElement(case, "skipped", message=_xml_text(inconclusive_line(report)))
            skipped.text = _xml_text(details)
        elif report.failed(r):
            failure = ET.SubElement(
                case, "failure", message=_xml_text(verdict(r)), type="PerformanceRegression"
            )
            failure.text = _xml_text(details)
        else:
            ET.SubElement(case, "system-out").text = _xml_text(details)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


# -- Markdown ------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


def _md(text: str) -> str:
    """Text from files, inert in Markdown (and one line: a table cell cannot break)."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(_xml_text(text).split()))


def markdown_summary(report: GateReport) -> str:
    """A heading with the verdict, a table of the metrics, each side's runs, the notes."""
    head = {
        "regression": "❌ Performance regression",
        "inconclusive": "⚠️ Inconclusive: measured on a busy machine",
    }.get(report.status, "✅ No performance regression")
    lines = [
        f"## {head}: {_md(report.model)}",
        "",
        f"Config {_md(report.config)}; baseline {_md(report.baseline_ref)}, "
        f"candidate {_md(report.candidate_ref)}.",
        "",
        "| metric | baseline | candidate | change | slowdown, lower bound | threshold | verdict |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in report.results:
        change = -r.slowdown_pct if r.higher_is_better else r.slowdown_pct
        lines.append(
            f"| {r.metric} | {value_text(r.baseline, r.unit)} | "
            f"{value_text(r.candidate, r.unit)} | {pct_text(change)} | "
            f"{pct_text(r.slowdown_bound_pct)} ({r.confidence:.0%}) | {r.threshold_pct:g}% | "
            f"{_md_verdict(report, r)} |"
        )
    lines.append("")
    for r in report.results:
        lines.append(f"- {r.metric}: {_md(runs_text(r))}")
    notes = dict.fromkeys([*(n for r in report.results for n in r.notes), *report.notes])
    lines += [f"- note: {_md(n)}" for n in notes]
    lines += [f"- machine: {_md(b)}" for b in report.busy]
    first = report.results[0] if report.results else None
    if first is not None:
        lines += [
            "",
            f"_{METHOD}; {first.resamples} resamples, seed {first.seed}. The slowdown "
            f"exceeds its lower bound with {first.confidence:.0%} confidence (one-sided); the "
            "gate fails when that bound exceeds the threshold._",
        ]
    return "\n".join(lines) + "\n"
