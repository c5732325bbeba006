"""docutils as a test oracle for the RST converter: Sphinx's roles and directives registered as stubs.

docutils alone knows neither Sphinx's directives (`code-block`, `autoclass`, `versionadded`, …) nor
its roles (`:func:`, `:ref:`, …) and reports each as an error. Here every name the converter knows
(`convert.sphinx_directives`, `convert.rst.inline.KNOWN_ROLES`) is registered with a stub that
builds the doctree nodes Sphinx would: code directives a `literal_block` holding the code, bodies of
admonitions and containers parsed as nested RST, autodoc and navigation nothing, roles a `literal`
(Python objects, shown as Sphinx shows them) or text. No Sphinx dependency: docutils only.

`parse(text)` returns the doctree and the system messages at level ERROR or above; the tests then
compare what the converter emits with the doctree (headings, code blocks, tables).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

import docutils.core
import docutils.utils
from docutils import nodes
from docutils.parsers.rst import Directive, directives, roles
from docutils.parsers.rst.languages import en as rst_en

from fsdp_skill.convert.rst.inline import KNOWN_ROLES
from fsdp_skill.convert.sphinx_directives import Kind, kind_of, known_directives

ERROR = 3  # docutils' report level for errors


class _AnyOptions(dict[str, Any]):
    """An option_spec that accepts every option (Sphinx directives take many docutils does not know)."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> Any:
        return directives.unchanged


class _Stub(Directive):
    optional_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec: ClassVar[dict[str, Any]] = _AnyOptions()


class _Nothing(_Stub):
    """autodoc, module tracking, navigation: nothing in the doctree (the converter hands them to a hook or
    drops them)."""

    def run(self) -> list[nodes.Node]:
        return []


class _Code(_Stub):
    """code-block and friends: one literal_block with the content as written. One argument without
    whitespace, as Sphinx's CodeBlock: code written on the lines right under the directive (no
    blank line) is then an error, as it is in Sphinx."""

    final_argument_whitespace = False

    def run(self) -> list[nodes.Node]:
        code = "\n".join(self.content)
        return [nodes.literal_block(code, code)]


class _Body(_Stub):
    """Admonitions Sphinx adds, version notes, containers, descriptions: the content parsed as RST."""

    def run(self) -> list[nodes.Node]:
        node = nodes.container()
        if self.arguments and kind_of(self.name) in (Kind.VERSION_NOTE, Kind.ADMONITION):
            node += nodes.paragraph(self.arguments[0], self.arguments[0])
        self.state.nested_parse(self.content, self.content_offset, node)
        return [node]


# docutils' own directives that mean the same in Sphinx (the rest are replaced: `class` is py:class
# in Sphinx, `include` would read files, `code` and `parsed-literal` become plain literal blocks).
_NATIVE = {"note", "warning", "tip", "important", "attention", "danger", "hint", "caution", "error", "admonition",
           "math", "image", "figure", "list-table", "csv-table", "raw", "role", "meta", "contents", "default-role",
           "topic", "sidebar", "rubric", "table", "compound", "container"}


def _stub_for(name: str) -> type[Directive]:
    kind = kind_of(name)
    if kind is Kind.CODE:
        return _Code
    if kind in (Kind.AUTODOC, Kind.MODULE, Kind.DROPPED):
        return _Nothing
    return _Body


def _python_role_text(role: str, text: str) -> str:
    """What Sphinx shows for a Python cross-reference: the title, else the target (`~` keeps the
    last part), with "()" after functions and methods (add_function_parentheses)."""
    match = re.match(r"^(.*?)\s*<([^<>]+)>$", text, re.DOTALL)
    if match and match.group(1):
        return match.group(1)
    target = (match.group(2) if match else text).lstrip("!")
    if target.startswith("~"):
        target = target[1:].rsplit(".", 1)[-1]
    target = target.lstrip(".")
    if role in ("func", "meth") and not target.endswith(")"):
        target += "()"
    return target


_PYTHON_ROLES = {"func", "meth", "class", "attr", "mod", "obj", "data", "exc", "const", "any", "type", "property"}


