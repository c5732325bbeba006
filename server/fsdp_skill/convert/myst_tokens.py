"""MyST as markdown-it-py tokens: the parser with the MyST plugins, and where each `{role}` sits in the page.

PyTorch's docs enable MyST's `colon_fence` and `deflist` extensions (docs/source/conf.py), on top of
what MyST always parses: `{role}` spans, `(label)=` targets, `%` comments and `+++` breaks
(mdit-py-plugins' `myst_role` and `myst_blocks`), and front matter. Dollar math is not enabled
upstream, so `$` stays text here too. Nothing is parsed by hand: the page walk (`convert.myst`) reads
this token stream, addresses blocks by their line `map`, and slices the page's own lines.

Inline tokens carry no column, so the role and link rules are wrapped to record their span in the
inline source (`meta["span"]`, and a link's `meta["label_end"]`); `InlineEdits` turns the spans into
replacements (a role converted, a relative link resolved) and maps them back to page lines and
columns, which lets the walk rewrite the original line text without re-rendering anything around it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from markdown_it.rules_inline import image as image_rule
from markdown_it.rules_inline import link as link_rule
from markdown_it.token import Token
from mdit_py_plugins.colon_fence import colon_fence_plugin
from mdit_py_plugins.deflist import deflist_plugin
from mdit_py_plugins.front_matter import front_matter_plugin
from mdit_py_plugins.myst_blocks import myst_block_plugin
from mdit_py_plugins.myst_role import myst_role_plugin
from mdit_py_plugins.myst_role.index import myst_role

from fsdp_skill.core.markdown import markdown_parser

__all__ = ["InlineEdits", "Rewrites", "myst_parser"]

# A link destination written as one run without spaces or title, `<>` allowed (what may be rewritten).
_PLAIN_DESTINATION = re.compile(r"<?([^)\s>]+)>?")
_ABSOLUTE_OR_FRAGMENT = re.compile(r"[a-zA-Z][\w+.-]*:|#")


@dataclass(frozen=True)
class Rewrites:
    """What the walk changes inline: each role (as written, `{func}`~torch.x``) to markdown; each
    relative link destination to the one to emit (None: drop the link, keep its label)."""

    role: Callable[[str], str]
    link: Callable[[str], str | None] | None = None


def _recording_myst_role(state: StateInline, silent: bool) -> bool:
    start = state.pos
    if not myst_role(state, silent):
        return False
    if not silent:
        state.tokens[-1].meta["span"] = (start, state.pos)
    return True


def _recording_link(state: StateInline, silent: bool) -> bool:
    start, first_token = state.pos, len(state.tokens)
    label_end = state.md.helpers.parseLinkLabel(state, state.pos, True) if state.src[state.pos] == "[" else -1
    if not link_rule(state, silent):
        return False
    if not silent:  # the first new token may be the pending text flushed before link_open
        opening = next(t for t in state.tokens[first_token:] if t.type == "link_open")
        opening.meta.update(span=(start, state.pos), label_end=label_end)
    return True


def _recording_image(state: StateInline, silent: bool) -> bool:
    """As `_recording_link`, for `![alt](path)`: a relative image path is resolved like a link's."""
    start, first_token = state.pos, len(state.tokens)
    is_image = state.src.startswith("![", state.pos)
    label_end = state.md.helpers.parseLinkLabel(state, state.pos + 1, False) if is_image else -1
    if not image_rule(state, silent):
        return False
    if not silent:
        image = next(t for t in state.tokens[first_token:] if t.type == "image")
        image.meta.update(span=(start, state.pos), label_end=label_end)
    return True


def myst_parser() -> MarkdownIt:
    """The plain CommonMark parser (`core.markdown`) plus the MyST syntax PyTorch's pages use."""
    parser = (
        markdown_parser()
        .use(front_matter_plugin)
        .use(myst_block_plugin)
        .use(colon_fence_plugin)
        .use(deflist_plugin)
        .use(myst_role_plugin)
    )
    parser.inline.ruler.at("myst_role", _recording_myst_role)
    parser.inline.ruler.at("link", _recording_link)
    parser.inline.ruler.at("image", _recording_image)
    return parser


