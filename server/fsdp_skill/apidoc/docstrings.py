"""Resolve autodoc directives against the installed torch into structured API docs.

Build time only (imports torch through introspect). `document()` follows Sphinx's rules for
which objects a directive covers (relative names against the current module; `:members:`,
`:undoc-members:`, `:special-members:`, `:exclude-members:`), splits each docstring into its
parts (docstring_sections), converts prose with the RST converter, and parses `>>>` examples.
The ApiDoc model lives in api_model; rendering to markdown and to catalog models in api_render.
"""

from __future__ import annotations

import enum
import inspect
import re
from collections.abc import Callable
from typing import Any

from fsdp_skill.apidoc import deprecation, introspect
from fsdp_skill.apidoc.api_model import DESCRIPTION_HEADING_BASE, ApiDoc, MissingName
from fsdp_skill.apidoc.docstring_sections import RawDocstring, RawItem, split_docstring
from fsdp_skill.apidoc.doctests import parse_doctest
from fsdp_skill.convert.markdown import plain_text
from fsdp_skill.convert.rst.converter import Warn, rst_to_markdown
from fsdp_skill.convert.rst.inline import inline_to_markdown
from fsdp_skill.core.catalog import Parameter
from fsdp_skill.core.markdown import markdown_parser


class _Context:
    def __init__(self, origin: str, line: int, warn: Warn) -> None:
        self.origin, self.line, self.warn = origin, line, warn

    def convert(self, rst: str, name: str, heading_base: int = DESCRIPTION_HEADING_BASE) -> str:
        def warn_in_docstring(_origin: str, line: int, message: str) -> None:
            self.warn(self.origin, self.line, f"docstring of {name}, line {line}: {message}")

        rst = markdown_fences_as_code_blocks(rst)
        return rst_to_markdown(rst, origin=name, warn=warn_in_docstring, heading_base=heading_base).strip()


