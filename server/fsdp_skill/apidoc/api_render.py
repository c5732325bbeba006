"""ApiDoc → markdown for a reference file, and → catalog ApiEntry / Example models.

An entry's anchor is its qualified name, written as an explicit `<a id>` line so it survives any
heading-slug rules. Headings inside a docstring's description are shifted below the entry's own
heading by rewriting the `#` run of heading lines outside fences (no re-rendering).
"""

from __future__ import annotations

import re

from fsdp_skill.apidoc.api_model import ApiDoc
from fsdp_skill.convert.markdown import blockquote, shift_headings
from fsdp_skill.core.catalog import ApiEntry, Example
from fsdp_skill.core.markdown import code_fence
from fsdp_skill.core.quoting import table_cell

__all__ = ["is_bare_module", "render_api", "to_api_entry", "to_examples"]


def _is_simple(markdown: str) -> bool:
    """Fits a table cell: one paragraph, no fence, list, quote or table."""
    return "\n\n" not in markdown and not re.search(r"^(\s*[-*+] |\s*\d+\. |```|~~~|>|\|)", markdown, re.M)


def _parameters(doc: ApiDoc) -> list[str]:
    if not doc.parameters:
        return []
    lines = ["**Parameters**", ""]
    if all(_is_simple(p.description) for p in doc.parameters):
        lines += ["| name | type | default | description |", "|---|---|---|---|"]
        for p in doc.parameters:
            type_text = f"`{table_cell(p.type, fold_whitespace=True)}`" if p.type else ""
            default = f"`{table_cell(p.default, fold_whitespace=True)}`" if p.default is not None else ""
            description = table_cell(p.description, fold_whitespace=True)
            lines.append(f"| `{p.name}` | {type_text} | {default} | {description} |")
        return lines
    for p in doc.parameters:  # rich descriptions (lists, code) do not fit in a table
        head = f"- `{p.name}`"
        details = [f"`{p.type}`" if p.type else "", f"default `{p.default}`" if p.default is not None else ""]
        details = [d for d in details if d]
        if details:
            head += f" ({', '.join(details)})"
        body = p.description.split("\n") if p.description else []
        lines.append(head + (f": {body[0]}" if body else ""))
        lines += [f"  {ln}" if ln else "" for ln in body[1:]]
    return lines


def _quote(markdown: str) -> list[str]:
    return blockquote(markdown).split("\n")


def _fence(code: str) -> list[str]:
    return code_fence(code, "python").split("\n")


def _title(doc: ApiDoc) -> str:
    if doc.kind in ("method", "property", "attribute"):
        owner, _, member = doc.qualified_name.rpartition(".")
        return f"{owner.rsplit('.', 1)[-1]}.{member}"
    return doc.qualified_name


def is_bare_module(doc: ApiDoc) -> bool:
    """A module without a docstring: nothing to show under a heading of its own."""
    return doc.kind == "module" and not (
        doc.lead or doc.description or doc.signature or doc.parameters or doc.returns or doc.raises
        or doc.notes or doc.examples or doc.deprecation
    )


def render_api(doc: ApiDoc, *, level: int) -> str:
    """Markdown for one entry and its members (members one level deeper).

    A module without a docstring renders nothing of its own, as in Sphinx (whose automodule adds
    only an invisible target): a heading with nothing under it reads as a broken page, and an anchor
    left alone would name whatever heading follows it. Its members, if any, take its place in the
    outline; it is not a catalog entry (see autodoc).
    """
    if is_bare_module(doc):
        return "\n".join(render_api(member, level=level) for member in doc.members)
    anchor = f'<a id="{doc.qualified_name}"></a>'
    lines = [anchor, "", f"{'#' * min(level, 6)} {_title(doc)}", ""]
    if doc.signature:
        lines += [*_fence(doc.signature), ""]
    if doc.deprecation:
        lines += [*_quote(f"**Deprecated:** {doc.deprecation.text(quote='`')}"), ""]
    text = "\n\n".join(part for part in (doc.lead, doc.description) if part)  # the full docstring prose
    if text:
        lines += [shift_headings(text, level + 1), ""]
    parameters = _parameters(doc)
    if parameters:
        lines += [*parameters, ""]
    if doc.returns:
        lines += [f"**Returns:** {doc.returns}", ""]
    if doc.raises:
        lines += ["**Raises**", ""] + [f"- {r}".replace("\n", "\n  ") for r in doc.raises] + [""]
    for note in doc.notes:
        lines += [*_quote(note), ""]
    shown = [e for k, e in enumerate(doc.examples) if k not in doc.inline_examples]
    if shown:
        lines += ["**Example**" if len(shown) == 1 else "**Examples**", ""]
        for example in shown:
            if example.caption:
                lines += [example.caption, ""]
            lines += [*_fence(example.text), ""]
    text = "\n".join(lines).rstrip() + "\n"
    for member in doc.members:
        text += "\n" + render_api(member, level=level + 1)
    return text


def to_api_entry(doc: ApiDoc, *, reference: str, anchor: str, url: str | None, example_ids: list[str]) -> ApiEntry:
    """The catalog entry for doc itself (members are separate entries: see api_model.walk)."""
    return ApiEntry(
        qualified_name=doc.qualified_name,
        kind=doc.kind,  # type: ignore[arg-type]
        module=doc.module,
        signature=doc.signature,
        summary=doc.summary,
        description=doc.description,
        parameters=doc.parameters,
        returns=doc.returns,
        raises=doc.raises,
        notes=doc.notes,
        deprecation=doc.deprecation,
        examples=example_ids,
        reference=reference,
        anchor=anchor,
        url=url,
        aliases=doc.aliases,
    )


def to_examples(doc: ApiDoc, *, reference: str, anchor: str, source: str | None) -> list[Example]:
    """doc's `>>>` examples as catalog Examples, ids '<qualified_name>#<N>' from 1."""
    return [
        Example(
            id=f"{doc.qualified_name}#{n}",
            symbol=doc.qualified_name,
            reference=reference,
            anchor=anchor,
            code=example.code,
            steps=example.steps,
            world_size=example.world_size,
            device=example.device,  # type: ignore[arg-type]
            requires=example.requires,
            skip=example.skip,
            source=source,
            line=example.line,
        )
        for n, example in enumerate(doc.examples, start=1)
    ]
