"""`fsdp-skill regenerate`: upstream cache + installed torch → references/*.md, catalog.json, api-drift.md.

Offline and deterministic. The whole output is built in memory and checked (markdown-it parse,
artefact scan, closed and labelled fences, unique anchors) before anything is written; it is then
staged in a temp folder inside references/ and moved into place file by file with os.replace, so
a failed or interrupted run leaves the previous references intact. Files the runner or other
tools keep in references/ (verification.md, ...) are never touched; generated files a previous run
produced and this one does not (a topic removed from the map) are deleted.

Flow: declared pages (sources.py) → each page converted once (myst.py / rst.py, autodoc resolved
against torch by autodoc.py) → cut into topics (assemble.py, map in assets/topics.toml) → header,
TOC and sections (render.py) → API entries and examples (docstrings.py) → drift (drift.py) →
catalog (catalog.py) → index (index.py).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fsdp_skill.apidoc import drift
from fsdp_skill.apidoc.api_model import ApiDoc, MissingName
from fsdp_skill.apidoc.api_render import to_api_entry, to_examples
from fsdp_skill.apidoc.autodoc import AutodocRegistry, Documented
from fsdp_skill.build.assemble import Chunk, ConvertedPage, assemble, sphinx_id, topic_body
from fsdp_skill.build.lint import problems as lint_problems
from fsdp_skill.build.page_checks import PageChecker
from fsdp_skill.build.patterns import load_patterns
from fsdp_skill.build.render import (
    SectionSpan,
    SourceRow,
    drop_empty_sections,
    drop_quotes_matching,
    render_reference,
    split_sections,
)
from fsdp_skill.build.topics import TOPICS_FILE, Topic, TopicMap, load_topics
from fsdp_skill.convert.myst import PageAutodocHook, myst_to_markdown
from fsdp_skill.convert.rst import converter as rst
from fsdp_skill.core.catalog import (
    ApiEntry,
    Catalog,
    CatalogError,
    Example,
    Reference,
    Section,
    Source,
    dump_catalog,
    load_catalog,
)
from fsdp_skill.core.errors import UserError
from fsdp_skill.core.paths import references_dir, repo_root, writable_root
from fsdp_skill.core.scratch import make_scratch_dir
from fsdp_skill.core.torch_version import installed_torch_version, release_version
from fsdp_skill.search.index import build_index, stale_reason
from fsdp_skill.upstream import sources

__all__ = [
    "CATALOG_FILE",
    "DRIFT_FILE",
    "INDEX_FILE",
    "Output",
    "build_references",
    "cli_regenerate",
    "differences",
    "summary",
    "torch_release",
    "write_output",
]

DRIFT_FILE = "api-drift.md"
STAGING_PREFIX = ".regenerate-"
CATALOG_FILE = "catalog.json"
INDEX_FILE = "index.sqlite"
RST_PAGE_ENTRY_LEVEL = 3  # heading level of API entries an .rst page's autodoc renders
# Tutorial furniture: a note pointing at the page's own source on GitHub (the header names it).
EDIT_ON_GITHUB_NOTE = re.compile(r"View and edit this tutorial in \[github\]")


@dataclass
class Output:
    files: dict[str, str]  # name under references/ -> text
    catalog: Catalog
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    drift_names: int = 0
    coverage: str = ""  # how the covered modules' public names are accounted for
    missing: list[MissingName] = field(default_factory=list)  # documented names torch lacks


# --- environment -----------------------------------------------------------------------------------


def torch_release() -> str:
    """The installed torch's release ('2.13.0'), the version the references are stamped with."""
    version = installed_torch_version()
    if version is None:
        raise UserError(
            "torch is not installed: regenerate reads the API text from the installed torch's docstrings; "
            "install the torch the references are pinned to (pip install 'torch==2.13.*') and rerun"
        )
    return release_version(version)


def _docs_ref(root: Path, pages: list[sources.DeclaredSource]) -> str:
    """The ref recorded in the cache manifest for the torch docs pages ('v2.13.0', 'snapshot')."""
    declaration = sources.load_declaration(root)
    refs = {
        sources.manifest_entry(root, page).ref or "snapshot"
        for page in pages
        if declaration.repo(page.repo).pinned_to_torch
    }
    return "+".join(sorted(refs)) or "unknown"


def _site_resolver(page: sources.DeclaredSource, page_url: str | None) -> Callable[[str], str] | None:
    """Relative links and images of a page → absolute URLs on its rendered docs site."""
    if page_url is None:
        return None
    site = (
        page_url[: -len(f"{page.page}.html")]
        if page_url.endswith(f"{page.page}.html")
        else page_url.rsplit("/", 1)[0] + "/"
    )
    base = page_url.rsplit("/", 1)[0] + "/"

    def resolve(uri: str) -> str:
        if "://" in uri or uri.startswith(("#", "mailto:")):
            return uri
        if uri.startswith("/"):
            return site.rstrip("/") + uri
        from urllib.parse import urljoin

        return urljoin(base, uri)

    return resolve


