"""Checks on each generated reference file before anything is written to references/.

`markdown_checks.artefacts` finds RST/MyST/scrape leftovers in prose and unclosed fences; this adds
what a reference file must satisfy as a whole: one title, every fence labelled with a language,
unique anchors, and no headerlink debris ("#" or "¶" glued to a heading).
"""

from __future__ import annotations

import re

from .markdown_checks import artefacts
from .myst import markdown_parser
from .render import anchors, outline

_HEADERLINK_TAIL = re.compile(r"(\s#|¶)\s*$")
# A role whose target markdown-it parsed as a code span: the role name ends the text just before it.
_ROLE_BEFORE_CODE = re.compile(r"(?:(?<![\w`]):(?:py:)?[a-z][\w-]*:|\{[a-z][\w:-]*\})$")
_CONTAINER_PREFIX = re.compile(r"^(?:\s*>)*\s*")


def _fence_closed(lines: list[str], start: int, end: int, markup: str) -> bool:
    """markdown-it runs an unclosed fence to the end of its container; a closed one ends on a line
    of the same fence character at least as long as the opening, whatever quote or list prefix."""
    if end - 1 <= start:
        return False
    closing = _CONTAINER_PREFIX.sub("", lines[end - 1], count=1).rstrip()
    return len(closing) >= len(markup) and set(closing) == {markup[0]}


def problems(name: str, text: str) -> list[str]:
    """Every problem found in one file, as 'name:line: message' (empty when the file is clean)."""
    # Fence closure is checked here (it must see through block-quote prefixes), the rest there.
    found: list[str] = [
        f"{name}:{line}: {problem}: {snippet.strip()[:80]}"
        for line, problem, snippet in artefacts(text)
        if problem != "unclosed fence"
    ]
    lines = text.splitlines()
    tokens = markdown_parser().parse(text)
    for token in tokens:
        if token.type != "fence" or not token.map:
            continue
        if not token.info.strip():
            found.append(f"{name}:{token.map[0] + 1}: code fence without a language")
        if not _fence_closed(lines, token.map[0], token.map[1], token.markup):
            found.append(f"{name}:{token.map[0] + 1}: unclosed code fence")
    for token in tokens:
        children = token.children or []
        for before, after in zip(children, children[1:]):
            if before.type == "text" and after.type == "code_inline" and _ROLE_BEFORE_CODE.search(before.content):
                kind = "MyST role" if before.content.endswith("}") else "RST role"
                found.append(f"{name}:{(token.map or [0])[0] + 1}: {kind} left in prose: {before.content[-20:]}`{after.content}`")
    headings = outline(text)
    titles = [h for h in headings if h.level == 1]
    if not headings or headings[0].line != 0 or headings[0].level != 1:
        found.append(f"{name}:1: the file must start with its '# title'")
    if len(titles) > 1:
        found.append(f"{name}:{titles[1].line + 1}: a second level-1 heading ({titles[1].text!r})")
    for heading in headings:
        if _HEADERLINK_TAIL.search(heading.raw):
            found.append(f"{name}:{heading.line + 1}: headerlink debris in heading {heading.raw!r}")
        if not heading.text:
            found.append(f"{name}:{heading.line + 1}: empty heading")
    seen: dict[str, int] = {}
    for heading, anchor in zip(headings, anchors(headings)):
        if anchor in seen:
            found.append(f"{name}:{heading.line + 1}: anchor {anchor!r} already used on line {seen[anchor]}")
        else:
            seen[anchor] = heading.line + 1
    return found
