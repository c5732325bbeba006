"""Cut converted pages into the topics of the topic map, and check that the map fits the pages.

Input: each page already converted to CommonMark (`myst` / `rst`, autodoc resolved) and the topic
map. Output: per topic, its chunks in order — markdown with headings shifted under the topic title,
and where each chunk came from (for provenance and upstream URLs).

A page used by `sections` / `apis` parts is split by line ranges computed from its heading outline:
a section runs from its heading (or the `<a id>` line above it) to the next heading of the same or a
higher level; an API entry likewise from its anchor. Every line of a split page must be claimed
exactly once (API claims carve their lines out of the section around them), so a section added
upstream cannot silently drop out of the references.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from fsdp_skill.build.render import Heading, outline
from fsdp_skill.build.topics import Part, TopicMap
from fsdp_skill.convert.markdown import shift_headings
from fsdp_skill.core.errors import UserError


@dataclass(frozen=True)
class Chunk:
    markdown: str
    source: str | None  # source id, None for a synthesized heading or a docstring-only part
    page_url: str | None  # rendered upstream page


@dataclass
class ConvertedPage:
    source: str
    markdown: str
    url: str | None
    headings: list[Heading] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.headings = outline(self.markdown)


class TopicMapError(UserError):
    """The topic map does not fit the converted pages."""


def sphinx_id(text: str) -> str:
    """The id Sphinx (docutils) gives a section title: ASCII, lower case, non-alphanumerics → '-'."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")


def _normalize_title(title: str) -> str:
    return " ".join(title.replace("`", "").split())


def _start(page: ConvertedPage, heading: Heading) -> int:
    """First line of a heading's block: its `<a id>` line when it has one."""
    if heading.anchor_id:
        lines = page.markdown.splitlines()
        j = heading.line - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        return j
    return heading.line


def _extent(page: ConvertedPage, index: int) -> tuple[int, int]:
    heading = page.headings[index]
    for later in page.headings[index + 1 :]:
        if later.level <= heading.level:
            return _start(page, heading), _start(page, later)
    return _start(page, heading), len(page.markdown.splitlines())


def _find_section(page: ConvertedPage, declared: str, topic: str) -> int:
    *parents, leaf = [_normalize_title(p) for p in declared.split(">")]
    matches = []
    for index, heading in enumerate(page.headings):
        if heading.anchor_id or _normalize_title(heading.text) != leaf:
            continue  # API entry headings are addressed by `apis`, not by title
        ancestors: list[str] = []
        level = heading.level
        for earlier in reversed(page.headings[:index]):
            if earlier.level < level:
                ancestors.insert(0, _normalize_title(earlier.text))
                level = earlier.level
        if all(parent in ancestors for parent in parents):
            matches.append(index)
    if not matches:
        raise TopicMapError(
            f"assets/topics.toml: topic {topic!r} wants section {declared!r} of {page.source}, "
            "but the page has no such heading; fix the title in the topic map"
        )
    if len(matches) > 1:
        raise TopicMapError(
            f"assets/topics.toml: section {declared!r} of {page.source} is ambiguous "
            f"({len(matches)} headings); write it as 'Parent > {declared}'"
        )
    return matches[0]


def _find_api(page: ConvertedPage, name: str, topic: str) -> int:
    for index, heading in enumerate(page.headings):
        if heading.anchor_id == name:
            return index
    raise TopicMapError(
        f"assets/topics.toml: topic {topic!r} wants API {name!r} from {page.source}, "
        "but no entry with that anchor was rendered there"
    )


def _page_title(page: ConvertedPage) -> Heading | None:
    return page.headings[0] if page.headings and page.headings[0].level == 1 else None


def _preamble_range(page: ConvertedPage) -> tuple[int, int]:
    title = _page_title(page)
    start = title.end if title else 0
    # API entries right under the title (an automodule's docstring) belong to the preamble.
    following = [h for h in page.headings if h.line >= start and not h.anchor_id]
    return start, (_start(page, following[0]) if following else len(page.markdown.splitlines()))


PartKey = tuple[str, int]  # (topic name, part index)


def _claims(part: Part, page: ConvertedPage, topic: str) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    if part.whole_page:
        return [(0, len(page.markdown.splitlines()))]
    if part.preamble:
        ranges.append(_preamble_range(page))
    for title in part.sections:
        ranges.append(_extent(page, _find_section(page, title, topic)))
    for name in part.apis:
        ranges.append(_extent(page, _find_api(page, name, topic)))
    return ranges