# --- the build ----------------------------------------------------------------------------------------


class _Warnings:
    """Collects 'file:line: message' warnings. (A page naming an object the installed torch lacks is
    API drift, not a warning: the autodoc registry collects those as MissingName events.)"""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, origin: str, line: int, message: str) -> None:
        self.lines.append(f"{origin}:{line}: {message}")


def _convert_pages(
    root: Path,
    pages: list[sources.DeclaredSource],
    used: set[str],
    registry: AutodocRegistry,
    torch_version: str,
    warn: _Warnings,
) -> dict[str, tuple[str, str | None]]:
    """Source id -> (markdown with autodoc placeholders, rendered page URL), in declaration order."""
    converted: dict[str, tuple[str, str | None]] = {}
    for page in pages:
        if page.id not in used:
            continue
        origin = f"upstream/{page.dir}/{page.path}"
        checker = PageChecker(origin, warn)
        text = checker.source(sources.read_cached_bytes(root, page)[0], page.format)
        url = sources.docs_url(page, torch_version)
        hook = registry.hook(origin=origin, source=page.id, page_url=url)
        resolve = _site_resolver(page, url)
        if page.format == "myst":
            markdown = myst_to_markdown(text, origin=origin, warn=warn, autodoc=hook, resolve_uri=resolve)
        else:
            markdown = rst.rst_to_markdown(
                text, origin=origin, warn=warn, autodoc=_fixed_level(hook, RST_PAGE_ENTRY_LEVEL), resolve_uri=resolve
            )
        markdown = checker.converted(markdown)
        converted[page.id] = (drop_quotes_matching(markdown, EDIT_ON_GITHUB_NOTE), url)
    return converted


def _fixed_level(hook: PageAutodocHook, level: int) -> rst.AutodocHook:
    def resolve(directive: str, argument: str, options: dict[str, str], line: int) -> str:
        return hook(directive, argument, options, line, level)

    return resolve


def _toml_line(root: Path, name: str) -> int:
    """The topics.toml line naming `name`, so a warning about an autodoc part points at it."""
    try:
        lines = (root / TOPICS_FILE).read_text(encoding="utf-8").splitlines()
    except OSError:
        return 0
    return next((number for number, line in enumerate(lines, 1) if f'"{name}"' in line), 0)


def _autodoc_parts(
    root: Path, topic_map: TopicMap, registry: AutodocRegistry, torch_version: str
) -> dict[tuple[str, int], tuple[str, str | None]]:
    parts: dict[tuple[str, int], tuple[str, str | None]] = {}
    version = sources.docs_version(torch_version)
    for topic in topic_map.topics:
        for index, part in enumerate(topic.parts):
            if part.autodoc is None:
                continue
            url = part.url.format(version=version) if part.url else None
            hook = registry.hook(origin=TOPICS_FILE, source=None, page_url=url)
            level = 3 if part.title else 2
            markdown = "\n".join(
                hook(part.autodoc, name, dict(part.options), _toml_line(root, name), level) for name in part.names
            )
            parts[(topic.name, index)] = (markdown, url)
    return parts


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
class _Collected:
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


def _topic_chunks(
    root: Path,
    pages: list[sources.DeclaredSource],
    topic_map: TopicMap,
    registry: AutodocRegistry,
    torch_version: str,
    warn: _Warnings,
) -> dict[str, list[Chunk]]:
    """Every page converted and every autodoc part resolved, then cut into the topics' chunks."""
    used = _used_sources(topic_map)
    converted = _convert_pages(root, pages, used, registry, torch_version, warn)
    autodoc_parts = _autodoc_parts(root, topic_map, registry, torch_version)
    # Every directive is resolved now; render each object once, under its most public spelling.
    pages_md = {
        key: ConvertedPage(key, drop_empty_sections(registry.expand(markdown)), url)
        for key, (markdown, url) in converted.items()
    }
    autodoc_parts = {key: (registry.expand(markdown), url) for key, (markdown, url) in autodoc_parts.items()}
    return assemble(topic_map, pages_md, autodoc_parts)


def _used_sources(topic_map: TopicMap) -> set[str]:
    return {p.source for t in topic_map.topics for p in t.parts if p.source}


