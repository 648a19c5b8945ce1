"""The README and docs/*.md hold together: every relative link (and image) points at a file
that exists, a `#anchor` into a markdown file names one of its headings, and the README's
command list names every `opscope` command the CLI has."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.MULTILINE)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _prose(text: str) -> str:
    """The text without code blocks and inline code, where brackets are not links."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def anchors(path: Path) -> set[str]:
    """The anchors GitHub makes for a markdown file's headings (duplicates get -1, -2...)."""
    seen: dict[str, int] = {}
    out = set()
    for title in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken_links(path: Path) -> list[str]:
    """Each relative link of `path` that does not resolve, as 'FILE: TARGET (why)'."""
    text = _prose(path.read_text(encoding="utf-8"))
    problems = []
    for target in [*LINK.findall(text), *REFERENCE.findall(text)]:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, mailto:, ...
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {target}"
        if not dest.exists():
            problems.append(f"{where} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{where} (no heading with that anchor)")
    return problems


def test_every_relative_link_resolves() -> None:
    problems = [p for path in doc_files() for p in broken_links(path)]
    assert not problems, "\n".join(problems)


def test_the_checker_catches_a_missing_file_and_a_missing_anchor(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A heading: `with code`\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md#a-heading-with-code) [gone](missing.md) ![img](nope.png)\n"
        "[bad anchor](there.md#elsewhere) [web](https://example.com/x.md)\n"
        "`[not a link](missing2.md)`\n```\n[in a block](missing3.md)\n```\n",
        encoding="utf-8",
    )
    problems = broken_links(page)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "missing.md (no such file)",
        "nope.png (no such file)",
        "there.md#elsewhere (no heading with that anchor)",
    ]


def _commands() -> list[str]:
    from engine.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


def test_the_readme_lists_every_command_with_a_link() -> None:
    """One line per command in the README, each with a link to its docs page."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = {name: [ln for ln in readme.splitlines() if f"`opscope {name}" in ln]
             for name in [*_commands(), "gui"]}  # fmt: skip
    missing = [name for name, found in lines.items() if not found]
    assert not missing, f"README names no line for: {', '.join(missing)}"
    unlinked = [name for name, found in lines.items() if not any("](docs/" in ln for ln in found)]
    assert not unlinked, f"README's line for these has no docs link: {', '.join(unlinked)}"