def _owner_table(topic_map: TopicMap, pages: dict[str, ConvertedPage]) -> dict[str, list[PartKey | None]]:
    """For each page, which part owns each line (API claims override section claims)."""
    owners: dict[str, list[PartKey | None]] = {}
    api_claims: list[tuple[str, PartKey, tuple[int, int]]] = []
    for topic in topic_map.topics:
        for index, part in enumerate(topic.parts):
            if part.source is None:
                continue
            page = pages[part.source]
            table = owners.setdefault(part.source, [None] * len(page.markdown.splitlines()))
            key = (topic.name, index)
            for start, end in _claims(part, page, topic.name):
                if part.apis:
                    api_claims.append((part.source, key, (start, end)))
                    continue
                for line in range(start, end):
                    owner = table[line]
                    if owner is not None and owner != key:
                        raise TopicMapError(
                            f"assets/topics.toml: line {line + 1} of converted {part.source} is claimed by both "
                            f"topic {owner[0]!r} and topic {topic.name!r}; each section may go to one topic only"
                        )
                    table[line] = key
    for source, key, (start, end) in api_claims:
        table = owners[source]
        for line in range(start, end):
            table[line] = key
    return owners


def _check_fully_claimed(
    topic_map: TopicMap, pages: dict[str, ConvertedPage], owners: dict[str, list[PartKey | None]]
) -> None:
    for source in sorted(topic_map.split_sources()):
        page = pages[source]
        lines = page.markdown.splitlines()
        title = _page_title(page)
        skip = set(range(title.line, title.end)) if title else set()
        for line, owner in enumerate(owners[source]):
            if owner is None and lines[line].strip() and line not in skip:
                enclosing = [h for h in page.headings if h.line <= line]
                where = f"section {enclosing[-1].text!r}" if enclosing else "the page's preamble"
                raise TopicMapError(
                    f"assets/topics.toml: {where} of {source} (converted line {line + 1}) is in no topic; "
                    "add it to a topic's `sections` (or `preamble = true`)"
                )


def _part_markdown(part: Part, key: PartKey, page: ConvertedPage, owners: list[PartKey | None]) -> str:
    lines = page.markdown.splitlines()
    if part.whole_page:
        return page.markdown
    pieces: list[str] = []
    for start, end in _claims(part, page, key[0]):
        kept = [line for index, line in enumerate(lines[start:end], start) if owners[index] == key]
        text = "\n".join(kept).strip("\n")
        if text:
            pieces.append(text)
    return "\n\n".join(pieces) + "\n"


def assemble(
    topic_map: TopicMap,
    pages: dict[str, ConvertedPage],
    autodoc_parts: dict[PartKey, tuple[str, str | None]],
) -> dict[str, list[Chunk]]:
    """Topic name -> its chunks. `autodoc_parts` holds the markdown and URL of each autodoc part."""
    owners = _owner_table(topic_map, pages)
    _check_fully_claimed(topic_map, pages, owners)
    result: dict[str, list[Chunk]] = {}
    for topic in topic_map.topics:
        chunks: list[Chunk] = []
        for index, part in enumerate(topic.parts):
            key = (topic.name, index)
            top_level = 3 if part.title else 2
            if part.source is None:
                markdown, url = autodoc_parts[key]
                source = None
            else:
                page = pages[part.source]
                markdown, url, source = _part_markdown(part, key, page, owners[part.source]), page.url, part.source
            if part.title:
                chunks.append(Chunk(f"## {part.title}\n", None, url))
            if markdown.strip():
                chunks.append(Chunk(shift_headings(markdown, top_level), source, url))
        result[topic.name] = chunks
    return result


def topic_body(chunks: list[Chunk]) -> tuple[str, list[tuple[int, int, Chunk]]]:
    """Join chunks with one blank line; return the body and each chunk's 0-based line range."""
    texts: list[str] = []
    ranges: list[tuple[int, int, Chunk]] = []
    line = 0
    for chunk in chunks:
        text = chunk.markdown.strip("\n")
        count = len(text.splitlines())
        ranges.append((line, line + count, chunk))
        texts.append(text)
        line += count + 1
    return "\n\n".join(texts) + "\n", ranges

