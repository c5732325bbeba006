"""Blocks and snippets: cut a document into whole markdown blocks once, then pick a short excerpt.

At build time (`markdown_blocks`) markdown-it-py parses each document once; every top-level block
(paragraph, list, table, fenced code, …) is sliced from the original source by its line map. At query
time (`make_snippet`) we choose the block that mentions the most query words and fill a character
budget from there. A code block is either included whole, or — when it alone is too long — cut at a
line boundary and *closed* with its fence, so a snippet never ends inside an open code block.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from fsdp_skill.core.markdown import fence_marker, markdown_parser

BlockKind = Literal["text", "code"]
Block = tuple[BlockKind, str]

SNIPPET_CHARS = 400
_ELLIPSIS = "…"
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def markdown_blocks(markdown: str, skip_heading: str | None = None) -> list[Block]:
    """Top-level blocks of a markdown text, each sliced verbatim from the source lines.

    `skip_heading` drops a heading block whose text equals the section's own title (the title is
    shown separately). markdown-it-py loads lazily: only the build (and a stale-index rebuild) parses.
    """
    lines = markdown.splitlines()
    tokens = markdown_parser().parse(markdown)
    blocks: list[Block] = []
    for i, token in enumerate(tokens):
        if token.level != 0 or token.map is None or token.nesting == -1:
            continue
        start, end = token.map
        text = "\n".join(lines[start:end]).strip("\n")
        if not text.strip():
            continue
        if token.type in ("fence", "code_block"):
            if token.type == "code_block":  # indented code: give it a fence so snippets stay valid
                text = "```\n" + token.content.rstrip("\n") + "\n```"
            blocks.append(("code", text))
        elif token.type == "heading_open":
            inline = tokens[i + 1].content if i + 1 < len(tokens) else ""
            if skip_heading is not None and inline.strip() == skip_heading.strip():
                continue
            blocks.append(("text", text))
        else:
            blocks.append(("text", text))
    return blocks


def code_block(code: str, language: str = "python") -> Block:
    """A fenced block around code, with a fence longer than any backtick run inside it."""
    fence = fence_marker(code)
    return ("code", f"{fence}{language}\n{code.rstrip()}\n{fence}")


def _block_score(text: str, words: Sequence[str]) -> int:
    lower = text.lower()
    return sum(1 for word in words if word and word in lower)


def _cut_text(text: str, budget: int, words: Sequence[str]) -> str:
    """Prose cut to budget at a word boundary, starting near the first query word when it is far in."""
    flat = " ".join(text.split())
    if len(flat) <= budget:
        return flat
    lower = flat.lower()
    hits = [lower.find(w) for w in words if w and lower.find(w) >= 0]
    start = 0
    if hits and min(hits) > budget // 2:
        # Start at the sentence (or, failing that, the word) before the first hit.
        first = min(hits)
        sentence = flat.rfind(". ", 0, first)
        start = sentence + 2 if sentence >= 0 and first - sentence < budget // 2 else flat.rfind(" ", 0, first) + 1
    prefix = _ELLIPSIS if start > 0 else ""
    room = budget - len(prefix) - len(_ELLIPSIS)
    piece = flat[start : start + room]
    if start + room < len(flat):
        cut = piece.rfind(" ")
        piece = (piece[:cut] if cut > room // 2 else piece).rstrip(" ,;:") + _ELLIPSIS
    return prefix + piece


def _cut_code(text: str, budget: int) -> str | None:
    """A fenced block cut to whole lines within budget and closed with its own fence; None if no line fits."""
    lines = text.split("\n")
    opening = lines[0]
    match = _FENCE.match(opening)
    fence = match.group(1) if match else "```"
    closing = "\n" + fence
    marker = "\n# …"
    kept = [opening]
    used = len(opening) + len(closing) + len(marker)
    for line in lines[1:-1]:
        if used + 1 + len(line) > budget:
            break
        kept.append(line)
        used += 1 + len(line)
    if len(kept) == 1:
        return None
    return "\n".join(kept) + marker + closing


def make_snippet(blocks: Sequence[Block], words: Sequence[str], budget: int = SNIPPET_CHARS) -> str:
    """At most `budget` characters of whole blocks, starting at the block that best matches `words`."""
    if not blocks:
        return ""
    scores = [_block_score(text, words) for _, text in blocks]
    best = max(range(len(blocks)), key=lambda i: (scores[i], -i))
    if scores[best] == 0:
        best = 0
    # A lone code block reads better with the sentence that introduces it.
    if best > 0 and blocks[best][0] == "code" and blocks[best - 1][0] == "text":
        if len(blocks[best - 1][1]) + len(blocks[best][1]) + 2 <= budget:
            best -= 1
    pieces: list[str] = []
    used = 0
    for kind, text in blocks[best:]:
        room = budget - used - (2 if pieces else 0)
        if room <= 20:
            break
        if kind == "code":
            if len(text) <= room:
                piece = text
            elif not pieces:
                piece = _cut_code(text, room) or ""
            else:
                break  # never start a code block we cannot finish
        else:
            piece = _cut_text(text, room, words) if len(text) > room else " ".join(text.split())
        if not piece:
            break
        pieces.append(piece)
        used += len(piece) + (2 if len(pieces) > 1 else 0)
        if piece.endswith(_ELLIPSIS):
            break
    return "\n\n".join(pieces)


def open_fence_at(text: str) -> str | None:
    """The fence that is still open at the end of `text` (a fence line like ```python), or None."""
    opening: str | None = None
    fence_chars = ""
    for line in text.split("\n"):
        match = _FENCE.match(line)
        if not match:
            continue
        run = match.group(1)
        if opening is None:
            opening, fence_chars = line.strip(), run
        elif run[0] == fence_chars[0] and len(run) >= len(fence_chars) and line.strip() == run:
            opening, fence_chars = None, ""
    return opening
