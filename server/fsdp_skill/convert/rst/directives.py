"""Explicit markup (`.. name:: arg`, targets, comments, footnotes) → markdown blocks.

Every directive falls in one class: rendered (admonitions, code, math, images, tables, containers,
Python-domain descriptions), handed to the autodoc hook (autodoc and module-tracking directives),
dropped silently (no meaning offline: toctree, raw, only, include, role...), or unknown (a warning
naming the page and line; its content kept as prose). Nothing is ever echoed as RST.
"""

from __future__ import annotations

import csv
import io
import re
from typing import TYPE_CHECKING

from fsdp_skill.convert.rst.blocks import Block, dedent, fence, normalize_language, paragraph_lines
from fsdp_skill.convert.rst.tables import TableError, list_table, pipe_table

if TYPE_CHECKING:
    from fsdp_skill.convert.rst.converter import _Converter

ADMONITIONS = {
    "note": "Note", "warning": "Warning", "tip": "Tip", "important": "Important", "seealso": "See also",
    "attention": "Attention", "danger": "Danger", "hint": "Hint", "caution": "Caution", "error": "Error",
}
VERSION_NOTES = {
    "versionadded": "New in version", "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version", "versionremoved": "Removed in version",
}
AUTODOC = {
    "automodule", "autoclass", "autofunction", "automethod", "autoattribute", "autodata", "autosummary",
    "autoexception", "autoproperty", "autodecorator",
}
# Sphinx directives that set the current module; the hook sees them all as "currentmodule".
MODULE_TRACKING = {"currentmodule", "py:currentmodule", "module", "py:module"}
CODE = {"code-block": None, "code": None, "sourcecode": None, "testcode": "python", "doctest": "python",
        "testoutput": "text", "parsed-literal": "text", "code-cell": "python", "ipython": "python"}
DROPPED = {
    "toctree", "raw", "role", "only", "include", "meta", "highlight", "contents", "index", "sectionauthor",
    "codeauthor", "moduleauthor", "testsetup", "testcleanup", "tabularcolumns", "default-role",
    "default-domain", "cssclass", "rst-class", "galleryitem", "customcarditem", "customcalloutitem",
    "footbibliography", "minigallery", "todo", "spelling:word-list", "literalinclude", "program",
    "tags", "jupyter-execute",
}
CONTAINERS = {"container", "grid", "grid-item", "tab-set", "compound", "hlist", "glossary", "class-card",
              "card-carousel", "div"}
TITLED_CONTAINERS = {"grid-item-card", "card", "tab-item", "tab", "topic", "sidebar", "rubric", "dropdown",
                     "admonition", "table", "centered"}
PY_DESCRIPTIONS = {"class", "function", "method", "attribute", "data", "exception", "decorator", "staticmethod",
                   "classmethod", "property", "attr", "module-attribute", "envvar", "option", "describe", "object"}
_DIRECTIVE = re.compile(r"^\.\.\s+([\w][\w:.+-]*)::(?:\s+(.*))?$|^\.\.\s+([\w][\w:.+-]*)::(.*)$")
# ".. note:", ".. warning" and ".. warning ::" (a space before the colons) are comments to docutils.
_SLOPPY_ADMONITION = re.compile(rf"^\.\.\s+({'|'.join(ADMONITIONS)})\s*:{{0,2}}\s*(.*)$", re.IGNORECASE)
_OPTION = re.compile(r"^:([\w][\w -]*):(?:\s+(.*))?$")


def split_options(body: list[str]) -> tuple[dict[str, str], list[str], int]:
    """A directive body → (options, content lines dedented, offset of the content in body)."""
    options: dict[str, str] = {}
    i = 0
    while i < len(body) and (match := _OPTION.match(body[i])):
        options[match.group(1).strip()] = (match.group(2) or "").strip()
        i += 1
        while i < len(body) and body[i].strip() and body[i].startswith(" "):  # option value continues
            key = match.group(1).strip()
            options[key] = (options[key] + " " + body[i].strip()).strip()
            i += 1
    while i < len(body) and not body[i].strip():
        i += 1
    return options, dedent(body[i:]), i


def explicit_markup(conv: _Converter, block: list[str], lineno: int) -> list[Block]:
    first = block[0]
    body = dedent(block[1:])
    if re.match(r"^\.\.\s+(_|__:)", first) or re.match(r"^\.\.\s+\|[^|]+\|", first):
        return []  # hyperlink targets and substitution definitions (collected in a pre-pass)
    footnote = re.match(r"^\.\.\s+\[([^\]]+)\]\s*(.*)$", first)
    if footnote:
        label = footnote.group(1).lstrip("#") or "*"
        return conv.blocks([f"[{label}] {footnote.group(2)}"] + body, lineno)
    match = _DIRECTIVE.match(first)
    if match:
        name = (match.group(1) or match.group(3)).lower()
        argument = (match.group(2) or match.group(4) or "").strip()
        return directive(conv, name, argument, body, lineno)
    sloppy = _SLOPPY_ADMONITION.match(first)
    if sloppy and (sloppy.group(2) or body):
        # ".. note:" / ".. warning" / ".. warning ::" is a comment to Sphinx, but the author meant a note.
        return admonition(conv, ADMONITIONS[sloppy.group(1).lower()], [sloppy.group(2)] + body, lineno)
    return []  # a comment


