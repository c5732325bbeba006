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
import importlib
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsdp_skill.convert.rst import converter as rst
from fsdp_skill.upstream import sources
from fsdp_skill.build.assemble import Chunk, ConvertedPage, assemble, sphinx_id, topic_body
from fsdp_skill.core.catalog import (
    ApiEntry,
    Catalog,
    CatalogError,
    Example,
    Reference,
    Section,
    dump_catalog,
    load_catalog,
)
from fsdp_skill.core.errors import UserError
from fsdp_skill.build.lint import problems as lint_problems
from fsdp_skill.convert.myst import PageAutodocHook, myst_to_markdown
from fsdp_skill.core.paths import references_dir, repo_root, writable_root
from fsdp_skill.build.render import SourceRow, drop_empty_sections, drop_quotes_matching, render_reference, split_sections
from fsdp_skill.build.topics import TOPICS_FILE, TopicMap, load_topics
from fsdp_skill.build import code_names
from fsdp_skill.build.page_code import page_code
from fsdp_skill.build.patterns import load_patterns
from fsdp_skill.search.index import build_index, stale_reason

DRIFT_FILE = "api-drift.md"
CATALOG_FILE = "catalog.json"
INDEX_FILE = "index.sqlite"
RST_PAGE_ENTRY_LEVEL = 3  # heading level of API entries an .rst page's autodoc renders
# Tutorial furniture: a note pointing at the page's own source on GitHub (the header names it).
EDIT_ON_GITHUB_NOTE = re.compile(r"View and edit this tutorial in \[github\]")


class BuildError(UserError):
    """The generated output failed validation; nothing was written."""

    exit_code = 1


@dataclass
class Output:
    files: dict[str, str]  # name under references/ -> text
    catalog: Catalog
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    drift_names: int = 0
    coverage: str = ""  # how the covered modules' public names are accounted for
    missing: list[tuple[str, str]] = field(default_factory=list)  # documented names torch lacks


# --- environment -----------------------------------------------------------------------------------


def installed_torch_version() -> str:
    """The installed torch's version without its local suffix ('2.13.0+cpu' -> '2.13.0')."""
    if importlib.util.find_spec("torch") is None:
        raise UserError(
            "torch is not installed: regenerate reads the API text from the installed torch's docstrings; "
            "install the torch the references are pinned to (pip install 'torch==2.13.*') and rerun"
        )
    import torch

    return str(torch.__version__).split("+")[0]


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
    site = page_url[: -len(f"{page.page}.html")] if page_url.endswith(f"{page.page}.html") else page_url.rsplit("/", 1)[0] + "/"
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
    """Collects 'file:line: message' warnings. A page naming an object the installed torch lacks is
    not a conversion problem but API drift: it is kept apart and reported in api-drift.md."""

    # The wording of docstrings.document's warning for a name that does not import.
    _MISSING = re.compile(
        r"^\w+ (?P<name>\S+): cannot import it from the installed torch(?: \(current module (?P<module>[\w.]+)\))?(?:: (?P<why>.+))?"
    )

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.missing: list[tuple[str, str]] = []  # (qualified name, "file:line")
        self.import_failures: dict[str, str] = {}  # qualified name -> why its module does not import

    def __call__(self, origin: str, line: int, message: str) -> None:
        match = self._MISSING.match(message)
        if match:
            name, module = match.group("name"), match.group("module")
            qualified = name if name.startswith("torch.") or not module else f"{module}.{name}"
            self.missing.append((qualified, f"{origin}:{line}"))
            if match.group("why"):
                self.import_failures[qualified] = match.group("why")
            return
        self.lines.append(f"{origin}:{line}: {message}")


def _convert_pages(
    root: Path, pages: list[sources.DeclaredSource], used: set[str], registry: Any, torch_version: str, warn: _Warnings
) -> dict[str, tuple[str, str | None]]:
    """Source id -> (markdown with autodoc placeholders, rendered page URL), in declaration order."""
    converted: dict[str, tuple[str, str | None]] = {}
    for page in pages:
        if page.id not in used:
            continue
        text = sources.read_cached(root, page)
        origin = f"upstream/{page.dir}/{page.path}"
        url = sources.docs_url(page, torch_version)
        hook = registry.hook(origin=origin, source=page.id, page_url=url)
        resolve = _site_resolver(page, url)
        if page.format == "myst":
            markdown = myst_to_markdown(text, origin=origin, warn=warn, autodoc=hook, resolve_uri=resolve)
        else:
            markdown = rst.rst_to_markdown(
                text, origin=origin, warn=warn, autodoc=_fixed_level(hook, RST_PAGE_ENTRY_LEVEL), resolve_uri=resolve
            )
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
    root: Path, topic_map: TopicMap, registry: Any, torch_version: str
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