_MARKDOWN_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<marker>`{3,}|~{3,})(?P<language>[\w+-]*)[ \t]*$")


def markdown_fences_as_code_blocks(rst: str) -> str:
    """Markdown code fences inside an RST docstring (torch has some: `FSDPModule.set_symm_mem_for_comm`)
    as `.. code-block::` directives; RST would read them as a paragraph and flatten the code."""
    lines = rst.split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        opening = _MARKDOWN_FENCE.match(lines[index])
        closing = None
        if opening:
            marker = opening.group("marker")
            closing = next(
                (
                    j
                    for j in range(index + 1, len(lines))
                    if lines[j].strip() == marker and lines[j].startswith(opening.group("indent"))
                ),
                None,
            )
        if opening is None or closing is None:
            out.append(lines[index])
            index += 1
            continue
        indent = opening.group("indent")
        out += ["", f"{indent}.. code-block:: {opening.group('language') or 'text'}", ""]
        out += [f"{indent}   {line[len(indent) :]}" if line.strip() else "" for line in lines[index + 1 : closing]]
        out.append("")
        index = closing + 1
    return "\n".join(out)


def _split_options_list(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


_EXPLICIT_SIGNATURE = re.compile(r"\s*\(.*\)\s*(->.*)?$", re.DOTALL)


def document(
    directive: str,
    argument: str,
    *,
    options: dict[str, str],
    current_module: str | None,
    origin: str,
    line: int,
    warn: Warn,
    missing: Callable[[MissingName], None] | None = None,
) -> list[ApiDoc]:
    """The ApiDocs an autodoc directive stands for.

    A name that does not import is left out and reported to `missing` (API drift), or as a warning
    when no `missing` is given.
    """
    ctx = _Context(origin, line, warn)
    names = [n.strip() for n in argument.split("\n") if n.strip()] if directive == "autosummary" else [argument.strip()]
    docs: list[ApiDoc] = []
    for name in names:
        # Sphinx lets a directive spell the signature itself (`autoclass:: Handler()`,
        # `automethod:: build(rank, store)`); the object is the name before it.
        name = _EXPLICIT_SIGNATURE.sub("", name)
        resolved = introspect.resolve(name, current_module)
        if resolved is None:
            event = MissingName(
                directive, name, current_module, origin, line, introspect.import_failure(name, current_module)
            )
            if missing is not None:
                missing(event)
            else:
                warn(origin, line, event.message())
            continue
        kind = introspect.kind_of(resolved.obj, resolved.parent)
        doc = build_doc(resolved.qualified_name, resolved.obj, kind, resolved.parent, ctx)
        if directive != "autosummary" and ("members" in options or "undoc-members" in options):
            doc.members = _members(doc, resolved.obj, kind, options, ctx)
        docs.append(doc)
    return docs


def _members(doc: ApiDoc, obj: Any, kind: str, options: dict[str, str], ctx: _Context) -> list[ApiDoc]:
    explicit = _split_options_list(options.get("members"))
    excluded = set(_split_options_list(options.get("exclude-members")))
    undoc = "undoc-members" in options
    special_value = options.get("special-members")
    special = set(_split_options_list(special_value)) if special_value else None
    members: list[ApiDoc] = []
    if kind == "module":
        public = getattr(obj, "__all__", None)
        candidates = explicit or list(public if public is not None else vars(obj))
        for name in candidates:
            value = getattr(obj, name, None)
            if name in excluded or name.startswith("_") or value is None or inspect.ismodule(value):
                continue
            if (
                not explicit
                and public is None
                and getattr(value, "__module__", doc.qualified_name) != doc.qualified_name
            ):
                continue
            if not (undoc or explicit or introspect.raw_docstring(value)):
                continue
            member_kind = introspect.kind_of(value, obj)
            child = build_doc(
                f"{doc.qualified_name}.{name}", value, member_kind, obj, ctx, f"{doc.documented_name}.{name}"
            )
            if member_kind == "class":  # automodule's :members: applies to the classes it documents
                child.members = _members(
                    child, value, "class", {"members": "", **({"undoc-members": ""} if undoc else {})}, ctx
                )
            members.append(child)
        return members
    if kind != "class":
        return members
    names = explicit or list(vars(obj))
    if special_value is not None and "special-members" in options and not special:
        special = {n for n in vars(obj) if n.startswith("__") and n.endswith("__")}
    for name in names:
        is_special = name.startswith("__") and name.endswith("__")
        if name in excluded or (name.startswith("_") and not (is_special and special and name in special)):
            continue
        raw = inspect.getattr_static(obj, name, None)
        if raw is None or isinstance(raw, type) and name.startswith("_"):
            continue
        value = raw if isinstance(raw, property) else getattr(obj, name, raw)
        if isinstance(raw, (staticmethod, classmethod)):
            value = raw.__func__
        has_doc = bool(_own_docstring(value, raw))
        if not (has_doc or undoc or explicit):
            continue
        if _is_enum_member(obj, value) and not undoc:
            continue
        member_kind = introspect.kind_of(value, obj)
        members.append(
            build_doc(f"{doc.qualified_name}.{name}", value, member_kind, obj, ctx, f"{doc.documented_name}.{name}")
        )
    return members


def _own_docstring(value: Any, raw: Any) -> str:
    if isinstance(raw, property):
        return introspect.raw_docstring(raw)
    if callable(value) or inspect.isdatadescriptor(raw):
        return introspect.raw_docstring(value)
    return ""  # plain class attributes only carry their type's docstring


def _is_enum_member(cls: Any, value: Any) -> bool:
    return isinstance(value, cls) if isinstance(cls, type) and hasattr(cls, "__members__") else False


def build_doc(
    qualified_name: str, obj: Any, kind: str, parent: Any, ctx: _Context, documented_name: str | None = None
) -> ApiDoc:
    """documented_name: the page's spelling when it differs from qualified_name (a member of a class
    renamed to its public path); module-level objects are renamed here."""
    documented_name = documented_name or qualified_name
    if kind in ("function", "class", "data"):
        qualified_name = introspect.public_path(qualified_name, obj, parent)
    short = qualified_name.rsplit(".", 1)[-1]
    text = introspect.raw_docstring(obj)
    signature = None
    params_sig: list[tuple[str, str | None, str | None]] = []
    if kind == "class" and isinstance(obj, enum.EnumMeta):
        # Enum's metaclass __call__ (value, names=None, *, module=None, ...) is not this class's API:
        # it is looked up by value, and what a reader needs is the list of members.
        signature = introspect.format_signature(qualified_name, [("value", None, None)], None)
    elif kind in ("function", "method", "class"):
        target = obj
        inspected = introspect.signature_from_inspect(target, drop_first=kind == "method")
        if kind == "class" and inspected is None:
            init = getattr(obj, "__init__", None)
            pybind_sigs, _ = introspect.split_pybind_doc(getattr(init, "__doc__", "") or "", "__init__")
            if pybind_sigs:
                inspected = introspect.parse_pybind_signature(pybind_sigs[0])
        pybind_sigs, rest = introspect.split_pybind_doc(text, short)
        if pybind_sigs:
            text = rest
            if inspected is None:
                inspected = introspect.parse_pybind_signature(pybind_sigs[0])
        if inspected is not None:
            params_sig, ret = inspected
            if kind == "class":
                ret = None
            signature = introspect.format_signature(qualified_name, params_sig, ret)
    elif kind == "property" and isinstance(obj, property) and obj.fget is not None:
        inspected = introspect.signature_from_inspect(obj.fget, drop_first=True)
        ret_type = inspected[1] if inspected else None
        signature = f"{qualified_name}: {ret_type}" if ret_type else None
    raw = split_docstring(text)
    module = qualified_name.rsplit(".", 1)[0] if kind != "module" else qualified_name
    if kind in ("method", "property", "attribute"):
        module = module.rsplit(".", 1)[0]
    doc = ApiDoc(
        qualified_name=qualified_name, kind=kind, module=module, signature=signature, documented_name=documented_name
    )
    _fill_from_docstring(doc, raw, params_sig, ctx)
    if kind == "class" and isinstance(obj, enum.EnumMeta) and obj.__members__:
        members: dict[str, enum.Enum] = dict(obj.__members__)
        listing = "\n".join(
            f"- `{name}` = `{introspect.format_default(member.value)}`" + _member_deprecation(member, obj, name)
            for name, member in members.items()
        )
        doc.description = (doc.description + "\n\n**Members:**\n\n" + listing).strip()
    doc.deprecation = deprecation.detect(
        obj, raw.deprecated, raw.notes, "\n".join(raw.body), parent=parent, member=short
    )
    doc.aliases = introspect.aliases(qualified_name, obj, kind, also=[documented_name])
    return doc


def _member_deprecation(member: Any, cls: type, name: str) -> str:
    """" (deprecated: ...)" for an enum member the sources deprecate (FSDP1's `ShardingStrategy.NO_SHARD`)."""
    found = deprecation.from_source(member, cls, name)
    return f" (deprecated: {found.text(quote='`')})" if found is not None else ""


