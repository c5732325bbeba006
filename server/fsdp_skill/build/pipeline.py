"""`fsdp-skill regenerate`: upstream cache + installed torch → references/*.md, catalog.json, api-drift.md.

Offline and deterministic. The whole output is built in memory and checked (markdown-it parse,
artefact scan, closed and labelled fences, unique anchors) before anything is written; it is then
staged in a temp folder inside references/ and moved into place file by file with os.replace, so
a failed or interrupted run leaves the previous references intact. Files the runner or other
tools keep in references/ (verification.md, ...) are never touched; generated files a previous run
produced and this one does not (a topic removed from the map) are deleted.

Flow: declared pages (sources.py) → each page converted once (myst.py / rst.py, autodoc resolved
against torch by autodoc.py; build/pages.py) → cut into topics (assemble.py, map in assets/topics.toml)
→ header, TOC and sections (render.py) → API entries and examples (api_render.py) → drift (drift.py)
(build/collect.py) → catalog (catalog.py) → index (index.py).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from fsdp_skill.apidoc import drift
from fsdp_skill.apidoc.api_model import MissingName
from fsdp_skill.apidoc.autodoc import AutodocRegistry
from fsdp_skill.build import api_history, code_names, torch_messages, what_changed
from fsdp_skill.build.collect import DRIFT_FILE, Collected, add_drift, add_topic, problems_and_coverage
from fsdp_skill.build.page_code import page_code
from fsdp_skill.build.pages import Warnings, topic_chunks, used_sources
from fsdp_skill.build.patterns import load_patterns
from fsdp_skill.build.skill_docs import skill_documents
from fsdp_skill.build.topics import load_topics
from fsdp_skill.core.api_history import HISTORY_FILE, ApiHistory
from fsdp_skill.core.catalog import Catalog, CatalogError, dump_catalog, load_catalog
from fsdp_skill.core.errors import UserError
from fsdp_skill.core.paths import references_dir, repo_root, writable_root
from fsdp_skill.core.scratch import LEFTOVER_ADVICE, data_leftovers, make_scratch_dir
from fsdp_skill.core.torch_version import installed_torch_version, release_version
from fsdp_skill.search.freshness import stale_reason
from fsdp_skill.search.index import build_index
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

STAGING_PREFIX = ".regenerate-"
CATALOG_FILE = "catalog.json"
INDEX_FILE = "index.sqlite"


@dataclass
class Output:
    files: dict[str, str]  # name under references/ -> text
    catalog: Catalog
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    drift_names: int = 0
    coverage: str = ""  # how the covered modules' public names are accounted for
    missing: list[MissingName] = field(default_factory=list)  # documented names torch lacks
    history: ApiHistory | None = None  # the API timeline written to references/ (dates SKILL.md's replacements)


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


# --- the build ----------------------------------------------------------------------------------------


def build_references(root: Path | None = None, *, ref: str | None = None) -> Output:
    """Build every generated file in memory (nothing is written)."""
    root = root or repo_root()
    torch_version = torch_release()
    warn = Warnings()
    pages = sources.load_pages(root)
    topic_map = load_topics(pages, root)
    registry = AutodocRegistry(warn)
    topics_chunks = topic_chunks(root, pages, topic_map, registry, torch_version, warn)
    used = used_sources(topic_map)
    records = {page.id: sources.source_record(root, page) for page in pages if page.id in used}

    out = Collected()
    for topic in topic_map.topics:
        add_topic(out, topic, topics_chunks[topic.name], records, torch_version, registry)
    for missing in sorted(set(registry.entries) - out.placed):
        warn("assets/topics.toml", 0, f"{missing} was documented but landed in no reference file")
    docs_ref = ref or _docs_ref(root, pages)
    # Every code block of the references (page code), and the torch names the documented code uses
    # without an API entry: rows of api-drift.md saying why (code_names).
    blocks = page_code(out.sections, out.api, {page.id: page.kind for page in pages})
    patterns = list(load_patterns(root))
    used_names, without_entry = code_names.uncovered(
        out.api, code_names.code_texts(blocks, out.examples, patterns, root)
    )
    add_drift(out, registry, torch_version, docs_ref, extra=code_names.drift_section(used_names, without_entry))
    # The API timeline across the releases read (upstream/torch-api/), not the installed torch. versions.md is
    # not a catalog reference: its hundreds of API names would crowd real sections out of search results (the
    # what_changed and api_history tools answer from the timeline instead).
    history = api_history.timeline(root, torch_version)
    out.files.update(api_history.history_files(history))

    catalog = Catalog(
        torch_version=torch_version,
        ref=docs_ref,
        sources=[records[key] for key in sorted(records)],
        references=out.references,
        sections=out.sections,
        api=sorted(out.api, key=lambda entry: entry.qualified_name),
        examples=out.examples,
        patterns=patterns,
        page_code=blocks,
    )
    catalog.skill = skill_documents(root, _skill_texts(root, out.files[DRIFT_FILE], catalog, history))
    torch_dir = torch_messages.torch_package_dir()
    if torch_dir is not None:  # regenerate needs torch anyway (torch_release); the scan reads its files
        scan = torch_messages.scan_torch(torch_dir)
        torch_messages.attach_messages(catalog.api, catalog.skill, scan.messages, scan.calls)
    out.files[CATALOG_FILE] = dump_catalog(catalog)
    problems, covered = problems_and_coverage(out.files, catalog)
    return Output(
        files=out.files,
        catalog=catalog,
        warnings=warn.lines,
        problems=problems,
        drift_names=len(drift.listed_names(out.files[DRIFT_FILE])),
        coverage=covered,
        missing=registry.missing,
        history=history,
    )


def _skill_texts(root: Path, drift: str, catalog: Catalog, history: ApiHistory | None) -> dict[str, str]:
    """SKILL.md as this run leaves it: its what-changed block regenerated (the documents cut from it
    must match the file written next to them)."""
    path = root / "SKILL.md"
    if not path.is_file():
        return {}
    block = what_changed.render_block(drift, catalog, history)
    return {"SKILL.md": what_changed.apply_block(path.read_text(encoding="utf-8"), block)}


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
        # The release documents come from the timeline files just staged, not the ones they replace.
        build_index(output.catalog, staging / INDEX_FILE, root, embed=True, previous=ref_dir / INDEX_FILE,
                    timeline=staging if (staging / HISTORY_FILE).is_file() else ref_dir)
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
    diff = [
        line[:160]
        for line in difflib.unified_diff(
            old, output.files[name].splitlines(), f"references/{name}", "regenerated", n=0, lineterm=""
        )
    ]
    return diff[:limit] + ([f"... ({len(diff) - limit} more diff lines)"] if len(diff) > limit else [])


def summary(output: Output, seconds: float) -> str:
    markdown_files = sum(1 for name in output.files if name.endswith(".md"))
    catalog = output.catalog
    return (
        f"{markdown_files} reference files, {len(catalog.sections)} sections, {len(catalog.api)} API entries, "
        f"{len(catalog.examples)} examples, {output.drift_names} drift names, {len(output.warnings)} warnings, "
        f"{seconds:.2f} s\ncoverage: {output.coverage}"
    )


def _sync_skill_md(root: Path, output: Output, write: bool) -> bool:
    """SKILL.md's generated what-changed block against this build's api-drift.md (see `what_changed`)."""
    drift = output.files.get(DRIFT_FILE)
    return drift is not None and what_changed.sync_skill(
        root, drift, output.catalog, write=write, history=output.history
    )


def _leftover_note(root: Path) -> str:
    """The tail of --check's last line when an interrupted run left files (listed above it)."""
    count = len(data_leftovers(root))
    if not count:
        return ""
    return f", but an interrupted run left {count} temporary {'entry' if count == 1 else 'entries'} (listed above)"


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
        if _sync_skill_md(root, output, write=False):
            changed.append("differs: SKILL.md (its what-changed block)")
        for line in changed:
            print(line)
        for entry in data_leftovers(root):
            kind = "folder" if entry.is_dir() else "file"
            print(f"leftover: {entry.relative_to(root).as_posix()} (a temporary {kind} an interrupted run left: "
                  f"{LEFTOVER_ADVICE})")
        print(summary(output, elapsed))
        provenance = [line.split("references/", 1)[1] for line in changed if line.startswith("provenance:")]
        if provenance:
            print("\n".join(short_diff(output, ref_dir, provenance[0])))
        if changed and len(provenance) == len(changed):
            print(
                f"{len(changed)} files differ only in provenance (the upstream ref, commit or URL the cache records; "
                "the content is the same): run `fsdp-skill regenerate` to record it"
            )
            return 1
        if changed:
            also = f" ({len(provenance)} of them only in provenance)" if provenance else ""
            print(f"{len(changed)} files differ from the committed references/{also}; run `fsdp-skill regenerate`")
            return 1
        print("references/ is up to date" + _leftover_note(root))
        return 0
    written = write_output(output, ref_dir, root)
    if _sync_skill_md(root, output, write=True):
        written.append("../SKILL.md")
    elapsed = time.perf_counter() - started
    print(summary(output, elapsed))
    print(f"regenerated {len(written)} files in {elapsed:.2f} s")
    return 0
