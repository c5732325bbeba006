"""Topic markdown: heading outline and level shifts, the file header and TOC, and the section split.

Pure functions over CommonMark text. Every heading is found by parsing with markdown-it-py and
addressed by its line map; lines are sliced from the text, never re-rendered. A heading's anchor is
the id of an `<a id="..."></a>` line directly above it (API entries: the qualified name), else a
GitHub-style slug of its text, de-duplicated within the file — so links in the files work on GitHub
and the catalog's anchors are the same ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from fsdp_skill.convert.markdown import plain_text
from fsdp_skill.convert.myst import anchor_before
from fsdp_skill.core.markdown import markdown_parser

TOC_THRESHOLD_LINES = 300
TOC_MAX_LEVEL = 3


@dataclass(frozen=True)
class Heading:
    level: int
    text: str  # plain text, as a reader sees it
    raw: str  # the inline markdown source of the heading
    line: int  # 0-based index of the heading's first line
    end: int  # 0-based index one past its last line
    anchor_id: str | None  # from an `<a id>` line directly above, if any


@dataclass(frozen=True)
class SourceRow:
    repo: str
    path: str
    commit: str | None
    licence: str
    url: str | None = None


@dataclass(frozen=True)
class SectionSpan:
    anchor: str
    title: str
    level: int
    breadcrumb: tuple[str, ...]
    line: int  # 1-based line of the heading
    markdown: str


def outline(markdown: str) -> list[Heading]:
    """Every heading of a markdown text, in order."""
    lines = markdown.splitlines()
    tokens = markdown_parser().parse(markdown)
    headings: list[Heading] = []
    for index, token in enumerate(tokens):
        if token.type == "heading_open" and token.map:
            inline = tokens[index + 1]
            start, end = token.map
            headings.append(
                Heading(
                    level=int(token.tag[1]),
                    text=plain_text(inline),
                    raw=inline.content.strip(),
                    line=start,
                    end=end,
                    anchor_id=anchor_before(lines, start),
                )
            )
    return headings


def _without_lines(lines: list[str], drop: set[int]) -> str:
    """The lines minus `drop`, without doubling the blank lines around what was removed (blank
    lines elsewhere, e.g. inside code, are left exactly as they are)."""
    kept: list[str] = []
    after_drop = False
    for index, line in enumerate(lines):
        if index in drop:
            after_drop = True
            continue
        if after_drop and not line.strip() and (not kept or not kept[-1].strip()):
            continue
        after_drop = False
        kept.append(line)
    return "\n".join(kept).strip("\n") + "\n"


def drop_quotes_matching(markdown: str, pattern: re.Pattern[str]) -> str:
    """Remove the top-level block quotes whose text matches `pattern` (page furniture such as a
    tutorial's "View and edit this tutorial in github" note)."""
    lines = markdown.splitlines()
    drop: set[int] = set()
    tokens = markdown_parser().parse(markdown)
    for token in tokens:
        if token.type == "blockquote_open" and token.level == 0 and token.map:
            start, end = token.map
            if pattern.search(" ".join(lines[start:end])):
                drop.update(range(start, end))
    if not drop:
        return markdown
    return _without_lines(lines, drop)


def drop_empty_sections(markdown: str) -> str:
    """Remove headings with nothing under them before the next heading of the same or a higher
    level (a page section that held only a toctree, say); repeated until none is left."""
    while True:
        lines = markdown.splitlines()
        headings = outline(markdown)
        empty: set[int] = set()
        for index, heading in enumerate(headings):
            following = headings[index + 1] if index + 1 < len(headings) else None
            stop = following.line if following else len(lines)
            if heading.anchor_id or any(line.strip() for line in lines[heading.end : stop]):
                continue
            if following is None or following.level <= heading.level:
                empty.update(range(heading.line, heading.end))
        if not empty:
            return markdown
        markdown = _without_lines(lines, empty)


_SLUG_DROP = re.compile(r"[^\w\- ]", re.UNICODE)


def github_slug(text: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, each space a hyphen."""
    return _SLUG_DROP.sub("", text.strip().lower()).replace(" ", "-")


class Slugger:
    """Assigns anchors in document order, de-duplicating slugs exactly as GitHub does (-1, -2, ...).

    A heading with an explicit `<a id>` keeps that id, but its slug is still counted: GitHub slugs
    every heading, so later duplicates must get the same suffix they get there.
    """

    def __init__(self) -> None:
        self.occurrences: dict[str, int] = {}

    def _slug(self, text: str) -> str:
        base = github_slug(text) or "section"
        result = base
        while result in self.occurrences:
            self.occurrences[base] += 1
            result = f"{base}-{self.occurrences[base]}"
        self.occurrences[result] = 0
        return result

    def anchor(self, heading: Heading) -> str:
        slug = self._slug(heading.text)
        return heading.anchor_id or slug


def anchors(headings: Iterable[Heading]) -> list[str]:
    slugger = Slugger()
    return [slugger.anchor(h) for h in headings]


def _escape_link_text(text: str) -> str:
    return re.sub(r"([\[\]\\])", r"\\\1", text)


def _short_sha(commit: str | None) -> str:
    return f"`{commit[:10]}`" if commit else "not recorded"


def header(title: str, description: str, sources: list[SourceRow], torch_version: str) -> str:
    """The block every reference file starts with: title, description, provenance, version."""
    rows = ["| Repository | File | Commit | Licence |", "| --- | --- | --- | --- |"]
    for row in sources:
        file = f"[`{row.path}`]({row.url})" if row.url else f"`{row.path}`"
        rows.append(f"| {row.repo} | {file} | {_short_sha(row.commit)} | {row.licence} |")
    return "\n".join(
        [
            f"# {title}",
            "",
            description,
            "",
            f"API reference text comes from the docstrings of **torch {torch_version}**. "
            "Generated by `fsdp-skill regenerate` from the sources below; do not edit by hand.",
            "",
            *rows,
        ]
    )


def table_of_contents(body: str, first_anchors: Slugger | None = None) -> str:
    """A nested list of links to the level-2 and level-3 headings of `body`."""
    headings = outline(body)
    slugger = first_anchors or Slugger()
    items: list[str] = []
    for heading in headings:
        anchor = slugger.anchor(heading)
        if 2 <= heading.level <= TOC_MAX_LEVEL:
            indent = "  " * (heading.level - 2)
            items.append(f"{indent}- [{_escape_link_text(heading.text)}](#{anchor})")
    return "**Contents**\n\n" + "\n".join(items) if items else ""


@dataclass(frozen=True)
class Rendered:
    text: str
    body_start: int  # 0-based line index where the body begins


def render_reference(title: str, description: str, sources: list[SourceRow], torch_version: str, body: str) -> Rendered:
    """Header, then a table of contents when the file would run over 300 lines, then the body."""
    head = header(title, description, sources, torch_version)
    body = body.strip("\n")
    draft_lines = len(head.splitlines()) + 2 + len(body.splitlines())
    if draft_lines > TOC_THRESHOLD_LINES:
        # The title is slugged first so that body anchors de-duplicate exactly as in the final file.
        slugger = Slugger()
        slugger.anchor(outline(head)[0])
        toc = table_of_contents(body, slugger)
        if toc:
            head = f"{head}\n\n{toc}"
    text = f"{head}\n\n{body}\n"
    return Rendered(text=text, body_start=len(head.splitlines()) + 1)


def _strip_trailing_anchor(lines: list[str]) -> list[str]:
    """Drop blank lines and a dangling `<a id>` line (it belongs to the next heading)."""
    out = list(lines)
    while out and not out[-1].strip():
        out.pop()
    if out and anchor_before(out + ["# x"], len(out)) is not None:
        out.pop()
        while out and not out[-1].strip():
            out.pop()
    return out


def split_sections(markdown: str) -> list[SectionSpan]:
    """Each heading with the markdown under it up to the next heading of any level."""
    lines = markdown.splitlines()
    headings = outline(markdown)
    slugger = Slugger()
    stack: list[Heading] = []
    spans: list[SectionSpan] = []
    for index, heading in enumerate(headings):
        while stack and stack[-1].level >= heading.level:
            stack.pop()
        stop = headings[index + 1].line if index + 1 < len(headings) else len(lines)
        chunk = _strip_trailing_anchor(lines[heading.line : stop])
        spans.append(
            SectionSpan(
                anchor=slugger.anchor(heading),
                title=heading.text,
                level=heading.level,
                breadcrumb=tuple(h.text for h in stack),
                line=heading.line + 1,
                markdown="\n".join(chunk) + "\n",
            )
        )
        stack.append(heading)
    return spans
