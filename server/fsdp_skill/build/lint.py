"""Checks on each generated reference file before anything is written to references/.

`markdown_checks.artefacts` (the one artefact checker) finds RST/MyST/scrape leftovers in prose and
unclosed fences; this adds what a reference file must satisfy as a whole: one title, every fence
labelled with a language, unique anchors, no headerlink debris ("#" or "¶" glued to a heading), and
no API entry heading with nothing under it (it reads as a broken page).
"""

from __future__ import annotations

import re

from fsdp_skill.build.markdown_checks import artefacts
from fsdp_skill.build.render import anchors, outline
from fsdp_skill.core.markdown import markdown_parser

_HEADERLINK_TAIL = re.compile(r"(\s#|¶)\s*$")
_ANCHOR_LINE = re.compile(r'^<a id="[^"]+"></a>$')


def problems(name: str, text: str) -> list[str]:
    """Every problem found in one file, as 'name:line: message' (empty when the file is clean)."""
    tokens = markdown_parser().parse(text)
    found = [f"{name}:{line}: {problem}: {snippet.strip()[:80]}" for line, problem, snippet in artefacts(text, tokens)]
    for token in tokens:
        if token.type == "fence" and token.map and not token.info.strip():
            found.append(f"{name}:{token.map[0] + 1}: code fence without a language")
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
    lines = text.splitlines()
    for index, heading in enumerate(headings):
        stop = headings[index + 1].line if index + 1 < len(headings) else len(lines)
        body = [line for line in lines[heading.end : stop] if line.strip() and not _ANCHOR_LINE.match(line.strip())]
        if heading.anchor_id and not body:
            found.append(f"{name}:{heading.line + 1}: API entry {heading.anchor_id!r} has nothing under its heading")
    seen: dict[str, int] = {}
    for heading, anchor in zip(headings, anchors(headings)):
        if anchor in seen:
            found.append(f"{name}:{heading.line + 1}: anchor {anchor!r} already used on line {seen[anchor]}")
        else:
            seen[anchor] = heading.line + 1
    return found
