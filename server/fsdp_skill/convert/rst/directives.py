"""Explicit markup (`.. name:: arg`, targets, comments, footnotes) → markdown blocks.

What each directive name is comes from the table shared with MyST (`convert.sphinx_directives`):
rendered, handed to the autodoc hook, dropped silently, or unknown (a warning naming the page and
line; its content kept as prose). Nothing is ever echoed as RST.
"""

from __future__ import annotations

import csv
import io
import re

from fsdp_skill.convert.markdown import admonition as markdown_admonition
from fsdp_skill.convert.rst.blocks import (
    Block,
    dedent,
    fence,
    join_blocks,
    normalize_language,
    paragraph_lines,
)
from fsdp_skill.convert.rst.context import RstContext
from fsdp_skill.convert.rst.tables import TableError, list_table, pipe_table
from fsdp_skill.convert.sphinx_directives import (
    ADMONITION_TITLES,
    CODE_LANGUAGES,
    VERSION_NOTE_TITLES,
    Kind,
    kind_of,
    short_name,
)

_DIRECTIVE = re.compile(r"^\.\.\s+([\w][\w:.+-]*)::(?:\s+(.*))?$|^\.\.\s+([\w][\w:.+-]*)::(.*)$")
# ".. note:", ".. warning" and ".. warning ::" (a space before the colons) are comments to docutils.
_SLOPPY_ADMONITION = re.compile(rf"^\.\.\s+({'|'.join(ADMONITION_TITLES)})\s*:{{0,2}}\s*(.*)$", re.IGNORECASE)
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


def explicit_markup(conv: RstContext, block: list[str], lineno: int) -> list[Block]:
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
        return admonition(conv, ADMONITION_TITLES[sloppy.group(1).lower()], [sloppy.group(2)] + body, lineno)
    return []  # a comment


def directive(conv: RstContext, name: str, argument: str, body: list[str], lineno: int) -> list[Block]:
    """One `.. name:: argument` block, by what the shared table says `name` is."""
    kind, short = kind_of(name), short_name(name)
    if kind is Kind.ADMONITION:
        return _admonition_directive(conv, short, argument, body, lineno)
    if kind is Kind.VERSION_NOTE:
        version, _, text = argument.partition(" ")
        _, content, _ = split_options(body)
        label = f"{VERSION_NOTE_TITLES[short]} {version}".strip()
        return admonition(conv, label, ([text] if text else []) + content, lineno)
    if kind is Kind.CODE:
        return _code(conv, short, argument, body)
    if kind is Kind.MATH:
        _, content, _ = split_options(body)
        return [fence(([argument] if argument else []) + content, "math")]
    if kind is Kind.IMAGE:
        return image(conv, short, argument, body, lineno)
    if kind is Kind.TABLE:
        return table_directive(conv, short, argument, body, lineno)
    if kind in (Kind.AUTODOC, Kind.MODULE):
        return autodoc(conv, "currentmodule" if kind is Kind.MODULE else short, argument, body, lineno)
    if kind is Kind.DROPPED:
        return []
    _, content, offset = split_options(body)
    if kind in (Kind.CONTAINER, Kind.EVAL_RST):
        return conv.blocks(content, lineno + 1 + offset)
    if kind is Kind.TITLED_CONTAINER:
        title = conv.inline(argument).strip()
        head = [paragraph_lines(f"**{title}**")] if title else []
        return head + conv.blocks(content, lineno + 1 + offset)
    if kind is Kind.DESCRIPTION:
        head = [paragraph_lines(f"**`{argument}`**")] if argument else []
        return head + conv.blocks(content, lineno + 1 + offset)
    conv.warn(conv.origin, lineno, f"unknown directive {name}")
    head = [paragraph_lines(conv.inline(argument))] if argument else []
    return head + conv.blocks(content, lineno + 1 + offset)


def _admonition_directive(conv: RstContext, name: str, argument: str, body: list[str], lineno: int) -> list[Block]:
    """`.. note:: text` (the argument is the first line of the body); `.. admonition:: Title` (the
    argument is the label)."""
    if name == "admonition":
        _, content, _ = split_options(body)
        return admonition(conv, conv.inline(argument).strip() or "Note", content, lineno)
    _, content, _ = split_options(body) if not argument else ({}, body, 0)
    return admonition(conv, ADMONITION_TITLES[name], ([argument] if argument else []) + content, lineno)


def _code(conv: RstContext, name: str, argument: str, body: list[str]) -> list[Block]:
    options, content, _ = split_options(body)
    declared = CODE_LANGUAGES[name]
    language = declared or argument.split()[0] if (declared or argument) else None
    blocks: list[Block] = []
    if options.get("caption"):
        blocks.append(paragraph_lines(f"*{conv.inline(options['caption'])}*"))
    blocks.append(fence(content, normalize_language(language, content)))
    return blocks


def admonition(conv: RstContext, label: str, content: list[str], lineno: int) -> list[Block]:
    """The body converted, then quoted under its label (`convert.markdown.admonition`)."""
    return [markdown_admonition(label, join_blocks(conv.blocks(dedent(content), lineno))).split("\n")]


def image(conv: RstContext, kind: str, argument: str, body: list[str], lineno: int) -> list[Block]:
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


def table_directive(conv: RstContext, kind: str, title: str, body: list[str], lineno: int) -> list[Block]:
    options, content, _offset = split_options(body)
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


def autodoc(conv: RstContext, name: str, argument: str, body: list[str], lineno: int) -> list[Block]:
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