def _add_topic(
    out: _Collected,
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


def _add_drift(out: _Collected, registry: AutodocRegistry, torch_version: str, docs_ref: str) -> None:
    drift_text = drift.build_drift(
        _upstream_names(registry),
        torch_version=torch_version,
        ref=docs_ref,
        missing=[(m.qualified_name, m.where) for m in registry.missing],
    )
    text = drift_text if drift_text.endswith("\n") else drift_text + "\n"
    spans = split_sections(text)
    description = (
        f"Public names of torch {torch_version} in the covered modules that no page documents, "
        "and documented names that are deprecated or missing."
    )
    out.add_file(DRIFT_FILE, spans[0].title if spans else "API drift", description, [], text)
    for span in spans:
        out.add_section(DRIFT_FILE, span)


def _problems_and_coverage(files: dict[str, str], catalog: Catalog) -> tuple[list[str], str]:
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


def build_references(root: Path | None = None, *, ref: str | None = None) -> Output:
    """Build every generated file in memory (nothing is written)."""
    root = root or repo_root()
    torch_version = torch_release()
    warn = _Warnings()
    pages = sources.load_pages(root)
    topic_map = load_topics(pages, root)
    registry = AutodocRegistry(warn)
    topics_chunks = _topic_chunks(root, pages, topic_map, registry, torch_version, warn)
    used = _used_sources(topic_map)
    records = {page.id: sources.source_record(root, page) for page in pages if page.id in used}

    out = _Collected()
    for topic in topic_map.topics:
        _add_topic(out, topic, topics_chunks[topic.name], records, torch_version, registry)
    for missing in sorted(set(registry.entries) - out.placed):
        warn("assets/topics.toml", 0, f"{missing} was documented but landed in no reference file")
    docs_ref = ref or _docs_ref(root, pages)
    _add_drift(out, registry, torch_version, docs_ref)

    catalog = Catalog(
        torch_version=torch_version,
        ref=docs_ref,
        sources=[records[key] for key in sorted(records)],
        references=out.references,
        sections=out.sections,
        api=sorted(out.api, key=lambda entry: entry.qualified_name),
        examples=out.examples,
        patterns=list(load_patterns(root)),
    )
    out.files[CATALOG_FILE] = dump_catalog(catalog)
    problems, covered = _problems_and_coverage(out.files, catalog)
    return Output(
        files=out.files,
        catalog=catalog,
        warnings=warn.lines,
        problems=problems,
        drift_names=len(drift.listed_names(out.files[DRIFT_FILE])),
        coverage=covered,
        missing=registry.missing,
    )


# --- writing -----------------------------------------------------------------------------------------


def _previously_generated(ref_dir: Path) -> set[str]:
    """Names the last run generated (from its catalog), so files it no longer makes can be removed."""
    try:
        previous = load_catalog(ref_dir / CATALOG_FILE)
    except CatalogError:
        return set()
    return {reference.name for reference in previous.references} | {CATALOG_FILE, DRIFT_FILE}


def write_output(output: Output, ref_dir: Path, root: Path) -> list[str]:
    """Stage every file in a temp folder inside ref_dir, then move each into place. Returns the names written."""
    ref_dir.mkdir(parents=True, exist_ok=True)
    stale = _previously_generated(ref_dir) - set(output.files)
    # `.regenerate-<pid>-*`: what a killed run left is removed here (and listed by `fsdp-skill validate`).
    staging = make_scratch_dir(ref_dir, STAGING_PREFIX)
    try:
        for name, text in output.files.items():
            with open(staging / name, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
        names = sorted(n for n in output.files if n != CATALOG_FILE)
        build_index(output.catalog, staging / INDEX_FILE, root)
        names.append(INDEX_FILE)
        # The catalog goes last: a reader that sees the new catalog finds every file it names.
        names.append(CATALOG_FILE)
        for name in names:
            os.replace(staging / name, ref_dir / name)
        for name in sorted(stale):
            (ref_dir / name).unlink(missing_ok=True)
        return names
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _provenance_tokens(*catalogs: Catalog) -> list[str]:
    """The strings that say where the sources came from (refs, commits, URLs), longest first."""
    tokens: set[str] = set()
    for catalog in catalogs:
        tokens.add(catalog.ref)
        for source in catalog.sources:
            tokens.update(t for t in (source.ref, source.url, source.commit, (source.commit or "")[:10]) if t)
    return sorted((t for t in tokens if len(t) >= 4), key=lambda t: (-len(t), t))


_TOKEN_COUNT = re.compile(r'"tokens": \d+')  # a reference's size estimate moves with the length of its ref


def _without_provenance(text: str, tokens: list[str]) -> str:
    for token in tokens:
        text = text.replace(token, "\0")
    return _TOKEN_COUNT.sub('"tokens": 0', text)


def differences(output: Output, ref_dir: Path) -> list[str]:
    """What `regenerate` would change in ref_dir: one line per differing, new or removed file. A file
    that differs only where it records the sources' ref, commit or URL (a fetch of byte-identical
    files moves those) is listed as `provenance:` instead of `differs:`."""
    lines: list[str] = []
    try:
        committed: Catalog | None = load_catalog(ref_dir / CATALOG_FILE)
    except CatalogError:
        committed = None
    tokens = _provenance_tokens(output.catalog, committed) if committed else []
    for name in sorted(output.files):
        target = ref_dir / name
        if not target.exists():
            lines.append(f"new:     references/{name}")
        elif target.read_bytes() != output.files[name].encode("utf-8"):
            old = target.read_text(encoding="utf-8", errors="replace")
            same = bool(tokens) and _without_provenance(old, tokens) == _without_provenance(output.files[name], tokens)
            lines.append(f"provenance: references/{name}" if same else f"differs: references/{name}")
    for name in sorted(_previously_generated(ref_dir) - set(output.files)):
        if (ref_dir / name).exists():
            lines.append(f"removed: references/{name}")
    if (ref_dir / CATALOG_FILE).is_file():
        # The index is binary and records its inputs' digests: stale when its schema, the committed
        # catalog or a pattern file moved on (e.g. a pattern edited without a regenerate).
        reason = stale_reason(ref_dir / INDEX_FILE, ref_dir / CATALOG_FILE, ref_dir.parent)
        if reason:
            lines.append(f"differs: references/{INDEX_FILE} ({reason})")
    return lines


def short_diff(output: Output, ref_dir: Path, name: str, limit: int = 12) -> list[str]:
    """The first changed lines between the committed file and the new one, as a unified diff."""
    old = (ref_dir / name).read_text(encoding="utf-8", errors="replace").splitlines()
    diff = [line[:160] for line in difflib.unified_diff(old, output.files[name].splitlines(), f"references/{name}",
                                                         "regenerated", n=0, lineterm="")]
    return diff[:limit] + ([f"... ({len(diff) - limit} more diff lines)"] if len(diff) > limit else [])


def summary(output: Output, seconds: float) -> str:
    markdown_files = sum(1 for name in output.files if name.endswith(".md"))
    catalog = output.catalog
    return (
        f"{markdown_files} reference files, {len(catalog.sections)} sections, {len(catalog.api)} API entries, "
        f"{len(catalog.examples)} examples, {output.drift_names} drift names, {len(output.warnings)} warnings, "
        f"{seconds:.2f} s\ncoverage: {output.coverage}"
    )


def cli_regenerate(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    root = writable_root("regenerate rebuilds references/ from the upstream/ cache")
    ref_dir = references_dir(root)
    output = build_references(root, ref=args.ref)
    for missing in output.missing:
        print(
            f"note: {missing.where}: {missing.qualified_name} is documented upstream but missing from the installed "
            "torch (see api-drift.md)",
            file=sys.stderr,
        )
    for line in output.warnings:
        print(f"warning: {line}", file=sys.stderr)
    if args.strict and output.warnings:
        # Before the problems: a broken upstream page is the cause, the problems in the output its effects.
        files = ", ".join(dict.fromkeys(line.split(":", 1)[0] for line in output.warnings))
        count = f"{len(output.warnings)} warning{'s' if len(output.warnings) != 1 else ''}"
        print(f"fsdp-skill regenerate: --strict and {count} (in {files}); nothing written", file=sys.stderr)
        return 1
    if output.problems:
        for line in output.problems:
            print(f"error: {line}", file=sys.stderr)
        print(
            f"fsdp-skill regenerate: {len(output.problems)} problems in the generated files; nothing written",
            file=sys.stderr,
        )
        return 1
    elapsed = time.perf_counter() - started
    if args.check:
        changed = differences(output, ref_dir)
        for line in changed:
            print(line)
        print(summary(output, elapsed))
        provenance = [line.split("references/", 1)[1] for line in changed if line.startswith("provenance:")]
        if provenance:
            print("\n".join(short_diff(output, ref_dir, provenance[0])))
        if changed and len(provenance) == len(changed):
            print(f"{len(changed)} files differ only in provenance (the upstream ref, commit or URL the cache records; "
                  "the content is the same): run `fsdp-skill regenerate` to record it")
            return 1
        if changed:
            also = f" ({len(provenance)} of them only in provenance)" if provenance else ""
            print(f"{len(changed)} files differ from the committed references/{also}; run `fsdp-skill regenerate`")
            return 1
        print("references/ is up to date")
        return 0
    written = write_output(output, ref_dir, root)
    elapsed = time.perf_counter() - started
    print(summary(output, elapsed))
    print(f"regenerated {len(written)} files in {elapsed:.2f} s")
    return 0
