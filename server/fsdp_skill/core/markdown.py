"""Plain CommonMark, as every stage reads it: the one parser configuration and code-fence sizing.

It lives in `core`, not `convert`, because `search` (which may import only `core`) cuts documents
into blocks with the same parser and closes cut code blocks with fences sized by the same rule;
`convert` (MyST pages), `apidoc`, `build` and `cli` use it to read or check the markdown they
emit. MyST syntax (roles, colon fences, targets…) is not plain CommonMark: that parser, with its
plugins, is `convert.myst.myst_parser`. markdown-it-py is imported only when a parser is asked for,
so the server, which never parses markdown, does not load it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

__all__ = ["code_fence", "fence_marker", "markdown_parser"]

# A backtick run that can close a fence: at the start of a line, after indentation (inside a list
# item or a block quote the indentation of the container comes first, so any amount is counted).
_LINE_START_TICKS = re.compile(r"^[ \t]*(`{3,})", re.MULTILINE)


def markdown_parser() -> MarkdownIt:
    """CommonMark with GFM pipe tables and raw HTML: how references/ are read, checked and indexed."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable("table")


def fence_marker(code: str) -> str:
    """The backtick fence for `code`: three, or one more than the longest backtick run that starts
    one of its lines, so nothing inside can close the block early."""
    longest = max((len(run) for run in _LINE_START_TICKS.findall(code)), default=2)
    return "`" * max(3, longest + 1)


def code_fence(code: str, language: str = "") -> str:
    """`code` in a fenced block labelled `language` (the code's trailing newlines dropped)."""
    marker = fence_marker(code)
    return f"{marker}{language}\n{code.rstrip(chr(10))}\n{marker}"
