"""The report's Runs table, laid out so a row takes a line or two at the page's width.

The runs table has 18 columns. With `overflow-wrap:anywhere` on every cell a browser may
break a cell at any character, so its narrowest width is one character: squeezed into the
page, dates, names and configs wrapped character by character into 6-8-line rows (#53).
Here a cell breaks only between words (`break-word`, table-wide in the report's CSS), a
config and the inputs are tokens that never break inside, a start time is short (the
date once, in the header, when the runs share it), a long model name is shortened in the
middle (its whole name on hover), and each text column is at least half its longest
cell wide: at most two lines. Past the page's width the table scrolls sideways.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from engine.analysis import run_table
from engine.analysis.report_html import esc
from engine.analysis.report_html import section as _section
from engine.analysis.run_compare import LATENCY_KINDS
from engine.analysis.run_summary import RunSummary, summarize
from engine.session.rows import RunRow

NAME_CHARS = 28  # a model name longer than this is shortened in the middle
MAX_MIN_CH = 30  # no text column asks for more than this many characters
TOKENS = {"config", "inputs", "kind"}  # cells made of tokens that never break inside


def runs_section(runs: Sequence[RunRow]) -> str:
    """The whole "Runs" section: the busy note, then the table."""
    if not runs:
        return _section("runs", "Runs", "<p>The session holds no runs.</p>")
    summaries = [summarize(r) for r in runs]
    day = _one_day(summaries)
    columns = run_table.COLUMNS
    rows = [[_cell(c.name, c.text(s), day) for c in columns] for s in summaries]
    head = [
        _th(c.name if c.name != "started" or not day else f"started ({day} UTC)", c.numeric, col)
        for c, col in zip(columns, zip(*rows, strict=True), strict=True)
    ]
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="r">{v}</td>' if c.numeric else f"<td>{v}</td>"
            for c, v in zip(columns, row, strict=True)
        )
        + "</tr>"
        for row in rows
    )
    table = (
        f'<div class="wide"><table class="runs"><thead><tr>{"".join(head)}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )
    return _section("runs", "Runs", busy_note(runs) + table)


def _one_day(summaries: Sequence[RunSummary]) -> str | None:
    """The date every run started on ('YYYY-MM-DD'), or None when they differ."""
    days = {s.started_at[:10] for s in summaries if s.started_at != "-"}
    return days.pop() if len(days) == 1 else None


def short_start(started_at: str, day: str | None) -> str:
    """'2026-12-06 18:52:18' -> '18:52:18' when every run shares the day (it is in the
    header), else '12-06 18:52'; '-' stays '-'."""
    if len(started_at) < 16:
        return started_at
    return started_at[11:19] if day else f"{started_at[5:10]} {started_at[11:16]}"


def short_name(name: str, most: int = NAME_CHARS) -> str:
    """A name of at most `most` characters: its start and its end, '…' between."""
    if len(name) <= most:
        return name
    head = (most - 1) * 2 // 3
    return name[:head] + "…" + name[len(name) - (most - 1 - head) :]


def _cell(column: str, text: str, day: str | None) -> str:
    """One cell's HTML (escaped): shortened, or as tokens that never break inside."""
    if column == "started":
        return f'<span title="{esc(text)}">{esc(short_start(text, day))}</span>'
    if column == "model" and len(text) > NAME_CHARS:
        return f'<span title="{esc(text)}">{esc(short_name(text))}</span>'
    if column == "kind":
        meaning = LATENCY_KINDS.get(text)
        extra = f' <span class="small">(latency: {esc(meaning)})</span>' if meaning else ""
        return esc(text) + extra
    if column in TOKENS:
        sep = ", " if column == "inputs" else " "
        return _tokens(text, sep)
    return esc(text)


def _tokens(text: str, sep: str = " ") -> str:
    """`text` split at `sep`, each part kept whole ('fusion=all', 'input_ids 1x128')."""
    glue = esc(sep.rstrip()) + " " if sep.strip() else " "
    return glue.join(f'<span class="tok">{esc(t)}</span>' for t in text.split(sep) if t)


def _th(name: str, numeric: bool, cells: Sequence[str]) -> str:
    """A header cell; a text column at least half as wide as its longest cell (at most
    two lines a row), numbers never wrap (the CSS)."""
    if numeric:
        return f"<th>{esc(name)}</th>"
    longest = max((len(html.unescape(_text_of(c))) for c in cells), default=0)
    widest_token = max((len(t) for c in cells for t in _text_of(c).split()), default=0)
    need = min(max(-(-longest // 2), widest_token, len(name) // 2 + 1), MAX_MIN_CH)
    return f'<th style="min-width:{need}ch">{esc(name)}</th>'


def _text_of(cell: str) -> str:
    """A cell's visible text (its markup dropped; the title's copy too)."""
    out, depth, i = [], 0, 0
    while i < len(cell):
        if cell[i] == "<":
            depth += 1
        elif cell[i] == ">":
            depth -= 1
        elif depth == 0:
            out.append(cell[i])
        i += 1
    return "".join(out)


def busy_note(runs: Sequence[RunRow]) -> str:
    """One paragraph naming the runs measured on a busy machine, each with its numbers:
    their figures are the model's speed while other work ran, and no verdict is drawn."""
    busy = [r for r in runs if r.contention is not None and r.contention.busy]
    if not busy:
        return ""
    items = "; ".join(
        f"run {r.id}: {html.escape(r.contention.line())}" for r in busy if r.contention
    )
    return (
        f"<p class='warn'>{len(busy)} of {len(runs)} runs were measured on a busy machine "
        "(the machine column): their figures are the model's speed while other work ran, "
        f"and comparisons with them draw no verdict. {items}.</p>"
    )


__all__ = ["busy_note", "runs_section", "short_name", "short_start"]
