"""Markdown the converters emit and the later stages reshape: what a reader sees of an inline token,
admonitions as block quotes, and heading shifts.

These live in `convert`, not `core`: only the stages that may import `convert` (apidoc, build, cli)
use them — the RST and MyST converters render admonitions alike here, apidoc quotes its notes and
deprecations and shifts a docstring's headings under its entry, build shifts a page's headings
under its topic. The plain parser and fence sizing, which `search` needs too, are `core.markdown`.
"""

from __future__ import annotations

import re

from markdown_it.token import Token

from fsdp_skill.core.markdown import markdown_parser

__all__ = ["admonition", "blockquote", "plain_text", "shift_headings"]

# A first line that opens a block other than a paragraph: the admonition's label then goes on a
# line of its own (bolding it into a fence, heading, table, list or quote would break that block).
_OPENS_OTHER_BLOCK = re.compile(r"^(`{3,}|~{3,}|#|\||[-*+] |\d+[.)] |>)")


def plain_text(inline: Token) -> str:
    """What a reader sees of an inline token: text and code, without markup."""
    parts: list[str] = []
    for child in inline.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "image":
            parts.append(child.content)
    return "".join(parts).strip()


def blockquote(markdown: str) -> str:
    """Every line quoted; blank lines become a bare `>` so the quote stays one block."""
    return "\n".join(f"> {line}" if line.strip() else ">" for line in markdown.split("\n"))


def admonition(title: str, body: str) -> str:
    """`> **Note:** text`, the whole body quoted: one form for notes from MyST pages, RST pages and
    docstrings. A body that does not open with prose gets the label on a line of its own."""
    lines = body.strip("\n").split("\n")
    if lines and lines[0] and not _OPENS_OTHER_BLOCK.match(lines[0]):
        lines[0] = f"**{title}:** {lines[0]}"
    else:
        lines = [f"**{title}:**", "", *(lines if body.strip() else [])]
    return blockquote("\n".join(lines))


def shift_headings(markdown: str, top_level: int) -> str:
    """Move every heading so the shallowest lands on `top_level` (each clamped to 1..6), rewritten
    as an ATX heading; every other line is kept byte for byte (headings are found by parsing and
    addressed by line, never re-rendered)."""
    tokens = markdown_parser().parse(markdown)
    headings = [(index, token) for index, token in enumerate(tokens) if token.type == "heading_open" and token.map]
    if not headings:
        return markdown
    delta = top_level - min(int(token.tag[1]) for _, token in headings)
    lines = markdown.splitlines()
    # Back to front, so a setext heading (two lines) rewritten to one line keeps earlier indices valid.
    for index, token in reversed(headings):
        assert token.map is not None
        start, end = token.map
        level = min(6, max(1, int(token.tag[1]) + delta))
        lines[start:end] = ["#" * level + " " + tokens[index + 1].content.strip()]
    return "\n".join(lines) + ("\n" if markdown.endswith("\n") else "")
