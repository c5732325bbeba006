"""Split a cleaned docstring into its parts: Google / NumPy sections and Sphinx field lists.

Upstream mixes all three flavours (`Args:`, `Arguments:`, `Keyword args:`, `Returns:`, `Raises:`,
`Example::`, NumPy `Parameters` + dashes, `:param x:` / `:rtype:`), plus top-level `.. note::`,
`.. warning::` and `.. deprecated::` directives. This module only cuts the text into raw RST
pieces; docstrings.py converts the prose with the RST converter. Pure stdlib.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fsdp_skill.convert.rst.blocks import (
    dedent,
    guess_language,
    indent_of,
    indented_end,
)

_GOOGLE_HEADERS = {
    "args": "params", "arguments": "params", "parameters": "params", "params": "params",
    "keyword args": "params", "keyword arguments": "params", "kwargs": "params", "other parameters": "params",
    "returns": "returns", "return": "returns", "yields": "returns", "yield": "returns",
    "raises": "raises", "raise": "raises", "exceptions": "raises",
    "example": "examples", "examples": "examples", "example usage": "examples",
    "note": "note", "notes": "note", "warning": "warning", "warnings": "warning",
    "attributes": "attributes", "members": "attributes",
}
_HEADER = re.compile(r"^(?P<name>[A-Z][A-Za-z ]*?)\s*(?P<colons>::?)\s*$")
_NUMPY_UNDERLINE = re.compile(r"^-{3,}\s*$")
_FIELD = re.compile(r"^:(?P<kind>param|parameter|arg|argument|key|keyword|kwarg|type|returns?|rtype|raises?|"
                    r"except|exception|yields?|ytype)(?:\s+(?P<arg>[^:]+?))?:(?:\s+(?P<body>.*))?$")
# Also ".. warning ::" (space before the colons) and "warning:: text" (the ".." forgotten), both
# written upstream; a bare "Note::" with nothing after it is a Google section header instead.
_TOP_DIRECTIVE = re.compile(r"^(?:\.\.\s+(?P<name>note|warning|deprecated)\s*(?P<colons>::?|)"
                            r"|(?P<bare>note|warning)::(?=\s+\S))(?:\s+(?P<arg>.*))?$")


@dataclass
class RawItem:
    """One documented name (parameter, exception, attribute): RST pieces, not yet converted."""

    name: str
    type: str | None
    description: str


@dataclass
class RawDocstring:
    body: list[str] = field(default_factory=list)  # prose left for the description (RST lines)
    params: list[RawItem] = field(default_factory=list)
    attributes: list[RawItem] = field(default_factory=list)
    returns: list[str] = field(default_factory=list)
    return_type: str | None = None
    raises: list[RawItem] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)  # (label, RST body)
    deprecated: tuple[str, str] | None = None  # (version, RST body)
    examples: list[str] = field(default_factory=list)  # RST text of each Examples section


def split_name_type(head: str) -> tuple[str, str | None, str]:
    """'group (ProcessGroup, optional): The group' → ('group', 'ProcessGroup, optional', 'The group').
    Balanced parentheses, so types like Dict[str, Tuple[int, int]] or (a) in the text are safe."""
    match = re.match(r"^\s*(\*{0,2}[\w.]+(?:\s*,\s*\*{0,2}[\w.]+)*)\s*", head)
    if not match:
        return "", None, head.strip()
    name = match.group(1)
    rest = head[match.end():]
    type_text = None
    if rest.startswith("("):
        depth = 0
        for k, ch in enumerate(rest):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                type_text, rest = rest[1:k].strip(), rest[k + 1 :]
                break
        else:
            return "", None, head.strip()
    rest = rest.lstrip()
    if rest.startswith(":"):
        text = rest[1:].strip()
        if type_text is None:  # "name: (Type):" / "name: Type:" with the text below (upstream typos)
            typo = re.fullmatch(r"\((?P<paren>.+)\)\s*:|(?P<bare>[\w.]+(?:\[[\w., \[\]|]*\])?)\s*:", text)
            if typo and (typo.group("bare") or _balanced(typo.group("paren"))):
                return name, (typo.group("paren") or typo.group("bare")).strip(), ""
        return name, type_text, text
    if not rest and type_text is not None:
        return name, type_text, ""
    if rest.startswith(("-", "–")):  # "name -- description"
        return name, type_text, rest.lstrip("-– ").strip()
    return "", None, head.strip()


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += (ch in "([") - (ch in ")]")
        if depth < 0:
            return False
    return depth == 0


def parse_items(lines: list[str]) -> list[RawItem]:
    """Google items: `name (type): text` at the base indentation, continuation lines deeper.
    Also NumPy items (`name : type` then an indented description)."""
    lines = dedent(lines)
    items: list[RawItem] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        end = indented_end(lines, i + 1)
        continuation = dedent(lines[i + 1 : end])
        numpy = re.match(r"^(\*{0,2}[\w.]+(?:\s*,\s*\*{0,2}[\w.]+)*)\s+:\s+(.+)$", line)
        if numpy:  # "name : type" (space before the colon) is NumPy style
            name, type_text, first = numpy.group(1), numpy.group(2).strip(), ""
        else:
            name, type_text, first = split_name_type(line)
        if name:
            description = "\n".join([first] + continuation).strip() if first else "\n".join(continuation).strip()
            items.append(RawItem(name, type_text, description))
        elif items:  # prose inside the section: attach to the previous item
            items[-1].description += "\n\n" + "\n".join([line.strip()] + continuation)
        else:
            items.append(RawItem("", None, "\n".join([line.strip()] + continuation)))
        i = end
    return items


def _section_kind(lines: list[str], i: int) -> tuple[str, str, int] | None:
    """(kind, header name, body start) if lines[i] opens a Google or NumPy section."""
    line = lines[i]
    if indent_of(line) or not line.strip():
        return None
    nxt = lines[i + 1] if i + 1 < len(lines) else ""
    if _NUMPY_UNDERLINE.match(nxt) and line.strip().lower() in _GOOGLE_HEADERS:
        return _GOOGLE_HEADERS[line.strip().lower()], line.strip(), i + 2
    match = _HEADER.match(line)
    if match and match.group("name").lower() in _GOOGLE_HEADERS:
        kind = _GOOGLE_HEADERS[match.group("name").lower()]
        if kind == "examples" or (nxt.strip() and indent_of(nxt) > 0) or not nxt.strip():
            return kind, match.group("name"), i + 1
    return None


def _numpy_body_end(lines: list[str], start: int) -> int:
    """A NumPy section runs to the next NumPy header (name + dashes) or the end."""
    j = start
    while j < len(lines):
        if j + 1 < len(lines) and lines[j].strip() and _NUMPY_UNDERLINE.match(lines[j + 1]) and not indent_of(lines[j]):
            break
        j += 1
    while j > start and not lines[j - 1].strip():
        j -= 1
    return j


def split_docstring(text: str) -> RawDocstring:
    """Cut a cleaned (inspect.cleandoc) docstring into its parts."""
    lines = text.expandtabs(8).split("\n")
    doc = RawDocstring()
    i = 0
    while i < len(lines):
        line = lines[i]
        section = _section_kind(lines, i)
        if section:
            kind, header, start = section
            numpy = start == i + 2
            end = _numpy_body_end(lines, start) if numpy else indented_end(lines, start)
            body = dedent(lines[start:end])
            _store_section(doc, kind, header, body, double_colon=line.rstrip().endswith("::"))
            i = end
            continue
        field_match = _FIELD.match(line)
        if field_match:
            end = indented_end(lines, i + 1)
            _store_field(doc, field_match, dedent(lines[i + 1 : end]))
            i = end
            continue
        directive = _TOP_DIRECTIVE.match(line)
        if directive and (directive.group("colons") or directive.group("name") != "deprecated"):
            name = directive.group("name") or directive.group("bare")
            end = indented_end(lines, i + 1)
            if directive.group("bare"):  # not a directive to the author either: a paragraph
                end = next((j for j in range(i + 1, len(lines)) if not lines[j].strip()), len(lines))
            arg = (directive.group("arg") or "").strip()
            body_lines = dedent(lines[i + 1 : end])
            if name == "deprecated":
                version, _, rest = arg.partition(" ")
                doc.deprecated = (version, "\n".join(([rest] if rest else []) + body_lines).strip())
            else:
                label = name.capitalize()
                doc.notes.append((label, "\n".join(([arg] if arg else []) + body_lines).strip()))
            i = end
            continue
        doc.body.append(line)
        i += 1
    while doc.body and not doc.body[-1].strip():
        doc.body.pop()
    return doc


def _store_section(doc: RawDocstring, kind: str, header: str, body: list[str], *, double_colon: bool) -> None:
    if kind == "params":
        doc.params.extend(item for item in parse_items(body) if item.name or item.description)
    elif kind == "attributes":
        doc.attributes.extend(parse_items(body))
    elif kind == "returns":
        doc.returns.append("\n".join(body).strip())
    elif kind == "raises":
        doc.raises.extend(parse_items(body))
    elif kind == "examples":
        # "Example::" introduces a literal block; "Example:" followed by bare code means one too.
        has_doctest = any(ln.lstrip().startswith(">>>") for ln in body)
        literal = not has_doctest and (double_colon or guess_language(body) in ("python", "bash"))
        doc.examples.append(("::\n\n" + "\n".join("    " + ln for ln in body)) if literal else "\n".join(body))
    elif kind in ("note", "warning"):
        doc.notes.append((header.rstrip("s") if header.lower() != "notes" else "Note", "\n".join(body).strip()))


def _store_field(doc: RawDocstring, match: re.Match[str], continuation: list[str]) -> None:
    kind = match.group("kind")
    arg = (match.group("arg") or "").strip()
    body = "\n".join(([match.group("body")] if match.group("body") else []) + continuation).strip()
    if kind in ("param", "parameter", "arg", "argument", "key", "keyword", "kwarg"):
        parts = arg.split()
        name = parts[-1] if parts else ""
        type_text = " ".join(parts[:-1]) or None
        existing = next((p for p in doc.params if p.name == name), None)
        if existing:
            existing.description = body
            existing.type = existing.type or type_text
        else:
            doc.params.append(RawItem(name, type_text, body))
    elif kind == "type":
        existing = next((p for p in doc.params if p.name == arg), None)
        if existing:
            existing.type = body
        else:
            doc.params.append(RawItem(arg, body, ""))
    elif kind in ("returns", "return", "yields", "yield"):
        doc.returns.append(body)
    elif kind in ("rtype", "ytype"):
        doc.return_type = body
    else:
        doc.raises.append(RawItem(arg, None, body))
