"""The compare panel's accuracy rows, Qt-free: each run's accuracy against FP32 and the
change, in the metric table's four text columns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ACCURACY_ROWS = (
    ("cosine", "cosine vs FP32", ".5f"),
    ("max_abs_err", "max abs err vs FP32", ".4g"),
    ("top1_agreement", "top-1 agreement", ".3f"),
)


def accuracy_rows(acc: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """(name, baseline, candidate, change) per accuracy measure either run has; one row
    saying so when neither run measured accuracy."""
    base, cand = acc.get("baseline") or {}, acc.get("candidate") or {}
    rows = []
    for key, label, fmt in ACCURACY_ROWS:
        b, c = base.get(key), cand.get(key)
        if b is None and c is None:
            continue
        delta = acc.get(key)
        rows.append(
            (
                label,
                "–" if b is None else format(b, fmt),
                "–" if c is None else format(c, fmt),
                "–" if delta is None else format(delta, "+" + fmt),
            )
        )
    return rows or [("accuracy", "not measured", "not measured", "–")]
