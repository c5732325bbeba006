"""The pages of a build: each declared page converted once (MyST or RST, autodoc resolved against the
installed torch through the registry), the topic map's docstring-only parts resolved, and all of it cut
into each topic's chunks. Warnings are collected as 'file:line: message'.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from fsdp_skill.apidoc.autodoc import AutodocRegistry
from fsdp_skill.build.assemble import Chunk, ConvertedPage, assemble
from fsdp_skill.build.page_checks import PageChecker
from fsdp_skill.build.render import drop_empty_sections, drop_quotes_matching
from fsdp_skill.build.topics import TOPICS_FILE, TopicMap
from fsdp_skill.convert.myst import PageAutodocHook, myst_to_markdown
from fsdp_skill.convert.rst import converter as rst
from fsdp_skill.upstream import sources

__all__ = ["EDIT_ON_GITHUB_NOTE", "RST_PAGE_ENTRY_LEVEL", "Warnings", "topic_chunks", "used_sources"]

RST_PAGE_ENTRY_LEVEL = 3  # heading level of API entries an .rst page's autodoc renders
# Tutorial furniture: a note pointing at the page's own source on GitHub (the header names it).
EDIT_ON_GITHUB_NOTE = re.compile(r"View and edit this tutorial in \[github\]")


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


class Warnings:
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
    warn: Warnings,
) -> dict[str, tuple[str, str | None]]:
    """Source id -> (markdown with autodoc placeholders, rendered page URL), in declaration order."""
    converted: dict[str, tuple[str, str | None]] = {}
    for page in pages:
        if page.id not in used:
            continue
        origin = f"upstream/{page.dir}/{page.path}"
        checker = PageChecker(origin, warn)
        data, entry = sources.read_cached_bytes(root, page)
        text = checker.source(data, page.format, manifest_chars=entry.chars)
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


def topic_chunks(
    root: Path,
    pages: list[sources.DeclaredSource],
    topic_map: TopicMap,
    registry: AutodocRegistry,
    torch_version: str,
    warn: Warnings,
) -> dict[str, list[Chunk]]:
    """Every page converted and every autodoc part resolved, then cut into the topics' chunks."""
    used = used_sources(topic_map)
    converted = _convert_pages(root, pages, used, registry, torch_version, warn)
    autodoc_parts = _autodoc_parts(root, topic_map, registry, torch_version)
    # Every directive is resolved now; render each object once, under its most public spelling.
    pages_md = {
        key: ConvertedPage(key, drop_empty_sections(registry.expand(markdown)), url)
        for key, (markdown, url) in converted.items()
    }
    autodoc_parts = {key: (registry.expand(markdown), url) for key, (markdown, url) in autodoc_parts.items()}
    return assemble(topic_map, pages_md, autodoc_parts)


def used_sources(topic_map: TopicMap) -> set[str]:
    return {p.source for t in topic_map.topics for p in t.parts if p.source}
