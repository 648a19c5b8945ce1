"""The accuracy a generating model's weights must keep against FP32, and the verdict.

Two figures, both teacher-forced against FP32 (agreement.py): token agreement (the share of
positions where the variant picks FP32's next token) and the logit cosine of the worst
position. Token agreement is what a reader sees: at 90% about one greedy token in ten of
FP32's changes. The cosine (the encoders' --min-cosine, 0.99 by default: one knob for both)
guards the positions where the tokens happen to agree but the distribution moved (sampling
reads all of it). On SmolLM2-135M over real texts, FP16 read 100% and 0.99998, INT8 weights
95.3% and 0.9954 (both meet 90% / 0.99), INT4 weights 75.0% and 0.34 ("The capital of
France is" lost " Paris."): the defaults pass what keeps the model's answers and stop what
does not."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from engine.config import RunConfig
from engine.errors import ConfigError

LABELS = {"fp16": "FP16", "int8-weights": "INT8", "int4-weights": "INT4"}


@dataclass(frozen=True)
class WeightTarget:
    token_agreement: float  # share of positions, (0, 1]
    min_cosine: float  # the worst position's logit cosine, (0, 1]

    def __post_init__(self) -> None:
        for name, value in (("token agreement", self.token_agreement),
                            ("min cosine", self.min_cosine)):  # fmt: skip
            if not 0.0 < value <= 1.0:  # nan fails too
                raise ConfigError(f"{name} target must be within (0, 1], got {value!r}")

    @classmethod
    def of(cls, config: RunConfig) -> WeightTarget:
        return cls(config.min_token_agreement, config.min_cosine)

    def text(self) -> str:
        """'token agreement >= 90%, logit cosine >= 0.98'."""
        return (
            f"token agreement >= {_pct(self.token_agreement)}, logit cosine >= {self.min_cosine:g}"
        )

    def to_json(self) -> dict[str, Any]:
        return {"token_agreement": self.token_agreement, "min_cosine": self.min_cosine}


def _pct(value: float, beside: float | None = None) -> str:
    """'55%'; with one decimal where a whole number would read as `beside` (89.6% is not
    90%)."""
    text = f"{value:.0%}"
    if beside is not None and value != beside and text == f"{beside:.0%}":
        text = f"{value:.1%}"
    return text


def _cos(value: float, beside: float) -> str:
    """'0.9510'; more digits where four would read as `beside` or as 1 (0.99998 is not 1)."""
    for digits in (4, 5, 6):
        text = f"{value:.{digits}f}"
        if value == beside or (text != f"{beside:.{digits}f}" and text != f"{1:.{digits}f}"):
            break
    return text


@dataclass(frozen=True)
class Verdict:
    label: str  # the variant as people read it: "INT4"
    token_agreement: float
    cosine_min: float
    target: WeightTarget

    @property
    def agreement_met(self) -> bool:
        return self.token_agreement >= self.target.token_agreement

    @property
    def cosine_met(self) -> bool:
        return self.cosine_min >= self.target.min_cosine

    @property
    def met(self) -> bool:
        return self.agreement_met and self.cosine_met

    def line(self) -> str:
        """'INT4: 55% token agreement, below the 90% target; logit cosine min 0.9510, below
        0.98', or 'INT8 meets the target: 95% token agreement (>= 90%), logit cosine min
        0.9934 (>= 0.98)'."""
        t = self.target
        agree = f"{_pct(self.token_agreement, t.token_agreement)} token agreement"
        cosine = f"logit cosine min {_cos(self.cosine_min, t.min_cosine)}"
        if not math.isfinite(self.cosine_min):  # Gemma 3 in FP16: every logit NaN on a CPU
            cosine = "logits not finite (NaN or inf)" + (
                ": the model's activations overflow FP16's range" if self.label == "FP16" else ""
            )
        if self.met:
            return (
                f"{self.label} meets the target: {agree} (>= {_pct(t.token_agreement)}), "
                f"{cosine} (>= {t.min_cosine:g})"
            )
        missed = []
        if not self.agreement_met:
            missed.append(f"{agree}, below the {_pct(t.token_agreement)} target")
        if not math.isfinite(self.cosine_min):
            missed.append(cosine)
        elif not self.cosine_met:
            missed.append(f"{cosine}, below the {t.min_cosine:g} target")
        return f"{self.label}: " + "; ".join(missed)

    def checks(self, positions: int, cosine_mean: float, detail: str = "") -> list[dict[str, Any]]:
        """The two checks as an AccuracyResult carries them, each with its own target (and
        the verdict's line, for the window's badge)."""
        t = self.target
        said = f"; {detail}" if detail else ""
        common = {"output": "logits", "part": "", "sample": 0, "samples": positions,
                  "variant": self.label, "verdict": self.line()}  # fmt: skip
        agreement = {
            **common,
            "metric": "token agreement",
            "worst": self.token_agreement,
            "mean": self.token_agreement,
            "target": t.token_agreement,
            "met": self.agreement_met,
            "detail": f"teacher-forced, {positions} positions; target "
            f"{_pct(t.token_agreement)}{said}",
        }
        cosine = {
            **common,
            "metric": "cosine",
            "worst": self.cosine_min,
            "mean": cosine_mean,
            "target": t.min_cosine,
            "met": self.cosine_met,
            "detail": f"worst of {positions} positions, mean {cosine_mean:.4f}; target "
            f"{t.min_cosine:g}",
        }
        return [agreement, cosine]

    def to_json(self) -> dict[str, Any]:
        return {"met": self.met, "line": self.line(), "token_agreement_met": self.agreement_met,
                "cosine_met": self.cosine_met}  # fmt: skip