def _source_rows(chunks: list[Chunk], records: dict[str, Any]) -> list[SourceRow]:
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


def _upstream_anchor(doc: Any) -> str:
    """Sphinx's id for an entry: the spelling the page documented it under (not ours); a module's
    target is 'module-<name>'."""
    return f"module-{doc.documented_name}" if doc.kind == "module" else doc.documented_name


def build_references(root: Path | None = None, *, ref: str | None = None) -> Output:
    """Build every generated file in memory (nothing is written)."""
    root = root or repo_root()
    torch_version = installed_torch_version()
    from fsdp_skill.apidoc import drift
    from fsdp_skill.apidoc.autodoc import AutodocRegistry

    warn = _Warnings()
    pages = sources.load_pages(root)
    topic_map = load_topics(pages, root)
    used = {p.source for t in topic_map.topics for p in t.parts if p.source}
    registry = AutodocRegistry(warn)
    converted = _convert_pages(root, pages, used, registry, torch_version, warn)
    autodoc_parts = _autodoc_parts(root, topic_map, registry, torch_version)
    # Every directive is resolved now; render each object once, under its most public spelling.
    pages_md = {
        key: ConvertedPage(key, drop_empty_sections(registry.expand(markdown)), url) for key, (markdown, url) in converted.items()
    }
    autodoc_parts = {key: (registry.expand(markdown), url) for key, (markdown, url) in autodoc_parts.items()}
    topics_chunks = assemble(topic_map, pages_md, autodoc_parts)
    records = {page.id: sources.source_record(root, page) for page in pages if page.id in used}

    files: dict[str, str] = {}
    references: list[Reference] = []
    sections: list[Section] = []
    api: list[ApiEntry] = []
    examples: list[Example] = []
    placed: set[str] = set()
    for topic in topic_map.topics:
        chunks = topics_chunks[topic.name]
        body, ranges = topic_body(chunks)
        rendered = render_reference(topic.title, topic.description, _source_rows(chunks, records), torch_version, body)
        name = topic.file_name
        files[name] = rendered.text
        references.append(
            Reference(
                name=name,
                title=topic.title.replace("`", ""),
                description=topic.description,
                sources=list(dict.fromkeys(c.source for c in chunks if c.source)),
                lines=len(rendered.text.splitlines()),
                tokens=len(rendered.text) // 4,
            )
        )
        for span in split_sections(rendered.text):
            chunk = _chunk_at(ranges, span.line - 1 - rendered.body_start)
            documented = registry.entries.get(span.anchor)
            upstream_anchor = _upstream_anchor(documented.doc) if documented is not None else span.anchor
            url = _section_url(chunk, upstream_anchor, span.title, documented is not None, span.level)
            sections.append(
                Section(
                    id=f"{name}#{span.anchor}",
                    reference=name,
                    anchor=span.anchor,
                    title=span.title,
                    level=span.level,
                    breadcrumb=list(span.breadcrumb),
                    markdown=span.markdown,
                    source=chunk.source if chunk else None,
                    line=span.line,
                    url=url,
                )
            )
            if documented is None or span.anchor in placed:
                continue
            placed.add(span.anchor)
            entry_examples = docstrings_examples(documented.doc, name, span.anchor, documented.source)
            examples.extend(entry_examples)
            api.append(
                docstrings_entry(documented.doc, name, span.anchor, url, [e.id for e in entry_examples])
            )
    for missing in sorted(set(registry.entries) - placed):
        warn("assets/topics.toml", 0, f"{missing} was documented but landed in no reference file")

    # Drift compares torch with what upstream documents: entries from pages, and docstring-only parts
    # that name an upstream page (DDP's generated page); not the names this project adds itself.
    upstream_names: set[str] = set()
    for documented in registry.entries.values():
        if documented.page_url is not None:
            upstream_names.add(documented.doc.qualified_name)
            upstream_names.update(documented.doc.aliases)
    docs_ref = ref or _docs_ref(root, pages)
    drift_text = drift.build_drift(
        upstream_names, torch_version=torch_version, ref=docs_ref, missing=warn.missing, import_failures=warn.import_failures
    )
    files[DRIFT_FILE] = drift_text if drift_text.endswith("\n") else drift_text + "\n"
    # Names the documented code uses without an API entry: rows of api-drift.md saying why (code_names).
    source_kinds = {page.id: page.kind for page in pages}
    blocks = page_code(sections, api, source_kinds)
    patterns = list(load_patterns(root))
    used, without_entry = code_names.uncovered(api, code_names.code_texts(blocks, examples, patterns, root))
    files[DRIFT_FILE] += code_names.drift_section(used, without_entry)
    drift_sections = split_sections(files[DRIFT_FILE])
    references.append(
        Reference(
            name=DRIFT_FILE,
            title=drift_sections[0].title if drift_sections else "API drift",
            description=f"Public names of torch {torch_version} in the covered modules that no page documents, "
            "and documented names that are deprecated or missing.",
            sources=[],
            lines=len(files[DRIFT_FILE].splitlines()),
            tokens=len(files[DRIFT_FILE]) // 4,
        )
    )
    for span in drift_sections:
        sections.append(
            Section(
                id=f"{DRIFT_FILE}#{span.anchor}",
                reference=DRIFT_FILE,
                anchor=span.anchor,
                title=span.title,
                level=span.level,
                breadcrumb=list(span.breadcrumb),
                markdown=span.markdown,
                line=span.line,
            )
        )

    catalog = Catalog(
        torch_version=torch_version,
        ref=docs_ref,
        sources=[records[key] for key in sorted(records)],
        references=references,
        sections=sections,
        api=sorted(api, key=lambda entry: entry.qualified_name),
        examples=examples,
        patterns=patterns,
        page_code=blocks,
    )
    files[CATALOG_FILE] = dump_catalog(catalog)
    found: list[str] = []
    for file_name, text in files.items():
        if file_name.endswith(".md"):
            found.extend(lint_problems(file_name, text))
    drift_count = _count_drift_names(drift, files[DRIFT_FILE])
    catalog_names = {entry.qualified_name for entry in catalog.api} | {a for entry in catalog.api for a in entry.aliases}
    total, as_entries, drift_only, uncovered = drift.coverage(catalog_names, files[DRIFT_FILE])
    # Every public name must be findable: an API entry, or a row of api-drift.md saying why not.
    found.extend(f"{DRIFT_FILE}: public name {name} is neither an API entry nor listed with a reason" for name in uncovered)
    covered = f"{total} public names: {as_entries} API entries + {drift_only} only in {DRIFT_FILE}, {len(uncovered)} uncovered"
    return Output(
        files=files, catalog=catalog, warnings=warn.lines, problems=found, drift_names=drift_count,
        coverage=covered, missing=warn.missing,
    )


