"""A MyST Markdown page (the PyTorch docs' dialect) → plain CommonMark, with autodoc resolved.

The page is parsed once with markdown-it-py; the walk visits the top-level blocks and slices the
original source by each block's line map, so prose reaches the output byte for byte except for the
MyST constructs that need rewriting:

- ```` ```{eval-rst} ```` fences: handed to `rst.rst_to_markdown`, autodoc directives to the hook;
- directive fences (```` ```{note} ````, ```` ```{warning} ````, …) and `:::{note}` colon fences:
  admonitions become block quotes, `{toctree}` / `{contents}` / `{role}` vanish, autodoc and
  `{currentmodule}` go to the hook;
- `{func}`/`{class}`/`{ref}`/… roles: converted by `rst.inline_to_markdown`;
- `(label)=` targets, `%` comments, `+++` breaks, HTML comments: dropped;
- plain code fences keep their language; an unlabeled one gets `python` when it parses as Python.

markdown-it-py's core knows neither colon fences nor definition lists, so a line-preserving pre-pass
rewrites those two into constructs it does know (backtick fences, plain lists) before the parse;
keeping the line count identical keeps every warning's line number true to the page.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

from fsdp_skill.convert.rst import blocks as rst_blocks
from fsdp_skill.convert.rst import converter as rst

Warn = Callable[[str, int, str], None]
# (directive, argument, options, line, heading level for the entries it renders) -> markdown
PageAutodocHook = Callable[[str, str, dict[str, str], int, int], str]

AUTODOC_DIRECTIVES = frozenset(
    {
        "automodule",
        "autoclass",
        "autofunction",
        "automethod",
        "autoattribute",
        "autodata",
        "autoexception",
        "autosummary",
        "autoproperty",
        "autodecorator",
    }
)
MODULE_TRACKING = frozenset({"currentmodule", "py:currentmodule", "module", "py:module"})
ADMONITIONS = {
    "note": "Note",
    "warning": "Warning",
    "seealso": "See also",
    "tip": "Tip",
    "hint": "Hint",
    "important": "Important",
    "attention": "Attention",
    "caution": "Caution",
    "danger": "Danger",
    "error": "Error",
    "todo": "To do",
    "deprecated": "Deprecated",
    "versionadded": "New in version",
    "versionchanged": "Changed in version",
}
# Sphinx navigation and page furniture: nothing a reader of a single reference file can use.
DROPPED_DIRECTIVES = frozenset({"toctree", "contents", "role", "raw", "meta", "include", "tableofcontents"})
CODE_DIRECTIVES = frozenset({"code-block", "code", "sourcecode", "code-cell"})

_FENCE_RE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_COLON_OPEN_RE = re.compile(r"^( {0,3})(:{3,})\{([^}]+)\}(.*)$")
_COLON_CLOSE_RE = re.compile(r"^( {0,3})(:{3,})\s*$")
_TARGET_RE = re.compile(r"^\s*\([\w.:-]+\)=\s*$")
_COMMENT_RE = re.compile(r"^%")
_BREAK_RE = re.compile(r"^\+\+\+\s*")
_ROLE_RE = re.compile(r"\{([A-Za-z][\w.:-]*)\}(`+)(.+?)\2", re.S)
_RST_DIRECTIVE_RE = re.compile(r"^\.\. [\w:-]+::")
_OPTION_RE = re.compile(r"^:([\w-]+):\s*(.*)$")
_ANCHOR_RE = re.compile(r'^<a id="([^"]+)"></a>\s*$')
_RELATIVE_LINK_RE = re.compile(r"(?<!!)\[([^\]\n]*)\]\((?!<?[a-zA-Z][\w+.-]*:|#)<?([^)\s>]+)>?\)")



def markdown_parser() -> MarkdownIt:
    """The one parser configuration used to read MyST pages and to check what we emit."""
    return MarkdownIt("commonmark", {"html": True}).enable("table")


# ---------------------------------------------------------------------------------------------
# Pre-pass: MyST-only syntax → CommonMark with the same number of lines.


def _fence_closes(line: str, opener: str) -> bool:
    match = _FENCE_RE.match(line)
    return bool(
        match and match.group(2)[0] == opener[0] and len(match.group(2)) >= len(opener) and not match.group(3).strip()
    )


def _longest_backtick_fence(lines: list[str]) -> int:
    longest = 0
    for line in lines:
        match = _FENCE_RE.match(line)
        if match and match.group(2)[0] == "`":
            longest = max(longest, len(match.group(2)))
    return longest


def prepass(lines: list[str]) -> list[str]:
    """Rewrite colon fences, definition lists, targets, comments and breaks; keep the line count."""
    out = list(lines)
    colon_stack: list[tuple[int, int]] = []  # (line index, colon count)
    colon_pairs: list[tuple[int, int]] = []
    code_opener: str | None = None
    previous_text = False
    in_definition = False
    for i, line in enumerate(lines):
        if code_opener is not None:
            if _fence_closes(line, code_opener):
                code_opener = None
            continue
        fence = _FENCE_RE.match(line)
        if fence and not (fence.group(2)[0] == "`" and "`" in fence.group(3)):
            code_opener = fence.group(2)
            previous_text = in_definition = False
            continue
        colon_open = _COLON_OPEN_RE.match(line)
        if colon_open:
            colon_stack.append((i, len(colon_open.group(2))))
            previous_text = in_definition = False
            continue
        colon_close = _COLON_CLOSE_RE.match(line)
        if colon_close and colon_stack and len(colon_close.group(2)) >= colon_stack[-1][1]:
            colon_pairs.append((colon_stack.pop()[0], i))
            previous_text = in_definition = False
            continue
        if _TARGET_RE.match(line) or _COMMENT_RE.match(line) or _BREAK_RE.match(line):
            out[i] = ""
            previous_text = in_definition = False
            continue
        # MyST definition list: "Term\n: definition" — keep the term as a paragraph and the
        # definition as its continuation, dedented by the two columns the ": " marker took.
        if line.startswith(": ") and (previous_text or in_definition):
            out[i] = line[2:]
            in_definition = True
            continue
        if in_definition and line.startswith("  "):
            out[i] = line[2:]
            continue
        in_definition = False
        previous_text = bool(line.strip())
    # Innermost colon fences first, so an outer fence can be made longer than what it contains.
    for start, end in sorted(colon_pairs, key=lambda pair: pair[1] - pair[0]):
        opening = _COLON_OPEN_RE.match(out[start])
        assert opening is not None
        ticks = "`" * max(3, _longest_backtick_fence(out[start + 1 : end]) + 1)
        out[start] = f"{opening.group(1)}{ticks}{{{opening.group(3)}}}{opening.group(4)}"
        out[end] = f"{opening.group(1)}{ticks}"
    return out


# ---------------------------------------------------------------------------------------------
# Inline: MyST roles outside code spans.


def convert_roles(text: str) -> str:
    """Replace `{role}`target`` with markdown, leaving code spans untouched."""
    out: list[str] = []
    pos = 0
    while pos < len(text):
        char = text[pos]
        if char == "{":
            match = _ROLE_RE.match(text, pos)
            if match:
                out.append(rst.inline_to_markdown(match.group(0)))
                pos = match.end()
                continue
        if char == "`":
            run_end = pos
            while run_end < len(text) and text[run_end] == "`":
                run_end += 1
            ticks = text[pos:run_end]
            close = re.compile(rf"(?<!`){ticks}(?!`)").search(text, run_end)
            if close:
                out.append(text[pos : close.end()])
                pos = close.end()
            else:
                out.append(ticks)
                pos = run_end
            continue
        if char == "\\" and pos + 1 < len(text):
            out.append(text[pos : pos + 2])
            pos += 2
            continue
        out.append(char)
        pos += 1
    return "".join(out)


def resolve_links(text: str, resolve_uri: Callable[[str], str] | None) -> str:
    """Relative links → absolute upstream URLs (a `page.md` link becomes `page.html` on the docs
    site); a link to a bare Sphinx label, which has no address outside the docs build, keeps only
    its text rather than leaving a link that is broken in references/."""
    if resolve_uri is None:
        return text

    def replace(match: re.Match[str]) -> str:
        label, target = match.group(1), match.group(2)
        path, hash_, fragment = target.partition("#")
        if "/" not in path and "." not in path:
            return label
        path = re.sub(r"\.(md|rst|ipynb)$", ".html", path)
        return f"[{label}]({resolve_uri(path)}{hash_}{fragment})"

    return _RELATIVE_LINK_RE.sub(replace, text)


# ---------------------------------------------------------------------------------------------
# Code fences.


def code_language(info: str, code: str) -> str:
    """The fence language to emit: the declared one (normalized), else python / bash / text by
    content — the same rule the RST converter applies, so both kinds of page label code alike."""
    declared = info.strip().split()[0] if info.strip() else ""
    return rst_blocks.normalize_language(declared or None, code.splitlines())


def fence(code: str, language: str) -> str:
    body = code if code.endswith("\n") or not code else code + "\n"
    longest = _longest_backtick_fence(body.splitlines())
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{language}\n{body}{ticks}"


def admonition(title: str, body: str) -> str:
    """`> **Note:** text`, the whole body quoted — the RST converter's admonition form, so notes
    from MyST pages and from docstrings read the same."""
    lines = body.strip("\n").splitlines()
    if lines and not re.match(r"^(`{3,}|~{3,}|#|\||- |\* |\d+\. |>)", lines[0]):
        lines[0] = f"**{title}:** {lines[0]}"
    else:
        lines = [f"**{title}:**", ""] + lines
    return "\n".join(f"> {line}" if line.strip() else ">" for line in lines)


# ---------------------------------------------------------------------------------------------
# The page walk.


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


class _PageConverter:
    def __init__(
        self, *, origin: str, warn: Warn, autodoc: PageAutodocHook | None, resolve_uri: Callable[[str], str] | None
    ) -> None:
        self.origin = origin
        self.resolve_uri = resolve_uri
        self.warn = warn
        self.autodoc = autodoc
        self.level = 0  # level of the last heading seen: autodoc entries nest one below it
        self.parser = markdown_parser()

    def convert(self, text: str, first_line: int) -> str:
        lines = prepass(text.splitlines())
        source = "\n".join(lines) + "\n"
        tokens = self.parser.parse(source)
        blocks: list[str] = []
        i = 0
        while i < len(tokens):
            token = tokens[i]
            end = i
            if token.nesting == 1:
                depth = 1
                while depth:
                    end += 1
                    depth += tokens[end].nesting
            block = self._block(tokens[i : end + 1], lines, first_line)
            if block is not None and block.strip():
                blocks.append(block.rstrip("\n"))
            i = end + 1
        return "\n\n".join(blocks) + ("\n" if blocks else "")

    # -- one top-level block ------------------------------------------------------------------

    def _block(self, tokens: list[Token], lines: list[str], first_line: int) -> str | None:
        token = tokens[0]
        assert token.map is not None
        start, end = token.map
        page_line = first_line + start
        if token.type == "heading_open":
            self.level = int(token.tag[1])
            return "#" * self.level + " " + self._prose(tokens[1].content.strip())
        if token.type == "fence":
            return self._fence(token, page_line)
        if token.type == "code_block":
            return fence(token.content, code_language("", token.content))
        if token.type == "html_block":
            if token.content.lstrip().startswith("<!--"):
                return None
            return token.content
        if token.type == "hr":
            return "---"
        if token.type == "paragraph_open" and _RST_DIRECTIVE_RE.match(lines[start]):
            # Raw RST that escaped its {eval-rst} fence upstream (it renders as literal text
            # there); the intent is unambiguous, so convert it as RST.
            return self._rst("\n".join(lines[start:end]), page_line)
        return self._container(tokens, lines, start, end)

    def _container(self, tokens: list[Token], lines: list[str], start: int, end: int) -> str:
        """Paragraphs, lists, tables, block quotes: the source lines with roles converted,
        except for nested code fences, which are kept verbatim."""
        verbatim: set[int] = set()
        for inner in tokens[1:]:
            if inner.type in ("fence", "code_block") and inner.map:
                if inner.type == "fence" and inner.info.strip().startswith("{"):
                    self.warn(
                        self.origin,
                        inner.map[0] + 1,
                        f"directive {inner.info.strip()} nested in a list or quote is kept verbatim",
                    )
                verbatim.update(range(inner.map[0], inner.map[1]))
        out: list[str] = []
        chunk: list[str] = []
        for index in range(start, end):
            if index in verbatim:
                if chunk:
                    out.append(self._prose("\n".join(chunk)))
                    chunk = []
                out.append(lines[index])
            else:
                chunk.append(lines[index])
        if chunk:
            out.append(self._prose("\n".join(chunk)))
        return "\n".join(out)

    def _prose(self, text: str) -> str:
        return resolve_links(convert_roles(text), self.resolve_uri)

    def _fence(self, token: Token, page_line: int) -> str | None:
        info = token.info.strip()
        if not info.startswith("{"):
            return fence(token.content, code_language(info, token.content))
        directive = _parse_directive(info, token.content, page_line)
        name = directive.name
        if name == "eval-rst":
            return self._rst(directive.body, directive.body_line)
        if name in AUTODOC_DIRECTIVES or name in MODULE_TRACKING:
            return self._autodoc(name, directive.argument, directive.options, page_line)
        if name in DROPPED_DIRECTIVES:
            return None
        if name in CODE_DIRECTIVES:
            return fence(directive.body, code_language(directive.argument, directive.body))
        if name == "math":
            return fence(directive.body, "math")
        if name in ("image", "figure"):
            alt = re.sub(r"[\[\]]", "", directive.options.get("alt", ""))
            uri = self.resolve_uri(directive.argument) if self.resolve_uri else directive.argument
            caption = self.convert(directive.body, directive.body_line).strip() if directive.body.strip() else ""
            return f"![{alt}]({uri})" + (f"\n\n{caption}" if caption else "")
        if name in ADMONITIONS or name == "admonition":
            title = ADMONITIONS.get(name) or self._prose(directive.argument) or "Note"
            if name in ("deprecated", "versionadded", "versionchanged") and directive.argument:
                title = f"{title} {directive.argument}"
            body = self.convert(directive.body, directive.body_line)
            return admonition(title, body)
        self.warn(self.origin, page_line, f"unknown MyST directive {{{name}}}: its body is kept as plain text")
        return self.convert(directive.body, directive.body_line) if directive.body.strip() else None

    def _autodoc(self, name: str, argument: str, options: dict[str, str], page_line: int) -> str | None:
        if self.autodoc is None:
            self.warn(self.origin, page_line, f"{name} {argument}: no autodoc resolver, directive dropped")
            return None
        if name in MODULE_TRACKING:
            name = "currentmodule"  # as the RST converter reports them: one name for the hook
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
