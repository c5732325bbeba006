"""What the reference files add to the catalog: each topic's rendered file with its sections (and their
upstream URLs) and the API entries it holds, api-drift.md, and the checks on the whole output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fsdp_skill.apidoc import drift
from fsdp_skill.apidoc.api_model import ApiDoc
from fsdp_skill.apidoc.api_render import to_api_entry, to_examples
from fsdp_skill.apidoc.autodoc import AutodocRegistry, Documented
from fsdp_skill.build.assemble import Chunk, sphinx_id, topic_body
from fsdp_skill.build.lint import problems as lint_problems
from fsdp_skill.build.render import SectionSpan, SourceRow, render_reference, split_sections
from fsdp_skill.build.topics import Topic
from fsdp_skill.core.catalog import ApiEntry, Catalog, Example, Reference, Section, Source

__all__ = ["DRIFT_FILE", "Collected", "add_drift", "add_topic", "problems_and_coverage"]

DRIFT_FILE = "api-drift.md"


def _source_rows(chunks: list[Chunk], records: dict[str, Source]) -> list[SourceRow]:
    rows: list[SourceRow] = []
    for source_id in dict.fromkeys(c.source for c in chunks if c.source):
        record = records[source_id]
        url = f"https://github.com/{record.repo}/blob/{record.commit}/{record.path}" if record.commit else None
        rows.append(SourceRow(record.repo, record.path, record.commit, record.licence, url))
    return rows


def _chunk_at(ranges: list[tuple[int, int, Chunk]], body_line: int) -> Chunk | None:
    for start, end, chunk in ranges:
        if start <= body_line < end:
            return chunk
    return None


def _section_url(chunk: Chunk | None, anchor: str, title: str, is_api: bool, level: int) -> str | None:
    if chunk is None or chunk.page_url is None:
        return None
    if is_api:
        return f"{chunk.page_url}#{anchor}"
    if level <= 2 and chunk.source is not None and chunk.markdown.lstrip().startswith(f"## {title}"):
        return chunk.page_url  # a page's own title: the page itself
    return f"{chunk.page_url}#{sphinx_id(title)}"


def _upstream_anchor(doc: ApiDoc) -> str:
    """Sphinx's id for an entry: the spelling the page documented it under (not ours); a module's
    target is 'module-<name>'."""
    return f"module-{doc.documented_name}" if doc.kind == "module" else doc.documented_name


@dataclass
class Collected:
    """The generated files and what they add to the catalog, in file order."""

    files: dict[str, str] = field(default_factory=dict)
    references: list[Reference] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    api: list[ApiEntry] = field(default_factory=list)
    examples: list[Example] = field(default_factory=list)
    placed: set[str] = field(default_factory=set)  # anchors already made API entries

    def add_file(self, name: str, title: str, description: str, sources: list[str], text: str) -> None:
        self.files[name] = text
        self.references.append(
            Reference(
                name=name,
                title=title,
                description=description,
                sources=sources,
                lines=len(text.splitlines()),
                tokens=len(text) // 4,
            )
        )

    def add_section(self, reference: str, span: SectionSpan, source: str | None = None, url: str | None = None) -> None:
        self.sections.append(
            Section(
                id=f"{reference}#{span.anchor}",
                reference=reference,
                anchor=span.anchor,
                title=span.title,
                level=span.level,
                breadcrumb=list(span.breadcrumb),
                markdown=span.markdown,
                source=source,
                line=span.line,
                url=url,
            )
        )

    def place_api_entry(self, documented: Documented, reference: str, anchor: str, url: str | None) -> None:
        """The entry and its examples, once: the first section carrying the anchor is where it lives."""
        if anchor in self.placed:
            return
        self.placed.add(anchor)
        examples = to_examples(documented.doc, reference=reference, anchor=anchor, source=documented.source)
        self.examples.extend(examples)
        entry = to_api_entry(
            documented.doc, reference=reference, anchor=anchor, url=url, example_ids=[e.id for e in examples]
        )
        self.api.append(entry)


def add_topic(
    out: Collected,
    topic: Topic,
    chunks: list[Chunk],
    records: dict[str, Source],
    torch_version: str,
    registry: AutodocRegistry,
) -> None:
    """One reference file: its text, its sections (with upstream URLs) and the API entries it holds."""
    body, ranges = topic_body(chunks)
    rendered = render_reference(topic.title, topic.description, _source_rows(chunks, records), torch_version, body)
    name = topic.file_name
    sources_used = list(dict.fromkeys(c.source for c in chunks if c.source))
    out.add_file(name, topic.title.replace("`", ""), topic.description, sources_used, rendered.text)
    for span in split_sections(rendered.text):
        chunk = _chunk_at(ranges, span.line - 1 - rendered.body_start)
        documented = registry.entries.get(span.anchor)
        upstream_anchor = _upstream_anchor(documented.doc) if documented is not None else span.anchor
        url = _section_url(chunk, upstream_anchor, span.title, documented is not None, span.level)
        out.add_section(name, span, chunk.source if chunk else None, url)
        if documented is not None:
            out.place_api_entry(documented, name, span.anchor, url)


def _upstream_names(registry: AutodocRegistry) -> set[str]:
    """What upstream documents: entries from pages, and docstring-only parts that name an upstream page
    (DDP's generated page); not the names this project adds itself. Drift compares torch with these."""
    names: set[str] = set()
    for documented in registry.entries.values():
        if documented.page_url is not None:
            names.add(documented.doc.qualified_name)
            names.update(documented.doc.aliases)
    return names


def add_drift(out: Collected, registry: AutodocRegistry, torch_version: str, docs_ref: str, extra: str = "") -> None:
    """api-drift.md; `extra`: sections appended to it (the code names without an API entry)."""
    drift_text = drift.build_drift(
        _upstream_names(registry),
        torch_version=torch_version,
        ref=docs_ref,
        missing=[(m.qualified_name, m.where) for m in registry.missing],
        import_failures={m.qualified_name: m.why for m in registry.missing if m.why},
        entries={d.doc.qualified_name for d in registry.entries.values() if d.page_url is None},
    )
    text = (drift_text if drift_text.endswith("\n") else drift_text + "\n") + extra
    spans = split_sections(text)
    description = (
        f"Public names of torch {torch_version} in the covered modules that no page documents, "
        "and documented names that are deprecated or missing."
    )
    out.add_file(DRIFT_FILE, spans[0].title if spans else "API drift", description, [], text)
    for span in spans:
        out.add_section(DRIFT_FILE, span)


def problems_and_coverage(files: dict[str, str], catalog: Catalog) -> tuple[list[str], str]:
    """Lint problems of the markdown files, plus every public name that is neither an API entry nor an
    api-drift.md row (each must be findable); and the coverage line saying how the names are accounted for."""
    found = [problem for name, text in files.items() if name.endswith(".md") for problem in lint_problems(name, text)]
    catalog_names = {name for entry in catalog.api for name in (entry.qualified_name, *entry.aliases)}
    total, as_entries, drift_only, uncovered = drift.coverage(catalog_names, files[DRIFT_FILE])
    found.extend(f"{DRIFT_FILE}: public name {name} is neither an API entry nor listed with a reason"
                 for name in uncovered)
    covered = (
        f"{total} public names: {as_entries} API entries + {drift_only} only in {DRIFT_FILE}, "
        f"{len(uncovered)} uncovered"
    )
    return found, covered