def _role(name: str, rawtext: str, text: str, lineno: int, inliner: Any, options: Any = None,
          content: Any = None) -> tuple[list[nodes.Node], list[nodes.system_message]]:
    short = name.split(":", 1)[1] if name.startswith(("py:", "std:")) else name
    if short in _PYTHON_ROLES:
        shown = _python_role_text(short, docutils.utils.unescape(text))
        return [nodes.literal(rawtext, shown)], []
    title = re.match(r"^(.*?)\s*<([^<>]+)>$", text, re.DOTALL)
    shown = title.group(1) if title and title.group(1) else docutils.utils.unescape(text)
    return [nodes.inline(rawtext, shown)], []


_registered = False


def register() -> None:
    """Register every Sphinx directive and role the converter knows (idempotent)."""
    global _registered
    if _registered:
        return
    for name in known_directives():
        if name not in _NATIVE:
            for spelled in (name, f"py:{name}", f"std:{name}", f"rst:{name}"):
                directives.register_directive(spelled, _stub_for(name))
    native_roles = set(rst_en.roles) | set(rst_en.roles.values())
    for name in KNOWN_ROLES:
        for spelled in (name, f"py:{name}", f"std:{name}"):
            if spelled not in native_roles:
                roles.register_local_role(spelled, _role)
    _registered = True


@dataclass(frozen=True)
class Parsed:
    doctree: nodes.document
    errors: list[str]  # "line N: message" for each system message at level ERROR or above


def parse(text: str, source: str = "<rst>") -> Parsed:
    """Parse RST as Sphinx would (its roles and directives known), collecting errors instead of printing them."""
    register()
    messages: list[nodes.system_message] = []
    settings = {
        "report_level": 5,  # print nothing; collect below
        "halt_level": 5,
        "doctitle_xform": False,  # keep the first title a section, as the converter's first heading
        "sectsubtitle_xform": False,
        "file_insertion_enabled": False,
        "raw_enabled": True,
        "warning_stream": False,
    }
    doctree = docutils.core.publish_doctree(text, source_path=source, settings_overrides=settings)
    messages = [m for m in doctree.findall(nodes.system_message) if m["level"] >= ERROR]
    messages += [m for m in doctree.parse_messages + doctree.transform_messages if m["level"] >= ERROR
                 and m not in messages]
    return Parsed(doctree, [f"line {m.get('line', '?')}: {m.astext()}" for m in messages])


def headings(doctree: nodes.document) -> list[tuple[int, str]]:
    """(level, title text) of every section, in document order; level 1 is the outermost."""
    out: list[tuple[int, str]] = []
    for section in doctree.findall(nodes.section):
        level, parent = 1, section.parent
        while parent is not None:
            level += isinstance(parent, nodes.section)
            parent = parent.parent
        title = section.next_node(nodes.title)
        out.append((level, " ".join(title.astext().split()) if title else ""))
    return out


def code_blocks(doctree: nodes.document) -> list[str]:
    """The text of every literal and doctest block, in document order (not those quoting the
    source in a system message)."""
    return [
        node.astext()
        for node in doctree.findall(lambda n: isinstance(n, (nodes.literal_block, nodes.doctest_block)))
        if not _inside(node, nodes.system_message)
    ]


def _inside(node: nodes.Node, kind: type[nodes.Node]) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, kind):
            return True
        parent = parent.parent
    return False


@dataclass(frozen=True)
class Table:
    header: list[list[str]]  # header rows; a label spanning columns is repeated in each
    body: list[list[str]]  # body rows; a cell spanning columns is followed by empty cells


def tables(doctree: nodes.document) -> list[Table]:
    """Every table's cell texts, header rows and body rows apart."""
    out: list[Table] = []
    for table in doctree.findall(nodes.table):
        header: list[list[str]] = []
        body: list[list[str]] = []
        for row in table.findall(nodes.row):
            in_header = _inside(row, nodes.thead)
            cells: list[str] = []
            for entry in row.children:
                text = " ".join(_text(entry).split())
                span = int(entry.get("morecols", 0))
                cells.extend([text] * (span + 1) if in_header else [text] + [""] * span)
            (header if in_header else body).append(cells)
        out.append(Table(header, body))
    return out




def _text(node: nodes.Element) -> str:
    """The node's text without the system messages docutils attaches in place (INFO notes in cells)."""
    copy = node.deepcopy()
    for message in list(copy.findall(nodes.system_message)):
        message.parent.remove(message)
    return copy.astext()
