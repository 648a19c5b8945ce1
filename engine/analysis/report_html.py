"""The HTML pieces the report is built from: escaping, sections, figures, tables and the
number formats its cells use (shared by engine/analysis/report.py and serving_report.py).

A session file is untrusted input, so every text that comes from it passes through
`html.escape`; `Html` marks the few strings we built as markup.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence


class Html(str):
    """Markup we built ourselves: `table` passes it through instead of escaping it."""

    __slots__ = ()


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{esc(title)}</h2>{body}</section>'


def figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>"


def cell(value: object) -> str:
    return value if isinstance(value, Html) else esc(value)


def table(
    head: Sequence[str], rows: Iterable[Sequence[object]], right: set[int] | None = None
) -> str:
    right = right or set()
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="r">{cell(v)}</td>' if i in right else f"<td>{cell(v)}</td>"
            for i, v in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def pct(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.1%}"


def byte_size(n: int | None, signed: bool = False) -> str:
    """1536 -> '1.5 KB' (binary units); signed: a '+' before growth."""
    if n is None:
        return "-"
    sign = ("+" if n > 0 else "-" if n < 0 else "") if signed else ("-" if n < 0 else "")
    value = float(abs(n))
    for unit in ("B", "KB", "MB"):
        if value < 1024:
            return f"{sign}{value:.0f} {unit}" if unit == "B" else f"{sign}{value:.1f} {unit}"
        value /= 1024
    return f"{sign}{value:.1f} GB"