def _replacements(inline: Token, rewrites: Rewrites) -> Iterator[tuple[int, int, str]]:
    """(start, end, new text) in the inline's source, in order: roles, and the destinations of
    inline links that are relative (not `scheme:` or `#fragment`; a title or spaces: left alone)."""
    text = inline.content
    for child in inline.children or []:
        if "span" not in child.meta:
            continue
        start, end = child.meta["span"]
        if child.type == "myst_role":
            yield start, end, rewrites.role(text[start:end])
        elif child.type in ("link_open", "image") and rewrites.link is not None:
            label_end = child.meta["label_end"]
            if text[label_end + 1 : label_end + 2] != "(":
                continue  # a reference-style link: its destination is elsewhere
            destination = _PLAIN_DESTINATION.fullmatch(text[label_end + 2 : end - 1])
            if destination is None or _ABSOLUTE_OR_FRAGMENT.match(destination.group(1)):
                continue
            resolved = rewrites.link(destination.group(1))
            if resolved is None:
                yield start, start + 1, ""
                yield label_end, end, ""
            else:
                yield label_end + 1, end, f"({resolved})"


def rewrite_inline(inline: Token, rewrites: Rewrites) -> str:
    """The inline token's source text rewritten (headings, directive arguments)."""
    text = inline.content
    for start, end, new in sorted(_replacements(inline, rewrites), reverse=True):
        text = text[:start] + new + text[end:]
    return text


@dataclass(frozen=True)
class _Edit:
    first: int  # page line (0-based) and column where the replaced text starts
    first_col: int
    last: int  # page line and column one past its end (a role may wrap onto the next line)
    last_col: int
    new: str


class InlineEdits:
    """Every inline rewrite of a parsed page, placed in the page's lines."""

    def __init__(self, tokens: list[Token], lines: list[str], rewrites: Rewrites) -> None:
        self.lines = lines
        self.rewrites = rewrites
        self.edits: list[_Edit] = []
        self.unplaced: list[tuple[int, str]] = []  # (page line, text) whose line was not found
        cursor: dict[int, int] = {}  # per page line, where the next inline's text may start (table cells)
        block_map: list[int] | None = None
        for token in tokens:
            block_map = token.map or block_map
            if token.type == "inline" and token.children and any("span" in c.meta for c in token.children):
                self._place(token, token.map or block_map, cursor)

    def _place(self, inline: Token, line_map: list[int] | None, cursor: dict[int, int]) -> None:
        content_lines = inline.content.split("\n")
        columns: list[int | None] = []
        for k, text in enumerate(content_lines):
            page_line = (line_map[0] + k) if line_map else -1
            columns.append(self._find(page_line, text, cursor))
        offsets = [0]
        for text in content_lines:
            offsets.append(offsets[-1] + len(text) + 1)
        for start, end, new in _replacements(inline, self.rewrites):
            first, last = _line_of(offsets, start), _line_of(offsets, max(start, end - 1))
            first_col, last_col = columns[first], columns[last]
            if line_map is None or first_col is None or last_col is None:
                self.unplaced.append(((line_map[0] if line_map else 0) + first, inline.content[start:end]))
                continue
            self.edits.append(_Edit(
                line_map[0] + first, first_col + start - offsets[first],
                line_map[0] + last, last_col + end - offsets[last], new,
            ))

    def _find(self, page_line: int, text: str, cursor: dict[int, int]) -> int | None:
        """Column of an inline's content line in its page line, at or after the previous inline's
        end on that line. A table cell's content has `\\|` unescaped: try it escaped too."""
        if not 0 <= page_line < len(self.lines):
            return None
        source = self.lines[page_line]
        for candidate in (text, text.replace("|", "\\|")):
            column = source.find(candidate, cursor.get(page_line, 0))
            if column >= 0:
                cursor[page_line] = column + len(candidate)
                return column
        return None

    def rewritten_lines(self) -> list[str | None]:
        """The page's lines with every placed edit applied; a line a wrapped role pulled onto the
        line above is None (a role's text is one line: its wrapped part joins the first)."""
        out: list[str | None] = list(self.lines)
        for edit in sorted(self.edits, key=lambda e: (e.first, e.first_col), reverse=True):
            head = (out[edit.first] or "")[: edit.first_col]
            tail = (out[edit.last] or "")[edit.last_col :]
            out[edit.first] = head + edit.new + tail
            for line in range(edit.first + 1, edit.last + 1):
                out[line] = None
        return out


def _line_of(offsets: list[int], position: int) -> int:
    """Index of the content line holding `position`, given each line's start offset."""
    line = 0
    while line + 1 < len(offsets) and offsets[line + 1] <= position:
        line += 1
    return line
