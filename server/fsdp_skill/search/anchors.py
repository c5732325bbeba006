"""Anchor text: what other documents say about an API, as a lower-weight field of that API's document.

At build time every sentence and list item of the corpus's prose (sections, and the other API entries'
docstrings) that names an API in inline code — the tutorial's "`dist.broadcast(tensor, src, group)`:
Copies `tensor` from `src` to all other processes" — is collected for that API. A user who describes
what an API does in the tutorial's words ("copy a tensor from one rank to all the others") then meets
the API entry itself, not only the tutorial. Generated from the corpus, never hand-written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from fsdp_skill.core.catalog import ApiEntry, Catalog
from fsdp_skill.search.identifiers import is_identifier

MAX_SENTENCE_CHARS = 300  # a longer "sentence" is a table row or a run-on list, not a statement about one API
MAX_ANCHORS_PER_API = 12
MAX_APIS_PER_SENTENCE = 2  # the first mentions in corpus order; more would outweigh the entry's own text

_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(])")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+", re.MULTILINE)
_CALL_TAIL = re.compile(r"\(.*$")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def spellings(api: Iterable[ApiEntry]) -> dict[str, str]:
    """Code spelling → qualified name: qualified names, `dist.`/aliases, and short names that are
    unambiguous and look like code (`all_reduce`, `DeviceMesh`; not `save` or `wait`)."""
    table: dict[str, str] = {}
    shorts: dict[str, set[str]] = {}
    for entry in api:
        name = entry.qualified_name
        table[name] = name
        for alias in entry.aliases:
            table.setdefault(alias, name)
        if name.startswith("torch.distributed."):
            table.setdefault("dist." + name[len("torch.distributed.") :], name)
        short = name.rsplit(".", 1)[-1]
        if is_identifier(short) and not short.startswith("_"):
            shorts.setdefault(short, set()).add(name)
    for short, names in shorts.items():
        if len(names) == 1:
            table.setdefault(short, next(iter(names)))
    return table


def statements(markdown: str) -> list[str]:
    """The prose sentences and list items of a markdown text (code blocks and tables left out)."""
    out: list[str] = []
    in_fence = False
    paragraph: list[str] = []

    def flush() -> None:
        text = " ".join(" ".join(paragraph).split())
        paragraph.clear()
        if not text:
            return
        for item in _LIST_ITEM.split(text) if _LIST_ITEM.match(text) else [text]:
            out.extend(s.strip() for s in _SENTENCE_END.split(item) if s.strip())

    for line in markdown.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            flush()
            in_fence = not in_fence
            continue
        if in_fence or stripped.startswith(("|", "#", ">>>")) or not stripped:
            flush()
            continue
        if _LIST_ITEM.match(line):
            flush()
        paragraph.append(stripped)
    flush()
    return [_LINK.sub(r"\1", s) for s in out if len(s) <= MAX_SENTENCE_CHARS]


def named_apis(sentence: str, table: dict[str, str]) -> set[str]:
    found = set()
    for match in _INLINE_CODE.finditer(sentence):
        code = _CALL_TAIL.sub("", match.group(1).strip()).strip()
        if code in table:
            found.add(table[code])
    return found


def anchor_texts(catalog: Catalog) -> dict[str, list[str]]:
    """qualified name → sentences of other documents that name it in code, in corpus order, deduplicated."""
    table = spellings(catalog.api)
    api_anchors = {(entry.reference, entry.anchor): entry.qualified_name for entry in catalog.api}
    sources: list[tuple[str | None, str]] = []  # (the API the text belongs to, if any; text)
    for section in catalog.sections:
        sources.append((api_anchors.get((section.reference, section.anchor)), section.markdown))
    for entry in catalog.api:
        sources.append((entry.qualified_name, entry.description or ""))
    out: dict[str, dict[str, None]] = {}
    for owner, text in sources:
        for sentence in statements(text):
            names = named_apis(sentence, table)
            if len(names) > MAX_APIS_PER_SENTENCE:
                continue  # a list of APIs says little about any one of them
            for name in names:
                if name == owner or (owner and owner.startswith(name + ".")):
                    continue  # an entry's own text (or its members') is already its body
                seen = out.setdefault(name, {})
                if len(seen) < MAX_ANCHORS_PER_API:
                    seen.setdefault(sentence, None)
    return {name: list(sentences) for name, sentences in out.items()}
