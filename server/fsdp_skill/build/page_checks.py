"""Content checks on every upstream page before and after it is converted; each problem is a warning.

A broken upstream page (a fence never closed, a `.. code-block::` with nothing under it, control
characters, bytes that are not UTF-8, a body cut short) used to flow silently into references/:
a literal fence in fsdp1.md, empty python blocks, escape codes in fsdp2.md, or a traceback. Here
each one is reported as 'upstream/<file>:<line>: <problem>' through the build's warning channel, so
`regenerate --strict` refuses to write anything, and without --strict the page is repaired as
CommonMark itself would read it (an unclosed block ends where the next one starts, or at the end of
the page; control characters and undecodable bytes dropped, never shown as U+FFFD; empty code
blocks removed) and the warning is printed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from fsdp_skill.build.markdown_checks import (
    CONTROL_CHARACTERS,
    code_line_numbers,
    empty_fence_spans,
    fence_is_closed,
    foreign_scheme,
)
from fsdp_skill.convert.myst_tokens import myst_parser

Warn = Callable[[str, int, str], None]
PageFormat = Literal["myst", "rst", "text"]

_CODE_DIRECTIVE = re.compile(r"^(?P<indent>\s*)\.\.\s+(?:code-block|code|sourcecode)::")
_RST_OPTION = re.compile(r"^\s*:[\w-]+:")
_COLON_OPEN = re.compile(r"^( {0,3})(:{3,})\{[^}]+\}")
_BACKTICK_OPEN = re.compile(r"^( {0,3})(`{3,}|~{3,})")


class PageChecker:
    """The checks of one upstream page: `source()` before conversion, `converted()` after it."""

    def __init__(self, origin: str, warn: Warn) -> None:
        self.origin, self.warn = origin, warn
        self.empty_directives = 0

    def source(self, data: bytes, page_format: PageFormat, manifest_chars: int | None = None) -> str:
        """Warn about each problem of the page's source; returns its text with them repaired.

        manifest_chars: the length the cache manifest recorded for the page, for the cut-short check."""
        decoded = self._decode(data)
        if decoded is not None:
            _cut_short(decoded, manifest_chars, self.origin, self.warn)
        text = _drop_control_characters(
            decoded if decoded is not None else data.decode("utf-8", errors="ignore"), self.origin, self.warn
        )
        lines = text.split("\n")
        self.empty_directives = _empty_code_directives(lines, self.origin, self.warn)
        if page_format == "myst":
            lines = _close_unclosed_blocks(lines, self.origin, self.warn)
        return "\n".join(lines)

    def converted(self, markdown: str) -> str:
        """Drop code blocks the conversion left empty (warning about those the source check did not name),
        and repair links a reader cannot follow."""
        markdown = _web_links_only(markdown, self.origin, self.warn)
        spans = empty_fence_spans(markdown)
        lines = markdown.split("\n")
        if len(spans) > self.empty_directives:
            shown = ", ".join(repr(lines[start].strip()) for start, _ in spans)
            self.warn(self.origin, 0, f"{len(spans)} empty code blocks ({shown}) in the converted page: dropped")
        for start, end in reversed(spans):
            del lines[start:end]
        return "\n".join(lines)

    def _decode(self, data: bytes) -> str | None:
        """The page as text, or None when it is not UTF-8: that is reported (line and byte of the first bad
        byte), and the caller drops the bad bytes."""
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            dropped = len(data) - len(data.decode("utf-8", errors="ignore").encode("utf-8"))
            line = data[: exc.start].count(b"\n") + 1
            self.warn(self.origin, line, f"not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start} cannot be "
                                         f"decoded ({dropped} such byte{'s' if dropped != 1 else ''} dropped; "
                                         "a corrupted download? run `fsdp-skill fetch` again)")
            return None


# The last line of a page cut short mid-sentence: prose (not indented code) ending in a letter, digit or comma.
# A complete page ends with a newline, or at least with a full stop, a closing fence (```, :::) or bracket:
# the four upstream pages without a final newline end so.
_UNFINISHED_LINE = re.compile(r"^\S.*[\w,]$")


def _cut_short(text: str, manifest_chars: int | None, origin: str, warn: Warn) -> None:
    """Two signs that a page was cut short even though its sha256 matches the manifest (a truncated download
    whose digest was recorded, or a file shortened and its digest updated by hand): it is not as long as
    the manifest recorded it when it was fetched, or it stops in the middle of a sentence with no final
    newline. (A page cut inside a code block or directive is the unclosed-block check's; a page cut
    cleanly at a paragraph end, with a consistent manifest, cannot be told from a shorter page: fetch's
    check of each file against GitHub's tree is the guard there.)"""
    lines = text.split("\n")
    if manifest_chars is not None and len(text) != manifest_chars:
        warn(origin, len(lines), f"{len(text)} characters, but the cache manifest recorded {manifest_chars} when it "
                                 "was fetched: the file was cut short or changed since (its sha256 was updated to "
                                 "match); run `fsdp-skill fetch` again")
    elif not text.endswith("\n") and _UNFINISHED_LINE.match(lines[-1]):
        warn(origin, len(lines), f"the page stops mid-sentence with no final newline ({lines[-1][-40:]!r}): it looks "
                                 "cut short; run `fsdp-skill fetch` again")


# `[text](target)` / `![alt](target)` whose target has a scheme: the shape both converters emit.
_SCHEMED_LINK = re.compile(r"(?P<bang>!?)\[(?P<text>[^\]]*)\]\((?P<url>[a-zA-Z][a-zA-Z0-9+.-]*:[^)\s]*)\)")
# A browser viewer's wrapper around a web address (chrome-extension://<id>/https://…): the address inside.
_WRAPPED_WEB_URL = re.compile(r"https?://\S+$")


def _web_links_only(markdown: str, origin: str, warn: Warn) -> str:
    """Links (outside code) whose scheme a reader cannot follow (markdown_checks.WEB_SCHEMES): one that wraps a
    web address (a PDF viewer's `chrome-extension://<id>/https://…`, pasted from the browser into a tutorial)
    becomes that address, a known repair like resolving a relative link; any other keeps its text and loses
    the link, with a warning naming the page."""
    code = code_line_numbers(markdown)
    lines = markdown.split("\n")
    for number, line in enumerate(lines):
        if number in code or "](" not in line:
            continue

        def repair(match: re.Match[str]) -> str:
            url, scheme = match.group("url"), foreign_scheme(match.group("url"))
            if scheme is None:
                return match.group(0)
            inner = _WRAPPED_WEB_URL.search(url[len(scheme) + 1 :])
            if inner:
                return f"{match.group('bang')}[{match.group('text')}]({inner.group(0)})"
            warn(origin, 0, f"a {scheme}: link cannot be followed by a reader ({url[:80]}): kept its text only")
            return match.group("text")

        lines[number] = _SCHEMED_LINK.sub(repair, line)
    return "\n".join(lines)


def _drop_control_characters(text: str, origin: str, warn: Warn) -> str:
    found = False
    for number, line in enumerate(text.split("\n"), start=1):
        hits = CONTROL_CHARACTERS.findall(line)
        if hits:
            found = True
            shown = ", ".join(dict.fromkeys(f"U+{ord(c):04X}" for c in hits))
            warn(origin, number, f"control characters ({shown}) in the text: dropped")
    return CONTROL_CHARACTERS.sub("", text) if found else text


def _empty_code_directives(lines: list[str], origin: str, warn: Warn) -> int:
    """`.. code-block::` (also inside a MyST eval-rst block) whose next content line is not indented
    under it; returns how many."""
    found = 0
    for index, line in enumerate(lines):
        directive = _CODE_DIRECTIVE.match(line)
        if not directive:
            continue
        indent = len(directive.group("indent"))
        following = (ln for ln in lines[index + 1 :] if ln.strip() and not _RST_OPTION.match(ln))
        body = next(following, None)
        if body is None or len(body) - len(body.lstrip()) <= indent or body.lstrip().startswith("```"):
            warn(origin, index + 1, f"{line.strip()!r} has no indented code under it: an empty code block")
            found += 1
    return found


def _close_unclosed_blocks(lines: list[str], origin: str, warn: Warn) -> list[str]:
    """A MyST fence or `:::` directive never closed swallows the rest of the page (later fences
    become literal text inside it). Close it just before the next block that opens like it, or at
    the end of the page."""
    lines = list(lines)
    for _ in range(len(lines)):  # each pass closes one block; a page has fewer blocks than lines
        problem = _first_unclosed(lines)
        if problem is None:
            return lines
        start, closer, reopen = problem
        stop = next((i for i in range(start + 1, len(lines)) if reopen.match(lines[i])), len(lines))
        where = f"before line {stop + 1}, where the next block opens" if stop < len(lines) else "at the end of the page"
        warn(origin, start + 1, f"{lines[start].strip()!r} is never closed, so what follows would be read as "
                                f"its text: closed {where}")
        while stop > start + 1 and not lines[stop - 1].strip():
            stop -= 1
        lines.insert(stop, closer)
    return lines


def _first_unclosed(lines: list[str]) -> tuple[int, str, re.Pattern[str]] | None:
    """(line index, closing line, pattern of a line where the block should have ended) of the first
    fence or colon directive that is never closed: one that runs to the end of the page, or one
    holding a line that opens a block with the very same marker (which cannot close it, so the
    block before it lost its closing line and every later pair is shifted by one)."""
    for token in myst_parser().parse("\n".join(lines)):
        if token.type not in ("fence", "colon_fence") or not token.map:
            continue
        start, end = token.map
        opener = _BACKTICK_OPEN.match(lines[start]) or _COLON_OPEN.match(lines[start])
        if opener is None:  # inside a list item or a quote: the output lint still catches what leaks
            continue
        markup = opener.group(2)
        # A line opening a block with this very marker cannot be inside it: the closing line went missing.
        same = re.compile(rf"^ {{0,3}}{re.escape(markup)}(?!{re.escape(markup[0])})\S")
        swallowed = any(same.match(line) for line in lines[start + 1 : end])
        if swallowed or not fence_is_closed(lines, token.map, markup):
            # A directive's body is markdown: it ends, at the latest, where the next directive or heading starts.
            ends = same if token.type == "fence" else re.compile(rf"^ {{0,3}}(?:{markup}\{{|`{{3,}}\{{|#{{1,6}}\s)")
            return start, opener.group(1) + markup, ends
    return None
