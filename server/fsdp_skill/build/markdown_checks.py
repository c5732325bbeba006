"""Checks that generated markdown is clean CommonMark: no RST/MyST/scrape artefacts, closed and
non-empty fences, no control characters, no literal fence markers left in prose.

The one artefact checker: the RST converter's tests run it over every upstream input, and the
build's lint runs it on every reference file. It parses once with markdown-it-py (the parser the
build reads pages with) and inspects prose tokens only, so code that legitimately shows
`.. note::` or `:func:` inside a fence or a code span is not flagged.
"""

from __future__ import annotations

import re

from markdown_it.token import Token

from fsdp_skill.core.markdown import markdown_parser

_PROSE_ARTEFACTS = [
    (re.compile(r"^\s*\.\.\s+[\w:.+-]+::"), "RST directive"),
    (re.compile(r"^\s*\.\.\s+_[^:]+:"), "RST target"),
    (
        re.compile(r"(?<![\w`]):(?:py:)?(?:func|meth|class|attr|mod|obj|data|exc|ref|doc|math|term|const)\:`"),
        "RST role",
    ),
    (re.compile(r"\{(?:func|meth|class|attr|mod|obj|data|exc|ref|doc|math|term|const|py:\w+)\}`"), "MyST role"),
    (re.compile(r"`__?(?!\w)"), "RST link tail"),
    (re.compile(r"¶"), "pilcrow"),
    (re.compile(r"\[source\]"), "[source] link"),
    (re.compile(r"Created On:|Last Updated On:"), "page boilerplate"),
    (re.compile(r"^:::"), "MyST colon fence"),
    # A link markdown-it refuses to make (file:, javascript:, data:) stays text: see WEB_SCHEMES below.
    (re.compile(r"\]\((?!(?:https?|mailto):)[a-zA-Z][a-zA-Z0-9+.-]*:"), "link a reader cannot follow"),
]
# A role whose target markdown-it parsed as a code span (":func:" + `x`): the backtick is gone
# from the text, so only the role name ending the text just before the code span shows it.
_ROLE_BEFORE_CODE = re.compile(r"(?:(?<![\w`]):(?:py:)?[a-z][\w-]*:|\{[a-z][\w:-]*\})$")
_CONTAINER_PREFIX = re.compile(r"^(?:\s*>)*\s*")
# C0 controls other than tab and line ends, DEL, and C1 controls: never meant as text in a docs page
# (an ANSI escape pasted from a terminal, a stray bell or NUL from a broken download).
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# A fence marker markdown-it read as text: what is left of a fence an unclosed block swallowed.
_LITERAL_FENCE = re.compile(r"^\s*(?:`{3,}|~{3,})")
# The link targets a reader can follow: the web, mail, and relative paths / anchors (no scheme at all).
# Anything else (`chrome-extension://…` copied from a browser's PDF viewer, `file:///home/…`, `javascript:`)
# is a scrape artefact of the page it came from.
WEB_SCHEMES = ("http", "https", "mailto")
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")


def foreign_scheme(url: str) -> str | None:
    """The scheme of a link target a reader cannot follow (see WEB_SCHEMES), or None."""
    match = _SCHEME.match(url)
    return match.group(1) if match and match.group(1).lower() not in WEB_SCHEMES else None


def artefacts(markdown: str, tokens: list[Token] | None = None) -> list[tuple[int, str, str]]:
    """(1-based line, problem, text) for each artefact found outside code; tokens: markdown
    already parsed with myst.markdown_parser (so a caller with more checks parses once)."""
    problems: list[tuple[int, str, str]] = []
    lines = markdown.split("\n")
    if tokens is None:
        tokens = markdown_parser().parse(markdown)
    code_lines: set[int] = set()
    for token in tokens:
        if token.type in ("fence", "code_block", "html_block") and token.map:
            code_lines.update(range(token.map[0], token.map[1]))
            if token.type == "fence" and not fence_is_closed(lines, token.map, token.markup):
                problems.append((token.map[0] + 1, "unclosed code fence", lines[token.map[0]]))
            elif token.type == "fence" and not token.content.strip():
                problems.append((token.map[0] + 1, "empty code block", lines[token.map[0]]))
    for token in tokens:
        if token.type != "inline" or not token.map:
            continue
        children = token.children or []
        prose = "".join(child.content for child in children if child.type == "text")
        for pattern, problem in _PROSE_ARTEFACTS:
            if pattern.search(prose):
                problems.append((token.map[0] + 1, problem, token.content[:120]))
        for child in children:
            target = str(child.attrs.get("href") or child.attrs.get("src") or "")
            if child.type in ("link_open", "image") and foreign_scheme(target):
                problems.append((token.map[0] + 1, f"link a reader cannot follow ({foreign_scheme(target)}:)",
                                 target[:120]))
        broken = "".join(c.content if c.type == "text" else "\n" if c.type.endswith("break") else "" for c in children)
        if any(_LITERAL_FENCE.match(line) for line in broken.split("\n")):
            problems.append((token.map[0] + 1, "literal code fence in prose", token.content[:120]))
        for before, after in zip(children, children[1:]):
            if before.type == "text" and after.type == "code_inline" and _ROLE_BEFORE_CODE.search(before.content):
                problem = "MyST role" if before.content.endswith("}") else "RST role"
                problems.append((token.map[0] + 1, problem, f"{before.content[-20:]}`{after.content}`"))
    for number, line in enumerate(lines):
        if number not in code_lines and re.match(r"^\s*\.\.\s+[\w:.+-]+::", line):
            if not any(p[0] == number + 1 for p in problems):
                problems.append((number + 1, "RST directive", line))
    for number, line in enumerate(lines):
        if CONTROL_CHARACTERS.search(line):
            problems.append((number + 1, "control character", repr(line[:120])))
    return sorted(set(problems))


def code_line_numbers(markdown: str) -> set[int]:
    """0-based numbers of the lines inside code blocks (fenced, indented) and raw HTML blocks."""
    lines: set[int] = set()
    for token in markdown_parser().parse(markdown):
        if token.type in ("fence", "code_block", "html_block") and token.map:
            lines.update(range(token.map[0], token.map[1]))
    return lines


def empty_fence_spans(markdown: str) -> list[tuple[int, int]]:
    """[start, end) line ranges of the closed fences that hold nothing but blank lines."""
    lines = markdown.split("\n")
    return [
        (token.map[0], token.map[1])
        for token in markdown_parser().parse(markdown)
        if token.type == "fence" and token.map and not token.content.strip()
        and fence_is_closed(lines, token.map, token.markup)
    ]


def fence_is_closed(lines: list[str], span: list[int], markup: str) -> bool:
    """markdown-it runs an unclosed fence to the end of its container; a closed one ends on a line
    of the same fence character at least as long as the opening, whatever quote or list prefix."""
    if span[1] - 1 <= span[0]:
        return False
    closing = _CONTAINER_PREFIX.sub("", lines[span[1] - 1], count=1).rstrip()
    return len(closing) >= len(markup) and set(closing) == {markup[0]}


def tables(markdown: str) -> int:
    """How many GFM tables markdown-it sees (to check a converted table really parses as one)."""
    return sum(1 for t in markdown_parser().parse(markdown) if t.type == "table_open")


def fences(markdown: str) -> list[tuple[str, str]]:
    """(info, content) of each fenced block."""
    return [(t.info.strip(), t.content) for t in markdown_parser().parse(markdown) if t.type == "fence"]