def _fill_from_docstring(
    doc: ApiDoc, raw: RawDocstring, params_sig: list[tuple[str, str | None, str | None]], ctx: _Context
) -> None:
    name = doc.qualified_name
    body = "\n".join(raw.body)
    doc.summary = _summary(raw.body)
    doc.lead, doc.description = split_lead(ctx.convert(body, name), doc.summary)
    for k, example in enumerate(parse_doctest(body)):
        doc.inline_examples.add(k)
        doc.examples.append(example)
    if raw.attributes:
        listing = "\n".join(_attribute_line(item, ctx, name) for item in raw.attributes)
        doc.description = (doc.description + "\n\n**Attributes:**\n\n" + listing).strip()
    doc.parameters = _parameters(raw.params, params_sig, ctx, name)
    for item in raw.params + raw.attributes + raw.raises:  # examples inside an argument's description
        start = len(doc.examples)
        doc.examples.extend(parse_doctest(item.description))
        doc.inline_examples.update(range(start, len(doc.examples)))
    if raw.returns or raw.return_type:
        text = ctx.convert("\n\n".join(raw.returns), name) if raw.returns else ""
        doc.returns = (f"`{raw.return_type}`" + (f": {text}" if text else "")) if raw.return_type else text
    doc.raises = [_item_markdown(item, ctx, name) for item in raw.raises]
    for label, note in raw.notes:
        doc.notes.append(f"**{label}:** {ctx.convert(note, name)}".strip())
        start = len(doc.examples)
        doc.examples.extend(parse_doctest(note))
        doc.inline_examples.update(range(start, len(doc.examples)))
    for section in raw.examples:
        doc.examples.extend(parse_doctest(section))
        prose = ctx.convert(section, name) if ">>>" not in section else ""
        if prose:  # a code example that is not a doctest: keep it in the description
            doc.description = (doc.description + "\n\n**Example:**\n\n" + prose).strip()


