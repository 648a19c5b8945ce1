"""Where the LLM Serving dock puts its form, its table and its chart for a given size
(no Qt): the form beside the results in a wide dock, above them in a narrow one; the
table and the chart side by side when the results are short (a bottom dock: stacked, the
chart fell below the visible area at 1600x1000), stacked when there is height for both.
The form scrolls in its own share, so the results are always in view."""

from __future__ import annotations

from dataclasses import dataclass

WIDE = 900  # px: from this width the form sits beside the results
FORM_MIN_HEIGHT = 60  # px: the form's share never below this (it scrolls inside it)
FORM_SHARE_WIDE = 0.38  # of the width, beside the results
RESULTS_SHARE_NARROW = 0.5  # of the height, below the form
TABLE_SHARE = 0.58  # of the results' width, side by side
SIDE_BY_SIDE_MIN = 520  # px: narrower results stack the chart under the table


@dataclass(frozen=True)
class Arrangement:
    sides_vertical: bool  # the form above the results (else beside them)
    sides: tuple[int, int]  # the form's share, the results'
    results_vertical: bool  # the table above the chart (else beside it)
    results: tuple[int, int]  # the table's share, the chart's


def arrange(
    width: int,
    height: int,
    *,
    table_min: int,
    chart_min: tuple[int, int],
    handle: int,
    form_width: int,
    form_min: int = FORM_MIN_HEIGHT,
) -> Arrangement:
    """The arrangement of a dock `width` x `height` px whose table needs `table_min` px
    of height, whose chart needs `chart_min` (width, height), between parts `handle`
    px apart, and whose form (its buttons and its scrolling settings) needs at least
    `form_width` x `form_min` px."""
    width, height = max(width, 1), max(height, 1)
    chart_w, chart_h = chart_min
    stacked_min = table_min + chart_h + handle
    if width >= WIDE:  # the form beside the results, which have the whole height
        form = max(form_width, round(FORM_SHARE_WIDE * width))
        results_w = max(width - form - handle, 1)
        results_h = height
        results_vertical = height >= stacked_min + table_min // 2 or results_w < SIDE_BY_SIDE_MIN
        sides = (form, results_w)
        sides_vertical = False
    else:  # the form above the results
        results_vertical = width < SIDE_BY_SIDE_MIN
        need = stacked_min if results_vertical else max(table_min, chart_h)
        results_h = max(need, round(RESULTS_SHARE_NARROW * height))
        results_h = min(results_h, max(need, height - form_min - handle))
        results_w = width
        sides = (max(height - results_h - handle, form_min), results_h)
        sides_vertical = True
    if results_vertical:
        table = max(table_min, (results_h - handle) // 3)
        results = (table, max(results_h - table - handle, chart_h))
    else:
        chart = max(chart_w, results_w - round(TABLE_SHARE * results_w) - handle)
        results = (max(results_w - chart - handle, 1), chart)
    return Arrangement(sides_vertical, sides, results_vertical, results)