def directive(conv: _Converter, name: str, argument: str, body: list[str], lineno: int) -> list[Block]:
    short = name.split(":", 1)[1] if name.startswith(("py:", "std:", "rst:")) and name not in MODULE_TRACKING else name
    if short in ADMONITIONS:
        options, content, _ = split_options(body) if not argument else ({}, body, 0)
        return admonition(conv, ADMONITIONS[short], ([argument] if argument else []) + content, lineno)
    if short in VERSION_NOTES:
        version, _, text = argument.partition(" ")
        options, content, _ = split_options(body)
        label = f"{VERSION_NOTES[short]} {version}".strip()
        return admonition(conv, label, ([text] if text else []) + content, lineno)
    if short in CODE:
        options, content, _ = split_options(body)
        language = CODE[short] or argument.split()[0] if (CODE[short] or argument) else None
        blocks: list[Block] = []
        if options.get("caption"):
            blocks.append(paragraph_lines(f"*{conv.inline(options['caption'])}*"))
        blocks.append(fence(content, normalize_language(language, content)))
        return blocks
    if short == "math":
        options, content, _ = split_options(body)
        return [fence(([argument] if argument else []) + content, "math")]
    if short in ("image", "figure"):
        return image(conv, short, argument, body, lineno)
    if short in ("list-table", "csv-table"):
        return table_directive(conv, short, argument, body, lineno)
    if name in MODULE_TRACKING or short in AUTODOC:
        return autodoc(conv, "currentmodule" if name in MODULE_TRACKING else short, argument, body, lineno)
    if short in DROPPED:
        return []
    options, content, offset = split_options(body)
    if short in CONTAINERS:
        return conv.blocks(content, lineno + 1 + offset)
    if short in TITLED_CONTAINERS:
        title = conv.inline(argument).strip()
        head = [paragraph_lines(f"**{title}**")] if title else []
        return head + conv.blocks(content, lineno + 1 + offset)
    if short in PY_DESCRIPTIONS:
        head = [paragraph_lines(f"**`{argument}`**")] if argument else []
        return head + conv.blocks(content, lineno + 1 + offset)
    conv.warn(conv.origin, lineno, f"unknown directive {name}")
    head = [paragraph_lines(conv.inline(argument))] if argument else []
    return head + conv.blocks(content, lineno + 1 + offset)


def admonition(conv: _Converter, label: str, content: list[str], lineno: int) -> list[Block]:
    """`> **Label:** text`, the whole body quoted; a body not starting with prose gets the label alone."""
    inner = conv.blocks(dedent(content), lineno)
    lines: list[str] = []
    for k, block in enumerate(inner):
        if k:
            lines.append("")
        lines.extend(block)
    starts_with_prose = bool(lines) and not re.match(r"^(`{3,}|~{3,}|#|\||- |\d+\. |>)", lines[0])
    if starts_with_prose:
        lines[0] = f"**{label}:** {lines[0]}"
    else:
        lines = [f"**{label}:**", ""] + lines
    return [["> " + ln if ln else ">" for ln in lines]]


def image(conv: _Converter, kind: str, argument: str, body: list[str], lineno: int) -> list[Block]:
    options, content, offset = split_options(body)
    uri = "".join(argument.split())
    if conv.resolve_uri is not None:
        uri = conv.resolve_uri(uri)
    caption_blocks = conv.blocks(content, lineno + 1 + offset) if kind == "figure" else []
    alt = options.get("alt") or (" ".join(caption_blocks[0]) if caption_blocks else "") or uri.rsplit("/", 1)[-1]
    alt = re.sub(r"[\[\]]", "", alt).strip()
    picture = f"![{alt}]({uri})"
    if options.get("target"):
        picture = f"[{picture}]({options['target']})"
    return [[picture]] + caption_blocks


def table_directive(conv: _Converter, kind: str, title: str, body: list[str], lineno: int) -> list[Block]:
    options, content, offset = split_options(body)
    head = [paragraph_lines(f"**{conv.inline(title)}**")] if title else []
    try:
        if kind == "list-table":
            return head + [list_table(content, options, conv.cell)]
        rows = [[conv.cell([c]).replace("|", "\\|") for c in row]
                for row in csv.reader(io.StringIO("\n".join(content)), skipinitialspace=True) if row]
        if options.get("header"):
            header = next(csv.reader([options["header"]], skipinitialspace=True))
            return head + [pipe_table([conv.cell([h]) for h in header], rows)]
        if not rows:
            raise TableError("empty csv-table")
        return head + [pipe_table(rows[0], rows[1:])]
    except TableError as exc:
        conv.warn(conv.origin, lineno, f"malformed {kind} kept as text: {exc}")
        return head + [fence(content, "text")]


_NESTED_MEMBER = re.compile(r"^\s*\.\. auto(?:method|attribute|property)::\s*(.+?)\s*$")


def autodoc(conv: _Converter, name: str, argument: str, body: list[str], lineno: int) -> list[Block]:
    options, content, _ = split_options(body)
    if name == "autosummary":
        argument = "\n".join(ln.strip() for ln in content if ln.strip() and not ln.lstrip().startswith(":"))
    nested = [m.group(1) for ln in content if (m := _NESTED_MEMBER.match(ln))]
    if nested and name in ("autoclass", "autoexception") and options.get("members", "x").strip():
        # Sphinx documents `.. automethod:: build(rank, store)` in an autoclass body as a member of it.
        names = [n.split("(", 1)[0].strip() for n in nested]
        options = {**options, "members": ", ".join([*filter(None, options.get("members", "").split(",")), *names])}
    if conv.autodoc is None:
        conv.warn(conv.origin, lineno, f"{name} {argument.splitlines()[0] if argument else ''} dropped: "
                                       "no docstring resolver in this context".replace("  ", " "))
        return []
    markdown = conv.autodoc(name, argument, options, lineno)
    return [markdown.strip("\n").split("\n")] if markdown.strip() else []