def _summary(body: list[str]) -> str:
    paragraph: list[str] = []
    for line in body:
        if not line.strip():
            if paragraph:
                break
            continue
        if line.lstrip().startswith((">>>", "..")) and not paragraph:
            continue
        if line.lstrip().startswith((">>>", ".. ")):
            break
        paragraph.append(line.strip())
    text = " ".join(paragraph).strip()
    if text.endswith("::"):
        text = text[:-1]
    return inline_to_markdown(text).strip()


def split_lead(markdown: str, summary: str) -> tuple[str, str]:
    """(first paragraph, the rest) when markdown opens with a paragraph saying `summary`, else ("", markdown).

    Docstring bodies open with their summary line; the catalog stores the summary on its own, so
    the description must not say it again (readers of the catalog would see it twice).
    """
    if not summary:
        return "", markdown
    tokens = markdown_parser().parse(markdown)
    first = next((t for t in tokens if t.level == 0 and t.map), None)  # the first block, whatever it is
    if first is None or first.type != "paragraph_open" or first.map is None:
        return "", markdown
    lines = markdown.split("\n")
    start, end = first.map
    paragraph = "\n".join(lines[start:end])
    if _words(plain_text_of(paragraph)) != _words(plain_text_of(summary)):
        return "", markdown
    return paragraph.strip(), "\n".join(lines[end:]).strip()


def _words(text: str) -> str:
    return " ".join(text.split())


def plain_text_of(markdown: str) -> str:
    """What a reader sees of one paragraph of inline markdown (markup dropped)."""
    tokens = markdown_parser().parse(markdown)
    return " ".join(plain_text(t) for t in tokens if t.type == "inline")


def _item_markdown(item: RawItem, ctx: _Context, name: str) -> str:
    description = ctx.convert(item.description, name) if item.description else ""
    if not item.name:
        return description
    return f"`{item.name}`" + (f": {description}" if description else "")


def _attribute_line(item: RawItem, ctx: _Context, name: str) -> str:
    description = ctx.convert(item.description, name) if item.description else ""
    description = description.replace("\n", "\n  ")
    type_text = f" ({inline_to_markdown(item.type)})" if item.type else ""
    return f"- `{item.name}`{type_text}" + (f": {description}" if description else "")


def _parameters(
    items: list[RawItem], params_sig: list[tuple[str, str | None, str | None]], ctx: _Context, name: str
) -> list[Parameter]:
    """Documented parameters in signature order, then documented extras, then undocumented
    signature parameters; types from the docs, else the annotation; defaults from the signature."""
    by_name: dict[str, RawItem] = {}
    for documented in items:
        for part in documented.name.split(","):
            if part.strip():
                by_name.setdefault(part.strip().lstrip("*"), documented)
    params: list[Parameter] = []
    seen: set[str] = set()
    sig = {p.lstrip("*"): (t, d) for p, t, d in params_sig if p not in ("*", "/")}
    order = [p.lstrip("*") for p, _, _ in params_sig if p not in ("*", "/")]
    for pname in order + [k for k in by_name if k not in sig]:
        item = by_name.get(pname)
        if pname in seen or (item is None and pname in ("args", "kwargs")):
            continue
        seen.add(pname)
        ann, default = sig.get(pname, (None, None))
        doc_type = item.type if item else None
        if doc_type:
            parts = [p.strip() for p in doc_type.split(",")]
            doc_type = ", ".join(p for p in parts if p.lower() not in ("optional",)) or None
        prefix = next((p[: len(p) - len(pname)] for p, _, _ in params_sig if p.lstrip("*") == pname), "")
        params.append(
            Parameter(
                name=prefix + pname,
                type=inline_to_markdown(doc_type).replace("`", "") if doc_type else ann,
                default=default,
                description=ctx.convert(item.description, name) if item and item.description else "",
            )
        )
    return params


__all__ = ["document", "build_doc", "split_lead", "plain_text_of"]
