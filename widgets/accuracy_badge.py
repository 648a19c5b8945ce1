"""A coloured badge with the running variant's accuracy against the FP32 model.

Green when the cosine similarity meets the user's tolerance, amber within ten times the
tolerance's gap to 1, red below; amber too when nothing could be compared (NaN cosine).
A generating model's weights carry checks with targets of their own (token agreement and
the worst position's logit cosine): green when both are met, red when the token agreement
misses, amber when only the cosine does; the first line is the engine's verdict ("INT4: 55%
token agreement, below the 90% target").
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from engine.api import AccuracyResult, describe_check
from widgets import theme

STATES = {
    "baseline": theme.NEUTRAL,
    "pending": theme.NEUTRAL,
    "good": theme.GOOD,
    "warn": theme.WARN,
    "bad": theme.BAD,
}


def grade(cosine: float, min_cosine: float) -> str:
    """ "good", "warn" or "bad" for a cosine similarity against a tolerance."""
    if math.isnan(cosine):
        return "warn"
    if cosine >= min_cosine:
        return "good"
    gap = 1.0 - min_cosine
    return "warn" if 1.0 - cosine <= 10.0 * gap else "bad"


def own_targets(result: AccuracyResult) -> list[dict[str, Any]]:
    """The checks that carry a target of their own (a generating model's weights)."""
    return [c for c in result.checks if isinstance(c.get("target"), int | float)]


def grade_checks(checks: list[dict[str, Any]]) -> str:
    """ "good" when every check meets its own target; "bad" when a token agreement misses
    (greedy output changes), else "warn" (only the logits' cosine misses)."""
    missed = [c for c in checks if not float(c["worst"]) >= float(c["target"])]
    if not missed:
        return "good"
    return "bad" if any(c["metric"] != "cosine" for c in missed) else "warn"


def checks_line(checks: list[dict[str, Any]]) -> str:
    """The engine's verdict when the checks carry it, else one said from the figures."""
    said = next((str(c["verdict"]) for c in checks if c.get("verdict")), "")
    if said:
        return said
    parts = []
    for c in checks:
        value = float(c["worst"])
        figure = f"{value:.4f}" if c["metric"] == "cosine" else _pct(value)
        verb = "meets" if value >= float(c["target"]) else "misses"
        parts.append(f"{c['metric']} {figure} {verb} {float(c['target']):g}")
    return "; ".join(parts)


def _pct(value: float) -> str:
    return f"{100 * value:.4g}%"


def _short(check: dict[str, Any]) -> str:
    """'output0 channels 4-83 cosine 0.9931' (the badge's line; the tooltip says more)."""
    where = f"{check['output']} {check['part']}".strip()
    value = float(check["worst"])
    figure = f"{value:.4f}" if check["metric"] == "cosine" else _pct(value)
    return f"{where} {check['metric']} {figure}"


class AccuracyBadge(QLabel):
    """`set_result(None)` for the FP32 model itself, `set_pending()` while checking."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._min_cosine = 0.999
        self._result: AccuracyResult | None = None
        self._int8: dict[str, Any] | None = None  # how INT8 met its target (variant details)
        self._state = "baseline"
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setWordWrap(True)  # every line whole at the dock's width (issue #50)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.set_result(None)

    @property
    def state(self) -> str:
        """One of "baseline", "pending", "good", "warn", "bad"."""
        return self._state

    @property
    def min_cosine(self) -> float:
        return self._min_cosine

    def set_tolerance(self, min_cosine: float) -> None:
        if not 0.0 < min_cosine <= 1.0:
            raise ValueError(f"min_cosine must be within (0, 1], got {min_cosine}")
        self._min_cosine = float(min_cosine)
        if self._state not in ("baseline", "pending"):
            self.set_result(self._result)

    def set_int8(self, details: dict[str, Any] | None) -> None:
        """What the INT8 search did (`variant.details["int8"]`), said with the result."""
        self._int8 = details
        if self._result is not None:
            self.set_result(self._result)

    def int8_text(self) -> str:
        """'int8-static; 3 nodes kept in FP32 to meet 0.99', or why the target was missed."""
        d = self._int8
        if not d:
            return ""
        kept = len(d.get("excluded_nodes") or [])
        target = d.get("min_cosine")
        kind = (d.get("settings") or {}).get("precision")
        said = f"{kind}; " if kind else ""
        if not d.get("met"):
            return f"{said}INT8 missed {target:g} ({kept} nodes in FP32)"
        if kept:
            return f"{said}{kept} node{'s' if kept != 1 else ''} kept in FP32 to meet {target:g}"
        if set(d.get("settings") or {}) - {"precision"}:
            return f"{said}settings chosen to meet {target:g}"
        heads = len(d.get("head_in_fp32") or [])
        if heads:
            return f"{said}the output's head ({heads} nodes) in FP32"
        return f"{kind}, every node in INT8" if kind else ""

    def set_pending(self) -> None:
        self._state = "pending"
        self.setText("checking accuracy…")
        self.setToolTip("Comparing this variant's outputs with the FP32 model's")
        self._restyle()

    def set_result(self, result: AccuracyResult | None) -> None:
        self._result = result
        if result is None:
            self._state = "baseline"
            self.setText("FP32 baseline")
            self.setToolTip("The reference model: other variants are compared with it")
            self._restyle()
            return
        score = result.score
        targeted = own_targets(result)
        if targeted:  # a generating model's weights: each check has its own target
            self._state = grade_checks(targeted)
            lines = [checks_line(targeted)]
        else:
            self._state = grade(score, self._min_cosine)
            lines = [self._verdict(result, score)]
        worst = result.worst
        if worst is not None and not targeted:
            lines.append(f"worst: {_short(worst)}")
        if (
            result.top1_agreement is not None
            and not targeted
            and not any(c.get("metric") == "top-1 agreement" for c in result.checks)
        ):
            lines.append(f"top-1 {_pct(result.top1_agreement)}")
        if getattr(result, "nonfinite", 0):
            lines.insert(0, f"FAILED: {result.nonfinite:,} values NaN/inf")
        if self.int8_text():
            lines.append(self.int8_text())
        if result.data:
            lines.append(f"on {result.data.removeprefix('generated: ')}")
        self.setText("\n".join(lines))
        self.setToolTip(self._tooltip(result))
        self._restyle()

    def _verdict(self, r: AccuracyResult, score: float) -> str:
        if math.isnan(score):
            return "no comparable outputs"
        verb = "meets" if score >= self._min_cosine else "misses"
        return f"{verb} {self._min_cosine:g}: {score:.5f}"

    def _tooltip(self, r: AccuracyResult) -> str:
        verdict = {
            "good": "within tolerance",
            "warn": "close to the tolerance",
            "bad": "outside the tolerance",
        }[self._state]
        if math.isnan(r.cosine):
            verdict = "no comparable outputs"
        top1 = "n/a (no class scores)" if r.top1_agreement is None else _pct(r.top1_agreement)
        targeted = own_targets(r)
        judged = (
            checks_line(targeted)
            if targeted
            else f"{r.score:.6f} (target ≥ {self._min_cosine:g} on every check)"
        )
        rows = [
            ("judged", judged),
            (
                "worst sample's cosine",
                f"{r.cosine:.8f}"
                + ("" if r.mean_cosine is None else f" (mean {r.mean_cosine:.6f})"),
            ),
            ("max |Δ|", f"{r.max_abs_err:.6g}"),
            ("mean |Δ|", f"{r.mean_abs_err:.6g}"),
            ("top-1 agreement", top1),
            ("samples", f"{r.samples}{f' ({r.data})' if r.data else ''}"),
        ]
        for c in r.checks:
            rows.append((f"{c['output']} {c['part']}".strip(), describe_check(c).split(": ", 1)[1]))
        if self._int8:
            d = self._int8
            settings = (d.get("settings") or {}).items()
            rows.append(("INT8 settings", ", ".join(f"{k}={v}" for k, v in settings) or "defaults"))
            rows.append(("kept in FP32", ", ".join(d.get("excluded_nodes") or []) or "none"))
            heads = d.get("head_in_fp32") or []
            if heads:
                rows.append(("head kept in FP32", f"{len(heads)} node(s): mixed-scale output"))
            rows.append(("attempts", str(len(d.get("attempts") or []))))
        for name, m in r.per_output.items():
            cos, err = m.get("cosine"), m.get("max_abs_err")
            rows.append(
                (
                    f"output {name}",
                    f"cos {'n/a' if cos is None else f'{cos:.6f}'}, "
                    f"max |Δ| {'n/a' if err is None else f'{err:.4g}'}",
                )
            )
        body = "".join(f"<tr><td>{escape(k)}</td><td>{escape(v)}</td></tr>" for k, v in rows)
        return (
            f"<b>Against the {escape(r.baseline.upper())} model: {verdict}</b>"
            f"<table cellspacing='4'>{body}</table>"
        )

    def _restyle(self) -> None:
        self.setStyleSheet(
            f"QLabel {{ background-color: {STATES[self._state]}; color: white; "
            "border-radius: 4px; padding: 2px 8px; font-weight: 600; }"
        )
