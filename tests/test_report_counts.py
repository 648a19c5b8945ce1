"""Counts from a session's serving figures (untrusted JSON): a negative, fractional or
boolean count is shown as what it is, never as a number of requests ("requests sent
-100" in a hostile file's report)."""

from __future__ import annotations

import pytest

from engine.analysis.json_fields import count, count_text
from engine.analysis.serving_report import figure_rows


@pytest.mark.parametrize("bad", [-100, True, 2.5, "12", 2**60])
def test_a_value_that_is_no_count_is_not_shown_as_one(bad: object) -> None:
    rows = dict(figure_rows({"requests": {"sent": bad, "completed": bad, "warmup": 0}}, False))
    assert rows["requests sent"].startswith("- (not a count: "), rows["requests sent"]
    assert rows["completed"].startswith("- (not a count: ")
    assert count(bad) is None


def test_counts_as_recorded() -> None:
    req = {"sent": 1214, "warmup": 14, "completed": 1200, "rejected": 0, "timed_out": 0}
    rows = dict(figure_rows({"requests": req}, False))
    assert rows["requests sent"] == "1,214 (14 in the warm-up)"
    assert (rows["completed"], rows["rejected"], rows["timed out"]) == ("1,200", "0", "0")
    assert dict(figure_rows({}, False))["completed"] == "-" == count_text(None)
