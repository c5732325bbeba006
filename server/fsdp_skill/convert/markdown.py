"""Markdown helpers every stage that reads CommonMark shares (the one parser lives in `convert.myst` for now)."""

from __future__ import annotations

from markdown_it.token import Token

__all__ = ["plain_text"]


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
