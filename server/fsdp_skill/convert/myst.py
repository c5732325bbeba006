"""A MyST Markdown page (the PyTorch docs' dialect) → plain CommonMark, with autodoc resolved.

The page is parsed once with markdown-it-py and the MyST plugins (`convert.myst_tokens`); the walk
visits the top-level blocks and slices the original source by each block's line map, so prose
reaches the output byte for byte except for the MyST constructs that need rewriting:

- ```` ```{eval-rst} ```` fences: handed to `rst.rst_to_markdown`, autodoc directives to the hook;
- directive fences (```` ```{note} ````, `:::{warning}`, …): classified by the Sphinx directive
  table shared with the RST converter (`convert.sphinx_directives`) — admonitions become block
  quotes, navigation vanishes, autodoc and `{currentmodule}` go to the hook;
- `{func}`/`{class}`/`{ref}`/… roles (`myst_role` tokens): converted by `rst.inline_to_markdown`;
- relative links (`link_open` tokens): made absolute upstream URLs; a bare Sphinx label keeps its text;
- `(label)=` targets, `%` comments, `+++` breaks, front matter, HTML comments: dropped;
- definition lists: the term as a paragraph, the definition's blocks under it;
- plain code fences keep their language; an unlabeled one gets `python` when it parses as Python.

Directive bodies are opaque to the parser (fence content), so each is converted as a page of its
own, its line numbers offset to the page's.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

from markdown_it.token import Token

from fsdp_skill.convert import sphinx_directives as sphinx
from fsdp_skill.convert.markdown import admonition
from fsdp_skill.convert.myst_tokens import (
    InlineEdits,
    Rewrites,
    myst_parser,
    rewrite_inline,
)
from fsdp_skill.convert.rst import blocks as rst_blocks
from fsdp_skill.convert.rst import converter as rst
from fsdp_skill.convert.rst.context import Warn
from fsdp_skill.core.markdown import fence_marker

__all__ = ["PageAutodocHook", "Warn", "anchor_before", "myst_to_markdown"]

# (directive, argument, options, line, heading level for the entries it renders) -> markdown
PageAutodocHook = Callable[[str, str, dict[str, str], int, int], str]

_DROPPED_BLOCKS = frozenset({"myst_target", "myst_line_comment", "myst_block_break", "front_matter"})
_RST_DIRECTIVE_RE = re.compile(r"^\.\. [\w:-]+::")
_OPTION_RE = re.compile(r"^:([\w-]+):\s*(.*)$")
_ANCHOR_RE = re.compile(r'^<a id="([^"]+)"></a>\s*$')
_DEFINITION_MARKER = re.compile(r"^[:~][ \t]+")


def _link_target(resolve_uri: Callable[[str], str]) -> Callable[[str], str | None]:
    """A relative link destination → the absolute upstream URL (a `page.md` link becomes
    `page.html` on the docs site); a bare Sphinx label, which has no address outside the docs
    build, → None: the link keeps only its text rather than being broken in references/."""

    def target(destination: str) -> str | None:
        path, hash_, fragment = destination.partition("#")
        if "/" not in path and "." not in path:
            return None
        path = re.sub(r"\.(md|rst|ipynb)$", ".html", path)
        return f"{resolve_uri(path)}{hash_}{fragment}"

    return target


def code_language(info: str, code: str) -> str:
    """The fence language to emit: the declared one (normalized), else python / bash / text by
    content — the same rule the RST converter applies, so both kinds of page label code alike."""
    declared = info.strip().split()[0] if info.strip() else ""
    return rst_blocks.normalize_language(declared or None, code.splitlines())


def fence(code: str, language: str) -> str:
    body = code if code.endswith("\n") or not code else code + "\n"
    ticks = fence_marker(body)
    return f"{ticks}{language}\n{body}{ticks}"


@dataclass
class _Directive:
    name: str
    argument: str
    options: dict[str, str]
    body: str
    body_line: int  # 1-based page line of the first body line


def _parse_directive(info: str, content: str, fence_line: int) -> _Directive:
    """Split a MyST directive fence into name, argument, options (`:key: value` or a `---` block) and body."""
    head = info.strip()[1:]
    name, _, argument = head.partition("}")
    lines = content.splitlines()
    options: dict[str, str] = {}
    skip = 0
    if lines and lines[0].strip() == "---":
        for j in range(1, len(lines)):
            if lines[j].strip() == "---":
                for option_line in lines[1:j]:
                    key, _, value = option_line.partition(":")
                    if key.strip():
                        options[key.strip()] = value.strip()
                skip = j + 1
                break
    else:
        while skip < len(lines) and (match := _OPTION_RE.match(lines[skip])):
            options[match.group(1)] = match.group(2).strip()
            skip += 1
    # Directive content is markdown whatever its indentation upstream ("    The loss_parallel API is
    # experimental" inside a warning is prose, not an indented code block).
    body = textwrap.dedent("\n".join(lines[skip:]))
    return _Directive(name.strip(), argument.strip(), options, body, fence_line + 1 + skip)


def _top_level_blocks(tokens: list[Token]) -> list[list[Token]]:
    """The token stream cut into its top-level blocks (an open token through its matching close)."""
    blocks: list[list[Token]] = []
    i = 0
    while i < len(tokens):
        end = i
        if tokens[i].nesting == 1:
            depth = 1
            while depth:
                end += 1
                depth += tokens[end].nesting
        blocks.append(tokens[i : end + 1])
        i = end + 1
    return blocks


class _PageConverter:
    def __init__(
        self, *, origin: str, warn: Warn, autodoc: PageAutodocHook | None, resolve_uri: Callable[[str], str] | None
    ) -> None:
        self.origin = origin
        self.resolve_uri = resolve_uri
        self.warn = warn
        self.autodoc = autodoc
        self.level = 0  # level of the last heading seen: autodoc entries nest one below it
        self.parser = myst_parser()
        self.rewrites = Rewrites(rst.inline_to_markdown, _link_target(resolve_uri) if resolve_uri else None)

    def convert(self, text: str, first_line: int) -> str:
        lines = text.splitlines()
        tokens = self.parser.parse("\n".join(lines) + "\n")
        edits = InlineEdits(tokens, lines, self.rewrites)
        for line, written in edits.unplaced:
            self.warn(self.origin, first_line + line, f"{written[:80]} kept as written: its line was not found")
        page = _Page(lines, edits.rewritten_lines(), first_line)
        blocks: list[str] = []
        for block_tokens in _top_level_blocks(tokens):
            block = self._block(block_tokens, page)
            if block is not None and block.strip():
                blocks.append(block.rstrip("\n"))
        return "\n\n".join(blocks) + ("\n" if blocks else "")

    # -- one top-level block ------------------------------------------------------------------

    def _block(self, tokens: list[Token], page: _Page) -> str | None:
        token = tokens[0]
        assert token.map is not None
        start, end = token.map
        page_line = page.first_line + start
        if token.type in _DROPPED_BLOCKS:
            return None
        if token.type == "heading_open":
            self.level = int(token.tag[1])
            return "#" * self.level + " " + rewrite_inline(tokens[1], self.rewrites).strip()
        if token.type in ("fence", "colon_fence"):
            return self._fence(token, page_line)
        if token.type == "code_block":
            return fence(token.content, code_language("", token.content))
        if token.type == "html_block":
            return None if token.content.lstrip().startswith("<!--") else token.content
        if token.type == "hr":
            return "---"
        if token.type == "paragraph_open" and _RST_DIRECTIVE_RE.match(page.lines[start]):
            # Raw RST that escaped its {eval-rst} fence upstream (it renders as literal text
            # there); the intent is unambiguous, so convert it as RST.
            return self._rst("\n".join(page.lines[start:end]), page_line)
        if token.type == "dl_open":
            return self._definition_list(tokens, page)
        return self._container(tokens, page, start, end)

    def _container(self, tokens: list[Token], page: _Page, start: int, end: int) -> str:
        """Paragraphs, lists, tables, block quotes: the source lines with roles converted,
        except for nested code fences, which are kept verbatim."""
        verbatim: set[int] = set()
        for inner in tokens[1:]:
            if inner.type in ("fence", "colon_fence", "code_block") and inner.map:
                if inner.type != "code_block" and inner.info.strip().startswith("{"):
                    self.warn(self.origin, page.first_line + inner.map[0],
                              f"directive {inner.info.strip()} nested in a list or quote is kept verbatim")
                verbatim.update(range(inner.map[0], inner.map[1]))
        out: list[str] = []
        chunk: list[str] = []
        for index in range(start, end):
            if index in verbatim:
                if chunk:
                    out.append("\n".join(chunk))
                    chunk = []
                out.append(page.lines[index])
            elif (converted := page.converted[index]) is not None:
                chunk.append(converted)
        if chunk:
            out.append("\n".join(chunk))
        return "\n".join(out)

    def _definition_list(self, tokens: list[Token], page: _Page) -> str:
        """`Term` / `: definition`: the term as a paragraph, the definition's lines under it with
        the `: ` marker and the indentation it sets removed (CommonMark has no definition list)."""
        parts: list[str] = []
        for token in tokens:
            if token.type not in ("dt_open", "dd_open") or token.map is None:
                continue
            start, end = token.map
            end = max(end, start + 1)  # deflist maps a one-line term as [n, n]
            text = self._container([token], page, start, end)
            if token.type == "dd_open":
                text = _strip_definition_marker(text)
            parts.append(text)
        return "\n\n".join(parts)

    def _inline(self, text: str) -> str:
        """A directive argument (text the page parse did not see as inline): roles and links converted."""
        tokens = self.parser.parseInline(text)
        return rewrite_inline(tokens[0], self.rewrites) if tokens else text

    # -- directive fences --------------------------------------------------------------------

    def _fence(self, token: Token, page_line: int) -> str | None:
        info = token.info.strip()
        if not info.startswith("{"):
            return fence(token.content, code_language(info, token.content))
        directive = _parse_directive(info, token.content, page_line)
        kind, short = sphinx.kind_of(directive.name), sphinx.short_name(directive.name)
        if kind is sphinx.Kind.EVAL_RST:
            return self._rst(directive.body, directive.body_line)
        if kind in (sphinx.Kind.AUTODOC, sphinx.Kind.MODULE):
            name = "currentmodule" if kind is sphinx.Kind.MODULE else short  # one name for the hook, as RST
            return self._autodoc(name, directive.argument, directive.options, page_line)
        if kind is sphinx.Kind.DROPPED:
            return None
        if kind is sphinx.Kind.CODE:
            declared = sphinx.CODE_LANGUAGES[short] or directive.argument
            return fence(directive.body, code_language(declared, directive.body))
        if kind is sphinx.Kind.MATH:
            return fence(directive.body, "math")
        if kind is sphinx.Kind.IMAGE:
            return self._image(directive)
        if kind in (sphinx.Kind.ADMONITION, sphinx.Kind.VERSION_NOTE):
            return self._admonition(kind, short, directive)
        body = self._body(directive)
        if kind is sphinx.Kind.CONTAINER:
            return body
        if kind is sphinx.Kind.TITLED_CONTAINER and directive.argument:
            return f"**{self._inline(directive.argument)}**\n\n{body}"
        if kind is sphinx.Kind.DESCRIPTION and directive.argument:
            return f"**`{directive.argument}`**\n\n{body}"
        if kind in (sphinx.Kind.TITLED_CONTAINER, sphinx.Kind.DESCRIPTION):
            return body
        self.warn(
            self.origin, page_line, f"unknown MyST directive {{{directive.name}}}: its body is kept as plain text"
        )
        return body or None

    def _body(self, directive: _Directive) -> str:
        return self.convert(directive.body, directive.body_line) if directive.body.strip() else ""

    def _image(self, directive: _Directive) -> str:
        alt = re.sub(r"[\[\]]", "", directive.options.get("alt", ""))
        uri = self.resolve_uri(directive.argument) if self.resolve_uri else directive.argument
        caption = self._body(directive).strip()
        return f"![{alt}]({uri})" + (f"\n\n{caption}" if caption else "")

    def _admonition(self, kind: sphinx.Kind, name: str, directive: _Directive) -> str:
        """`{note}`: the argument, if any, is the body's first line (MyST passes it as content, as
        RST does); `{admonition} Title`: the argument is the label; version notes: "New in version X"."""
        body = self._body(directive)
        argument = directive.argument
        if kind is sphinx.Kind.VERSION_NOTE:
            version, _, text = argument.partition(" ")
            title = f"{sphinx.VERSION_NOTE_TITLES[name]} {version}".strip()
            lead = self._inline(text) if text else ""
        elif name == "admonition":
            title, lead = self._inline(argument) or "Note", ""
        else:
            title, lead = sphinx.ADMONITION_TITLES[name], self._inline(argument) if argument else ""
        return admonition(title, "\n\n".join(part for part in (lead, body) if part))

    def _autodoc(self, name: str, argument: str, options: dict[str, str], page_line: int) -> str | None:
        if self.autodoc is None:
            self.warn(self.origin, page_line, f"{name} {argument}: no autodoc resolver, directive dropped")
            return None
        return self.autodoc(name, argument, options, page_line, self._entry_level())

    def _entry_level(self) -> int:
        return min(6, max(2, self.level + 1))

    def _rst(self, text: str, first_line: int) -> str:
        hook: rst.AutodocHook | None = None
        if self.autodoc is not None:
            level = self._entry_level()
            page_hook = self.autodoc

            def level_hook(directive: str, argument: str, options: dict[str, str], line: int) -> str:
                return page_hook(directive, argument, options, line, level)

            hook = level_hook

        return rst.rst_to_markdown(
            text,
            origin=self.origin,
            warn=self.warn,
            first_line=first_line,
            autodoc=hook,
            heading_base=self._entry_level(),
            resolve_uri=self.resolve_uri,
        )


@dataclass(frozen=True)
class _Page:
    lines: list[str]  # the page as written
    converted: list[str | None]  # the same lines with roles converted (None: joined to the line above)
    first_line: int  # page line number of lines[0]


def _strip_definition_marker(text: str) -> str:
    """A definition's lines without the `: ` marker, continuation lines dedented by as much."""
    lines = text.split("\n")
    marker = _DEFINITION_MARKER.match(lines[0])
    width = marker.end() if marker else 0
    out = [lines[0][width:]]
    for line in lines[1:]:
        indent = len(line) - len(line.lstrip(" "))
        out.append(line[min(width, indent):])
    return "\n".join(out)


def myst_to_markdown(
    text: str,
    *,
    origin: str,
    warn: Warn,
    autodoc: PageAutodocHook | None = None,
    first_line: int = 1,
    resolve_uri: Callable[[str], str] | None = None,
) -> str:
    """Convert one MyST page (or fragment) to CommonMark.

    `autodoc` resolves autodoc and current-module directives (also those inside eval-rst blocks);
    `resolve_uri` turns a relative link or image path into an absolute upstream URL.
    """
    converter = _PageConverter(origin=origin, warn=warn, autodoc=autodoc, resolve_uri=resolve_uri)
    return converter.convert(text, first_line)


def anchor_before(lines: list[str], heading_index: int) -> str | None:
    """The id of an `<a id="..."></a>` line directly above a heading (blank lines allowed), if any."""
    j = heading_index - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    if j >= 0:
        match = _ANCHOR_RE.match(lines[j].strip())
        if match:
            return match.group(1)
    return None