def docstrings_examples(doc: Any, reference: str, anchor: str, source: str | None) -> list[Example]:
    from fsdp_skill.apidoc import docstrings

    return list(docstrings.to_examples(doc, reference=reference, anchor=anchor, source=source))


def docstrings_entry(doc: Any, reference: str, anchor: str, url: str | None, example_ids: list[str]) -> ApiEntry:
    from fsdp_skill.apidoc import docstrings

    return docstrings.to_api_entry(doc, reference=reference, anchor=anchor, url=url, example_ids=example_ids)


def _count_drift_names(drift: Any, text: str) -> int:
    counter = getattr(drift, "count_names", None)
    if counter is not None:
        return int(counter(text))
    return sum(1 for line in text.splitlines() if line.startswith("| `"))


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
    staging = Path(tempfile.mkdtemp(prefix=".regenerate-", dir=ref_dir))
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


def differences(output: Output, ref_dir: Path) -> list[str]:
    """What `regenerate` would change in ref_dir: one line per differing, new or removed file."""
    lines: list[str] = []
    for name in sorted(output.files):
        target = ref_dir / name
        if not target.exists():
            lines.append(f"new:     references/{name}")
        elif target.read_bytes() != output.files[name].encode("utf-8"):
            lines.append(f"differs: references/{name}")
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
    for name, where in output.missing:
        print(f"note: {where}: {name} is documented upstream but missing from the installed torch (see api-drift.md)", file=sys.stderr)
    for line in output.warnings:
        print(f"warning: {line}", file=sys.stderr)
    if output.problems:
        for line in output.problems:
            print(f"error: {line}", file=sys.stderr)
        print(f"fsdp-skill regenerate: {len(output.problems)} problems in the generated files; nothing written", file=sys.stderr)
        return 1
    if args.strict and output.warnings:
        print(f"fsdp-skill regenerate: {len(output.warnings)} warnings and --strict; nothing written", file=sys.stderr)
        return 1
    elapsed = time.perf_counter() - started
    if args.check:
        changed = differences(output, ref_dir)
        for line in changed:
            print(line)
        print(summary(output, elapsed))
        if changed:
            print(f"{len(changed)} files differ from the committed references/; run `fsdp-skill regenerate`")
            return 1
        print("references/ is up to date")
        return 0
    written = write_output(output, ref_dir, root)
    elapsed = time.perf_counter() - started
    print(summary(output, elapsed))
    print(f"regenerated {len(written)} files in {elapsed:.2f} s")
    return 0
