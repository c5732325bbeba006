"""Checks that generated markdown is clean CommonMark: no RST/MyST/scrape artefacts, closed fences.

Used by the RST converter's tests over every upstream input, and usable by the build on whole
reference files. It parses once with markdown-it-py and inspects prose tokens only, so code that
legitimately shows `.. note::` or `:func:` inside a fence or a code span is not flagged.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

_PROSE_ARTEFACTS = [
    (re.compile(r"^\s*\.\.\s+[\w:.+-]+::"), "RST directive"),
    (re.compile(r"^\s*\.\.\s+_[^:]+:"), "RST target"),
    (re.compile(r"(?<![\w`]):(?:py:)?(?:func|meth|class|attr|mod|obj|data|exc|ref|doc|math|term|const)\:`"), "RST role"),
    (re.compile(r"\{(?:func|meth|class|attr|mod|obj|data|exc|ref|doc|math|term|const|py:\w+)\}`"), "MyST role"),
    (re.compile(r"`__?(?!\w)"), "RST link tail"),
    (re.compile(r"¶"), "pilcrow"),
    (re.compile(r"\[source\]"), "[source] link"),
    (re.compile(r"Created On:|Last Updated On:"), "page boilerplate"),
    (re.compile(r"^:::"), "MyST colon fence"),
]


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def artefacts(markdown: str) -> list[tuple[int, str, str]]:
    """(1-based line, problem, text) for each artefact found outside code."""
    problems: list[tuple[int, str, str]] = []
    lines = markdown.split("\n")
    tokens = _parser().parse(markdown)
    code_lines: set[int] = set()
    for token in tokens:
        if token.type in ("fence", "code_block", "html_block") and token.map:
            code_lines.update(range(token.map[0], token.map[1]))
            if token.type == "fence" and not _fence_closed(lines, token.map):
                problems.append((token.map[0] + 1, "unclosed fence", lines[token.map[0]]))
    for token in tokens:
        if token.type != "inline" or not token.map:
            continue
        prose = "".join(child.content for child in token.children or [] if child.type == "text")
        for pattern, problem in _PROSE_ARTEFACTS:
            if pattern.search(prose):
                problems.append((token.map[0] + 1, problem, token.content[:120]))
    for number, line in enumerate(lines):
        if number not in code_lines and re.match(r"^\s*\.\.\s+[\w:.+-]+::", line):
            if not any(p[0] == number + 1 for p in problems):
                problems.append((number + 1, "RST directive", line))
    return sorted(set(problems))


def _unquote(line: str) -> str:
    """A line without its blockquote markers and container indentation."""
    return re.sub(r"^(\s*>)*\s*", "", line)


def _fence_closed(lines: list[str], span: list[int]) -> bool:
    opening = _unquote(lines[span[0]])
    marker = re.match(r"^(`{3,}|~{3,})", opening)
    if not marker or span[1] - 1 <= span[0]:
        return False
    closing = _unquote(lines[span[1] - 1]).strip()
    return closing.startswith(marker.group(1)[0] * len(marker.group(1))) and not closing.strip("`~")


def tables(markdown: str) -> int:
    """How many GFM tables markdown-it sees (to check a converted table really parses as one)."""
    return sum(1 for t in _parser().parse(markdown) if t.type == "table_open")


def fences(markdown: str) -> list[tuple[str, str]]:
    """(info, content) of each fenced block."""
    return [(t.info.strip(), t.content) for t in _parser().parse(markdown) if t.type == "fence"]
