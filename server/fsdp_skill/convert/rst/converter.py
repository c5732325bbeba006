"""reStructuredText → CommonMark, line-based, for Sphinx pages, eval-rst blocks and docstrings.

docutils is not used on purpose: every Sphinx role and directive would be unknown to it, and we
want a warning naming the page and line rather than a system message in the output. The parser
walks blocks by indentation (the RST model): explicit markup (`.. x::`), section titles, lists,
field and definition lists, literal and doctest blocks, tables and paragraphs, recursing into
indented bodies. Its output contract: no RST artefact survives (no directive lines, roles or
`_`-link tails outside code), every fence is closed, and tables are GFM pipe tables.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from fsdp_skill.convert.rst import blocks as rst_blocks
from fsdp_skill.convert.rst.blocks import Block, dedent, fence, indent_of, indented_end
from fsdp_skill.convert.rst.context import AutodocHook, ExplicitMarkup, Warn
from fsdp_skill.convert.rst.directives import explicit_markup
from fsdp_skill.convert.rst.inline import code_span, inline_to_markdown
from fsdp_skill.convert.rst.inline import convert as convert_inline
from fsdp_skill.convert.rst.tables import (
    GRID_BORDER,
    SIMPLE_BORDER,
    TableError,
    grid_table,
    simple_table,
)

__all__ = ["AutodocHook", "Warn", "inline_to_markdown", "rst_to_markdown"]

_ADORNMENT = re.compile(r"""^([!-/:-@\[-`{-~])\1{2,}\s*$""")
_BULLET = re.compile(r"^([-*+•‣⁃])(?: +(.*))?$")
_ENUM = re.compile(r"^(?:(\d+|#)[.)]|\((\d+|#|[a-zA-Z])\)|([a-zA-Z])\))(?: +(.*))?$")
_FIELD = re.compile(r"^:(?P<name>[^:`\s][^:`]*?):(?:\s+(?P<body>.*))?$")
_EXPLICIT = re.compile(r"^\.\.(?:\s|$)")


class _Converter:
    def __init__(self, origin: str, warn: Warn, autodoc: AutodocHook | None, heading_base: int,
                 resolve_uri: Callable[[str], str] | None, explicit_markup: ExplicitMarkup) -> None:
        self.origin = origin
        self.explicit_markup = explicit_markup
        self.resolve_uri = resolve_uri
        self.warn = warn
        self.autodoc = autodoc
        self.heading_base = heading_base
        self.title_styles: list[tuple[str, bool]] = []
        self.substitutions: dict[str, str] = {}
        self.targets: dict[str, str] = {}

    def inline(self, text: str) -> str:
        return convert_inline(text, self.substitutions, self.targets, escape_html=True, resolve_uri=self.resolve_uri)

    def collect_definitions(self, lines: list[str]) -> None:
        """Named hyperlink targets and |substitutions| can be used before they are defined."""
        for line in lines:
            target = re.match(r"^\s*\.\.\s+_(`[^`]+`|[^:`][^:]*):\s+(\S+)\s*$", line)
            if target:
                self.targets[target.group(1).strip("`").lower()] = target.group(2)
            subst = re.match(r"^\s*\.\.\s+\|([^|]+)\|\s+replace::\s*(.*)$", line)
            if subst:
                self.substitutions[subst.group(1)] = subst.group(2).strip()

    # -- block level ---------------------------------------------------------------------------

    def blocks(self, lines: list[str], line0: int) -> list[Block]:
        """Convert lines whose block indentation is 0; line0 is the source line of lines[0]."""
        out: list[Block] = []
        i = 0
        while i < len(lines):
            i = self.block(lines, i, line0, out) if lines[i].strip() else i + 1
        return out

    def block(self, lines: list[str], i: int, line0: int, out: list[Block]) -> int:
        """Convert the block element starting at lines[i] (not blank) into `out`; return the index after it.
        The order of the tests is RST's precedence: explicit markup and literal-like blocks before
        section titles, titles with an overline before simple tables, tables before underlined titles."""
        line = lines[i]
        lineno = line0 + i
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if indent_of(line) > 0:
            return self.indented(lines, i, lineno, out)
        if _EXPLICIT.match(line):
            end = indented_end(lines, i + 1)
            out.extend(self.explicit(lines[i:end], lineno))
            return end
        if line.startswith(">>>"):
            end = _paragraph_end(lines, i, stop_at_breaks=False)
            out.append(fence(lines[i:end], "python"))
            return end
        if GRID_BORDER.match(line):
            end = _paragraph_end(lines, i, stop_at_breaks=False)
            out.append(self.table(grid_table, lines[i:end], lineno))
            return end
        if _ADORNMENT.match(line) and i + 2 < len(lines) and nxt.strip() and lines[i + 2].rstrip() == line.rstrip():
            out.append(self.heading(nxt.strip(), (line[0], True)))
            return i + 3
        if SIMPLE_BORDER.match(line) and (end := _simple_table_end(lines, i) or 0):
            out.append(self.table(simple_table, lines[i:end], lineno))
            return end
        if nxt and _ADORNMENT.match(nxt) and not _ADORNMENT.match(line):
            out.append(self.heading(line.strip(), (nxt[0], False)))
            return i + 2
        if _ADORNMENT.match(line) and len(line.strip()) >= 4 and not nxt.strip():
            out.append(["---"])  # transition
            return i + 1
        if _BULLET.match(line) or _is_enum_item(lines, i):
            return self.list_(lines, i, line0, out)
        if _FIELD.match(line):
            return self.field_list(lines, i, line0, out)
        return self.paragraph(lines, i, line0, out)

    def indented(self, lines: list[str], i: int, lineno: int, out: list[Block]) -> int:
        """A block quote in RST; in docstrings nearly always stray indentation: kept as prose,
        unless it is code whose "::" the author forgot."""
        end = indented_end(lines, i)
        body = dedent(lines[i:end])
        if rst_blocks.looks_like_python(body):
            out.append(fence(body, "python"))
        else:
            out.extend(self.blocks(body, lineno))
        return end

    def heading(self, title: str, style: tuple[str, bool]) -> Block:
        if style not in self.title_styles:
            self.title_styles.append(style)
        level = min(6, self.heading_base + self.title_styles.index(style))
        text = self.inline(title).strip().rstrip("#").strip()
        return ["#" * level + " " + text]

    def cell(self, lines: list[str]) -> str:
        """A table cell's RST (any body elements) as one markdown line."""
        parts: list[str] = []
        for block in self.blocks(dedent(lines), 0):
            if block and re.match(r"^(`{3,}|~{3,})", block[0]):
                parts.append(code_span("; ".join(ln.strip() for ln in block[1:-1] if ln.strip())))
            else:
                parts.append(" ".join(ln.strip() for ln in block))
        return " ".join(p for p in parts if p)

    def table(self, parse: Callable[[list[str], Callable[[list[str]], str]], list[str]], lines: list[str],
              lineno: int) -> Block:
        try:
            return parse(lines, self.cell)
        except TableError as exc:
            self.warn(self.origin, lineno, f"malformed table kept as text: {exc}")
            return fence(lines, "text")

    def paragraph(self, lines: list[str], i: int, line0: int, out: list[Block]) -> int:
        end = _paragraph_end(lines, i, stop_at_breaks=True)
        # Deeper lines right under a paragraph (no blank line): under "Example::" a literal block
        # (docstrings often omit the blank line); under one short line a definition-list term; else
        # docutils' "unexpected indentation", which upstream means as a wrapped sentence.
        deeper_next = end < len(lines) and bool(lines[end].strip()) and indent_of(lines[end]) > 0
        if deeper_next and not lines[end - 1].rstrip().endswith("::"):
            term = lines[i].strip()
            if end == i + 1 and (len(term) <= 80 or term.endswith(":")):
                return self.definition_list(lines, i, line0, out)
            end = _continuation_end(lines, end)
        para = [ln.strip() for ln in lines[i:end]]
        literal_follows = para[-1].endswith("::")
        if literal_follows:
            last = para[-1][:-2]
            para[-1] = last.rstrip() if (not last or last[-1].isspace()) else last + ":"
            if not para[-1]:
                para.pop()
        if para:
            out.append(rst_blocks.paragraph_lines(self.inline("\n".join(para))))
        if literal_follows:
            j = end
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j < len(lines) and indent_of(lines[j]) > 0:
                stop = indented_end(lines, j)
                code = dedent(lines[j:stop])
                out.append(fence(code, rst_blocks.guess_language(code)))
                return stop
        return end

    def definition_list(self, lines: list[str], i: int, line0: int, out: list[Block]) -> int:
        """`term` + indented definition. Terms ending in ':' read as lead-in lines ("Usage:"), and
        code under them is a literal block whose "::" was forgotten; other terms become bold labels."""
        term = lines[i].strip()
        end = indented_end(lines, i + 1)
        definition = dedent(lines[i + 1 : end])
        code = term.endswith(":") and rst_blocks.looks_like_python(definition)
        body = [fence(definition, "python")] if code else self.blocks(definition, line0 + i + 1)
        label = self.inline(term)
        if term.endswith(":"):
            out.append(rst_blocks.paragraph_lines(label))
        else:
            out.append(rst_blocks.paragraph_lines(f"**{label.strip()}**"))
        out.extend(body)
        return end

    def list_(self, lines: list[str], i: int, line0: int, out: list[Block]) -> int:
        items: list[Block] = []
        ordered = not _BULLET.match(lines[i])
        number = 1
        first_enum = _ENUM.match(lines[i])
        if first_enum and (first_enum.group(1) or "").isdigit():
            number = int(first_enum.group(1))
        while i < len(lines):
            line = lines[i]
            match = _BULLET.match(line) if not ordered else (_ENUM.match(line) if _is_enum_item(lines, i) else None)
            if not match:
                break
            text = match.group(match.lastindex or 0) if match.lastindex else ""
            marker_width = len(line) - len(text) if text else len(line.rstrip()) + 1
            end = _lazy_end(lines, indented_end(lines, i + 1))
            rest = lines[i + 1 : end]
            body_lines = [text or ""] + _strip_columns(rest, marker_width)
            body = self.blocks(body_lines, line0 + i)
            label = _enum_label(match) if ordered else None
            if label is None:
                marker = f"{number}. " if ordered else "- "
            else:
                marker = "- "
                body = [
                    [f"{label} " + (body[0][0] if body and body[0] else "")] + (body[0][1:] if body else [])
                ] + body[1:]
            items.append(rst_blocks.list_item(marker, body))
            number += 1
            i = end
            while i < len(lines) and not lines[i].strip():
                i += 1
        out.append([ln for item in items for ln in item])
        return i

    def field_list(self, lines: list[str], i: int, line0: int, out: list[Block]) -> int:
        items: list[Block] = []
        while i < len(lines) and (match := _FIELD.match(lines[i])):
            end = indented_end(lines, i + 1)
            body = self.blocks([match.group("body") or ""] + dedent(lines[i + 1 : end]), line0 + i)
            name = self.inline(match.group("name").strip())
            if body and body[0]:
                body[0][0] = f"**{name}:** {body[0][0]}"
            else:
                body = [[f"**{name}:**"]] + body
            items.append(rst_blocks.list_item("- ", body))
            i = end
            while i < len(lines) and not lines[i].strip():
                i += 1
        out.append([ln for item in items for ln in item])
        return i

    # -- explicit markup ---------------------------------------------------------------------

    def explicit(self, block: list[str], lineno: int) -> list[Block]:
        return self.explicit_markup(self, block, lineno)


def _is_enum_item(lines: list[str], i: int) -> bool:
    """RST enumerators need a blank or indented next line, else "1990. was..." is a paragraph."""
    match = _ENUM.match(lines[i])
    if not match:
        return False
    nxt = lines[i + 1] if i + 1 < len(lines) else ""
    return not nxt.strip() or indent_of(nxt) > 0 or bool(_ENUM.match(nxt))


def _enum_label(match: re.Match[str]) -> str | None:
    """Letter enumerators have no CommonMark form: keep "(a)" as text on a bullet."""
    if match.group(2) and not match.group(2).isdigit() and match.group(2) != "#":
        return f"({match.group(2)})"
    if match.group(3):
        return f"{match.group(3)})"
    return None


def _lazy_end(lines: list[str], end: int) -> int:
    """Extend a list item over unindented lines that directly continue its last line: RST calls
    that an error, but upstream writes it and means a wrapped line (CommonMark's lazy line)."""
    while (
        0 < end < len(lines) and lines[end - 1].strip() and lines[end].strip()
        and indent_of(lines[end]) == 0 and not _starts_markup(lines, end)
    ):
        end += 1
    return end


def _starts_markup(lines: list[str], i: int) -> bool:
    line = lines[i]
    return bool(
        _EXPLICIT.match(line) or line.startswith(">>>") or _BULLET.match(line) or _is_enum_item(lines, i)
        or _FIELD.match(line) or GRID_BORDER.match(line) or _ADORNMENT.match(line)
        or (i + 1 < len(lines) and _ADORNMENT.match(lines[i + 1]))
    )


def _continuation_end(lines: list[str], start: int) -> int:
    """End of the indented prose lines from start that continue the paragraph above them (they
    stop at a blank line or at a line starting other markup)."""
    j = start
    while (j < len(lines) and lines[j].strip() and indent_of(lines[j]) > 0
           and not _starts_markup([lines[j].strip()], 0)):
        j += 1
    return j


def _strip_columns(lines: list[str], width: int) -> list[str]:
    """Dedent a list item's continuation lines by the marker width (or less if they are less)."""
    indents = [indent_of(ln) for ln in lines if ln.strip()]
    cut = min([width] + indents)
    return [ln[cut:] if ln.strip() else "" for ln in lines]


def _paragraph_end(lines: list[str], i: int, *, stop_at_breaks: bool) -> int:
    """The line after a paragraph starting at i: a blank or indented line ends it; so does, for
    prose, a line starting other markup (docstrings often omit the blank line before it)."""
    j = i + 1
    while j < len(lines) and lines[j].strip() and indent_of(lines[j]) == 0:
        if stop_at_breaks and (
            _EXPLICIT.match(lines[j]) or lines[j].startswith(">>>") or _BULLET.match(lines[j])
            or GRID_BORDER.match(lines[j])
        ):
            break
        j += 1
    return j


def _simple_table_end(lines: list[str], i: int) -> int | None:
    """A simple table ends at a === border followed by a blank line (or the end)."""
    for j in range(i + 1, len(lines)):
        if SIMPLE_BORDER.match(lines[j]) and (j + 1 == len(lines) or not lines[j + 1].strip()):
            return j + 1
        if not lines[j].strip() and j + 1 < len(lines) and not lines[j + 1].strip():
            return None
    return None


def rst_to_markdown(text: str, *, origin: str, warn: Warn, first_line: int = 1,
                    autodoc: AutodocHook | None = None, heading_base: int = 1,
                    resolve_uri: Callable[[str], str] | None = None,
                    directives: ExplicitMarkup = explicit_markup) -> str:
    """Convert an RST document or fragment to CommonMark (see the module docstring).

    first_line is the source line of text's first line, so warnings name the right place;
    heading_base is the ATX level of the first section-title style met; resolve_uri maps an
    image path or relative link as written ("/_static/img/x.png", "../intermediate/x.html") to
    the URL to emit (default: unchanged); directives handles explicit markup (the Sphinx
    directive table of `convert.rst.directives`, passed in so that module never imports this one).
    """
    lines = text.expandtabs(8).splitlines()
    converter = _Converter(origin, warn, autodoc, heading_base, resolve_uri, directives)
    converter.collect_definitions(lines)
    blocks = converter.blocks(dedent(lines), first_line)
    return rst_blocks.join_blocks(blocks)
